"""The stub's configuration, and the parsing of its textual pieces (topic specs, listen addresses).

Kept apart from the command line so that tests and demos build a :class:`StubConfig` directly; the CLI only
turns arguments into one.
"""

from __future__ import annotations

import ipaddress
import math
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from rocket_rebalance.model import PERM_READ, PERM_WRITE, check_topic_name

MAX_QUEUE_NUMS = 1024
MAX_INTERVAL = 10 * 365 * 24 * 3600.0  # seconds; beyond it a timed wait overflows (OverflowError in a thread)
MIN_DB_BYTES = 64 * 1024  # the empty schema takes a few pages; below this nothing fits
MAX_STREAMS_PER_CLIENT = 8  # one per broker is the norm; a few more cover a reconnect whose old stream lingers
PERM_READ_WRITE = PERM_READ | PERM_WRITE
DEFAULT_BROKER = "broker-a"


class ConfigError(ValueError):
    """A configuration the stub refuses to start with; the message says what is wrong."""


@dataclass(frozen=True)
class TopicQueues:
    """One topic's queues on one broker, as RocketMQ's TopicConfig."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = PERM_READ_WRITE


@dataclass(frozen=True)
class TopicSpec:
    """A topic and the brokers hosting it, e.g. from ``TopicTest:broker-a=4,broker-b=4``."""

    topic: str
    brokers: tuple[TopicQueues, ...]


@dataclass(frozen=True)
class StubConfig:
    """Everything a :class:`nameserver_stub.server.StubServer` needs. Intervals are in seconds."""

    listen: str = "127.0.0.1:9876"
    data_dir: Path = field(default_factory=lambda: Path(".stub-data"))
    topics: tuple[TopicSpec, ...] = ()
    brokers: tuple[str, ...] = ()  # more brokers than the topics name (they host no topic yet)
    cluster_name: str = "DefaultCluster"
    client_expiry: float = 120.0
    lock_expiry: float = 60.0
    sweep_interval: float = 1.0
    max_long_poll: float = 30.0
    enable_faults: bool = False
    allow_remote: bool = False
    tls_cert: Path | None = None
    tls_key: Path | None = None
    token: str | None = None
    max_workers: int = 1024
    # Each open notification stream and each parked long poll holds a worker thread for as long as it lasts, so
    # both are bounded to leave a quarter of the workers for plain calls; None: half / a quarter of max_workers.
    max_streams: int | None = None
    max_streams_per_client: int = MAX_STREAMS_PER_CLIENT  # per client ID at one broker
    max_parked_pulls: int | None = None
    max_db_bytes: int | None = None  # cap on the database file: a runaway producer fills it, not the disk
    log_repeat_interval: float = 5.0  # seconds: the same kind of log line at most once per interval (CLI only)

    @property
    def stream_limit(self) -> int:
        """Open notification streams allowed in total."""
        return self.max_workers // 2 if self.max_streams is None else self.max_streams

    @property
    def parked_pull_limit(self) -> int:
        """Long polls allowed to wait at the same time."""
        return self.max_workers // 4 if self.max_parked_pulls is None else self.max_parked_pulls

    @property
    def running_info_limit(self) -> int:
        """Operators' running-info calls allowed to wait for consumers' answers at once (each holds a worker)."""
        return max(1, self.max_workers // 8)

    def broker_names(self) -> tuple[str, ...]:
        """Every logical broker: those listed, those the topics name, or ``broker-a`` when there are none."""
        names = dict.fromkeys(self.brokers)
        for spec in self.topics:
            names.update(dict.fromkeys(queues.broker_name for queues in spec.brokers))
        return tuple(sorted(names)) or (DEFAULT_BROKER,)

    def check(self) -> None:
        """Raise :class:`ConfigError` for a configuration that cannot work."""
        for name in ("client_expiry", "lock_expiry", "sweep_interval", "max_long_poll", "log_repeat_interval"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 0 < value <= MAX_INTERVAL):
                raise ConfigError(f"{name} must be positive (seconds, finite, at most {MAX_INTERVAL:.0f}), got {value}")
        if self.max_workers < 4:
            raise ConfigError(f"max_workers must be at least 4, got {self.max_workers}")
        for name, value in (
            ("max_streams", self.stream_limit),
            ("max_streams_per_client", self.max_streams_per_client),
            ("max_parked_pulls", self.parked_pull_limit),
        ):
            if value < 1:
                raise ConfigError(f"{name} must be at least 1, got {value}")
        if self.stream_limit + self.parked_pull_limit > self.max_workers * 3 // 4:
            raise ConfigError(
                f"max_streams ({self.stream_limit}) + max_parked_pulls ({self.parked_pull_limit}) must leave a "
                f"quarter of the {self.max_workers} worker threads (max_workers) for plain calls: at most "
                f"{self.max_workers * 3 // 4} together"
            )
        if self.max_db_bytes is not None and self.max_db_bytes < MIN_DB_BYTES:
            raise ConfigError(f"max_db_bytes must be at least {MIN_DB_BYTES}, got {self.max_db_bytes}")
        for broker in self.broker_names():
            check_broker_name(broker)
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ConfigError("TLS needs both a certificate (--tls-cert) and a key (--tls-key)")
        if self.token is not None:
            check_token(self.token)
        if self.tls_cert is not None and self.tls_key is not None:
            check_tls_files(self.tls_cert, self.tls_key)
        host, _ = split_listen(self.listen)
        if not self.allow_remote and not is_loopback(host):
            raise ConfigError(
                f"refusing to listen on {host!r}, which is not a loopback address; pass --allow-remote "
                "(allow_remote=True) to serve other machines"
            )


def check_token(token: str) -> str:
    """The token travels as a gRPC metadata value, which must be printable ASCII (space to ``~``).

    The refusal names the position but not the character: the token is a secret, and error lines get pasted.
    """
    if not token:
        raise ConfigError("the token is empty")
    for position, char in enumerate(token, 1):
        if not " " <= char <= "~":
            raise ConfigError(
                f"the token has a character that is not printable ASCII at position {position}; gRPC metadata "
                "values (and so tokens) may only use the characters from space to '~'"
            )
    return token


def check_tls_files(cert: Path, key: Path) -> None:
    """Load the certificate chain and key as Python's ssl does, so a wrong file is one clear line at start.

    gRPC would only say "failed to bind" about the port, with the real reason in its C log.
    """
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        if not path.is_file():
            raise ConfigError(f"{flag} {path} is not a readable file")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as error:
        raise ConfigError(
            f"TLS certificate {cert} and key {key} cannot be used together (a PEM certificate chain and its PEM "
            f"private key are needed): {error.strerror or error}"
        ) from None


def check_broker_name(name: str) -> str:
    """Broker names follow the topic character rules (RocketMQ validates them the same way)."""
    try:
        check_topic_name(name)
    except ValueError as error:
        raise ConfigError(str(error).replace("topic", "broker name", 1)) from None
    return name


def split_listen(listen: str) -> tuple[str, int]:
    """``host:port`` (IPv6 hosts in brackets) into its parts; port 0 means "pick a free port"."""
    host, sep, port_text = listen.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"listen address {listen!r} is not host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        if ":" not in host:
            raise ConfigError(f"listen address {listen!r}: brackets are for IPv6 addresses")
    elif ":" in host or "[" in host or "]" in host:
        # Unbracketed, "::1:0" would pass as host "::1" here while gRPC binds the IPv6 address "::1:0".
        raise ConfigError(f"listen address {listen!r}: write an IPv6 address in brackets, e.g. [::1]:0")
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"listen address {listen!r} has a port that is not a number") from None
    if not 0 <= port <= 65535:
        raise ConfigError(f"listen port {port} is outside 0..65535")
    return host, port


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IPs (127.0.0.0/8, ::1); names other than localhost are not trusted."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_topic_spec(text: str) -> TopicSpec:
    """Parse ``Topic:broker-a=4,broker-b=4`` (or ``broker-a=8/4`` for 8 read and 4 write queues)."""
    topic, sep, rest = text.partition(":")
    if not sep or not rest:
        raise ConfigError(f"topic spec {text!r} is not TOPIC:BROKER=QUEUES[,BROKER=QUEUES...]")
    try:
        check_topic_name(topic)
    except ValueError as error:
        raise ConfigError(f"topic spec {text!r}: {error}") from None
    brokers: dict[str, TopicQueues] = {}
    for part in rest.split(","):
        broker, sep, counts = part.strip().partition("=")
        if not sep:
            raise ConfigError(f"topic spec {text!r}: {part!r} is not BROKER=QUEUES")
        check_broker_name(broker)
        if broker in brokers:
            raise ConfigError(f"topic spec {text!r}: broker {broker!r} appears twice")
        read_text, _, write_text = counts.partition("/")
        try:
            read = int(read_text)
            write = int(write_text) if write_text else read
        except ValueError:
            raise ConfigError(f"topic spec {text!r}: queue count {counts!r} is not a number") from None
        for count in (read, write):
            if not 1 <= count <= MAX_QUEUE_NUMS:
                raise ConfigError(f"topic spec {text!r}: queue count {count} is outside 1..{MAX_QUEUE_NUMS}")
        brokers[broker] = TopicQueues(broker, read, write)
    return TopicSpec(topic, tuple(brokers.values()))
