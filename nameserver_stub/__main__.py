"""``nameserver-stub`` / ``python -m nameserver_stub``: run the stub until SIGTERM or SIGINT.

The first line on stdout is the bound ``host:port`` (flushed at once), so a parent process that started the
stub on port 0 reads one line to learn where it is. Logs go to stderr, at most one line of a kind per
``--log-repeat-interval`` (:mod:`nameserver_stub.logs`). Exit status: 0 after a clean stop, 2 for a
configuration the stub refuses or an install without the ``stub`` extra (one line on stderr, nothing served).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from nameserver_stub.config import MAX_STREAMS_PER_CLIENT, ConfigError, StubConfig, parse_topic_spec
from nameserver_stub.logs import RepeatFilter

if TYPE_CHECKING:
    from nameserver_stub.server import StubServer

TOKEN_ENV = "NAMESERVER_STUB_TOKEN"


class _VersionAction(argparse.Action):
    """``--version``: the version of the distribution the stub ships in (rocket-rebalance), looked up only when
    asked, since the stub may import no more of the library than its model and wire."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(f"{parser.prog} {importlib.metadata.version('rocket-rebalance')}")
        parser.exit()


def _server_class() -> type[StubServer]:
    """The server, imported when it is run: it needs the ``stub`` extra (grpcio, protobuf), and without it the
    command says so in one line (exit 2) rather than with a traceback, and ``--help``/``--version`` still work."""
    try:
        from nameserver_stub.server import StubServer
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] not in ("grpc", "grpc_health", "google"):
            raise
        raise ConfigError(
            f"nameserver-stub needs the 'stub' extra ({error.name} is missing): pip install 'rocket-rebalance[stub]'"
        ) from None
    return StubServer


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nameserver-stub",
        description="A gRPC stand-in for a RocketMQ NameServer and its brokers (for tests and demos).",
    )
    add = parser.add_argument
    add("--version", action=_VersionAction)
    add("--listen", default="127.0.0.1:9876", help="host:port; port 0 picks a free port (default %(default)s)")
    add("--data-dir", type=Path, default=Path(".stub-data"), help="SQLite files (default %(default)s)")
    add(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC:BROKER=N[,BROKER=N]",
        help="create or update a topic, e.g. TopicTest:broker-a=4,broker-b=4 (N or READ/WRITE); repeatable",
    )
    add("--broker", action="append", default=[], metavar="NAME", help="a broker hosting no topic yet; repeatable")
    add("--cluster-name", default="DefaultCluster")
    add(
        "--client-expiry",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="drop a client after this long without a heartbeat (default %(default)s)",
    )
    add(
        "--lock-expiry",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="a queue lock lives this long unless renewed (default %(default)s)",
    )
    add("--sweep-interval", type=float, default=1.0, metavar="SECONDS", help="how often expiry is checked")
    add("--max-long-poll", type=float, default=30.0, metavar="SECONDS", help="cap on a pull's max_wait_ms")
    add("--enable-faults", action="store_true", help="allow fault-injection admin calls")
    add("--allow-remote", action="store_true", help="allow a non-loopback listen address")
    add("--tls-cert", type=Path, help="PEM certificate chain (with --tls-key) to serve TLS")
    add("--tls-key", type=Path, help="PEM private key")
    add(
        "--token",
        default=os.environ.get(TOKEN_ENV),
        help=f"shared token required on every call as 'authorization: Bearer TOKEN' (or ${TOKEN_ENV})",
    )
    add("--max-workers", type=int, default=1024, help="gRPC worker threads (each open stream holds one)")
    add("--max-streams", type=int, help="open notification streams allowed (default: half of --max-workers)")
    add(
        "--max-streams-per-client",
        type=int,
        default=MAX_STREAMS_PER_CLIENT,
        help="open streams one client ID may have at one broker (default %(default)s)",
    )
    add("--max-parked-pulls", type=int, help="long polls waiting at once (default: a quarter of --max-workers)")
    add("--max-db-bytes", type=int, metavar="BYTES", help="cap on the database size; writes beyond it: disk full")
    add("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    add(
        "--log-repeat-interval",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="log a line of the same kind at most once per interval, counting the rest (default %(default)s)",
    )
    return parser


def config_from_args(args: argparse.Namespace) -> StubConfig:
    return StubConfig(
        listen=args.listen,
        data_dir=args.data_dir,
        topics=tuple(parse_topic_spec(spec) for spec in args.topic),
        brokers=tuple(args.broker),
        cluster_name=args.cluster_name,
        client_expiry=args.client_expiry,
        lock_expiry=args.lock_expiry,
        sweep_interval=args.sweep_interval,
        max_long_poll=args.max_long_poll,
        enable_faults=args.enable_faults,
        allow_remote=args.allow_remote,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        token=args.token,
        max_workers=args.max_workers,
        max_streams=args.max_streams,
        max_streams_per_client=args.max_streams_per_client,
        max_parked_pulls=args.max_parked_pulls,
        max_db_bytes=args.max_db_bytes,
        log_repeat_interval=args.log_repeat_interval,
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    try:
        config = config_from_args(args)
        config.check()  # before the filter below is built from it
        repeats = RepeatFilter(config.log_repeat_interval)
        for handler in logging.getLogger().handlers:
            handler.addFilter(repeats)
        server = _server_class()(config).start()
    except ConfigError as error:
        print(f"nameserver-stub: error: {error}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(server.address, flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
        repeats.flush(logging.getLogger("nameserver_stub"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
