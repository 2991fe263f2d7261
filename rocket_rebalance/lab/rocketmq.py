"""A real Apache RocketMQ cluster on this machine: a NameServer, brokers and Java consumers, from Maven Central.

For the tests that prove compatibility (``tests/rocketmq``), ``make rocketmq`` and ``rocket-rebalance demo
--rocketmq``. The jars of the pinned version (``ROCKET_REBALANCE_ROCKETMQ_VERSION``, default 5.3.3) are fetched
once with Maven into a git-ignored cache (``ROCKET_REBALANCE_ROCKETMQ_CACHE``, default ``.rocketmq/`` in a
checkout); every JVM is kept small (a NameServer boots in about 2 s and a broker in about 5 s on two cores), binds
loopback only, and keeps its store under ``/dev/shm`` when there is room (RocketMQ refuses writes on a disk more
than 90 % full). Topics are created over our own remoting transport, as an operator's tool would.

Without Java or Maven, :class:`RocketMQUnavailable` says in one line what is missing.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from rocket_rebalance.lab.certs import LabCertificates
from rocket_rebalance.model import AclCredentials, TlsSettings
from rocket_rebalance.runtime.transport import TransportError
from rocket_rebalance.runtime.transport.remoting import RemotingTransport

__all__ = [
    "BrokerProcess",
    "JavaPeer",
    "NameServerProcess",
    "RocketMQCluster",
    "RocketMQUnavailable",
    "ensure_jars",
    "java_produce",
    "mqadmin",
]

VERSION_ENV = "ROCKET_REBALANCE_ROCKETMQ_VERSION"
CACHE_ENV = "ROCKET_REBALANCE_ROCKETMQ_CACHE"
DEFAULT_VERSION = "5.3.3"
JAVA_DIR = Path(__file__).with_name("rocketmq_java")
# The flags of remoting.md §4.5: small heaps, no pre-touch, and the JDK 17 opens a broker may need.
_OPENS = [
    "--add-exports",
    "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.nio=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang=ALL-UNNAMED",
]
BOOT_TIMEOUT = 60.0


def _tls_properties(certs: LabCertificates, server: bool) -> list[str]:
    """RocketMQ's TLS system properties (``TlsSystemConfig``): a client on TLS (``tls.enable``) that verifies the
    server against the lab's CA, and for a server TLS enforcing (plaintext connections closed) with the lab's
    certificate. Test mode off, or RocketMQ would serve a self-signed certificate and trust anything; no
    ``/etc/rocketmq/tls.properties`` read (the config file named does not exist)."""
    properties = [
        "-Dtls.enable=true",
        "-Dtls.test.mode.enable=false",
        f"-Dtls.config.file={certs.ca.parent / 'no-tls.properties'}",
        "-Dtls.client.authServer=true",
        f"-Dtls.client.trustCertPath={certs.ca}",
    ]
    if server:
        properties += [
            "-Dtls.server.mode=enforcing",
            f"-Dtls.server.certPath={certs.server_cert}",
            f"-Dtls.server.keyPath={certs.server_key}",  # PKCS#8: what Netty's JDK provider reads
        ]
    return properties


class RocketMQUnavailable(RuntimeError):
    """A real RocketMQ cannot be run here; the message says what is missing, in one line."""


def _cache_root() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").exists():
        return checkout / ".rocketmq"
    return Path.home() / ".cache" / "rocket-rebalance" / "rocketmq"


def _version(version: str | None) -> str:
    return version or os.environ.get(VERSION_ENV) or DEFAULT_VERSION


def _require(tool: str, why: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise RocketMQUnavailable(f"{tool} not found on PATH: {why}")
    return path


def ensure_jars(version: str | None = None) -> Path:
    """The folder of the version's jars, fetched with Maven the first time (a marker is written only after a
    complete fetch, so an interrupted one is redone; a file lock keeps parallel fetches apart)."""
    version = _version(version)
    _require("java", "the real-RocketMQ parts need Java 17 (apt-get install openjdk-17-jdk-headless)")
    root = _cache_root() / version
    lib, marker = root / "lib", root / "fetched"
    if marker.exists():
        return lib
    mvn = _require("mvn", "the RocketMQ jars are fetched with Maven (apt-get install maven)")
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return lib
        shutil.rmtree(lib, ignore_errors=True)
        command = [
            mvn,
            "-B",
            "-q",
            "-f",
            str(JAVA_DIR / "pom.xml"),
            "dependency:copy-dependencies",
            f"-Drocketmq.version={version}",
            f"-DoutputDirectory={lib}",
            "-DincludeScope=runtime",
        ]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
            last = lines[-1] if lines else f"exit {done.returncode}"
            raise RocketMQUnavailable(f"Maven could not fetch Apache RocketMQ {version}: {last}")
        marker.write_text(version + "\n", encoding="utf-8")
    return lib


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(span: Sequence[int] = (0,)) -> int:
    """A loopback port P with P+d free for every d in ``span`` (a broker also opens P-2 and P+1)."""
    for _ in range(200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if all(0 < port + d < 65536 and _free(port + d) for d in span):
            return port
    raise RocketMQUnavailable("no free loopback ports for a broker")


log = logging.getLogger("rocket_rebalance.lab")

BOOT_ATTEMPTS = 3
"""Starts of a JVM of the lab's before it gives up, each on ports of its own: a port found free can be taken before
the JVM binds it (by any connection's own port, on a busy machine), and a boot can fail for a moment's reason."""

P = TypeVar("P", bound="_JvmProcess")


def _booted(make: Callable[[], P], properties: Sequence[str]) -> P:
    """A process ``make`` gives (with fresh ports each time), started with the system ``properties``; tried
    :data:`BOOT_ATTEMPTS` times, each failure logged, the last raised."""
    attempt = 1
    while True:
        process = make()
        process.properties = list(properties)
        try:
            process.start()
            return process
        except RocketMQUnavailable as error:
            if attempt == BOOT_ATTEMPTS:
                raise
            log.warning("attempt %d of %d: %s; trying again on other ports", attempt, BOOT_ATTEMPTS, error)
            attempt += 1


def _store_root(run_dir: Path) -> Path:
    shm = Path("/dev/shm")
    if shm.is_dir() and shutil.disk_usage(shm).free > 1 << 30:
        return Path(shm / f"rocket-rebalance-{os.getpid()}-{run_dir.name}")
    return run_dir / "store"


def _terminate(process: subprocess.Popen[Any], timeout: float) -> None:
    """SIGTERM, so a JVM's shutdown hooks run; SIGKILL if it has not ended within ``timeout`` seconds."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class _JvmProcess:
    """One RocketMQ JVM with its config file, logs and a readiness line; restartable with the same config."""

    main_class = ""
    ready_text = ""
    logback = ""  # each kind its own: the first rmq.*.logback.xml on the class path (the broker's) wins otherwise
    heap = ("-Xms128m", "-Xmx256m")

    def __init__(self, lib: Path, run_dir: Path, name: str, config: dict[str, str]) -> None:
        self.lib = lib
        self.run_dir = run_dir
        self.name = name
        self.config = config
        self.properties: list[str] = []  # further -D system properties (the lab's TLS)
        self.process: subprocess.Popen[bytes] | None = None
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / f"{name}.conf").write_text(
            "".join(f"{key}={value}\n" for key, value in config.items()), encoding="utf-8"
        )

    @property
    def log_path(self) -> Path:
        return self.run_dir / f"{self.name}.out"

    def start(self) -> None:
        log = self.log_path.open("ab")
        offset = log.tell()
        home = self.run_dir / "home"
        home.mkdir(exist_ok=True)
        command = [
            "java",
            *self.heap,
            "-XX:+UseSerialGC",
            "-XX:MaxDirectMemorySize=256m",
            f"-Duser.home={home}",
            f"-Drocketmq.home.dir={self.run_dir}",
            f"-Drmq.logback.configurationFile={self.logback}",
            *self.properties,
            *_OPENS,
            "-cp",
            f"{self.lib}/*",
            self.main_class,
            "-c",
            str(self.run_dir / f"{self.name}.conf"),
        ]
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self._wait_ready(offset)

    def _wait_ready(self, offset: int) -> None:
        deadline = time.monotonic() + BOOT_TIMEOUT
        while time.monotonic() < deadline:
            with self.log_path.open("rb") as log:
                log.seek(offset)
                if self.ready_text.encode() in log.read():
                    return
            if self.process is None or self.process.poll() is not None:
                break
            time.sleep(0.1)
        exited = self.process is not None and self.process.poll() is not None
        with self.log_path.open("rb") as log:
            log.seek(offset)
            lines = log.read().decode("utf-8", errors="replace").splitlines()
        self.kill()
        # the first exception's own line says why (a port taken, a full disk), not the stack's last frames
        cause = next((line.strip() for line in lines if "Exception" in line and not line.startswith("\tat ")), "")
        how = "exited" if exited else f"not ready within {BOOT_TIMEOUT:g} s"
        raise RocketMQUnavailable(
            f"{self.name} did not start ({how}): " + " | ".join(filter(None, [cause, *lines[-2:]]))
        )

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM (RocketMQ's shutdown hook runs), then SIGKILL if it does not end in time."""
        if self.process is not None:
            _terminate(self.process, timeout)
        self.process = None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


class NameServerProcess(_JvmProcess):
    main_class = "org.apache.rocketmq.namesrv.NamesrvStartup"
    ready_text = "The Name Server boot success"
    logback = "rmq.namesrv.logback.xml"

    def __init__(self, lib: Path, run_dir: Path) -> None:
        self.port = free_port()
        super().__init__(
            lib,
            run_dir,
            "namesrv",
            {
                "listenPort": str(self.port),
                "bindAddress": "127.0.0.1",
                "kvConfigPath": str(run_dir / "namesrv" / "kvConfig.json"),
            },
        )

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


class BrokerProcess(_JvmProcess):
    """A master broker, or with ``slave_id`` a slave of the broker set ``broker_name`` (``brokerRole=SLAVE``: it
    replicates the master's store over the master's HA port, which the name server tells it); its store stays
    across restarts (under ``/dev/shm`` when there is room)."""

    main_class = "org.apache.rocketmq.broker.BrokerStartup"
    ready_text = "boot success"
    logback = "rmq.broker.logback.xml"
    heap = ("-Xms256m", "-Xmx512m")

    def __init__(
        self,
        lib: Path,
        run_dir: Path,
        broker_name: str,
        namesrv: str,
        settings: Mapping[str, str] | None = None,
        slave_id: int = 0,
    ) -> None:
        """``settings`` are further ``broker.conf`` entries (``{"enablePropertyFilter": "true"}``, ACL, TLS ...),
        over the lab's. A slave logs apart from its master (:attr:`store_log`); it learns the master's HA port
        from its registration at the name server (a ``haMasterAddress`` given in the config left 5.3.3's HA client
        with no master at all)."""
        self.port = free_port((-2, 0, 1))  # main port, fast port (P-2) and HA port (P+1)
        self.broker_name = broker_name
        self.store_log = run_dir / "home" / "logs" / f"rocketmqlogs{broker_name}_{slave_id}" / "store.log"
        """A slave's own store log (``isolateLogEnable``: RocketMQ names its folder so)."""
        name = broker_name if slave_id == 0 else f"{broker_name}-s{slave_id}"
        self.store = _store_root(run_dir) / name
        super().__init__(
            lib,
            run_dir,
            name,
            {
                "brokerClusterName": "DefaultCluster",
                "brokerName": broker_name,
                "brokerId": str(slave_id),
                "brokerRole": "SLAVE" if slave_id else "ASYNC_MASTER",
                **({} if slave_id == 0 else {"isolateLogEnable": "true"}),
                "flushDiskType": "ASYNC_FLUSH",
                "namesrvAddr": namesrv,
                "brokerIP1": "127.0.0.1",
                "brokerIP2": "127.0.0.1",
                "bindAddress": "127.0.0.1",
                "listenPort": str(self.port),
                "storePathRootDir": str(self.store),
                "storePathCommitLog": str(self.store / "commitlog"),
                "mappedFileSizeCommitLog": str(64 << 20),  # 64 MiB segments instead of 1 GiB
                "mappedFileSizeConsumeQueue": str(30_000 * 20),
                "maxHashSlotNum": "4000",
                "maxIndexNum": "16000",
                "timerWheelEnable": "false",
                "autoCreateTopicEnable": "true",
                "autoCreateSubscriptionGroup": "true",
                "loadBalancePollNameServerInterval": "1000",  # QUERY_ASSIGNMENT's route cache
                "diskMaxUsedSpaceRatio": "95",
                **(settings or {}),  # a test's own settings win over these
            },
        )

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def remove_store(self) -> None:
        """Delete the store, and its run's folder under /dev/shm once no broker's store is left in it."""
        shutil.rmtree(self.store, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.store.parent.rmdir()


class RocketMQCluster:
    """A NameServer and brokers (``broker-a`` ...) under ``work_dir``; a context manager that stops them all.

    ``broker_settings`` adds entries to every broker's config file (property filters, ACL ...); ``credentials``
    are what the cluster's own transport (topic creation, readiness checks) signs with when the brokers want ACL.
    :meth:`start_slave` adds a slave to a broker set (in :attr:`slaves`); a test kills either process
    (``kill()``) and restarts it (:meth:`restart_broker`).
    With ``tls`` (certificates from :func:`~rocket_rebalance.lab.certs.make_certificates`) the NameServer and the
    brokers enforce TLS with its server certificate, and every client of the cluster verifies against its CA."""

    def __init__(
        self,
        work_dir: Path,
        brokers: Sequence[str] = ("broker-a",),
        version: str | None = None,
        broker_settings: Mapping[str, str] | None = None,
        credentials: AclCredentials | None = None,
        tls: LabCertificates | None = None,
    ) -> None:
        self.slaves: dict[str, BrokerProcess] = {}
        self.work_dir = work_dir
        self.broker_settings = dict(broker_settings or {})
        self.credentials = credentials
        self.tls = tls
        self.broker_names = list(brokers)
        self.version = _version(version)
        self.lib: Path | None = None
        self.namesrv: NameServerProcess | None = None
        self.brokers: dict[str, BrokerProcess] = {}

    def start(self) -> str:
        """Fetch the jars if needed, start everything, wait until the NameServer knows every broker."""
        self.lib = lib = ensure_jars(self.version)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        properties = [] if self.tls is None else _tls_properties(self.tls, server=True)
        self.namesrv = _booted(lambda: NameServerProcess(lib, self.work_dir), properties)
        namesrv = self.namesrv.address

        def broker(name: str) -> BrokerProcess:
            try:
                made = _booted(
                    lambda: BrokerProcess(lib, self.work_dir, name, namesrv, self.broker_settings), properties
                )
            except RocketMQUnavailable:  # not among self.brokers, whose stores stop() removes
                shutil.rmtree(_store_root(self.work_dir) / name, ignore_errors=True)
                raise
            self.brokers[name] = made
            return made

        with ThreadPoolExecutor(len(self.broker_names)) as pool:  # brokers boot in parallel: ~5 s each on 2 cores
            starting = [pool.submit(broker, name) for name in self.broker_names]
        failures = [error for error in (f.exception() for f in starting) if error is not None]
        if failures:
            self.stop()
            raise failures[0]
        self.wait_registered()
        return self.namesrv_address

    def start_slave(self, name: str) -> BrokerProcess:
        """Start a slave (broker ID 1) of the broker set ``name`` (its master runs) and wait until the name server
        lists it and it replicates the master (10 to 20 s). Its messages come over the master's HA port as they are
        written; topics and groups it copies from the master only 10 s after it starts and then every 60 s
        (``SlaveSynchronize.syncAll``), and it answers no pull of a topic it does not know, so create the topics
        after this: :meth:`create_topic` creates them on every broker of a set."""
        if name not in self.brokers or name in self.slaves:
            raise ValueError(f"no broker set {name} without a slave here: the brokers are {self.broker_names}")
        assert self.lib is not None
        slave = BrokerProcess(self.lib, self.work_dir, name, self.namesrv_address, self.broker_settings, slave_id=1)
        slave.properties = [] if self.tls is None else _tls_properties(self.tls, server=True)
        self.slaves[name] = slave
        slave.start()
        deadline = time.monotonic() + BOOT_TIMEOUT
        while True:
            transport = self.transport()
            try:
                listed = transport.addresses(name).get(1)
            except TransportError:
                listed = None
            finally:
                transport.close()
            replicating = False
            with contextlib.suppress(OSError):
                # the HA client reports its offset to the master every 5 s once connected, and only then
                replicating = b"Slave report current offset" in slave.store_log.read_bytes()
            if listed == slave.address and replicating:
                return slave
            if time.monotonic() > deadline:
                raise RocketMQUnavailable(
                    f"the slave of {name} did not register at the name server and replicate (see {slave.store_log})"
                )
            time.sleep(0.2)

    def _started_namesrv(self) -> NameServerProcess:
        if self.namesrv is None:
            raise RuntimeError("the cluster is not started: call start() first")
        return self.namesrv

    @property
    def namesrv_address(self) -> str:
        return self._started_namesrv().address

    @property
    def tls_settings(self) -> TlsSettings | None:
        """What a client of this cluster needs for TLS: the lab's CA (None without TLS)."""
        return None if self.tls is None else TlsSettings(ca_file=str(self.tls.ca))

    def transport(self) -> RemotingTransport:
        return RemotingTransport([self.namesrv_address], credentials=self.credentials, tls=self.tls_settings)

    def wait_registered(self, names: Sequence[str] | None = None, timeout: float = BOOT_TIMEOUT) -> None:
        """Until the NameServer's cluster info lists each broker at its address."""
        wanted = {name: self.brokers[name].address for name in (names or self.broker_names)}
        deadline = time.monotonic() + timeout
        transport = self.transport()
        try:
            while True:
                try:
                    known = transport.brokers()
                except TransportError:
                    known = {}
                if all(known.get(name) == address for name, address in wanted.items()):
                    return
                if time.monotonic() > deadline:
                    raise RocketMQUnavailable(f"brokers {sorted(wanted)} did not register (the NameServer has {known})")
                time.sleep(0.2)
        finally:
            transport.close()

    def create_topic(self, topic: str, queue_nums: int, brokers: Sequence[str] = ()) -> None:
        """UPDATE_AND_CREATE_TOPIC on each broker (a set's slave too) over our own protocol; returns once the route
        shows it."""
        transport = self.transport()
        try:
            transport.create_topic(topic, queue_nums, brokers)
        finally:
            transport.close()

    def restart_broker(self, name: str) -> None:
        self.brokers[name].restart()
        self.wait_registered([name])

    def restart_namesrv(self) -> None:
        self._started_namesrv().restart()
        self.wait_registered()  # brokers register every 30 s (``registerNameServerPeriod``)

    def stop(self) -> None:
        """Kill everything and delete the stores: nothing here outlives the cluster, so a graceful shutdown (about
        ten seconds per broker) would buy nothing."""
        for broker in [*self.brokers.values(), *self.slaves.values()]:
            broker.kill()
            broker.remove_store()
        if self.namesrv is not None:
            self.namesrv.kill()

    def __enter__(self) -> RocketMQCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _java_escape(text: str) -> str:
    """Non-ASCII as backslash-u escapes of UTF-16 units, which Peer.java turns back into characters."""
    units = text.encode("utf-16-be", "surrogatepass")
    out = []
    for index in range(0, len(units), 2):
        unit = int.from_bytes(units[index : index + 2], "big")
        out.append(chr(unit) if 0x20 <= unit < 0x7F and unit != 0x5C else f"\\u{unit:04x}")
    return "".join(out)


MQADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"


def _client_jvm(lib: Path, home: Path, logback: str, *properties: str) -> list[str]:
    """A small, quick-starting JVM for a RocketMQ client (a Java consumer, mqadmin), its files kept in ``home``."""
    return [
        "java",
        "-Xms64m",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",  # C1 only: these JVMs live seconds to minutes, start-up dominates
        f"-Duser.home={home}",
        f"-Drocketmq.log.root={home}",
        f"-Drmq.logback.configurationFile={logback}",  # else the broker's, which also chatters on stdout
        *properties,
        "-cp",
        f"{lib}/*",
    ]


class JavaPeer:
    """A Java ``DefaultMQPushConsumer`` (Peer.java) in its own JVM, followed through its stdout lines."""

    def __init__(
        self,
        lib: Path,
        run_dir: Path,
        namesrv: str,
        group: str,
        instance: str,
        topics: Sequence[str],
        strategy: str = "AVG",
        orderly: bool = False,
        work_ms: int = 0,
        wait_interval_ms: int = 2000,
        consume_from: str = "first",
        tags: str | None = None,
        sql: str | None = None,
        credentials: AclCredentials | None = None,
        tls: LabCertificates | None = None,
        extra: Sequence[str] = (),
    ) -> None:
        """With ``tls``, the consumer speaks TLS (``tls.enable``) and verifies the servers against its CA;
        ``extra``: more of Peer.java's options (``--answers``, ``--batch N`` ...)."""
        self.client_id = f"127.0.0.1@{instance}"
        self.allocation: dict[str, frozenset[tuple[str, int]]] = {}
        self.messages: list[dict[str, Any]] = []
        self.started = threading.Event()
        self.stopped = threading.Event()
        self._lock = threading.Lock()
        home = run_dir / "java-home"
        home.mkdir(parents=True, exist_ok=True)
        args = ["--namesrv", namesrv, "--group", group, "--instance", _java_escape(instance)]
        for topic in topics:
            args += ["--topic", topic]
        args += ["--strategy", strategy, "--work-ms", str(work_ms), "--consume-from", consume_from]
        if orderly:
            args.append("--orderly")
        if tags is not None:
            args += ["--tags", tags]
        if sql is not None:
            args += ["--sql", sql]
        args += extra
        wait = f"-Drocketmq.client.rebalance.waitInterval={wait_interval_ms}"
        tls_properties = [] if tls is None else _tls_properties(tls, server=False)
        command = _client_jvm(lib, home, "rmq.client.logback.xml", wait, *tls_properties)
        command += [str(JAVA_DIR / "Peer.java"), *args]
        safe = "".join(ch if ch.isascii() and ch.isalnum() else "_" for ch in instance)
        self._stderr = (run_dir / f"java-{safe}.err").open("ab")
        env = dict(os.environ)
        for name in ("ROCKETMQ_ACCESS_KEY", "ROCKETMQ_SECRET_KEY"):
            env.pop(name, None)
        if credentials is not None:  # through the environment, as our CLI takes them: never on a command line
            env.update(ROCKETMQ_ACCESS_KEY=credentials.access_key, ROCKETMQ_SECRET_KEY=credentials.secret_key)
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            encoding="utf-8",
            errors="replace",
            env=env,
        )
        self._follower = threading.Thread(target=self._follow, daemon=True)
        self._follower.start()

    def _follow(self) -> None:
        for line in self.process.stdout or ():
            kind, _, payload = line.strip().partition(" ")
            if kind not in ("STARTED", "ALLOC", "MSG", "STOPPED"):
                continue  # the JVM's own logging
            event = json.loads(payload)
            with self._lock:
                if kind == "ALLOC":
                    queues = frozenset((q["brokerName"], q["queueId"]) for q in event["queues"])
                    self.allocation[event["topic"]] = queues
                elif kind == "MSG":
                    self.messages.append(event)
            if kind == "STARTED":
                self.started.set()
            elif kind == "STOPPED":
                self.stopped.set()

    def owned(self, topic: str) -> frozenset[tuple[str, int]]:
        with self._lock:
            return self.allocation.get(topic, frozenset())

    def consumed(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.messages)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 30.0) -> bool:
        """Graceful leave (SIGTERM: the shutdown hook persists offsets and unregisters); True when it said so (its
        lines read to the pipe's end first: on a busy machine the follower may not have run since it printed)."""
        _terminate(self.process, timeout)
        self._stderr.close()
        self._follower.join(timeout)
        return self.stopped.is_set()

    def kill(self) -> None:
        """A crash: no shutdown hook runs, the connections just close."""
        if self.alive:
            self.process.kill()
            self.process.wait()
        self._stderr.close()


def mqadmin(
    lib: Path,
    home: Path,
    *args: str,
    timeout: float = 60.0,
    credentials: AclCredentials | None = None,
    tls: LabCertificates | None = None,
) -> str:
    """Run the real ``mqadmin`` (rocketmq-tools) and return what it printed; a failure names its last line.
    With ``credentials``, mqadmin signs its requests with them (it reads them from ``conf/tools.yml`` under its
    home, as an operator configures it); with ``tls``, it speaks TLS and verifies against the lab's CA."""
    home.mkdir(parents=True, exist_ok=True)
    tools_yml = home / "conf" / "tools.yml"
    if credentials is not None:
        tools_yml.parent.mkdir(exist_ok=True)
        tools_yml.write_text(
            f"accessKey: {json.dumps(credentials.access_key)}\nsecretKey: {json.dumps(credentials.secret_key)}\n",
            encoding="utf-8",
        )
        tools_yml.chmod(0o600)
    else:
        tools_yml.unlink(missing_ok=True)
    properties = [f"-Drocketmq.home.dir={home}", *([] if tls is None else _tls_properties(tls, server=False))]
    command = [*_client_jvm(lib, home, "rmq.tools.logback.xml", *properties), MQADMIN_MAIN, *args]
    done = subprocess.run(command, capture_output=True, text=True, encoding="utf-8", timeout=timeout)
    output = done.stdout + done.stderr
    # mqadmin exits 0 on most failures, printing a stack trace or "The sub command X not exist" instead.
    if done.returncode != 0 or "SubCommandException" in output or "sub command" in output and "not exist" in output:
        lines = [line for line in output.splitlines() if line.strip() and not line.startswith("\tat ")]
        raise RuntimeError(f"mqadmin {args[0]} failed: {lines[0] if lines else done.returncode}")
    return done.stdout


def java_produce(
    lib: Path, home: Path, namesrv: str, topic: str, steps: Sequence[str], timeout: float = 300.0
) -> list[dict[str, Any]]:
    """Send with the real Java producer (Producer.java: each step ``mode=single|batch|auto,compress=ZLIB|LZ4|ZSTD,
    count=N,size=BYTES[,over=BYTES][,tag=T]``) and return what it sent, one dict per message: ``msgId`` (its
    UNIQ_KEY), ``sha256`` and ``size`` of its body, the step's ``mode``, ``compress`` and ``over``."""
    home.mkdir(parents=True, exist_ok=True)
    command = [*_client_jvm(lib, home, "rmq.client.logback.xml"), str(JAVA_DIR / "Producer.java")]
    command += ["--namesrv", namesrv, "--topic", topic]
    for step in steps:
        command += ["--send", step]
    done = subprocess.run(command, capture_output=True, text=True, encoding="utf-8", timeout=timeout)
    lines = done.stdout.splitlines()
    if done.returncode != 0 or not any(line.startswith("DONE ") for line in lines):
        errors = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("\tat ")]
        raise RuntimeError(f"the Java producer failed: {errors[0] if errors else done.returncode}")
    return [json.loads(line[5:]) for line in lines if line.startswith("SENT ")]


@contextlib.contextmanager
def _signals_stop() -> Iterator[threading.Event]:
    stop = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stop.set())
    yield stop


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rocket_rebalance.lab.rocketmq``: run a cluster until Ctrl-C (``make rocketmq``)."""
    parser = argparse.ArgumentParser(prog="python -m rocket_rebalance.lab.rocketmq", description=main.__doc__)
    parser.add_argument("--brokers", type=int, default=1, help="number of brokers (broker-a, broker-b, ...)")
    parser.add_argument("--workdir", type=Path, help="where configs and logs go (default: a temporary folder)")
    parser.add_argument("--topic", action="append", default=[], metavar="NAME:QUEUES", help="create a topic")
    parser.add_argument("--fetch-only", action="store_true", help="only fetch the jars into the cache")
    args = parser.parse_args(argv)
    try:
        if args.fetch_only:
            print(ensure_jars())
            return 0
        if not 1 <= args.brokers <= 26:
            raise RocketMQUnavailable("--brokers must be between 1 and 26")
        work_dir = args.workdir or Path(os.environ.get("TMPDIR", "/tmp")) / f"rocketmq-{os.getpid()}"
        names = [f"broker-{chr(ord('a') + i)}" for i in range(args.brokers)]
        with _signals_stop() as stop, RocketMQCluster(work_dir, names) as cluster:
            for spec in args.topic:
                name, _, queues = spec.partition(":")
                cluster.create_topic(name, int(queues or 8))
            brokers = {name: broker.address for name, broker in cluster.brokers.items()}
            print(json.dumps({"namesrv": cluster.namesrv_address, "brokers": brokers, "workdir": str(work_dir)}))
            sys.stdout.flush()
            stop.wait()
    except (RocketMQUnavailable, TransportError, ValueError) as error:
        print(f"rocketmq: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
