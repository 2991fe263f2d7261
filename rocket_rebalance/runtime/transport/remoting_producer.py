"""The remoting transport as a producer: what tests, demos and the lab need to put messages and topics on a real
RocketMQ cluster.

It is a small producer (one after another, no retries to other brokers, no batching), but it sends as Java's
producer does, on the same connections as the consumer's calls (one per address, :mod:`.remoting_pool`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence

from rocket_rebalance.model import AclCredentials, MessageQueue, TlsSettings
from rocket_rebalance.remoting import RequestCode, headers, message, request
from rocket_rebalance.runtime.transport import TransportError
from rocket_rebalance.runtime.transport.remoting_pool import RemotingPool, int_field

__all__ = ["PRODUCER_GROUP", "RemotingProducer"]

PRODUCER_GROUP = "PID_rocket_rebalance"


class RemotingProducer(RemotingPool):
    """Sends messages and creates topics through the pool's connections."""

    def __init__(
        self,
        namesrv_addrs: Sequence[str],
        timeout: float = 5.0,
        credentials: AclCredentials | None = None,
        tls: TlsSettings | None = None,
    ) -> None:
        super().__init__(namesrv_addrs, timeout, credentials, tls)
        self._next_queue: dict[str, int] = {}

    def send(
        self,
        topic: str,
        broker: str,
        bodies_: Sequence[bytes],
        queue_id: int | None = None,
        tags: str = "",
        keys: str = "",
        properties: Mapping[str, str] | None = None,
    ) -> tuple[int, list[int]]:
        """SEND_MESSAGE_V2 per body, one after another as Java's producer sends: the broker stores concurrent
        requests in any order, and a queue's messages must keep the order they were given in. ``tags``, ``keys``
        and ``properties`` travel as Java's ``Message`` carries them (the broker derives the tag's hash code, by
        which tag subscriptions are filtered, from ``TAGS``)."""
        given = message.message_properties(tags, keys, properties)
        if queue_id is None:
            queue_id = self._next_queue.get(broker, 0)
            self._next_queue[broker] = queue_id + 1
            queue_id %= max(1, self._write_queue_nums(topic, broker))
        address = self._master(broker)
        mq = MessageQueue(topic, broker, queue_id)
        offsets: list[int] = []
        for body in bodies_:
            encoded = message.encode_properties({**given, "UNIQ_KEY": uuid.uuid4().hex.upper(), "WAIT": "true"})
            ext = headers.send_message_v2(PRODUCER_GROUP, mq, encoded, born_timestamp_ms=int(time.time() * 1000))
            answer = self._ok(address, f"SEND_MESSAGE_V2 to {mq}", request(RequestCode.SEND_MESSAGE_V2, ext, body))
            offsets.append(int_field(answer, "queueOffset", "SEND_MESSAGE_V2", address))
        return queue_id, offsets

    def _write_queue_nums(self, topic: str, broker: str) -> int:
        for data in self.route(topic).queue_datas:
            if data.broker_name == broker:
                return data.write_queue_nums
        raise TransportError(f"topic {topic} has no queue on broker {broker}", "NOT_FOUND")

    def create_topic(self, topic: str, queue_nums: int, brokers: Sequence[str] = ()) -> None:
        """UPDATE_AND_CREATE_TOPIC at each broker's master, then wait until the name server's route shows it."""
        masters = self.brokers()
        names = list(brokers) or sorted(masters)
        unknown = [name for name in names if name not in masters]
        if unknown:
            raise TransportError(f"no broker named {', '.join(unknown)} in the cluster at {self.address}", "NOT_FOUND")
        ext = headers.create_topic(topic, queue_nums, queue_nums)
        for name in names:
            self._ok(
                masters[name],
                f"UPDATE_AND_CREATE_TOPIC {topic} at {name}",
                request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext),
            )
        deadline = time.monotonic() + 15
        while True:
            try:
                datas = {d.broker_name: d.read_queue_nums for d in self.route(topic).queue_datas}
            except TransportError as error:
                if error.code != "NOT_FOUND":
                    raise
                datas = {}
            if all(datas.get(name) == queue_nums for name in names):
                return
            if time.monotonic() > deadline:
                raise TransportError(
                    f"topic {topic} was created but the name server's route does not show it", "DEADLINE_EXCEEDED"
                )
            time.sleep(0.1)
