"""``audit`` prints what servers and consumers named (client IDs, broker, topic and group names, the collector's
reasons): none of it may drive the operator's terminal or forge a line of the findings table.

A consumer chooses its own client ID and a broker any instance name, so anyone who can connect a consumer to the
cluster writes into the table an operator's cron job prints; every cell is escaped as the other commands escape
server text (:func:`rocket_rebalance.model.printable`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance.pipeline.audit import FINDING_COLUMNS, Audit, format_audit

HOSTILE = [
    "10.0.0.1@1\x1b[2J\x1b]0;pwned\x07",  # clear the screen, set the window title, bell
    "10.0.0.2@2\nGID_esc  TopicOne  before  all_clear   -   nothing wrong here",  # a forged row
    "broker\x1b[31m-a\r",  # red, and a carriage return that rewrites the line
    "T\u2028opic\x85\u202e",  # Unicode line and paragraph breaks, a right-to-left override
]


def control_characters(text: str) -> list[str]:
    """Every character of ``text`` a terminal could act on, line breaks between lines aside."""
    return [ch for line in text.split("\n") for ch in line if not ch.isprintable()]


def test_every_cell_and_note_of_the_table_is_escaped() -> None:
    findings = [dict.fromkeys(FINDING_COLUMNS, text) for text in HOSTILE]
    notes = [{"group": text, "client_id": text, "reason": text} for text in HOSTILE]
    text = format_audit(Audit(findings, True, notes), 50, "table")
    assert control_characters(text) == []
    lines = text.split("\n")
    # the partial line, the header, one line per finding, a blank line, the notes' title and header, one per note
    assert len(lines) == 1 + 1 + len(HOSTILE) + 1 + 2 + len(HOSTILE), lines
    assert "\\x1b[2J\\x1b]0;pwned\\x07" in text and "10.0.0.2@2\\nGID_esc" in text


def test_json_keeps_the_strings_as_they_are() -> None:
    """JSON escapes control characters itself, and a program reading it must get the true names back."""
    findings = [dict.fromkeys(FINDING_COLUMNS, text) for text in HOSTILE]
    text = format_audit(Audit(findings, False), 50, "json")
    assert control_characters(text) == []
    assert [f["where"] for f in json.loads(text)["findings"]] == HOSTILE


@given(
    st.lists(st.fixed_dictionaries({c: st.one_of(st.none(), st.text()) for c in FINDING_COLUMNS}), max_size=5),
    st.lists(
        st.fixed_dictionaries({c: st.one_of(st.none(), st.text()) for c in ("group", "client_id", "reason")}),
        max_size=3,
    ),
)
def test_the_table_has_one_line_per_row_whatever_the_strings(
    findings: list[dict[str, str | None]], notes: list[dict[str, str | None]]
) -> None:
    text = format_audit(Audit(findings, False, notes), 50, "table")
    assert control_characters(text) == []
    expected = (1 + len(findings) if findings else 1) + (3 + len(notes) if notes else 0)
    assert len(text.split("\n")) == expected


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    return subprocess.run(
        [sys.executable, "-m", "rocket_rebalance", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.e2e
def test_hostile_client_ids_of_live_consumers_reach_the_audit_escaped(tmp_path: Path) -> None:
    """The whole path an operator's cron job takes: live consumers on the stub, whose client IDs carry escape
    sequences and a newline, then ``snapshot``, then ``audit``: the table has no control character and exactly
    one row per finding."""
    from rocket_rebalance.lab.stub_cluster import LocalCluster
    from rocket_rebalance.lab.wait import wait_until
    from rocket_rebalance.runtime.transport.wire import open_transport

    with LocalCluster(tmp_path / "cluster", topic="TopicOne", brokers=[("broker-a", 1)], group="GID_esc") as cluster:
        # one queue: the benign ID sorts first and takes it (AVG), so both hostile ones are idle, each a finding
        first, *hostile = [cluster.start_consumer(cid) for cid in ("10.0.0.0@0", *HOSTILE[:2])]
        transport = open_transport(cluster.address)

        def settled() -> bool:
            """All three are members, the first holds the topic's queue and the retry topic's, the others nothing
            (an idle consumer that never held a queue reports nothing)."""
            topics = (cluster.topic, "%RETRY%GID_esc")
            return (
                len(transport.consumer_list("broker-a", "GID_esc")) == 3
                and all(first.owned(topic) == {"broker-a:0"} for topic in topics)
                and all(not c.owned(topic) for c in hostile for topic in topics)
            )

        try:
            wait_until(settled, timeout=60)
        finally:
            transport.close()
        done = _cli("snapshot", "-n", cluster.address, "--out", str(tmp_path / "snap"))
        assert done.returncode == 0, done.stderr
    members = [json.loads(line)["client_id"] for line in (tmp_path / "snap" / "members.jsonl").read_text().splitlines()]
    assert sorted(members) == sorted(["10.0.0.0@0", *HOSTILE[:2]])  # the names reached the snapshot unchanged
    done = _cli("audit", "--snapshot", str(tmp_path / "snap"))
    assert done.returncode == 1, done.stderr
    assert control_characters(done.stdout) == []
    lines = done.stdout.rstrip("\n").split("\n")
    assert lines[0].split() == list(FINDING_COLUMNS)
    assert len(lines) == 3 and all(line.startswith("GID_esc  TopicOne  before  idle_consumer") for line in lines[1:])
    assert "10.0.0.1@1\\x1b[2J\\x1b]0;pwned\\x07" in lines[1]
    assert "10.0.0.2@2\\nGID_esc  TopicOne  before  all_clear" in lines[2]
