"""The embeddable server: ``StubServer(config).start()``, ``.address``, ``.stop()``.

It owns the gRPC server, the store, the cluster and the expiry sweeper thread, and starts and stops them in an
order that loses nothing: on stop, health turns NOT_SERVING, notification streams and long polls are ended
(their handlers return), in-flight calls get a grace period to finish, and only then is the store closed. A
sync gRPC server is used on purpose: the stub's work is short, and each open notification stream costs one
parked thread, which is cheap at the hundreds of clients a test or demo runs. Because a parked thread is still a
thread, open streams and parked long polls are bounded (:mod:`nameserver_stub.guard`, the cluster) well below the
pool, so plain calls always find a worker.
"""

from __future__ import annotations

import logging
import threading
from types import TracebackType

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from nameserver_stub.admin_service import AdminService
from nameserver_stub.auth import TokenInterceptor
from nameserver_stub.broker_service import BrokerService
from nameserver_stub.clock import Clock, SystemClock
from nameserver_stub.cluster import Cluster
from nameserver_stub.config import ConfigError, StubConfig, split_listen
from nameserver_stub.guard import GuardInterceptor, StreamSlots
from nameserver_stub.namesrv_service import NameServerService
from nameserver_stub.relay import RunningInfoRelay
from nameserver_stub.store import Store
from rocket_rebalance._proto.v1 import admin_pb2_grpc, broker_pb2, broker_pb2_grpc, namesrv_pb2_grpc

log = logging.getLogger("nameserver_stub")

SERVICE_NAMES = (
    "rocket_rebalance.v1.NameServer",
    "rocket_rebalance.v1.Broker",
    "rocket_rebalance.v1.Admin",
)
MAX_REQUEST_BYTES = 16 * 1024 * 1024  # above the 4 MiB message limit, so an oversized body gets a clear error


class StubServer:
    """A NameServer and its brokers on one gRPC port. Use as a context manager or call start()/stop()."""

    def __init__(self, config: StubConfig, *, clock: Clock | None = None) -> None:
        config.check()
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self._server: grpc.Server | None = None
        self._store: Store | None = None
        self._cluster: Cluster | None = None
        self._health: health.HealthServicer | None = None
        self._stopping = threading.Event()
        self._sweeper: threading.Thread | None = None
        self._address = ""
        self.stream_slots = StreamSlots(config.stream_limit)
        self.relay: RunningInfoRelay[broker_pb2.ReportRunningInfoRequest] = RunningInfoRelay(config.running_info_limit)

    @property
    def address(self) -> str:
        """``host:port`` actually bound (the real port when the config asked for port 0)."""
        if not self._address:
            raise RuntimeError("the server is not started")
        return self._address

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            raise RuntimeError("the server is not started")
        return self._cluster

    @property
    def store(self) -> Store:
        if self._store is None:
            raise RuntimeError("the server is not started")
        return self._store

    def start(self) -> StubServer:
        if self._server is not None:
            raise RuntimeError("the server is already started")
        store = Store(self.config.data_dir, max_bytes=self.config.max_db_bytes)
        try:
            cluster = Cluster(self.config, store, self.clock)
            server, port = self._bind(cluster)
        except BaseException:
            store.close()
            raise
        host, _ = split_listen(self.config.listen)
        self._address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        cluster.address = self._address
        self._store, self._cluster, self._server = store, cluster, server
        server.start()
        self._stopping.clear()
        self._sweeper = threading.Thread(target=self._sweep_loop, name="stub-sweeper", daemon=True)
        self._sweeper.start()
        log.info("serving brokers %s on %s", ", ".join(self.config.broker_names()), self._address)
        return self

    def _bind(self, cluster: Cluster) -> tuple[grpc.Server, int]:
        from concurrent.futures import ThreadPoolExecutor

        # The token is checked first, so a caller without it learns nothing, not even that its bytes were junk.
        interceptors: list[grpc.ServerInterceptor] = []
        if self.config.token:
            interceptors.append(TokenInterceptor(self.config.token))
        interceptors.append(GuardInterceptor(self.stream_slots))
        server = grpc.server(
            ThreadPoolExecutor(max_workers=self.config.max_workers, thread_name_prefix="stub-rpc"),
            interceptors=interceptors,
            options=[
                ("grpc.so_reuseport", 0),  # a second server on a taken port must fail, not share it
                ("grpc.max_receive_message_length", MAX_REQUEST_BYTES),
            ],
        )
        namesrv_pb2_grpc.add_NameServerServicer_to_server(NameServerService(cluster, self.config.cluster_name), server)
        broker_pb2_grpc.add_BrokerServicer_to_server(BrokerService(cluster, self.clock, self.relay), server)
        admin_pb2_grpc.add_AdminServicer_to_server(AdminService(cluster, self.config.cluster_name, self.relay), server)
        self._health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        for name in ("", *SERVICE_NAMES):
            self._health.set(name, health_pb2.HealthCheckResponse.SERVING)
        credentials = None
        if self.config.tls_cert is not None and self.config.tls_key is not None:
            try:  # config.check() loaded them already; this is only for a file changed since
                credentials = grpc.ssl_server_credentials(
                    [(self.config.tls_key.read_bytes(), self.config.tls_cert.read_bytes())]
                )
            except OSError as error:
                raise ConfigError(f"cannot read the TLS files: {error}") from None
        try:
            if credentials is not None:
                port = server.add_secure_port(self.config.listen, credentials)
            else:
                port = server.add_insecure_port(self.config.listen)
        except (RuntimeError, OSError) as error:
            raise ConfigError(f"cannot listen on {self.config.listen}: {error}") from None
        if not port:
            raise ConfigError(f"cannot listen on {self.config.listen}")
        return server, port

    def _sweep_loop(self) -> None:
        while not self._stopping.wait(self.config.sweep_interval):
            try:
                self.cluster.sweep()
            except Exception:  # noqa: BLE001 - a failed sweep must not end expiry for good
                log.exception("client expiry sweep failed")

    def stop(self, grace: float = 5.0) -> None:
        """Stop serving and close the store; idempotent."""
        server, cluster, store = self._server, self._cluster, self._store
        if server is None or cluster is None or store is None:
            return
        self._server = None
        if self._health is not None:
            self._health.enter_graceful_shutdown()
        self._stopping.set()
        cluster.close()
        server.stop(grace).wait()
        if self._sweeper is not None:
            self._sweeper.join()
        store.close()
        log.info("stopped")

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        """Block until the server stops (or ``timeout``); True when it stopped."""
        return self._stopping.wait(timeout)

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
