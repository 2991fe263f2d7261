"""A RocketMQ remoting server scripted by the test, on loopback: the faults a real broker cannot be made to produce
on demand (no answer, a closed connection, a server that goes away mid-run), with the real codec on real sockets.
Shared by the transport's own tests and the commands' hostile tests."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable

from rocket_rebalance.remoting import FrameDecoder, RemotingCommand, encode

__all__ = ["Handler", "ScriptedServer"]

Handler = Callable[[RemotingCommand], RemotingCommand | None]


class ScriptedServer:
    """A loopback server that decodes frames and answers each request with ``handler`` (None: no answer); with
    ``tls``, every connection is a TLS server connection (a failed handshake just ends it). ``port`` 0 is any
    free one; a given one lets a test bring a server up where clients failed to connect before."""

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None, port: int = 0) -> None:
        self.handler = handler
        self.tls = tls
        self.listener = socket.create_server(("127.0.0.1", port))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.received: list[RemotingCommand] = []
        self.connections: list[socket.socket] = []
        self.accepted = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections.append(conn)
                self.accepted += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        if self.tls is not None:
            try:
                conn = self.tls.wrap_socket(conn, server_side=True)
            except OSError:  # ssl.SSLError included: the client refused us, or we refused it
                conn.close()
                return
            with self._lock:
                self.connections.append(conn)
        decoder = FrameDecoder()
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                return
            if not data:
                return
            for command in decoder.feed(data):
                with self._lock:
                    self.received.append(command)
                if command.is_response:
                    continue
                answer = self.handler(command)
                if answer is not None:
                    try:
                        conn.sendall(encode(answer))
                    except OSError:
                        return

    def push(self, command: RemotingCommand) -> None:
        """Send a request of the server's own to the latest client connection."""
        with self._lock:
            conn = self.connections[-1]
        conn.sendall(encode(command))

    def wait_for(self, condition: Callable[[list[RemotingCommand]], bool], timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if condition(list(self.received)):
                    return
            time.sleep(0.01)
        raise AssertionError("the server did not receive what was expected")

    def close(self) -> None:
        self.listener.close()
        with self._lock:
            for conn in self.connections:
                conn.close()
