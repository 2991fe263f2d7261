"""What a long command is doing and how far it is, on the stream it is given (the commands give stderr).

Each line names the command that runs (``audit [3]  12.4s reading and checking rows``: the step's number and the
seconds since the command started), since ``audit`` runs the impact job and a log may hold both. A counted step
(``analyzing groups: 120/300 groups``) is drawn two ways:

* on a terminal (the stream is a TTY), a bar redrawn in place with the counts, the share done and an estimate of
  the time left, at most every :data:`BAR_EVERY` seconds: a person watching sees it move;
* otherwise (a file, a pipe, cron's mail), a plain line every :data:`PLAIN_EVERY` seconds, and always the last:
  a log shows the run is alive without a line per group.

It sits low in the layers, beside :mod:`~rocket_rebalance.inputs`, because both the commands and the pipeline use it
and the pipeline may import only the pure layers. It does no I/O but writing to its stream, and reads the clock it
is given, so a test drives it with a fake clock and a fake terminal. A ``None`` stream is ``--quiet``: nothing is
written, the time is still kept (a run's result reports its seconds).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

from rocket_rebalance.model import printable

__all__ = ["BAR_EVERY", "PLAIN_EVERY", "Count", "Progress"]

PLAIN_EVERY = 5.0
"""Seconds between two plain lines of one counted step (a log reader's "every few seconds")."""

BAR_EVERY = 0.1
"""Seconds between two redraws of a bar: fast enough to look alive, slow enough to cost nothing."""

_COLUMNS = 80
"""The width assumed when the terminal does not say its own."""

_BAR = (10, 20)
"""The narrowest and widest bar, in characters."""

_TAIL = 60
"""Room kept for the label and the numbers beside a bar: the bar keeps one width as the numbers grow."""


def _duration(seconds: float) -> str:
    """``7s``, ``3m05s``, ``2h04m``: short enough for a bar, exact enough for a wait."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


class Progress:
    """A command's progress on ``stream`` (None: quiet), its lines labelled ``label`` (the command's name).

    Use it as a context manager: leaving the block ends a bar left open by a failure, so the command's error line
    starts on a line of its own. One thread at a time may call it (a poller calls a count while the caller waits)."""

    def __init__(
        self,
        label: str,
        stream: TextIO | None,
        clock: Callable[[], float] = time.monotonic,
        every: float = PLAIN_EVERY,
    ) -> None:
        self.label = label  # the command's name, which every line starts with
        self._stream = stream
        self._clock = clock
        self._every = every
        self._started = clock()
        self._step = 0
        self._open = 0  # the length of a bar drawn on the current line, 0 when the line is ended
        self.tty = stream is not None and stream.isatty()
        self._columns = _COLUMNS
        if self.tty:
            try:
                self._columns = os.get_terminal_size(stream.fileno()).columns  # type: ignore[union-attr]
            except (OSError, ValueError):  # not a real terminal's descriptor (or a closed one): the default
                pass

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def seconds(self) -> float:
        """Seconds since the command started."""
        return self._clock() - self._started

    def step(self, text: str) -> None:
        """Say the next step: ``audit [3]  12.4s reading and checking rows``."""
        self._step += 1
        self._line(f"{self._prefix()} {printable(text)}")

    def count(self, text: str, unit: str, detail: str = "") -> Count:
        """A counted step (``text``: what it does, ``unit``: what it counts, ``detail``: how, said once in its first
        line); see :class:`Count`."""
        self._step += 1
        return Count(self, printable(text), unit, printable(detail))

    def close(self) -> None:
        """End a bar left on its line (after a failure inside a count)."""
        if self._open and self._stream is not None:
            self._stream.write("\n")
            self._stream.flush()
        self._open = 0

    def _prefix(self) -> str:
        return f"{self.label} [{self._step}] {self.seconds():6.1f}s"

    def _line(self, text: str, replace: bool = False) -> None:
        """A line of its own; with ``replace``, in place of a bar drawn on the current line (a count's last)."""
        if self._stream is None:
            return
        if replace and self._open:
            self._stream.write("\r" + text.ljust(self._open) + "\n")
            self._open = 0
        else:
            self.close()
            self._stream.write(text + "\n")
        self._stream.flush()

    def _bar(self, head: str, done: int, total: int, tail: str) -> None:
        """``head [#####-----] tail`` in place of the line drawn before, no wider than the terminal (a wider line
        would wrap, and the next redraw start on the wrong row): the bar is narrower on a narrow terminal, and
        the tail's end (a count's note) is cut."""
        if self._stream is None:
            return
        width = max(_BAR[0], min(_BAR[1], self._columns - _TAIL))
        filled = min(width, width * done // total) if total > 0 else 0
        text = f"{head} [{'#' * filled}{'-' * (width - filled)}] {tail}"[: self._columns - 1]
        self._stream.write("\r" + text.ljust(self._open))
        self._stream.flush()
        self._open = len(text)


class Count:
    """A counted step: call it with ``(done, total)`` as the work goes (``note``: a few words more, such as
    ``3 rejected``), as often as is handy: the first call says what the step does, the others draw only as often
    as :class:`Progress` says. Use it as a context manager: leaving the block normally writes the final line with
    the last counts and the step's time.

    Any code that counts its work can take it as a plain ``Callable[[int, int], None]``."""

    def __init__(self, progress: Progress, text: str, unit: str, detail: str) -> None:
        self._progress = progress
        self._text = text
        self._detail = f" ({detail})" if detail else ""
        self._unit = unit
        self._started = progress._clock()
        self._shown = self._started
        self._done = 0
        self._total = 0
        self._note = ""
        self._announced = False

    def __enter__(self) -> Count:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if kind is not None:
            self._progress.close()
            return
        took = _duration(self._progress._clock() - self._started)
        final = f"{self._progress._prefix()} {self._text}: {self._counts()} in {took}{self._note}"
        self._progress._line(final, replace=True)

    def __call__(self, done: int, total: int, note: str = "") -> None:
        self._done, self._total, self._note = done, total, f", {printable(note)}" if note else ""
        if not self._announced:  # said when the work starts: a command refusing its input says only why
            self._announced = True
            self._progress._line(f"{self._progress._prefix()} {self._text}{self._detail}")
        now = self._progress._clock()
        tty = self._progress.tty
        if now - self._shown < (BAR_EVERY if tty else self._progress._every) or (done >= total and not tty):
            return  # the plain line of the whole count is the final one
        self._shown = now
        left = self._left(now)
        if tty:  # under the step's own line: the label, the bar and the numbers fit 80 columns
            share = f"{100 * done // total}%" if total else ""
            estimate = f", ETA {left}" if left else ""
            tail = f"{self._counts()} {share} {_duration(now - self._started)}{estimate}{self._note}"
            self._progress._bar(self._progress.label, done, total, tail)
        else:
            share = f" ({100 * done // total}%)" if total else ""
            estimate = f", about {left} left" if left else ""
            self._progress._line(
                f"{self._progress._prefix()} {self._text}: {self._counts()}{share}{estimate}{self._note}"
            )

    def _counts(self) -> str:
        return f"{self._done:,}/{self._total:,} {self._unit}"

    def _left(self, now: float) -> str:
        """The time left at the pace so far, or nothing before the first unit is done."""
        elapsed = now - self._started
        if self._done <= 0 or self._total <= self._done or elapsed <= 0:
            return ""
        return _duration(elapsed * (self._total - self._done) / self._done)
