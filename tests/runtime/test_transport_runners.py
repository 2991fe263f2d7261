"""The four transports' calls against the interface they implement, parameter by parameter.

Most calls of a transport are a runner over the wire's own operation (``lock = blocking_op(RemotingCalls.lock)``),
so their parameters are the operation's. mypy holds each transport to its protocol where it is given as one
(:mod:`rocket_rebalance.runtime.transport.wire`), but not by the parameters' names, which a caller passing them by
keyword depends on; this test does, and by their defaults and whether the call is awaited.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from rocket_rebalance.runtime.transport import AdminTransport, AsyncTransport
from rocket_rebalance.runtime.transport.grpc import GrpcTransport, blocking_stub_call
from rocket_rebalance.runtime.transport.grpc_async import AsyncGrpcTransport, awaited_stub_call
from rocket_rebalance.runtime.transport.remoting import RemotingTransport, blocking_op
from rocket_rebalance.runtime.transport.remoting_async import AsyncRemotingTransport, awaited_op

_RUNNERS = {blocking_op: False, blocking_stub_call: False, awaited_op: True, awaited_stub_call: True}


def _parameters(function: Any) -> list[tuple[str, Any, Any]]:
    """A function's parameters after the first (``self``, or the operations' object), as (name, kind, default)."""
    return [(p.name, p.kind, p.default) for p in list(inspect.signature(function).parameters.values())[1:]]


def _call(transport: type, name: str) -> tuple[list[tuple[str, Any, Any]], bool]:
    """What calling ``transport``'s ``name`` takes, and whether it is awaited."""
    member = inspect.getattr_static(transport, name)
    if type(member) in _RUNNERS:
        wrapped = member.op if isinstance(member, blocking_op | awaited_op) else member.build
        return _parameters(wrapped), _RUNNERS[type(member)]
    return _parameters(member), inspect.iscoroutinefunction(member)


def _interface(protocol: type) -> list[str]:
    return [name for name in dir(protocol) if not name.startswith("_") and inspect.isfunction(getattr(protocol, name))]


@pytest.mark.parametrize(
    ("transport", "protocol"),
    [
        (RemotingTransport, AdminTransport),
        (GrpcTransport, AdminTransport),
        (AsyncRemotingTransport, AsyncTransport),
        (AsyncGrpcTransport, AsyncTransport),
    ],
)
def test_every_call_takes_the_interfaces_parameters(transport: type, protocol: type) -> None:
    differ = {
        name: (_call(transport, name), (_parameters(getattr(protocol, name)), _call(protocol, name)[1]))
        for name in _interface(protocol)
        if _call(transport, name) != (_parameters(getattr(protocol, name)), _call(protocol, name)[1])
    }
    assert not differ, differ


def test_a_runner_is_the_descriptor_on_the_class_and_a_function_of_the_instance() -> None:
    assert isinstance(AsyncGrpcTransport.lock, awaited_stub_call)
    transport = AsyncGrpcTransport("127.0.0.1:1")  # outside a loop: no channel yet, nothing to close
    assert inspect.iscoroutinefunction(transport.lock)
    assert inspect.iscoroutinefunction(transport.route)
