"""A connection's writes: whatever the socket takes at once goes without releasing the GIL, the rest by
``sendall``; either way the peer reads every byte once, in order, and a socket that cannot be written raises."""

from __future__ import annotations

import socket
import threading
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocket_rebalance.runtime.transport import connection
from rocket_rebalance.runtime.transport.connection import send_whole

# a few bytes, and more than a socket's buffer holds, so the send without waiting takes only a part
SIZES = st.one_of(st.integers(0, 512), st.integers(1 << 20, 3 << 20))


def _read_all(sock: socket.socket, into: bytearray) -> None:
    while chunk := sock.recv(1 << 16):
        into += chunk


def _sent_and_read(writes: Sequence[bytes | bytearray | memoryview]) -> bytes:
    left, right = socket.socketpair()
    received = bytearray()
    reader = threading.Thread(target=_read_all, args=(right, received))
    reader.start()
    try:
        for data in writes:
            send_whole(left, data)
    finally:
        left.close()
        reader.join(60)  # it ends at the writer's close; the bound only keeps a broken run from hanging
        right.close()
    return bytes(received)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(SIZES, st.integers(0, 255)), min_size=1, max_size=4))
def test_every_byte_arrives_once_in_order(shapes: list[tuple[int, int]]) -> None:
    writes = [bytes([seed]) * size + bytes([size % 256, 255 - seed]) for size, seed in shapes]
    assert _sent_and_read(writes) == b"".join(writes)


def test_the_gil_holding_send_is_there_on_linux() -> None:
    """The speed of the service thread rests on it (issue 42): a platform that has ``MSG_DONTWAIT`` and a C
    library ctypes opens must not fall back silently."""
    if not hasattr(socket, "MSG_DONTWAIT"):
        pytest.skip("no MSG_DONTWAIT here (Windows): every send is sendall's")
    assert connection._SEND_HOLDING_GIL is not None


def test_without_it_sendall_writes_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection, "_SEND_HOLDING_GIL", None)
    writes = [b"a" * 10, b"b" * (2 << 20)]
    assert _sent_and_read(writes) == b"".join(writes)


def test_a_socket_that_cannot_be_written_raises() -> None:
    left, right = socket.socketpair()
    right.close()
    try:
        with pytest.raises(OSError):
            for _ in range(3):  # the first write may still be taken before the peer's end is seen
                send_whole(left, b"x" * 100)
    finally:
        left.close()


def test_a_closed_socket_raises() -> None:
    left, right = socket.socketpair()
    left.close()
    right.close()
    with pytest.raises(OSError):
        send_whole(left, b"request")


def test_other_buffers_go_by_sendall() -> None:
    assert _sent_and_read([bytearray(b"frame"), memoryview(b"-and-more")]) == b"frame-and-more"
