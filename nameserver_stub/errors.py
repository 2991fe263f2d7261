"""Errors the stub answers with, one class per gRPC status code.

The domain code raises these; the gRPC layer turns them into a status code and the message, which always says
what was wrong (the client's developer reads it, not the stub's).
"""

from __future__ import annotations

import grpc


class StubError(Exception):
    """A request the stub refuses; ``code`` is the gRPC status the client receives."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(StubError):
    """The request is malformed: a bad name, an out-of-range number, a missing field."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(StubError):
    """An unknown broker, or a topic the broker does not host."""

    code = grpc.StatusCode.NOT_FOUND


class FailedPrecondition(StubError):
    """The request is well formed but the server's state forbids it (permission, fault injection disabled)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class Unavailable(StubError):
    """The named broker is down."""

    code = grpc.StatusCode.UNAVAILABLE


class ResourceExhausted(StubError):
    """A bound the stub keeps to stay responsive (open streams, parked polls) or its disk is full; retry later."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class DeadlineExceeded(StubError):
    """Someone the stub relays to (a consumer asked for its running info) did not answer in time."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED
