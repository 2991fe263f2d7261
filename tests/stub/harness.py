"""Helpers to run the stub in tests: gRPC client bundles, a notification listener, and a subprocess runner.

Plain functions and classes (no pytest here), so other test packages (the runtime's) can use them too; the
fixtures in ``conftest.py`` wrap them with cleanup.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2_grpc

from rocket_rebalance._proto.v1 import admin_pb2_grpc, broker_pb2, broker_pb2_grpc, common_pb2, namesrv_pb2_grpc

DEFAULT_TOPIC_SPEC = "TopicTest:broker-a=4,broker-b=4"
WAIT = 15.0  # seconds: generous bound for "eventually", never an assertion about speed
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class StubClients:
    """One channel to a stub and a stub object per service."""

    channel: grpc.Channel
    namesrv: namesrv_pb2_grpc.NameServerStub
    broker: broker_pb2_grpc.BrokerStub
    admin: admin_pb2_grpc.AdminStub
    health: health_pb2_grpc.HealthStub

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> StubClients:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect_clients(
    address: str, *, credentials: grpc.ChannelCredentials | None = None, options: Sequence[Any] = ()
) -> StubClients:
    """Open a channel (plain, or TLS with ``credentials``) and the four service stubs."""
    opts = [("grpc.max_receive_message_length", 16 * 1024 * 1024), *options]
    if credentials is not None:
        channel = grpc.secure_channel(address, credentials, options=opts)
    else:
        channel = grpc.insecure_channel(address, options=opts)
    return StubClients(
        channel,
        namesrv_pb2_grpc.NameServerStub(channel),
        broker_pb2_grpc.BrokerStub(channel),
        admin_pb2_grpc.AdminStub(channel),
        health_pb2_grpc.HealthStub(channel),
    )


def queue_of(topic: str, broker: str, queue_id: int) -> common_pb2.MessageQueue:
    return common_pb2.MessageQueue(topic=topic, broker_name=broker, queue_id=queue_id)


def consumer_data(
    group: str,
    *topics: str,
    consume_type: int = common_pb2.CONSUME_TYPE_PUSH,
    message_model: int = common_pb2.MESSAGE_MODEL_CLUSTERING,
    consume_from_where: int = common_pb2.CONSUME_FROM_LAST_OFFSET,
) -> broker_pb2.ConsumerData:
    """A heartbeat's description of one group subscribing ``topics`` (all tags)."""
    return broker_pb2.ConsumerData(
        group_name=group,
        consume_type=consume_type,
        message_model=message_model,
        consume_from_where=consume_from_where,
        subscriptions=[common_pb2.SubscriptionData(topic=t, sub_string="*") for t in topics],
    )


def heartbeat(
    clients: StubClients, broker: str, client_id: str, *datas: broker_pb2.ConsumerData, metadata: Any = None
) -> None:
    clients.broker.HeartBeat(
        broker_pb2.HeartbeatRequest(broker_name=broker, client_id=client_id, consumer_datas=list(datas)),
        metadata=metadata,
        timeout=WAIT,
    )


class Listener:
    """A client's ``Connect`` stream read on a background thread into a queue.

    ``next()`` waits (up to a generous bound) for the next notification's group; ``pending()`` tells what has
    arrived so far without waiting. The stream's end (status) is recorded in ``ended``.
    """

    _END = object()

    def __init__(self, clients: StubClients, broker: str, client_id: str, metadata: Any = None) -> None:
        self.broker = broker
        self.client_id = client_id
        self._call = clients.broker.Connect(
            broker_pb2.ConnectRequest(broker_name=broker, client_id=client_id), metadata=metadata
        )
        self._items: queue.Queue[object] = queue.Queue()
        self.ended: grpc.StatusCode | None = None
        self._thread = threading.Thread(target=self._read, name=f"listener-{client_id}", daemon=True)
        self._thread.start()
        first = self._items.get(timeout=WAIT)
        if first is self._END:
            raise RuntimeError(f"Connect ended at once with {self.ended}")
        assert isinstance(first, broker_pb2.BrokerNotification) and first.HasField("connected"), first

    def _read(self) -> None:
        try:
            for item in self._call:
                self._items.put(item)
            self.ended = grpc.StatusCode.OK
        except grpc.RpcError as error:
            self.ended = error.code()
        self._items.put(self._END)

    def next(self, timeout: float = WAIT) -> str | None:
        """The group of the next notification, or ``None`` if the stream ended first."""
        item = self._items.get(timeout=timeout)
        if item is self._END:
            self._items.put(self._END)
            return None
        assert isinstance(item, broker_pb2.BrokerNotification)
        return item.consumer_ids_changed.consumer_group

    def pending(self) -> list[str]:
        """Groups notified so far and not yet taken, without waiting."""
        groups: list[str] = []
        while True:
            try:
                item = self._items.get_nowait()
            except queue.Empty:
                return groups
            if item is self._END:
                self._items.put(self._END)
                return groups
            assert isinstance(item, broker_pb2.BrokerNotification)
            groups.append(item.consumer_ids_changed.consumer_group)

    def wait_ended(self, timeout: float = WAIT) -> grpc.StatusCode | None:
        self._thread.join(timeout)
        return self.ended

    def close(self) -> None:
        self._call.cancel()
        self._thread.join(WAIT)


@dataclass
class StubProcess:
    """A stub running as a child process (``python -m nameserver_stub``)."""

    process: subprocess.Popen[str]
    address: str
    stderr_path: Path
    args: list[str] = field(default_factory=list)

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Send ``signum`` and wait for the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signum)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout)
            raise

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


def stub_command(*args: str, module: bool = True) -> list[str]:
    """The command line of a stub: ``python -m nameserver_stub ARGS``."""
    return [sys.executable, "-m", "nameserver_stub", *args] if module else list(args)


def spawn_stub(
    data_dir: Path,
    *extra: str,
    topics: Sequence[str] = (DEFAULT_TOPIC_SPEC,),
    listen: str = "127.0.0.1:0",
    command: Sequence[str] | None = None,
    stderr_path: Path | None = None,
    env: dict[str, str] | None = None,
) -> StubProcess:
    """Start a stub subprocess and read the bound address from its first stdout line."""
    args = ["--listen", listen, "--data-dir", str(data_dir)]
    for spec in topics:
        args += ["--topic", spec]
    args += list(extra)
    cmd = [*(command or stub_command()), *args]
    stderr_path = stderr_path or data_dir.parent / f"{data_dir.name}.stderr.log"
    child_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    with open(stderr_path, "w", encoding="utf-8") as stderr:
        process = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=REPO_ROOT,
            env=child_env,
        )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: lines.put(process.stdout.readline() if process.stdout else ""))
    reader.daemon = True
    reader.start()
    try:
        first = lines.get(timeout=60).strip()
    except queue.Empty:
        process.kill()
        process.wait()
        raise RuntimeError(f"stub printed no address; stderr:\n{stderr_path.read_text()}") from None
    if not first:
        process.wait(30)
        raise RuntimeError(
            f"stub exited ({process.returncode}) before printing its address; stderr:\n{stderr_path.read_text()}"
        )
    return StubProcess(process, first, stderr_path, cmd)


# -- request shorthands used across the tests ---------------------------------------------------------------


def send(
    clients: StubClients, broker: str, topic: str, *bodies: bytes, queue_id: int | None = None, tags: str = ""
) -> broker_pb2.SendMessageResponse:
    request = broker_pb2.SendMessageRequest(
        broker_name=broker, topic=topic, messages=[broker_pb2.MessageToSend(body=body, tags=tags) for body in bodies]
    )
    if queue_id is not None:
        request.queue_id = queue_id
    response: broker_pb2.SendMessageResponse = clients.broker.SendMessage(request, timeout=WAIT)
    return response


def pull(
    clients: StubClients,
    broker: str,
    topic: str,
    queue_id: int,
    offset: int,
    *,
    group: str = "G1",
    max_msg_nums: int = 0,
    max_wait_ms: int = 0,
    sub_expression: str = "",
    max_bytes: int = 0,
) -> broker_pb2.PullMessageResponse:
    response: broker_pb2.PullMessageResponse = clients.broker.PullMessage(
        broker_pb2.PullMessageRequest(
            broker_name=broker,
            consumer_group=group,
            topic=topic,
            queue_id=queue_id,
            queue_offset=offset,
            max_msg_nums=max_msg_nums,
            max_wait_ms=max_wait_ms,
            sub_expression=sub_expression,
            max_bytes=max_bytes,
        ),
        timeout=WAIT + max_wait_ms / 1000,
    )
    return response


def commit(
    clients: StubClients, broker: str, group: str, offsets: dict[tuple[str, int], int], client_id: str = ""
) -> broker_pb2.UpdateConsumerOffsetResponse:
    response: broker_pb2.UpdateConsumerOffsetResponse = clients.broker.UpdateConsumerOffset(
        broker_pb2.UpdateConsumerOffsetRequest(
            broker_name=broker,
            consumer_group=group,
            client_id=client_id,
            offsets=[
                common_pb2.QueueOffset(queue=queue_of(topic, broker, qid), offset=offset)
                for (topic, qid), offset in offsets.items()
            ],
        ),
        timeout=WAIT,
    )
    return response


def query(clients: StubClients, broker: str, group: str, *queues: tuple[str, int]) -> list[int]:
    """Committed offsets (-1 where none) of the queues, in order."""
    response = clients.broker.QueryConsumerOffset(
        broker_pb2.QueryConsumerOffsetRequest(
            broker_name=broker, consumer_group=group, queues=[queue_of(t, broker, q) for t, q in queues]
        ),
        timeout=WAIT,
    )
    return [entry.offset if entry.found else -1 for entry in response.offsets]


def lock(
    clients: StubClients, broker: str, group: str, client_id: str, *queue_ids: int, topic: str = "TopicTest"
) -> list[int]:
    """Lock queues of ``topic``; returns the queue IDs the client now holds."""
    response = clients.broker.LockBatchMQ(
        broker_pb2.LockBatchMQRequest(
            broker_name=broker,
            consumer_group=group,
            client_id=client_id,
            queues=[queue_of(topic, broker, q) for q in queue_ids],
        ),
        timeout=WAIT,
    )
    return [q.queue_id for q in response.locked_queues]


def unlock(
    clients: StubClients, broker: str, group: str, client_id: str, *queue_ids: int, topic: str = "TopicTest"
) -> list[int]:
    response = clients.broker.UnlockBatchMQ(
        broker_pb2.UnlockBatchMQRequest(
            broker_name=broker,
            consumer_group=group,
            client_id=client_id,
            queues=[queue_of(topic, broker, q) for q in queue_ids],
        ),
        timeout=WAIT,
    )
    return [q.queue_id for q in response.unlocked_queues]


def consumer_ids(clients: StubClients, broker: str, group: str) -> list[str]:
    response = clients.broker.GetConsumerListByGroup(
        broker_pb2.GetConsumerListByGroupRequest(broker_name=broker, consumer_group=group), timeout=WAIT
    )
    return list(response.consumer_id_list)


def status_of(call: Any, *args: Any, **kwargs: Any) -> tuple[grpc.StatusCode, str]:
    """Call an RPC expected to fail; returns (status code, details)."""
    try:
        call(*args, timeout=WAIT, **kwargs)
    except grpc.RpcError as error:
        return error.code(), error.details() or ""
    raise AssertionError(f"{call} succeeded")
