"""The remoting transport as a producer: what tests, demos and the lab need to put messages and topics on a real
RocketMQ cluster.

It is a small producer (one after another, no retries to other brokers, no batching), but it sends as Java's
producer does, on the same connections as the consumer's calls (one per address, :mod:`.remoting_pool`), over
which the transport builds this role.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from rocket_rebalance.remoting import RequestCode, headers, request
from rocket_rebalance.runtime.transport import TransportError
from rocket_rebalance.runtime.transport.remoting_pool import RemotingPool

__all__ = ["RemotingProducer"]


class RemotingProducer:
    """Creates topics through ``pool``'s connections (sending is the wire's operation itself, which the transport
    runs as it runs the consumer's calls: :meth:`~.remoting_calls.RemotingCalls.send`)."""

    def __init__(self, pool: RemotingPool) -> None:
        self._pool = pool
        self._wire = pool.wire

    def create_topic(self, topic: str, queue_nums: int, brokers: Sequence[str] = ()) -> None:
        """UPDATE_AND_CREATE_TOPIC at every broker of each set, then wait until the name server's route shows it.
        A slave is sent it too: it would copy the master's topics only at its next sync (every 60 s), and until
        then answer no pull of the topic."""
        masters = self._pool.brokers()
        names = list(brokers) or sorted(masters)
        unknown = [name for name in names if name not in masters]
        if unknown:
            raise TransportError(
                f"no broker named {', '.join(unknown)} in the cluster at {self._wire.address}", "NOT_FOUND"
            )
        ext = headers.create_topic(topic, queue_nums, queue_nums)
        for name in names:
            for address in self._pool.run(self._wire.addresses(name)).values():
                self._pool.ok(
                    address,
                    f"UPDATE_AND_CREATE_TOPIC {topic} at {name}",
                    request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext),
                )
        deadline = time.monotonic() + 15
        while True:
            try:
                datas = {d.broker_name: d.read_queue_nums for d in self._pool.route(topic).queue_datas}
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
