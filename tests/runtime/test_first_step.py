"""An ``async def`` listener's call on the asyncio consumer's loop runs up to its first wait at once (so a listener
that never waits needs no steps), and the rest is awaited through :class:`_Started`: held here to awaiting the
call directly, for any mix of waits, values sent back, exceptions thrown in, answers, failures and a cancellation
from outside."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.runtime.dispatch import _first_step, _Started
from tests.aio import run

STEPS = st.lists(
    st.one_of(
        st.just(("sleep",)),
        st.tuples(st.just("value"), st.integers()),  # a future resolved with a value: sent into the coroutine
        st.tuples(st.just("error"), st.text(max_size=5)),  # a future failed: thrown into it, which catches it
        st.tuples(st.just("raise"), st.text(max_size=5)),  # the call fails
        st.tuples(st.just("return"), st.integers()),  # the call answers
    ),
    max_size=8,
)


async def call(steps: list[tuple[Any, ...]], log: list[object]) -> object:
    """A listener's call doing ``steps`` in order; what it saw goes to ``log``."""
    loop = asyncio.get_running_loop()
    for step in steps:
        if step[0] == "sleep":
            await asyncio.sleep(0)
            log.append("slept")
        elif step[0] == "value":
            future: asyncio.Future[int] = loop.create_future()
            loop.call_soon(future.set_result, step[1])
            log.append(await future)
        elif step[0] == "error":
            failing: asyncio.Future[int] = loop.create_future()
            loop.call_soon(failing.set_exception, ValueError(step[1]))
            try:
                await failing
            except ValueError as error:
                log.append(("caught", str(error)))
        elif step[0] == "raise":
            raise ValueError(step[1])
        else:
            return step[1]
    return "end"


async def outcome(steps: list[tuple[Any, ...]], eager: bool) -> tuple[object, ...]:
    log: list[object] = []
    try:
        if eager:
            value = _first_step(call(steps, log))
            answer = await value if type(value) is _Started else value
        else:
            answer = await call(steps, log)
    except ValueError as error:
        return ("raised", str(error), log)
    return ("answered", answer, log)


@settings(max_examples=200, deadline=None)
@given(STEPS)
def test_the_first_step_then_the_rest_is_the_call_awaited(steps: list[tuple[Any, ...]]) -> None:
    async def both() -> tuple[tuple[object, ...], tuple[object, ...]]:
        return await outcome(steps, eager=False), await outcome(steps, eager=True)

    direct, eager = run(both())
    assert eager == direct


def test_a_call_that_never_waits_answers_at_once() -> None:
    async def scenario() -> object:
        return _first_step(call([("return", 7)], []))

    assert run(scenario()) == 7


def test_a_cancellation_from_outside_reaches_the_call_where_it_waits() -> None:
    """The consume task cancelled while the call waits (a shutdown, or the consume timeout): the call sees the
    cancellation where it waits, and it ends the task as it would end a task awaiting the call itself."""
    seen: list[str] = []

    async def waits_forever() -> None:
        await asyncio.sleep(0)
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            seen.append("cancelled where it waits")
            raise
        finally:
            seen.append("cleaned up")

    async def task_body() -> object:
        value = _first_step(waits_forever())
        assert type(value) is _Started
        return await value

    async def scenario() -> bool:
        task = asyncio.ensure_future(task_body())
        for _ in range(3):
            await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return task.cancelled()
        return False

    assert run(scenario())
    assert seen == ["cancelled where it waits", "cleaned up"]
