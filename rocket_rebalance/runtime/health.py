"""What a consumer is failing at right now, said loudly enough and not too often.

A consumer retries everything (routes, heartbeats, pulls, offset writes), so one failure is no reason to stop;
but a failure that lasts is something a person must act on (a wrong address, a wrong token, an unwritable offset
file). Each kind of failure ("route of TopicTest", "pull", "persist offsets") is logged at WARNING
(ERROR where data is at stake) the first time and then at most once per ``quiet_interval`` with a count, so a
flood of retries cannot flood the log; the next success of that kind clears it and says so. The application reads
the same state: :attr:`Health.healthy`, :meth:`Health.report` (in ``describe()`` and the SIGUSR1 dump), and an
``on_error(kind, error)`` hook, told when the log is, and also at once of a failure at a place (broker) where the
kind did not fail yet, of one at ERROR (data at stake: each is its own event), and whenever a kind fails with another
type of error than it last told: a listener that always raises would otherwise call it for every batch, hundreds of
times a second.

A call made to every broker ("heartbeat", "pull", "broker connection") is one kind whatever the number of
brokers, with the brokers where it fails named in it (``at=``): a kind per broker would log a line per broker
every interval, and a route may name a thousand brokers. Such a kind is cleared when it works again at every one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rocket_rebalance.model import first_few

__all__ = ["ErrorHook", "Health"]

log = logging.getLogger("rocket_rebalance.runtime")

ErrorHook = Callable[[str, Exception], None]


@dataclass
class _Problem:
    message: str
    code: str  # the latest error's ``code`` (a TransportError's: NOT_FOUND, UNAVAILABLE ...), else ""
    count: int
    since: float
    last: float
    logged_at: float
    unlogged: int = 0
    told: type[Exception] | None = None  # the type of error on_error last heard of for this kind
    places: set[str] = field(default_factory=set)  # where it fails (``at=``)

    def where(self) -> str:
        """The places named in a line: the first five in order, then how many more."""
        return f" at {first_few(sorted(self.places))}" if self.places else ""


class Health:
    """Failures by kind; thread-safe (every I/O thread reports here)."""

    def __init__(
        self,
        on_error: ErrorHook | None = None,
        quiet_interval: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._on_error = on_error
        self._quiet = quiet_interval
        self._clock = clock
        self._problems: dict[str, _Problem] = {}
        self._lock = threading.Lock()

    def failed(
        self, kind: str, error: Exception, level: int = logging.WARNING, traceback: bool = False, at: str | None = None
    ) -> None:
        """Record a failure of ``kind`` (``at`` one broker, for a kind that spans them); log it and tell
        ``on_error`` unless the same kind was logged less than ``quiet_interval`` ago (with its traceback when
        asked: an application's own code failed, and where matters); a new place, an ERROR or a new type of error
        is told at once."""
        now = self._clock()
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        with self._lock:
            problem = self._problems.get(kind)
            if problem is None:
                problem = self._problems[kind] = _Problem(message, "", 0, now, now, now - self._quiet)
            problem.count += 1
            problem.message, problem.code, problem.last = message, str(getattr(error, "code", "")), now
            somewhere_new = at is not None and at not in problem.places
            if at is not None:
                problem.places.add(at)
            say = now - problem.logged_at >= self._quiet
            if say:
                repeated, problem.unlogged, problem.logged_at = problem.unlogged, 0, now
                where = problem.where()
            else:
                problem.unlogged += 1
            tell = say or somewhere_new or level >= logging.ERROR or type(error) is not problem.told
            problem.told = type(error)
        if say:
            more = f" ({repeated} more failures since the last report)" if repeated else ""
            log.log(level, "%s failing%s: %s%s", kind, where, message, more, exc_info=error if traceback else None)
        if tell and self._on_error is not None:
            try:
                self._on_error(kind, error)
            except Exception:  # the application's hook must not break the consumer
                log.exception("the on_error hook failed")

    def ok(self, kind: str, at: str | None = None) -> None:
        """``kind`` works again (``at`` that broker: the kind is cleared once it works at every broker where it
        failed): forget its failures (and say so if they were reported).

        Called after every successful batch, so the usual case (nothing failing) takes no lock: a dict membership
        test is atomic, and a failure recorded just after it is cleared by the next success."""
        if kind not in self._problems:
            return
        with self._lock:
            problem = self._problems.get(kind)
            if problem is not None and at is not None:
                problem.places.discard(at)
                if problem.places:
                    return
            self._problems.pop(kind, None)
        if problem is not None:
            log.warning("%s works again after %d failures", kind, problem.count)

    @property
    def healthy(self) -> bool:
        with self._lock:
            return not self._problems

    def report(self) -> dict[str, str]:
        """Each failing kind: its last error, how often, for how long (for ``describe()``)."""
        now = self._clock()
        with self._lock:
            return {
                kind: f"{p.where().lstrip()}{': ' if p.places else ''}{p.message} "
                f"({p.count} failures over {now - p.since:.0f} s)"
                for kind, p in sorted(self._problems.items())
            }

    def codes(self) -> dict[str, str]:
        """Each failing kind's latest error code (``""`` for an error without one), for a caller that classifies
        them: a consumer that was not ready in time says why. Codes, not the errors: an error's traceback would
        keep what its frames held (a listener's batch) alive for as long as the kind fails."""
        with self._lock:
            return {kind: p.code for kind, p in sorted(self._problems.items())}
