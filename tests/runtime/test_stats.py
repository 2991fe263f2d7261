"""Consume statistics as Java's ``ConsumerStatsManager`` computes them: the lazy sampling here against a scheduler
that samples at every tick as Java's does, and the figures a steady consumer shows."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.runtime.stats import HOUR_SAMPLING, MINUTE_SAMPLING, WINDOW_SAMPLES, ConsumeStats
from rocket_rebalance.runtime.transport import TopicConsumeStatus

MQ = MessageQueue("T", "broker-a", 0)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _java_window(records: list[tuple[float, float]], start: float, interval: float, until: float) -> list[float]:
    """Java's ``StatsItem`` window, sampled by a scheduler at ``start + k * interval``: (time, calls, sum) of the
    running totals at each tick up to ``until``, the first preceded by a zero one, the last 7 kept; as
    (sum, tps, avgpt) of the window. A record at a tick's very time comes after that tick's sample."""
    samples: list[tuple[float, int, float]] = []
    tick = start
    while tick <= until:
        before = [value for at, value in records if at < tick]
        if not samples and before:
            samples.append((tick - interval, 0, 0.0))
        if samples or before:
            samples.append((tick, len(before), sum(before)))
        samples = samples[-WINDOW_SAMPLES:]
        tick += interval
    if not samples:
        return [0.0, 0.0, 0.0]
    (t0, c0, v0), (t1, c1, v1) = samples[0], samples[-1]
    total = v1 - v0
    return [total, total / (t1 - t0), total / (c1 - c0) if c1 > c0 else 0.0]


@given(
    st.lists(
        st.tuples(st.floats(0, 2 * HOUR_SAMPLING), st.integers(0, 50), st.integers(0, 5), st.floats(0, 500)),
        max_size=40,
    ),
    st.floats(0, 3 * HOUR_SAMPLING),
)
def test_lazy_sampling_gives_what_javas_scheduler_gives(
    batches: list[tuple[float, int, int, float]], read_after: float
) -> None:
    clock = _Clock()
    start = clock.now
    stats = ConsumeStats(clock=clock)
    batches = sorted(batches)
    for at, ok, failed, rt in batches:
        clock.now = start + at
        stats.consumed(MQ, ok, failed, rt)
    clock.now = start + (batches[-1][0] if batches else 0.0) + read_after
    status = stats.status("T")

    oks = [(start + at, float(ok)) for at, ok, _, _ in batches]
    fails = [(start + at, float(failed)) for at, _, failed, _ in batches]
    rts = [(start + at, rt) for at, _, _, rt in batches]
    ok_tps = _java_window(oks, start, MINUTE_SAMPLING, clock.now)[1]
    failed_tps = _java_window(fails, start, MINUTE_SAMPLING, clock.now)[1]
    rt_minute = _java_window(rts, start, MINUTE_SAMPLING, clock.now)
    rt = rt_minute if rt_minute[0] != 0 else _java_window(rts, start, HOUR_SAMPLING, clock.now)
    failed_hour = _java_window(fails, start, HOUR_SAMPLING, clock.now)[0]
    expected = TopicConsumeStatus(0.0, 0.0, rt[2], ok_tps, failed_tps, round(failed_hour))
    assert _rounded(status) == _rounded(expected)


def _rounded(status: TopicConsumeStatus) -> tuple[float, ...]:
    return tuple(round(value, 6) for value in vars(status).values())


def test_a_steady_consumer_shows_its_rate_and_response_times() -> None:
    """100 messages a second in batches of 10 taking 4 ms, pulled in batches of 20 after 2 ms, one failed batch
    of 10 a minute: after a minute the figures are those, in Java's units (per second, milliseconds); the failed
    messages of the hour show at the hour window's next sample (Java's lag of up to 10 minutes)."""
    clock = _Clock()
    stats = ConsumeStats(clock=clock, wall=lambda: 1_700_000_000.0)
    for tenth in range(1, 1201):  # two minutes, a batch every 0.1 s
        clock.now = 1000.0 + tenth / 10
        stats.consumed(MQ, 10, 0, 4.0)
        if tenth % 2 == 0:
            stats.pulled(MQ, 20, 2.0)
        if tenth % 600 == 0:
            stats.consumed(MQ, 0, 10, 4.0)
    status = stats.status("T")
    assert status.consume_ok_tps == 100.0
    assert status.pull_tps == 100.0
    assert status.pull_rt == 2.0 and status.consume_rt == 4.0
    assert status.consume_failed_msgs == 0
    clock.now = 1000.0 + HOUR_SAMPLING
    assert stats.status("T").consume_failed_msgs == 20
    assert stats.last_consume_ms(MQ) == 1_700_000_000_000
    assert stats.status("other topic") == TopicConsumeStatus()


def test_consume_rt_falls_back_to_the_hour_when_the_last_minute_saw_no_batch() -> None:
    clock = _Clock()
    stats = ConsumeStats(clock=clock)
    clock.now += 1
    stats.consumed(MQ, 1, 0, 30.0)
    clock.now += HOUR_SAMPLING + MINUTE_SAMPLING  # idle: the minute window has nothing, the hour has sampled it
    status = stats.status("T")
    assert status.consume_ok_tps == 0.0
    assert status.consume_rt == 30.0


def test_a_queue_starts_its_last_consumption_when_it_enters_the_table_and_forgets_it_when_dropped() -> None:
    wall = [1_700_000_000.0]
    stats = ConsumeStats(wall=lambda: wall[0])
    assert stats.last_consume_ms(MQ) == 0 and stats.started_ms(MQ) == 0
    stats.queue_started(MQ)
    wall[0] += 5
    stats.consumed(MQ, 1, 0, 1.0)
    assert stats.started_ms(MQ) == 1_700_000_000_000 and stats.last_consume_ms(MQ) == 1_700_000_005_000
    stats.queue_dropped(MQ)
    assert stats.last_consume_ms(MQ) == 0 and stats.started_ms(MQ) == 0
