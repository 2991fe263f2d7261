"""Reads from the slave when a broker set's master is down (issue 39, item 4): where a pull goes (Java's
``findBrokerAddressInSubscribe`` and the broker's ``suggestWhichBrokerId``), where offsets go, what needs the
master; against two scripted servers on loopback, a master and its slave, whose route can lose the master."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance.core import RebalanceConfig, RebalanceCore
from rocket_rebalance.model import MASTER_ID, MessageQueue
from rocket_rebalance.remoting import RemotingCommand, RequestCode, ResponseCode, response_to
from rocket_rebalance.runtime.health import Health
from rocket_rebalance.runtime.pulling import SLAVE_READS_KIND, SLAVE_RETRY_DELAY, Pulling
from rocket_rebalance.runtime.service import PullDone
from rocket_rebalance.runtime.settings import EngineSettings
from rocket_rebalance.runtime.stats import ConsumeStats
from rocket_rebalance.runtime.transport import PullResult, PullStatus, TransportError
from rocket_rebalance.runtime.transport.remoting import RemotingTransport
from rocket_rebalance.runtime.transport.remoting_async import AsyncRemotingTransport
from rocket_rebalance.runtime.transport.remoting_wire import subscribe_node
from rocket_rebalance.subscription import SubscriptionExpression
from tests.aio import run
from tests.runtime.test_remoting_transport import MQ
from tests.scripted_server import ScriptedServer

# ---------------------------------------------------------------------------------------------------- the choice

addresses = st.dictionaries(st.integers(0, 4), st.sampled_from(["m:1", "s1:1", "s2:1", "s3:1"]), max_size=4)


@given(addrs=addresses, wanted=st.integers(-(2**63), 2**63 - 1))
def test_a_read_goes_only_to_an_address_of_the_set_and_to_the_wanted_broker_when_it_is_named(
    addrs: dict[int, str], wanted: int
) -> None:
    node = subscribe_node(addrs, wanted)
    if not addrs:
        assert node is None
        return
    assert node is not None
    broker_id, address = node
    assert addrs.get(broker_id) == address
    if wanted in addrs:
        assert broker_id == wanted
    elif wanted != MASTER_ID and wanted + 1 in addrs:
        assert broker_id == wanted + 1  # Java's next slave up
    else:
        assert broker_id == min(addrs)  # the master while it is named, else the lowest slave


def test_the_master_is_read_while_it_is_named_and_the_slave_once_it_is_not() -> None:
    assert subscribe_node({0: "m", 1: "s"}, MASTER_ID) == (0, "m")
    assert subscribe_node({1: "s"}, MASTER_ID) == (1, "s")
    assert subscribe_node({0: "m", 1: "s"}, 1) == (1, "s")  # the broker suggested its slave
    assert subscribe_node({0: "m"}, 1) == (0, "m")  # a suggested slave that is gone: the master


# ---------------------------------------------------------------------------------------------------- a set of two


class BrokerSet:
    """A master and its slave on loopback, as one broker set ``broker-a`` whose route names both until
    ``master_up`` is cleared; each answers pulls with ``suggest`` (a broker ID) and records who got what."""

    def __init__(self) -> None:
        self.master_up = True
        self.suggest = {"master": MASTER_ID, "slave": MASTER_ID}
        self.got: list[tuple[str, int]] = []  # (who, request code)
        self.master = ScriptedServer(self._handler("master"))
        self.slave = ScriptedServer(self._handler("slave"))

    def route_body(self) -> bytes:
        addrs = ([f'"0":"{self.master.address}"'] if self.master_up else []) + [f'"1":"{self.slave.address}"']
        broker = '{"brokerAddrs":{' + ",".join(addrs) + '},"brokerName":"broker-a","cluster":"c"}'
        queue = '{"brokerName":"broker-a","perm":6,"readQueueNums":1,"writeQueueNums":1,"topicSysFlag":0}'
        return ('{"brokerDatas":[' + broker + '],"queueDatas":[' + queue + "]}").encode()

    def _handler(self, who: str) -> Callable[[RemotingCommand], RemotingCommand | None]:
        def handle(command: RemotingCommand) -> RemotingCommand | None:
            self.got.append((who, command.code))
            if command.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
                return response_to(command, ResponseCode.SUCCESS, body=self.route_body())
            if command.code == RequestCode.PULL_MESSAGE:
                ext = {"nextBeginOffset": "3", "suggestWhichBrokerId": str(self.suggest[who])}
                return response_to(command, ResponseCode.PULL_NOT_FOUND, ext=ext)
            if command.code == RequestCode.QUERY_CONSUMER_OFFSET:
                return response_to(command, ResponseCode.SUCCESS, ext={"offset": "7"})
            if command.code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
                return response_to(command, ResponseCode.SUCCESS, body=b'{"consumerIdList":["' + who.encode() + b'"]}')
            return response_to(command, ResponseCode.SUCCESS)

        return handle

    def who_got(self, code: int) -> list[str]:
        return [who for who, got in self.got if got == code]

    def close(self) -> None:
        self.master.close()
        self.slave.close()


@pytest.fixture
def brokers() -> Iterator[BrokerSet]:
    pair = BrokerSet()
    yield pair
    pair.close()


def pulled(transport: RemotingTransport) -> PullResult | TransportError:
    results: list[PullResult | TransportError] = []
    answered = threading.Event()
    transport.pull(MQ, "G", 3, 32, 0, lambda result: (results.append(result), answered.set()))
    assert answered.wait(10)  # a hang bound
    return results[0]


def test_pulls_follow_the_brokers_suggestion_both_ways(brokers: BrokerSet) -> None:
    transport = RemotingTransport([brokers.master.address], timeout=5)
    try:
        assert transport.route("TopicT").masterless == frozenset()
        brokers.suggest["master"] = 1  # a master with slaveReadEnable, its reads fallen behind its memory
        assert pulled(transport) == PullResult(PullStatus.NO_NEW_MSG, 3, broker_id=0)
        assert pulled(transport) == PullResult(PullStatus.NO_NEW_MSG, 3, broker_id=1)
        assert pulled(transport) == PullResult(PullStatus.NO_NEW_MSG, 3, broker_id=0)  # the slave sends it back
        assert brokers.who_got(RequestCode.PULL_MESSAGE) == ["master", "slave", "master"]
    finally:
        transport.close()


def test_with_the_master_gone_from_the_route_reads_and_offsets_go_to_the_slave_and_locks_fail(
    brokers: BrokerSet,
) -> None:
    transport = RemotingTransport([brokers.master.address], timeout=5)
    try:
        transport.route("TopicT")
        brokers.master_up = False
        assert transport.route("TopicT").masterless == frozenset({"broker-a"})
        brokers.got.clear()
        assert pulled(transport) == PullResult(PullStatus.NO_NEW_MSG, 3, broker_id=1)
        assert transport.query_offsets("broker-a", "G", [MQ]) == {MQ: 7}
        assert transport.update_offsets("broker-a", "G", "c1", {MQ: 9}) == {MQ: 9}
        assert transport.consumer_list("broker-a", "G") == ["slave"]  # Java's selectBrokerAddr
        with pytest.raises(TransportError, match="has no master") as refused:
            transport.lock("broker-a", "G", "c1", [MQ])
        assert refused.value.code == "UNAVAILABLE"
        with pytest.raises(TransportError, match="has no master"):
            transport.max_offset(MQ)  # Java asks only the master (findBrokerAddressInPublish)
        codes = (RequestCode.PULL_MESSAGE, RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.UPDATE_CONSUMER_OFFSET)
        assert not [code for who, code in brokers.got if who == "master"]
        assert all(brokers.who_got(code) == ["slave"] for code in codes)
        brokers.master_up = True
        transport.route("TopicT")  # the master is back: the slave's suggestion (0) is followed again
        assert pulled(transport).broker_id == 0
        assert brokers.who_got(RequestCode.PULL_MESSAGE) == ["slave", "master"]
    finally:
        transport.close()


def test_the_async_transport_reads_the_slave_too(brokers: BrokerSet) -> None:
    brokers.master_up = False

    async def calls() -> None:
        transport = AsyncRemotingTransport([brokers.slave.address], timeout=5)
        try:
            assert (await transport.route("TopicT")).masterless == frozenset({"broker-a"})
            assert await transport.pull(MQ, "G", 3, 32, 0) == PullResult(PullStatus.NO_NEW_MSG, 3, broker_id=1)
        finally:
            await transport.close()

    run(calls())
    assert brokers.who_got(RequestCode.PULL_MESSAGE) == ["slave"]


def test_a_malformed_suggestion_is_one_transport_error(brokers: BrokerSet) -> None:
    def odd(command: RemotingCommand) -> RemotingCommand | None:
        if command.code == RequestCode.PULL_MESSAGE:
            ext = {"nextBeginOffset": "3", "suggestWhichBrokerId": "slave"}
            return response_to(command, ResponseCode.PULL_NOT_FOUND, ext=ext)
        return response_to(command, ResponseCode.SUCCESS, body=brokers.route_body())

    brokers.master.handler = odd
    transport = RemotingTransport([brokers.master.address], timeout=5)
    try:
        transport.route("TopicT")
        result = pulled(transport)
        assert isinstance(result, TransportError) and "suggestWhichBrokerId" in str(result)
    finally:
        transport.close()


# ---------------------------------------------------------------------------------------------------- the pulling part


class _Service:
    """Just enough of the engine for the pulling part: a real core and health, timers and pulls recorded."""

    def __init__(self) -> None:
        self.config = RebalanceConfig("G", "c1")
        self.core = RebalanceCore(self.config, ("TopicT",))
        self.settings = EngineSettings()
        self.health = Health()
        self.expressions: dict[str, SubscriptionExpression] = {}
        self.closing = threading.Event()
        self.timers: list[float] = []
        self.pulls: list[PullDone] = []

    def later(self, delay: float, callback: Callable[[], None]) -> None:
        self.timers.append(delay)

    def start_pull(self, mq: MessageQueue, offset: int, wait_ms: int, done: PullDone) -> None:
        self.pulls.append(done)

    def handle(self, event: object) -> None:
        self.core.handle(event, 0.0)  # type: ignore[arg-type]


def test_a_set_read_from_its_slave_is_named_in_health_and_an_idle_slave_is_asked_again_after_a_moment() -> None:
    service = _Service()
    pulling = Pulling(service, 0, ConsumeStats(), None)  # type: ignore[arg-type]
    pulling.start(MQ, 3, announced=True)
    pulling.pull(MQ)
    service.pulls.pop()(PullResult(PullStatus.NO_MATCHED_MSG, 3, broker_id=1))  # "ask again", from the slave
    assert SLAVE_READS_KIND in service.health.report() and "broker-a" in service.health.report()[SLAVE_READS_KIND]
    assert service.timers == [SLAVE_RETRY_DELAY] and not service.pulls
    pulling.pull(MQ)  # the timer's pull
    service.pulls.pop()(PullResult(PullStatus.NO_MATCHED_MSG, 3, broker_id=0))  # the master again: at once
    assert SLAVE_READS_KIND not in service.health.report()
    assert service.timers == [SLAVE_RETRY_DELAY] and len(service.pulls) == 1
