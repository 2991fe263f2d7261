"""The progress module with a fake clock and a fake terminal: a bar with counts and a time estimate on a TTY, plain
lines at most every few seconds otherwise, always a final line, nothing at all when quiet."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocket_rebalance.progress import BAR_EVERY, PLAIN_EVERY, Progress
from tests.progress_lines import progress_line


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    """A stream that says it is a terminal (of no real descriptor: the default width, 80 columns)."""

    def isatty(self) -> bool:
        return True


def drawn(text: str) -> list[str]:
    """What a terminal's rows show in turn: every ``\\r`` redraw as a row of its own."""
    return [row for row in text.replace("\r", "\n").split("\n") if row.strip()]


def test_a_terminal_gets_a_bar_with_counts_and_a_time_estimate_then_the_final_line() -> None:
    clock, screen = Clock(), Terminal()
    with Progress("fleet-gen", screen, clock=clock) as progress, progress.count("generating", "groups") as count:
        for done in range(0, 2001, 100):
            count(done, 2000)
            clock.now += 0.5
    text = screen.getvalue()
    rows = drawn(text)
    assert rows[0] == "fleet-gen [1]    0.0s generating"
    bars = rows[1:-1]
    assert len(bars) == 20  # every redraw at least BAR_EVERY apart: here every call (0.5 s apart) but the first
    assert bars[9].startswith("fleet-gen [##########----------] 1,000/2,000 groups 50% 5s, ETA 5s")
    assert bars[-1].startswith("fleet-gen [####################] 2,000/2,000 groups 100% 10s")
    assert rows[-1].rstrip() == "fleet-gen [1]   10.5s generating: 2,000/2,000 groups in 10s"
    assert text.endswith("\n") and text.count("\n") == 2  # the bar was redrawn in place, and replaced at the end
    assert all(len(row) < 80 for row in rows)


def test_a_bar_is_redrawn_at_most_every_tenth_of_a_second() -> None:
    clock, screen = Clock(), Terminal()
    with Progress("impact", screen, clock=clock) as progress, progress.count("analyzing groups", "tasks") as count:
        for done in range(1000):
            clock.now += BAR_EVERY / 10
            count(done, 1000)
    assert screen.getvalue().count("\r") == pytest.approx(1000 / 10, abs=2)


def test_plain_lines_come_every_few_seconds_and_the_last_always() -> None:
    clock, log = Clock(), io.StringIO()
    with Progress("snapshot", log, clock=clock) as progress:
        with progress.count("reading consumer groups", "groups") as count:
            for done in range(481):
                count(done, 480, f"{done // 100} rejected")
                clock.now += 0.125  # a minute in all
        progress.step("writing the tables")
    lines = log.getvalue().splitlines()
    assert lines[0] == "snapshot [1]    0.0s reading consumer groups"
    assert lines[1] == "snapshot [1]    5.0s reading consumer groups: 40/480 groups (8%), about 55s left, 0 rejected"
    assert len(lines) == 1 + 11 + 1 + 1  # 60 s of work: a line every 5 s (the 12th would say 100%: the last says it)
    assert lines[-2] == "snapshot [1]   60.1s reading consumer groups: 480/480 groups in 1m00s, 4 rejected"
    assert lines[-1] == "snapshot [2]   60.1s writing the tables"
    assert all(progress_line("snapshot").fullmatch(line) for line in lines)


def test_short_work_says_what_it_does_and_its_end_only() -> None:
    clock, log = Clock(), io.StringIO()
    with Progress("fleet-gen", log, clock=clock) as progress, progress.count("generating", "groups") as count:
        for done in range(7):
            count(done, 6)
            clock.now += 0.2
    assert log.getvalue().splitlines() == [
        "fleet-gen [1]    0.0s generating",
        "fleet-gen [1]    1.4s generating: 6/6 groups in 1s",
    ]


def test_a_count_that_never_started_says_nothing_until_its_end_and_a_failed_one_no_end() -> None:
    """A command refusing its input before the work starts prints only its error line; a bar a failure leaves
    open is ended, so the error starts on a line of its own."""
    clock, screen = Clock(), Terminal()
    with pytest.raises(ValueError), Progress("snapshot", screen, clock=clock) as progress:
        with progress.count("reading consumer groups", "groups"):
            raise ValueError("bad --group")
    assert screen.getvalue() == ""
    with pytest.raises(ValueError), Progress("snapshot", screen, clock=clock) as progress:
        with progress.count("reading consumer groups", "groups") as count:
            count(0, 4)
            clock.now += 1
            count(1, 4)
            raise ValueError("the cluster went away")
    assert screen.getvalue().endswith("\n") and "1/4 groups" in screen.getvalue() and " in " not in screen.getvalue()


def test_quiet_writes_nothing_but_keeps_the_time() -> None:
    clock = Clock()
    with Progress("audit", None, clock=clock) as progress:
        progress.step("checking snapshot")
        with progress.count("analyzing groups", "tasks") as count:
            count(3, 4)
            clock.now += 12.5
            count(4, 4)
        assert progress.seconds() == 12.5


def test_text_from_outside_cannot_move_the_cursor() -> None:
    log = io.StringIO()
    with Progress("impact", log, clock=Clock()) as progress:
        progress.step("checking snapshot /tmp/a\rb\x1b[2J")
    assert log.getvalue() == "impact [1]    0.0s checking snapshot /tmp/a\\rb\\x1b[2J\n"


@given(
    steps=st.lists(st.tuples(st.floats(0, 3), st.integers(0, 50)), max_size=200),
    total=st.integers(1, 10_000),
    tty=st.booleans(),
)
def test_never_a_flood_and_always_one_final_line(steps: list[tuple[float, int]], total: int, tty: bool) -> None:
    """Whatever the pace: plain lines at least PLAIN_EVERY apart (bars BAR_EVERY), none wider than the terminal,
    and exactly one final line with the last counts."""
    clock = Clock()
    stream = Terminal() if tty else io.StringIO()
    shown: list[float] = []
    done = 0
    with Progress("fleet-gen", stream, clock=clock) as progress, progress.count("generating", "groups") as count:
        for pause, more in steps:
            clock.now += pause
            done = min(total, done + more)
            before = stream.tell()
            count(done, total)
            if stream.tell() != before:
                shown.append(clock.now)
    rows = drawn(stream.getvalue())
    gaps = [later - earlier for earlier, later in zip(shown[1:], shown[2:], strict=False)]  # the first says the step
    assert all(gap >= (BAR_EVERY if tty else PLAIN_EVERY) for gap in gaps)
    assert all(len(row) < 80 for row in rows)
    finals = [row for row in rows if " in " in row]
    counted = f"{done:,}/{total if steps else 0:,} groups"  # no call: no total known
    assert len(finals) == 1 and finals[0].rstrip().endswith(f"{counted} in {finals[0].split()[-1]}")
    assert stream.getvalue().endswith("\n")
