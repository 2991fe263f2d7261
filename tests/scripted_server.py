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
        self.connections: list[socket.socket] = []  # each the object that owns its socket (TLS: the wrapped one)
        self.accepted = 0
        self._lock = threading.Lock()
        self._serving: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            server = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            with self._lock:
                self.connections.append(conn)
                self.accepted += 1
                self._serving.append(server)
            server.start()

    def _serve(self, conn: socket.socket) -> None:
        if self.tls is not None:
            # wrapped before the handshake, so that close() reaches the object owning the socket from here on
            conn = self._wrapped(conn, self.tls)
            try:
                conn.do_handshake()
            except OSError:  # ssl.SSLError included: the client refused us, or we refused it
                conn.close()  # only this thread uses it (close() then finds it closed)
                return
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

    def _wrapped(self, conn: socket.socket, tls: ssl.SSLContext) -> ssl.SSLSocket:
        wrapped = tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        with self._lock:
            self.connections[self.connections.index(conn)] = wrapped
        return wrapped

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
        """End every connection and wait for the threads serving them before closing any socket. A socket closed
        while its thread still reads it gives its file number away, and that thread's next write lands in whatever
        the number names next: OpenSSL's alert at the end of the client's stream was found in a subprocess's pipe
        (a later test's ``openssl`` output, unreadable), and could as well reach a new connection."""
        for sock in (self.listener, *self._connections()):
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in accept() or recv() on it
            except OSError:  # never connected, or already ended by the client or a test
                pass
        self._acceptor.join(5)
        with self._lock:
            serving = [thread for thread in self._serving if thread is not threading.current_thread()]
        for server in serving:  # a handler may close the server: its own thread ends once it returns
            server.join(5)
        for sock in (self.listener, *self._connections()):
            sock.close()

    def _connections(self) -> list[socket.socket]:
        with self._lock:
            return list(self.connections)
