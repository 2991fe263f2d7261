"""The remoting transport: RocketMQ's own protocol to a real Apache RocketMQ cluster.

Chosen by a name-server list in RocketMQ's form (``host:port;host:port``). It behaves on the wire as the Java
client does (``MQClientAPIImpl``): requests multiplexed by opaque, every required header field sent as a string,
Java enum names in bodies, and the retry topic ``%RETRY%<group>`` in every heartbeat of a clustering consumer, so
Java and Python members of one group keep one subscription table.

:class:`RemotingTransport` is one object with four roles, each in a module of its own, over one connection pool:

* :mod:`.remoting_pool`: one TCP connection per name server or broker address, shared by every role (the broker
  keys a consumer by its connection, so heartbeats, pulls and the unregister all share it), the name servers tried
  in turn, brokers' addresses learnt from routes and cluster info, one reader thread for every connection and a
  small work pool (a fixed number of threads, however many brokers); ACL signing and TLS belong there;
* this module: the consumer's wire (heartbeat, unregister, consumer list, offsets, locks, pulls, send back), each
  call the operation of :mod:`.remoting_calls` (shared with the asyncio transport) run by the pool's blocking
  driver, except the pull, which waits with no thread (a callback on the reader);
* :mod:`.remoting_inbound`: the requests a broker sends us (notifications, running info, consume directly);
* :mod:`.remoting_admin`: the operator's reads (connections, topics, groups, running info, progress);
* :mod:`.remoting_producer`: sending messages and creating topics, for tests, demos and the lab.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.remoting import RemotingCommand
from rocket_rebalance.runtime.transport import (
    GroupRegistration,
    GroupSubscription,
    Message,
    PullResult,
    TransportError,
)
from rocket_rebalance.runtime.transport.remoting_admin import RemotingAdminReads
from rocket_rebalance.runtime.transport.remoting_calls import pull_result, pull_timeout
from rocket_rebalance.runtime.transport.remoting_inbound import RemotingInbound
from rocket_rebalance.runtime.transport.remoting_producer import RemotingProducer
from rocket_rebalance.subscription import SubscriptionExpression

__all__ = ["RemotingTransport"]


class RemotingTransport(RemotingInbound, RemotingAdminReads, RemotingProducer):
    """A RocketMQ client's wire to the name servers ``namesrv_addrs`` and the brokers their routes name.

    The consumer's calls are written here; the pool, the answers to brokers' requests, the operator's reads and the
    producer come from its bases (see the module docstring), all on one connection per address."""

    def heartbeat(self, broker: str, client_id: str, group: GroupRegistration) -> None:
        self._run(self._wire.heartbeat(broker, client_id, group))

    def check_subscription(
        self, broker: str, consumer_group: str, client_id: str, topic: str, expression: SubscriptionExpression
    ) -> None:
        self._run(self._wire.check_subscription(broker, consumer_group, client_id, topic, expression))

    def unregister(self, broker: str, client_id: str, consumer_group: str) -> None:
        self._run(self._wire.unregister(broker, client_id, consumer_group))

    def consumer_list(self, broker: str, consumer_group: str) -> list[str]:
        return self._run(self._wire.consumer_list(broker, consumer_group))

    def subscription_table(self, broker: str, consumer_group: str) -> dict[str, GroupSubscription]:
        return self._run(self._wire.subscription_table(broker, consumer_group))

    def query_offsets(
        self, broker: str, consumer_group: str, queues: Sequence[MessageQueue]
    ) -> dict[MessageQueue, int | None]:
        return self._run(self._wire.query_offsets(broker, consumer_group, queues))

    def update_offsets(
        self, broker: str, consumer_group: str, client_id: str, offsets: Mapping[MessageQueue, int]
    ) -> dict[MessageQueue, int]:
        return self._run(self._wire.update_offsets(broker, consumer_group, client_id, offsets))

    def lock(
        self, broker: str, consumer_group: str, client_id: str, queues: Sequence[MessageQueue]
    ) -> set[MessageQueue]:
        return self._run(self._wire.lock(broker, consumer_group, client_id, queues))

    def unlock(self, broker: str, consumer_group: str, client_id: str, queues: Sequence[MessageQueue]) -> None:
        self._run(self._wire.unlock(broker, consumer_group, client_id, queues))

    def pull(
        self,
        mq: MessageQueue,
        consumer_group: str,
        offset: int,
        max_messages: int,
        wait_ms: int,
        done: Callable[[PullResult | TransportError], None],
    ) -> None:
        """The wire's pull request, sent with its answer going to ``done`` on the reader: an idle queue's long
        poll holds no thread. The broker holds it up to ``wait_ms`` and the socket waits 15 s longer than that."""
        try:
            address = self._master(mq.broker_name)
            connection = self._connection(address)
        except TransportError as error:
            done(error)
            return

        def finished(answer: RemotingCommand | TransportError) -> None:
            if isinstance(answer, TransportError):
                done(answer)
                return
            try:
                done(pull_result(mq, address, answer))
            except TransportError as error:
                done(error)

        command = self._wire.pull_request(mq, consumer_group, offset, max_messages, wait_ms)
        self._request(connection, f"PULL_MESSAGE {mq}", command, pull_timeout(wait_ms), finished)

    def max_offset(self, mq: MessageQueue) -> int:
        return self._run(self._wire.max_offset(mq))

    def min_offset(self, mq: MessageQueue) -> int:
        return self._run(self._wire.min_offset(mq))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._run(self._wire.search_offset(mq, timestamp_ms))

    def send_back(self, consumer_group: str, message_: Message, max_reconsume_times: int) -> None:
        self._run(self._wire.send_back(consumer_group, message_, max_reconsume_times))
