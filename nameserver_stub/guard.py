"""A server interceptor that guards every method before its handler runs: undecodable requests and open streams.

Undecodable bytes: gRPC's own deserializer raises, and gRPC then logs a traceback per request and answers
INTERNAL ("Exception deserializing request!"), so a flood of junk floods the log and the client learns nothing.
Here the request is decoded leniently and the handler is never called for junk: the caller gets
INVALID_ARGUMENT naming the message type, and the log gets one line (rate-limited by the CLI's log filter).

Open streams: the sync server gives every running call a worker thread, and a response stream (``Connect``,
health ``Watch``) keeps its thread for as long as it is open, idle or not. Unbounded, streams that nobody reads
take every worker and then every other call waits until its deadline. So streams are counted here, for every
streaming method at once, and the one past ``limit`` is refused with RESOURCE_EXHAUSTED saying what the limit
is; plain calls always find a free worker.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import grpc

log = logging.getLogger("nameserver_stub")


class _Undecodable:
    """What the lenient deserializer returns instead of raising."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def _lenient(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserializer is None:
        return None

    def deserialize(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as error:  # noqa: BLE001 - any parser failure means the same: not a valid request
            return _Undecodable(error)

    return deserialize


class StreamSlots:
    """A counter of open streams with a ceiling; thread-safe."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open = 0
        self._lock = threading.Lock()

    @property
    def open(self) -> int:
        with self._lock:
            return self._open

    def acquire(self) -> Callable[[], None] | None:
        """Take a slot; returns its release function (safe to call twice), or ``None`` when all are taken."""
        with self._lock:
            if self._open >= self.limit:
                return None
            self._open += 1
        released = threading.Event()

        def release() -> None:
            with self._lock:
                if not released.is_set():
                    released.set()
                    self._open -= 1

        return release


class GuardInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]  # grpc ships no type hints
    def __init__(self, slots: StreamSlots) -> None:
        self._slots = slots

    def intercept_service(self, continuation: Callable[[Any], Any], handler_call_details: Any) -> Any:
        handler = continuation(handler_call_details)
        if handler is None or handler.request_streaming:
            return handler  # unknown method (gRPC answers UNIMPLEMENTED), or client streaming (none here)
        method: str = handler_call_details.method
        if handler.response_streaming:
            behavior = self._stream(handler.unary_stream, method)
            return handler._replace(request_deserializer=_lenient(handler.request_deserializer), unary_stream=behavior)
        return handler._replace(
            request_deserializer=_lenient(handler.request_deserializer),
            unary_unary=self._unary(handler.unary_unary, method),
        )

    @staticmethod
    def _refuse_undecodable(request: Any, method: str, context: Any) -> None:
        if isinstance(request, _Undecodable):
            log.warning("refused an undecodable request to %s from %s: %s", method, context.peer(), request.error)
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"the request to {method} is not a valid protobuf message of its type: {request.error}",
            )

    def _unary(self, behavior: Callable[[Any, Any], Any], method: str) -> Callable[[Any, Any], Any]:
        def handle(request: Any, context: Any) -> Any:
            self._refuse_undecodable(request, method, context)
            return behavior(request, context)

        return handle

    def _stream(self, behavior: Callable[[Any, Any], Any], method: str) -> Callable[[Any, Any], Any]:
        def handle(request: Any, context: Any) -> Any:
            self._refuse_undecodable(request, method, context)
            release = self._slots.acquire()
            if release is None:
                limit = self._slots.limit
                log.warning("refused a stream to %s from %s: %d streams open", method, context.peer(), limit)
                context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    f"too many open streams: the stub allows {limit} at once (max_streams, --max-streams), and "
                    "each holds a worker thread; close unused streams or retry later",
                )
                raise AssertionError("context.abort returned")  # pragma: no cover - abort always raises
            if not context.add_callback(release):  # runs when the call ends, however it ends
                release()
            return behavior(request, context)

        return handle
