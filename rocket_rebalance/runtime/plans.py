"""Plans: what a consumer's request does, written once for the threaded and the asyncio runtime.

A request of the engine is often several steps with decisions between them: fetch a route, then register at the
brokers it names for the first time; read the subscription table, then send the heartbeat; fetch a broker's member
list, then unlock on behalf of each gone holder. Each is written once, as a generator that *yields effects* (a
transport call, a call of the application's listener, blocking local work) and receives each effect's result (or
has its exception thrown in), then returns its outcome, usually the core event that answers the request. The same
idea as the core's: the logic knows nothing of threads or event loops.

Two interpreters run plans: :func:`run` on the threaded runtime's pool threads (a transport call is a blocking
call of :class:`~rocket_rebalance.runtime.transport.Transport`), :func:`run_async` on the event loop (the same call
on :class:`~rocket_rebalance.runtime.transport.AsyncTransport`, awaited). Both transports have the same methods
with the same arguments, answers and errors, which is what makes one plan right for both.

What cannot be shared is the effect itself, and only that differs: a listener that returns an awaitable is awaited
on the loop; blocking local work (an offset file written and fsynced, an application's own offset store) runs in
place on a pool thread under threads, and in the loop's default executor under asyncio, which has no asynchronous
file I/O.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from rocket_rebalance.runtime.transport import TransportError

__all__ = ["Blocking", "Call", "Effect", "Invoke", "Plan", "run", "run_async"]

T = TypeVar("T")


class Effect:
    """Something a plan asks its interpreter to do; the result (or the exception) is sent back into the plan."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Call(Effect):
    """``transport.<method>(*args)``: a call of the consumer's transport, blocking or awaited. A transport without
    the method (an operator's read a wire does not offer) raises :class:`TransportError` with code
    ``UNIMPLEMENTED`` into the plan, as a server that does not know the request would."""

    method: str
    args: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class Invoke(Effect):
    """``function(*args)``: the application's code (a listener, a rebalance callback). Under asyncio an awaitable
    it returns is awaited, so ``async def`` callbacks work, and a plain function is called in place on the loop;
    under threads a coroutine it returns is run to its end with ``asyncio.run`` on the calling pool thread."""

    function: Callable[..., Any]
    args: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class Blocking(Effect):
    """``function()``, which blocks on local I/O (an offset file): in place under threads (plans run on pool
    threads), in the default executor under asyncio."""

    function: Callable[[], Any]


Plan = Generator[Effect, Any, T]
"""A request's steps: yields effects, receives their results, returns the outcome."""


def _method(transport: object, call: Call) -> Callable[..., Any]:
    method = getattr(transport, call.method, None)
    if method is None:
        raise TransportError(f"{call.method} is not offered by the transport to {transport!r}", "UNIMPLEMENTED")
    return method  # type: ignore[no-any-return]


def run(plan: Plan[T], transport: object) -> T:
    """Run ``plan`` to its end on this thread, each effect a blocking call; its outcome, or the exception it let
    through. (On the consume path once per listener batch: dispatched by exact type, the commonest first.)"""
    send, throw = plan.send, plan.throw
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            effect = send(result) if error is None else throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        result, error = None, None
        try:
            if type(effect) is Invoke:
                result = effect.function(*effect.args)
                if result is not None and inspect.iscoroutine(result):  # an ``async def`` callback: run to its end
                    result = asyncio.run(result)
            elif type(effect) is Call:
                result = _method(transport, effect)(*effect.args)
            elif type(effect) is Blocking:
                result = effect.function()
            else:
                raise TypeError(f"not an effect: {effect!r}")
        except Exception as raised:
            error = raised


async def run_async(plan: Plan[T], transport: object) -> T:
    """Run ``plan`` to its end on the running loop, each transport call awaited; its outcome, or the exception it
    let through. A cancellation (not an ``Exception``) is not thrown into the plan: it ends the plan where it
    waits, running its ``finally`` clauses, and goes on to the task's owner."""
    try:
        return await _run_async(plan, transport)
    finally:
        plan.close()


async def _run_async(plan: Plan[T], transport: object) -> T:
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            effect = plan.send(result) if error is None else plan.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        result, error = None, None
        try:
            if isinstance(effect, Call):
                result = await _method(transport, effect)(*effect.args)
            elif isinstance(effect, Invoke):
                result = effect.function(*effect.args)
                if inspect.isawaitable(result):
                    result = await result
            elif isinstance(effect, Blocking):
                result = await asyncio.get_running_loop().run_in_executor(None, effect.function)
            else:
                raise TypeError(f"not an effect: {effect!r}")
        except Exception as raised:
            error = raised
