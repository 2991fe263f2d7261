"""Commands that act as a client of a running cluster: ``consume``, ``produce``, ``consumer-progress``,
``consumer-connection``. ``consume`` prints one JSON line per event so that scripts and tests can follow it."""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from rocket_rebalance.commands import CommandError
from rocket_rebalance.commands.options import (
    acl_credentials,
    add_connection_options,
    add_namespace_option,
    add_strategy_options,
    build_strategy,
    duration,
    group_name,
    port,
    tls_settings,
    topic_name,
    wire_names,
)
from rocket_rebalance.model import (
    PERM_WRITE,
    MessageQueue,
    printable,
    sort_queues,
    without_namespace,
    word_choices,
)
from rocket_rebalance.runtime.transport import GROUP_NOT_ONLINE
from rocket_rebalance.trace import TRACE_TOPIC

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from rocket_rebalance.runtime.listener import RebalanceListener
    from rocket_rebalance.runtime.transport import Message

__all__ = ["register"]


_emit_lock = threading.Lock()


def _emit(event: str, **fields: Any) -> None:
    """One JSON line, written whole: several threads emit, and ``print`` writes text and newline separately, so
    two lines could interleave into one that no reader can parse (an ownership change would go unseen)."""
    line = json.dumps({"event": event, "at": round(time.time(), 4), **fields}, ensure_ascii=False) + "\n"
    with _emit_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


TEXT_LOG_FORMAT = "%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s"


class JsonLogFormatter(logging.Formatter):
    """``consume --log-format json``: each log record as one JSON object on one line (a traceback inside it, not
    on lines of its own), so a log collector takes every record whole and can filter by its fields."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "at": round(record.created, 4),
            "level": record.levelname,
            "logger": record.name,
            "thread": record.threadName,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        stacks = getattr(record, "stacks", None)
        if stacks is not None:
            line["stacks"] = stacks
        return json.dumps(line, ensure_ascii=False)


def _stacks() -> dict[str, str]:
    """Every thread's stack, by thread name (what faulthandler prints, for the JSON log)."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    return {
        f"{names.get(ident, 'thread')} ({ident})": "".join(traceback.format_stack(frame))
        for ident, frame in sys._current_frames().items()
    }


def _queue_names(queues: Sequence[MessageQueue]) -> list[str]:
    return [f"{mq.broker_name}:{mq.queue_id}" for mq in sort_queues(queues)]


class _Recorder:
    """Appends one JSON line per consumed message (queue, offset, client, start and end time), flushed before
    the listener returns, so a killed process has recorded everything whose offset it could have committed."""

    def __init__(self, path: Path | None, client_id: str) -> None:
        self._file: TextIO | None = path.open("a", encoding="utf-8") if path else None
        self._client_id = client_id
        self._lock = threading.Lock()

    def record(self, mq: MessageQueue, offset: int, started: float, ended: float, tags: str = "") -> None:
        if self._file is None:
            return
        line = {
            "topic": mq.topic,
            "broker": mq.broker_name,
            "queue": mq.queue_id,
            "offset": offset,
            "tags": tags,
            "client": self._client_id,
            "t0": started,
            "t1": ended,
        }
        with self._lock:
            self._file.write(json.dumps(line) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def _metrics_server(args: argparse.Namespace) -> tuple[CollectorRegistry | bool, Callable[[], None]]:
    """``--metrics-port``: a registry of its own, served on ``/metrics`` before the consumer registers anywhere
    (a port that cannot be bound ends the command at once); returns it and what stops the server."""
    if args.metrics_port is None:
        if args.metrics_address is not None:
            raise CommandError("--metrics-address needs --metrics-port")
        return False, lambda: None
    try:
        from prometheus_client import CollectorRegistry

        from rocket_rebalance.runtime.prometheus import serve
    except ImportError:
        raise CommandError("--metrics-port needs prometheus_client: pip install 'rocket-rebalance[metrics]'") from None
    registry = CollectorRegistry()
    address = args.metrics_address or "127.0.0.1"
    try:
        stop, bound = serve(args.metrics_port, address, registry)
    except OSError as error:
        raise CommandError(f"--metrics-port: cannot listen on {address}:{args.metrics_port}: {error}") from None
    _emit("metrics", url=f"http://{address}:{bound}/metrics")
    return registry, stop


def _run_consume(args: argparse.Namespace) -> int:
    """``consume``: one consumer of the API ``--api`` chooses (push or pull, threaded or asyncio), printing its
    ownership and progress as JSON lines until SIGTERM or Ctrl-C, then shutting down cleanly."""
    from rocket_rebalance.runtime.consumer import default_client_id

    if args.orderly and args.api in ("pull", "async-pull"):
        raise CommandError("--orderly is for the push consumers (--api push or async-push): a pull consumer polls")
    metrics, stop_metrics = _metrics_server(args)
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLogFormatter() if args.log_format == "json" else logging.Formatter(TEXT_LOG_FORMAT))
    logging.basicConfig(level=args.log_level, handlers=[handler])
    client_id = args.client_id or default_client_id()
    session = _Session(args, client_id, _Recorder(args.record, client_id), _consumer_options(args, client_id, metrics))
    try:
        if args.api.startswith("async"):
            import asyncio

            asyncio.run(session.run_async())
        else:
            session.run()
    finally:
        stop_metrics()
        session.recorder.close()
    return 0


def _consumer_options(args: argparse.Namespace, client_id: str, metrics: CollectorRegistry | bool) -> dict[str, Any]:
    """What every kind of consumer is given, from the command line."""
    from rocket_rebalance.model import ConsumeFromWhere, MessageModel
    from rocket_rebalance.runtime.settings import EngineSettings

    intervals = {
        name: value
        for name, value in (
            ("rebalance_interval", args.rebalance_interval),
            ("persist_interval", args.persist_interval),
            ("heartbeat_interval", args.heartbeat_interval),
            ("route_refresh_interval", args.route_interval),
        )
        if value is not None
    }
    credentials = acl_credentials(args)
    tls = tls_settings(args)
    return {
        "topics": _subscriptions(args.topic, args.expressions),
        "strategy": build_strategy(args.strategy or "AVG", args),
        "message_model": MessageModel.BROADCASTING if args.broadcast else MessageModel.CLUSTERING,
        "consume_from_where": {
            "last": ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
            "first": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            "timestamp": ConsumeFromWhere.CONSUME_FROM_TIMESTAMP,
        }[args.consume_from],
        "fenced_handover": not args.no_fence,
        "recover_dead_holders": not args.keep_dead_locks,
        "client_id": client_id,
        "token": args.token,
        "access_key": None if credentials is None else credentials.access_key,
        "secret_key": None if credentials is None else credentials.secret_key,
        "security_token": None if credentials is None else credentials.security_token,
        "tls": tls is not None,
        "tls_ca_file": None if tls is None else tls.ca_file,
        "tls_cert_file": None if tls is None else tls.cert_file,
        "tls_key_file": None if tls is None else tls.key_file,
        "tls_verify": tls is None or tls.verify,
        "offset_file": args.offsets,
        "reset_offsets": args.reset_offsets,
        "metrics": metrics,
        "namespace": args.namespace,
        **({} if args.trace is None else {"settings": EngineSettings(enable_trace=True, trace_topic=args.trace)}),
        **intervals,
    }


class _Session:
    """One ``consume`` run: the consumer, what it prints, and how it stops. A push consumer reports its queues
    through its queue listener (Java's ``MessageQueueListener``: the allocation); a pull consumer, which has
    none, through a rebalance listener (the queues it consumes: assigned, revoked, lost) and commits each batch
    once processed, so a kill re-delivers what it had not finished."""

    def __init__(self, args: argparse.Namespace, client_id: str, recorder: _Recorder, options: dict[str, Any]) -> None:
        self.args = args
        self.client_id = client_id
        self.recorder = recorder
        self.options = options
        self.work = args.work_ms / 1000
        self.held: dict[str, set[MessageQueue]] = {}  # a pull consumer's queues, per topic, as its listener heard
        self.failing: dict[str, str] = {}  # what health reported failing at the last look, by kind

    def topic(self, name: str) -> str:
        """A topic as the command line named it: without ``--namespace``."""
        return without_namespace(name, self.args.namespace)

    def record(self, message: Message, started: float) -> None:
        mq = message.mq
        queue = MessageQueue(self.topic(mq.topic), mq.broker_name, mq.queue_id)
        self.recorder.record(queue, message.queue_offset, started, time.time(), message.tags)

    def queues_changed(self, topic: str, mq_all: Sequence[MessageQueue], mq_divided: Sequence[MessageQueue]) -> None:
        _emit(
            "owned", client=self.client_id, topic=self.topic(topic), queues=_queue_names(mq_divided), total=len(mq_all)
        )

    def heard(self, queues: frozenset[MessageQueue], gained: bool) -> None:
        for mq in queues:
            held = self.held.setdefault(mq.topic, set())
            if gained:
                held.add(mq)
            else:
                held.discard(mq)
        for topic in sorted({mq.topic for mq in queues}):
            queue_names = _queue_names(sort_queues(self.held[topic]))
            _emit("owned", client=self.client_id, topic=self.topic(topic), queues=queue_names)

    def look_at_health(self, problems: dict[str, str]) -> None:
        """A ``problem`` line for each kind that began failing since the last look (a wrong address, an unknown
        topic: otherwise only stderr and ``consumed 0`` would tell) and a ``works again`` line for each that
        stopped, so whoever reads stdout sees the consumer's state change, not only its counts."""
        for kind in sorted(problems.keys() - self.failing.keys()):
            _emit("problem", client=self.client_id, kind=kind, error=problems[kind])
        for kind in sorted(self.failing.keys() - problems.keys()):
            _emit("works again", client=self.client_id, kind=kind)
        self.failing = problems

    def push_options(self, listener: Callable[[list[Message]], Any]) -> dict[str, Any]:
        """A push consumer's: the listener, the queue listener that reports its allocation, orderly or not."""
        return {
            "listener": listener,
            "queue_listener": self.queues_changed,
            "consume_orderly": self.args.orderly,
            **self.options,
        }

    def pull_options(self) -> dict[str, Any]:
        """A pull consumer's: commits by hand (after each processed batch), and reports through its listener."""
        return {"auto_commit": False, "rebalance_listener": self.listener(), **self.options}

    def listener(self) -> RebalanceListener:
        from rocket_rebalance.runtime.listener import RebalanceListener

        session = self

        class Reporting(RebalanceListener):
            def on_queues_assigned(self, queues: frozenset[MessageQueue]) -> None:
                session.heard(queues, gained=True)

            def on_queues_revoked(self, queues: frozenset[MessageQueue]) -> None:
                session.heard(queues, gained=False)

        return Reporting()

    def dump(self, describe: Callable[[], dict[str, object]]) -> None:
        """kill -USR1: the engine's state as a JSON line on stdout and every thread's stack on stderr: through
        faulthandler (registered after the Python handler so that it chains to it) as text, or as one JSON log
        record with --log-format json, whose every line must be one object."""
        _emit("state", **describe())
        if self.args.log_format == "json":
            logging.getLogger("rocket_rebalance.commands").warning("thread stacks", extra={"stacks": _stacks()})

    def run(self) -> None:
        """The threaded consumers, on this thread: a push consumer's listener on its pool, a pull consumer's
        polls here."""
        from rocket_rebalance.runtime.consumer import PushConsumer
        from rocket_rebalance.runtime.pull_consumer import PullConsumer

        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        consumer: PushConsumer | PullConsumer
        if self.args.api == "push":

            def listener(batch: list[Message]) -> None:
                for message in batch:
                    started = time.time()
                    if self.work:
                        time.sleep(self.work)
                    self.record(message, started)

            consumer = PushConsumer(self.args.namesrv, self.args.group, **self.push_options(listener))
        else:
            consumer = PullConsumer(self.args.namesrv, self.args.group, **self.pull_options())
        signal.signal(signal.SIGUSR1, lambda *_: threading.Thread(target=self.dump, args=(consumer.describe,)).start())
        if self.args.log_format == "text":
            faulthandler.register(signal.SIGUSR1, all_threads=True, chain=True)
        self._starting()
        consumer.start()
        self._started()
        reported = time.monotonic()
        while not stop.is_set():
            if isinstance(consumer, PullConsumer):
                batch = consumer.poll(timeout=min(self.args.report_interval, 0.5))
                for message in batch:
                    started = time.time()
                    if self.work:
                        time.sleep(self.work)
                    self.record(message, started)
                if batch:
                    consumer.commit()
            else:
                stop.wait(min(self.args.report_interval, 0.5))
            self.look_at_health(consumer.problems)
            if time.monotonic() - reported >= self.args.report_interval:
                reported = time.monotonic()
                _emit("consumed", client=self.client_id, total=consumer.consumed)
        clean = consumer.shutdown()
        _emit("stopped", client=self.client_id, clean=clean, total=consumer.consumed)

    async def run_async(self) -> None:
        """The asyncio consumers, on this process's one event loop: the listener awaited there, polls there."""
        import asyncio

        from rocket_rebalance.runtime.async_consumer import AsyncPullConsumer, AsyncPushConsumer

        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        consumer: AsyncPushConsumer | AsyncPullConsumer
        if self.args.api == "async-push":

            async def listener(batch: list[Message]) -> None:
                for message in batch:
                    started = time.time()
                    if self.work:
                        await asyncio.sleep(self.work)
                    self.record(message, started)

            consumer = AsyncPushConsumer(self.args.namesrv, self.args.group, **self.push_options(listener))
        else:
            consumer = AsyncPullConsumer(self.args.namesrv, self.args.group, **self.pull_options())
        loop.add_signal_handler(signal.SIGUSR1, self.dump, consumer.describe)
        self._starting()
        await consumer.start()
        self._started()
        reported = time.monotonic()
        while not stop.is_set():
            if isinstance(consumer, AsyncPullConsumer):
                batch = await consumer.poll(timeout=min(self.args.report_interval, 0.5))
                for message in batch:
                    started = time.time()
                    if self.work:
                        await asyncio.sleep(self.work)
                    self.record(message, started)
                if batch:
                    await consumer.commit()
            else:
                try:
                    await asyncio.wait_for(stop.wait(), min(self.args.report_interval, 0.5))
                except TimeoutError:
                    pass
            self.look_at_health(consumer.problems)
            if time.monotonic() - reported >= self.args.report_interval:
                reported = time.monotonic()
                _emit("consumed", client=self.client_id, total=consumer.consumed)
        clean = await consumer.shutdown()
        _emit("stopped", client=self.client_id, clean=clean, total=consumer.consumed)

    def _starting(self) -> None:
        _emit("starting", client=self.client_id, group=self.args.group, topics=self.args.topic)  # before registering

    def _started(self) -> None:
        _emit("started", client=self.client_id, group=self.args.group, topics=self.args.topic)


class _Expression(argparse.Action):
    """``--tags`` and ``--sql`` append (type, expression) to one list, so their order across both is kept."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        kind = "SQL92" if option == "--sql" else "TAG"
        setattr(namespace, self.dest, [*getattr(namespace, self.dest), (kind, values)])  # never the shared default


def _subscriptions(topics: Sequence[str], expressions: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Topic to expression: the Nth ``--tags``/``--sql`` is the Nth ``-t``'s; none at all subscribes ``*``."""
    from rocket_rebalance.subscription import SubscriptionExpression

    if len(set(topics)) != len(topics):
        raise CommandError(
            f"-t names a topic twice: {', '.join(sorted(t for t in set(topics) if topics.count(t) > 1))}"
        )
    if not expressions:
        return dict.fromkeys(topics, SubscriptionExpression())
    if len(expressions) != len(topics):
        raise CommandError(
            f"{len(expressions)} --tags/--sql for {len(topics)} -t: give one per -t, in the same order (or none)"
        )
    return {
        topic: SubscriptionExpression(text, kind).check()
        for topic, (kind, text) in zip(topics, expressions, strict=True)
    }


def _properties(pairs: Sequence[str]) -> dict[str, str]:
    """``--property NAME=VALUE`` pairs, checked as Java's ``putUserProperty`` checks them, on either wire."""
    from rocket_rebalance.remoting.message import message_properties

    properties: dict[str, str] = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or not name:
            raise CommandError(f"--property {pair!r}: expected NAME=VALUE")
        properties[name] = value
    message_properties(user=properties)
    return properties


def _run_produce(args: argparse.Namespace) -> int:
    from rocket_rebalance.runtime.transport import TransportError
    from rocket_rebalance.runtime.transport.wire import open_transport

    if args.count < 0 or args.batch < 1 or args.size < 0:
        raise CommandError("--count and --size must be >= 0 and --batch >= 1")
    properties = _properties(args.property)
    topic = args.topic
    wire_names(args)  # under --namespace, sent to (and --create makes) NS%TOPIC
    transport = open_transport(
        args.namesrv, token=args.token, credentials=acl_credentials(args), tls=tls_settings(args)
    )
    sent = 0
    try:
        if args.create is not None:
            transport.create_topic(args.topic, args.create)
        try:
            route = transport.route(args.topic)
        except TransportError as error:
            if error.code == "NOT_FOUND":
                message = f"topic {args.topic} does not exist at {args.namesrv} (--create N makes it)"
                raise CommandError(message) from None
            raise
        targets = [
            (d.broker_name, q) for d in route.queue_datas if d.perm & PERM_WRITE for q in range(d.write_queue_nums)
        ]
        if not targets:
            raise OSError(f"topic {args.topic} has no writable queue")
        per_queue: dict[tuple[str, int], int] = {}
        for index in range(args.count):
            target = targets[index % len(targets)]
            per_queue[target] = per_queue.get(target, 0) + 1
        body = b"x" * args.size
        for (broker, queue_id), count in per_queue.items():
            for start in range(0, count, args.batch):
                bodies = [body] * min(args.batch, count - start)
                _, offsets = transport.send(
                    args.topic, broker, bodies, queue_id, tags=args.tags, keys=args.keys, properties=properties
                )
                sent += len(offsets)  # what the broker acknowledged
    finally:
        transport.close()
    print(json.dumps({"sent": sent, "topic": topic, "queues": len(per_queue)}))
    return 0


def _run_progress(args: argparse.Namespace) -> int:
    from rocket_rebalance.admin.reads import consumer_progress

    wire_names(args)
    rows = consumer_progress(
        args.namesrv,
        args.group,
        args.topic or "",
        token=args.token,
        credentials=acl_credentials(args),
        tls=tls_settings(args),
    )
    if not rows:  # the stub answers a group it does not know with no rows; mqadmin and the remoting wire refuse
        raise CommandError(
            f"group {args.group}: not found at {args.namesrv} ({GROUP_NOT_ONLINE.format(group=args.group)})"
        )
    if args.json:
        print(
            json.dumps(
                [
                    {
                        **row.mq.to_dict(),
                        "topic": without_namespace(row.mq.topic, args.namespace),
                        "brokerOffset": row.broker_offset,
                        "consumerOffset": row.consumer_offset,
                        "diff": row.diff,
                        "lastOwner": row.last_owner,
                        "lockOwner": row.lock_owner,
                    }
                    for row in rows
                ]
            )
        )
        return 0
    print(
        f"{'#Topic':<32} {'#Broker Name':<16} {'#QID':>4} {'#Broker Offset':>14} {'#Consumer Offset':>16} "
        f"{'#Diff':>8}  #Last Owner"
    )
    for row in rows:
        topic = without_namespace(row.mq.topic, args.namespace)
        print(
            f"{topic:<32} {printable(row.mq.broker_name):<16} {row.mq.queue_id:>4} {row.broker_offset:>14} "
            f"{row.consumer_offset:>16} {row.diff:>8}  {printable(row.last_owner or '-')}"
        )
    print(f"\nConsume TPS: -\nDiff Total: {sum(row.diff for row in rows)}")
    return 0


def _run_connection(args: argparse.Namespace) -> int:
    from rocket_rebalance.admin.reads import consumer_connection

    wire_names(args)
    rows = consumer_connection(
        args.namesrv, args.group, token=args.token, credentials=acl_credentials(args), tls=tls_settings(args)
    )
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "clientId": r.client_id,
                        "brokerName": r.broker_name,
                        "connected": r.connected,
                        "lastHeartbeatMsAgo": r.last_heartbeat_ms_ago,
                        "topics": [without_namespace(topic, args.namespace) for topic in r.topics],
                        "clientAddr": r.client_addr,
                        "language": r.language,
                        "version": r.version,
                    }
                    for r in rows
                ]
            )
        )
        return 0
    print(
        f"{'#':<4} {'#ClientId':<48} {'#Broker':<16} {'#Language':<9} {'#Addr':<22} {'#Heartbeat ms ago':>17}  #Topics"
    )
    for number, r in enumerate(rows, start=1):
        heartbeat = "-" if r.last_heartbeat_ms_ago < 0 else str(r.last_heartbeat_ms_ago)  # RocketMQ does not say
        print(
            f"{number:<4} {printable(r.client_id):<48} {printable(r.broker_name):<16} "
            f"{printable(r.language or '-'):<9} {printable(r.client_addr or '-'):<22} {heartbeat:>17}  "
            f"{printable(','.join(without_namespace(topic, args.namespace) for topic in r.topics))}"
        )
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    consume = subparsers.add_parser("consume", help="run a consumer that prints its ownership changes as JSON lines")
    add_connection_options(consume, required=True)
    consume.add_argument("-g", "--group", required=True, type=group_name, help="consumer group")
    add_namespace_option(consume)
    consume.add_argument(
        "-t", "--topic", required=True, action="append", type=topic_name, help="topic to consume (repeatable)"
    )
    for option, example, what in (
        ("--tags", "TagA || TagB", "tags"),
        ("--sql", "a > 5", "an SQL92 condition over message properties (brokers need enablePropertyFilter=true)"),
    ):
        consume.add_argument(
            option,
            dest="expressions",
            action=_Expression,
            default=[],
            metavar="EXPR",
            help=f"subscribe by {what}, e.g. {example!r}; repeatable: the Nth --tags/--sql applies to the Nth -t "
            "(give one per -t or none; without any, every topic is '*'). Every member of a group must subscribe "
            "alike.",
        )
    add_strategy_options(consume, repeatable=False)
    consume.add_argument(
        "--api",
        **word_choices(("push", "async-push", "pull", "async-pull")),
        default="push",
        help="the consumer to run: PushConsumer (default), AsyncPushConsumer, PullConsumer or AsyncPullConsumer "
        "(the pull consumers commit each batch once processed)",
    )
    consume.add_argument("--orderly", action="store_true", help="consume each queue in order, holding its lock")
    consume.add_argument("--broadcast", action="store_true", help="every consumer takes every queue")
    consume.add_argument("--no-fence", action="store_true", help="Java's handover: no lock fence for concurrent")
    consume.add_argument(
        "--keep-dead-locks",
        action="store_true",
        help="do not release the locks of a member the broker no longer lists (a killed one): its queues then wait "
        "for the broker's lock lifetime (60 s), as Java's orderly consumers do",
    )
    consume.add_argument("--consume-from", **word_choices(("last", "first", "timestamp")), default="last")
    consume.add_argument("--client-id", help="client ID (default ip@pid#nanotime)")
    consume.add_argument("--offsets", type=Path, help="broadcasting: the local offset file")
    consume.add_argument(
        "--reset-offsets", action="store_true", help="broadcasting: start without the local offsets (consume-from)"
    )
    consume.add_argument("--record", type=Path, help="append one JSON line per consumed message to this file")
    consume.add_argument(
        "--work-ms",
        type=duration(zero=True, unit="milliseconds"),
        default=0.0,
        help="simulated processing time per message (default 0: none)",
    )
    consume.add_argument("--report-interval", type=duration(), default=5.0, help="seconds between consumed-count lines")
    consume.add_argument("--rebalance-interval", type=duration(), help="periodic rebalance (default 20 s)")
    consume.add_argument("--persist-interval", type=duration(), help="offset persist interval (default 5 s)")
    consume.add_argument("--heartbeat-interval", type=duration(), help="heartbeat interval (default 30 s)")
    consume.add_argument("--route-interval", type=duration(), help="route refresh interval (default 30 s)")
    consume.add_argument("--log-level", default="WARNING", **word_choices(("DEBUG", "INFO", "WARNING", "ERROR")))
    consume.add_argument(
        "--log-format",
        default="text",
        **word_choices(("text", "json")),
        help="json: one JSON object per log line (stderr)",
    )
    consume.add_argument(
        "--trace",
        nargs="?",
        const=TRACE_TOPIC,
        metavar="TOPIC",
        help=f"write message trace as Java's enableMsgTrace does, to TOPIC (default {TRACE_TOPIC}), so mqadmin "
        "queryMsgTraceById and the dashboard show this consumer (the broker keeps that topic with "
        "traceTopicEnable=true)",
    )
    consume.add_argument(
        "--metrics-port",
        type=port,
        metavar="PORT",
        help="serve Prometheus metrics on http://127.0.0.1:PORT/metrics (0: a free port, printed as an event)",
    )
    consume.add_argument(
        "--metrics-address", metavar="ADDRESS", help="listen for --metrics-port on ADDRESS instead of 127.0.0.1"
    )
    consume.set_defaults(handler=_run_consume)

    produce = subparsers.add_parser("produce", help="send test messages, spread over the topic's write queues")
    add_connection_options(produce, required=True)
    produce.add_argument("-t", "--topic", required=True, type=topic_name)
    add_namespace_option(produce)
    produce.add_argument("--count", type=int, required=True)
    produce.add_argument("--size", type=int, default=64, help="body bytes per message")
    produce.add_argument("--batch", type=int, default=32, help="messages per send request")
    produce.add_argument("--create", type=int, metavar="N", help="create the topic first, N queues on every broker")
    produce.add_argument("--tags", default="", help="the messages' tag (what --tags of consume filters by)")
    produce.add_argument("--keys", default="", help="the messages' keys, space-separated")
    produce.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a user property (repeatable; what --sql of consume filters by)",
    )
    produce.set_defaults(handler=_run_produce)

    progress = subparsers.add_parser("consumer-progress", help="per queue: broker and consumer offsets, diff, owner")
    add_connection_options(progress, required=True)
    progress.add_argument("-g", "--group", required=True, type=group_name)
    progress.add_argument("-t", "--topic", type=topic_name)
    add_namespace_option(progress)
    progress.add_argument("--json", action="store_true")
    progress.set_defaults(handler=_run_progress)

    connection = subparsers.add_parser("consumer-connection", help="the group's members at each broker")
    add_connection_options(connection, required=True)
    connection.add_argument("-g", "--group", required=True, type=group_name)
    add_namespace_option(connection)
    connection.add_argument("--json", action="store_true")
    connection.set_defaults(handler=_run_connection)
