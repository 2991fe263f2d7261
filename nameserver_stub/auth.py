"""The shared-token check: every call (health included) must carry ``authorization: Bearer <token>``.

A server interceptor, so no handler can forget it. The comparison is constant-time. A refused call gets
UNAUTHENTICATED whatever the method, even an unknown one, so a caller without the token learns nothing.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from typing import Any

import grpc

log = logging.getLogger("nameserver_stub")

METADATA_KEY = "authorization"


def bearer(token: str) -> tuple[tuple[str, str]]:
    """The call metadata a client sends with a token."""
    return ((METADATA_KEY, f"Bearer {token}"),)


def _deny(request: Any, context: Any) -> Any:
    log.warning("refused a call from %s: missing or wrong token", context.peer())
    context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong token (metadata 'authorization: Bearer ...')")


def _deny_stream(request: Any, context: Any) -> Any:
    _deny(request, context)
    yield  # pragma: no cover - abort raises first


class TokenInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]  # grpc ships no type hints
    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()
        self._deny_unary = grpc.unary_unary_rpc_method_handler(_deny)
        self._deny_streaming = grpc.unary_stream_rpc_method_handler(_deny_stream)
        self._deny_client_streaming = grpc.stream_unary_rpc_method_handler(_deny)
        self._deny_bidi = grpc.stream_stream_rpc_method_handler(_deny_stream)

    def intercept_service(self, continuation: Callable[[Any], Any], handler_call_details: Any) -> Any:
        given = ""
        for key, value in handler_call_details.invocation_metadata or ():
            if key == METADATA_KEY and isinstance(value, str):
                given = value
        if hmac.compare_digest(given.encode(), self._expected):
            return continuation(handler_call_details)
        handler = continuation(handler_call_details)
        if handler is None:
            return self._deny_unary
        if handler.request_streaming and handler.response_streaming:
            return self._deny_bidi
        if handler.request_streaming:
            return self._deny_client_streaming
        if handler.response_streaming:
            return self._deny_streaming
        return self._deny_unary
