"""``consume --metrics-port``: a real consumer process scraped over HTTP while a member joins and leaves and while
its broker is gone; the counters move as the events did."""

from __future__ import annotations

import subprocess
import sys
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rocket_rebalance.lab.stub_cluster import ConsumerProcess, LocalCluster
from rocket_rebalance.lab.wait import wait_until

pytestmark = pytest.mark.e2e

TOPIC = {"topic": "TopicTest"}


def _url(consumer: ConsumerProcess) -> str:
    def announced() -> str | None:
        with consumer.lock:
            return next((e["url"] for e in consumer.events if e.get("event") == "metrics"), None)

    wait_until(lambda: announced() is not None, 30, "the metrics address")
    url = announced()
    assert url is not None and url.startswith("http://127.0.0.1:")  # loopback unless asked otherwise
    return url


def _scrape(url: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``, as Prometheus parses ``/metrics``."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    wanted = set(labels.items())
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and wanted <= set(sample.labels.items())
    )


def test_a_join_and_a_leave_move_the_counters_as_they_happened(cluster: LocalCluster) -> None:
    first = cluster.start_consumer("c1", "--metrics-port", "0")
    url = _url(first)
    wait_until(lambda: len(first.owned(cluster.topic) or ()) == 8, 30, "c1 owns every queue")
    wait_until(lambda: _scrape(url, "rocket_rebalance_assigned_queues", **TOPIC) == 8, 15, "8 queues assigned")
    assert _scrape(url, "rocket_rebalance_rebalances_total", trigger="start", client="c1", group=cluster.group) == 1
    assert _scrape(url, "rocket_rebalance_queues_assigned_total", **TOPIC) == 8
    assert _scrape(url, "rocket_rebalance_queues_revoked_total", **TOPIC) == 0
    before_join = _scrape(url, "rocket_rebalance_rebalances_total")

    second = cluster.start_consumer("c2")
    # the join's round is the last that changed c1's table until a later round changes it or fails (on a busy
    # machine one may, soon after: a member list not read in time), so it is looked for while it is the last
    joined = {"reason": "members changed"}
    wait_until(lambda: _scrape(url, "rocket_rebalance_last_rebalance_info", **joined) == 1, 30, "the join's round")
    wait_until(cluster.balanced, 30, "the two consumers share the queues")
    wait_until(lambda: _scrape(url, "rocket_rebalance_queues_revoked_total", **TOPIC) == 4, 15, "4 queues revoked")
    assert _scrape(url, "rocket_rebalance_assigned_queues", **TOPIC) == 4
    assert _scrape(url, "rocket_rebalance_queues_assigned_total", **TOPIC) == 8
    assert _scrape(url, "rocket_rebalance_rebalances_total") > before_join
    assert _scrape(url, "rocket_rebalance_rebalance_latency_seconds_count") >= 2  # the start and the join

    second.stop()
    wait_until(lambda: _scrape(url, "rocket_rebalance_assigned_queues", **TOPIC) == 8, 30, "c1 takes them back")
    wait_until(lambda: _scrape(url, "rocket_rebalance_queues_assigned_total", **TOPIC) == 12, 15, "4 more assigned")
    assert _scrape(url, "rocket_rebalance_queues_revoked_total", **TOPIC) == 4
    assert _scrape(url, "rocket_rebalance_queues_lost_total", **TOPIC) == 0  # every handover was clean
    assert _scrape(url, "rocket_rebalance_rebalances_failed_total") == 0

    cluster.produce(100)
    java = {"topic": "TopicTest", "consumer_group": cluster.group, "client_id": "c1"}
    wait_until(
        lambda: _scrape(url, "rocketmq_process_time_count", invocation_status="success", **java) == 100,
        30,
        "the produced messages counted",
    )
    assert _scrape(url, "rocket_rebalance_offset_persist_seconds_count") > 0
    first.stop()


def test_a_broker_that_cannot_list_the_members_shows_in_the_failure_counters(cluster: LocalCluster) -> None:
    first = cluster.start_consumer("c1", "--metrics-port", "0")
    url = _url(first)
    wait_until(lambda: _scrape(url, "rocket_rebalance_assigned_queues", **TOPIC) == 8, 30, "8 queues assigned")
    assert _scrape(url, "rocket_rebalance_rebalances_failed_total") == 0
    cluster.stub.stop()  # rounds every 2 s: their member lists cannot be read
    wait_until(
        lambda: _scrape(url, "rocket_rebalance_rebalances_failed_total", reason="member list not read") >= 1,
        30,
        "a failed round counted",
    )
    assert _scrape(url, "rocket_rebalance_assigned_queues", **TOPIC) == 8  # the queues are kept meanwhile (R3)
    wait_until(lambda: _scrape(url, "rocket_rebalance_rebalances_total", trigger="retry") >= 1, 15, "a retry round")
    cluster.stub.start()  # back on its port, so that the consumer can leave cleanly
    first.stop()


@pytest.mark.parametrize("argv", [["--metrics-port", "65536"], ["--metrics-address", "0.0.0.0"]])
def test_a_bad_metrics_option_is_one_line_and_a_failure(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rocket_rebalance", "consume", "-n", "grpc://127.0.0.1:1", "-g", "G", "-t", "T", *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "metrics" in done.stderr and done.stdout == ""
