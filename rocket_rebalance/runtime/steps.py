"""Steps: what a consumer's request does, written once for the threaded and the asyncio runtime.

A request of the engine is often several steps with decisions between them: fetch a route, then register at the
brokers it names for the first time; read the subscription table, then send the heartbeat; fetch a broker's member
list, then unlock on behalf of each gone holder. Each is written once, as a generator that *yields effects* (a
transport call, a call of the application's listener, blocking local work) and receives each effect's result (or
has its exception thrown in), then returns its outcome, usually the core event that answers the request. The same
idea as the core's: the logic knows nothing of threads or event loops.

(A request's steps are called a ``Steps`` generator here; ``Plan`` is :mod:`rocket_rebalance.plan`'s, a group's
shares.) A call to the wire names the transport's method itself, ``yield from call(Transport.lock, ...)``, so mypy
checks its arguments and its answer, and a rename of the method is seen everywhere it is called.

Two interpreters run steps: :func:`run` on the threaded runtime's pool threads (a transport call is a blocking
call of :class:`~rocket_rebalance.runtime.transport.Transport`), :func:`run_async` on the event loop (the same call
on :class:`~rocket_rebalance.runtime.transport.AsyncTransport`, awaited). Both transports have the same methods
with the same arguments, answers and errors, which is what makes one generator of steps right for both.

What cannot be shared is the effect itself, and only that differs: a listener that returns an awaitable is awaited
on the loop; blocking local work (an offset file written and fsynced, an application's own offset store) runs in
place on a pool thread under threads, and in the loop's default executor under asyncio, which has no asynchronous
file I/O.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Generator
from typing import Any, Concatenate, NamedTuple, ParamSpec, TypeVar

from rocket_rebalance.runtime.transport import TransportError

__all__ = ["Blocking", "Call", "Effect", "Invoke", "Steps", "call", "run", "run_async"]

T = TypeVar("T")
P = ParamSpec("P")


class Call(NamedTuple):
    """``transport.<method>(*args)``: a call of the consumer's transport, blocking or awaited. ``method`` is the
    interface's own (``Transport.lock``, ``AdminTransport.min_offset``): the interpreter calls the method of that
    name on the transport it runs with, the blocking or the asyncio one. A transport without it (an operator's
    read a wire does not offer) raises :class:`TransportError` with code ``UNIMPLEMENTED`` into the steps, as a
    server that does not know the request would. Made by :func:`call`, which types it.

    The effects are named tuples, immutable as frozen dataclasses are and made in a third of the time: the consume
    path makes one per listener call (issue 42)."""

    method: Callable[..., Any]
    args: tuple[Any, ...] = ()


class Invoke(NamedTuple):
    """``function(*args)``: the application's code (a listener, a rebalance callback). Under asyncio an awaitable
    it returns is awaited, so ``async def`` callbacks work, and a plain function is called in place on the loop;
    under threads a coroutine it returns is run to its end with ``asyncio.run`` on the calling pool thread."""

    function: Callable[..., Any]
    args: tuple[Any, ...] = ()


class Blocking(NamedTuple):
    """``function()``, which blocks on local I/O (an offset file): in place under threads (steps run on pool
    threads), in the default executor under asyncio."""

    function: Callable[[], Any]


Effect = Call | Invoke | Blocking
"""Something a request's steps ask their interpreter to do; its result (or exception) is sent back into them."""

Steps = Generator[Effect, Any, T]
"""A request's steps: yields effects, receives their results, returns the outcome."""


def call(method: Callable[Concatenate[Any, P], T], /, *args: P.args, **kwargs: P.kwargs) -> Steps[T]:
    """``result = yield from call(Transport.route, topic)``: one call of the consumer's transport, its arguments
    and answer typed by the interface's method (the blocking one's; the asyncio twin takes and answers the same).
    Positional arguments only, as every transport method is called."""
    if kwargs:
        raise TypeError(f"call({method.__name__}): pass the arguments by position")
    result: T = yield Call(method, args)
    return result


def _method(transport: object, effect: Call) -> Callable[..., Any]:
    name = effect.method.__name__
    method = getattr(transport, name, None)
    if method is None:
        raise TransportError(f"{name} is not offered by the transport to {transport!r}", "UNIMPLEMENTED")
    return method  # type: ignore[no-any-return]


def run(steps: Steps[T], transport: object) -> T:
    """Run ``steps`` to its end on this thread, each effect a blocking call; its outcome, or the exception it let
    through. (On the consume path once per listener batch: dispatched by exact type, the commonest first.)"""
    send, throw = steps.send, steps.throw
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


async def run_async(steps: Steps[T], transport: object) -> T:
    """Run ``steps`` to its end on the running loop, each transport call awaited; its outcome, or the exception it
    let through. A cancellation (not an ``Exception``) is not thrown into the steps: it ends the steps where they
    waits, running its ``finally`` clauses, and goes on to the task's owner."""
    try:
        return await _run_async(steps, transport)
    finally:
        steps.close()


async def _run_async(steps: Steps[T], transport: object) -> T:
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            effect = steps.send(result) if error is None else steps.throw(error)
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
