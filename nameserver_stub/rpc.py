"""Turning domain errors into gRPC statuses, once, for every handler.

A :class:`~nameserver_stub.errors.StubError` becomes its status code and message. Anything else is a bug in
the stub: it is logged with its traceback and the client gets INTERNAL, and the server goes on serving (no
request can take it down; the store's transactions keep a failed call from leaving half a write behind).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from nameserver_stub.errors import StubError

log = logging.getLogger("nameserver_stub")

S = TypeVar("S")
Req = TypeVar("Req")
Resp = TypeVar("Resp")


def unary(method: Callable[[S, Req, Any], Resp]) -> Callable[[S, Req, Any], Resp]:
    """Decorate a unary-unary handler ``(self, request, context)`` so failures become proper statuses."""

    @functools.wraps(method)
    def handler(self: S, request: Req, context: Any) -> Resp:
        try:
            return method(self, request, context)
        except StubError as error:
            failure: tuple[grpc.StatusCode, str] = (error.code, error.message)
        except Exception as error:  # noqa: BLE001 - the whole point: nothing a client sends crashes the stub
            log.exception("internal error in %s", method.__qualname__)
            failure = (grpc.StatusCode.INTERNAL, f"internal error: {type(error).__name__}: {error}")
        context.abort(*failure)
        raise AssertionError("context.abort returned")  # pragma: no cover - abort always raises

    return handler
