"""Remoting connections on an asyncio event loop: the twin of :mod:`.connection`, on the loop's streams.

An :class:`AsyncConnection` is one ``asyncio.open_connection`` stream pair, upgraded to TLS in place
(``StreamWriter.start_tls``) when the pool has a TLS context, and read by one task of its own. What it does above
the socket is :class:`~.connection.Multiplexer`'s, shared with the threaded connection: requests waiting by opaque,
the first bytes checked for another protocol, frames decoded and told apart, the end that fails what waits, and
the wording of every error. What differs is how waiting is done: a request's answer is a future of the loop, and
its deadline one of the loop's timers (``call_later``), cancelled when the answer comes; a request past its deadline
fails with ``DEADLINE_EXCEEDED`` and closes the connection, as Java's client does.

No reader here waits for a writer (issue 37 froze the threaded one so): a write is put in the loop transport's
buffer at once, and only the request's caller awaits ``drain``; the records TLS makes while reading (asyncio's
SSL protocol runs over memory buffers too) go to that buffer as well, and each connection has its own reader task.
A server that stops reading only makes the buffer wait, until a request's deadline closes the connection.

A request whose caller is cancelled while it waits keeps its place in the table until its answer comes, which is
then dropped without a word (its future is cancelled already), or until its deadline; so a late answer neither
breaks the connection nor is taken for an answer no request asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable

from rocket_rebalance.remoting import RemotingCommand, encode
from rocket_rebalance.runtime.transport import TransportError
from rocket_rebalance.runtime.transport.connection import Multiplexer, Pending, cannot_connect, split_host_port
from rocket_rebalance.runtime.transport.tls import TlsClient, closed_in_handshake, handshake_failure

__all__ = ["AsyncConnection"]

log = logging.getLogger("rocket_rebalance.runtime.remoting")


def _settle(future: asyncio.Future[RemotingCommand], result: RemotingCommand | TransportError) -> None:
    """Give ``future`` its answer or failure; one whose caller was cancelled drops it."""
    if future.done():
        return
    if isinstance(result, TransportError):
        future.set_exception(result)
    else:
        future.set_result(result)


class AsyncConnection(Multiplexer):
    """A live connection to ``address`` on the running loop, read by its own task (:attr:`task`); create it with
    :meth:`open`. ``on_request`` and ``on_close`` are called on the loop, by the reader, and must return at once."""

    def __init__(
        self,
        address: str,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        on_request: Callable[[AsyncConnection, RemotingCommand], None],
        on_close: Callable[[AsyncConnection, TransportError], None],
        tls: bool,
    ) -> None:
        super().__init__(address, tls)
        self._reader = reader
        self._writer = writer
        self._on_request = on_request
        self._on_close = on_close
        self._loop = asyncio.get_running_loop()
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self.task = self._loop.create_task(self._read(), name=f"rr-remoting-read {address}")

    @classmethod
    async def open(
        cls,
        address: str,
        connect_timeout: float,
        on_request: Callable[[AsyncConnection, RemotingCommand], None],
        on_close: Callable[[AsyncConnection, TransportError], None],
        tls: TlsClient | None = None,
        peer: str = "the server",
    ) -> AsyncConnection:
        """Connect to ``address`` within ``connect_timeout``, then (with ``tls``) do the TLS handshake within as
        long again; ``peer`` names the server in the handshake's errors, which are those of the threaded
        connection (:func:`~.tls.handshake_failure`)."""
        host, port = split_host_port(address)
        try:
            async with asyncio.timeout(connect_timeout):
                reader, writer = await asyncio.open_connection(host, port)
        except OSError as error:  # TimeoutError included
            raise cannot_connect(address, error) from None
        try:
            if tls is not None:
                await cls._handshake(writer, address, peer, tls, connect_timeout)
        except BaseException:
            writer.transport.abort()
            raise
        return cls(address, reader, writer, on_request, on_close, tls is not None)

    @staticmethod
    async def _handshake(writer: asyncio.StreamWriter, address: str, peer: str, tls: TlsClient, timeout: float) -> None:
        host = address.rpartition(":")[0].strip("[]")
        try:
            async with asyncio.timeout(timeout):
                await writer.start_tls(tls.context, server_hostname=host, ssl_handshake_timeout=timeout)
        except (ssl.SSLError, TimeoutError) as error:
            raise handshake_failure(error, address, peer, tls, timeout) from None
        except (ConnectionError, EOFError):  # the server hung up in the middle: a plaintext one, or it refused us
            raise closed_in_handshake(address, peer) from None
        except OSError as error:
            raise handshake_failure(error, address, peer, tls, timeout) from None

    # ------------------------------------------------------------------ writing

    async def request(self, name: str, command: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send ``command`` and await its answer: a :class:`TransportError` when there is none in ``timeout``
        seconds (``DEADLINE_EXCEEDED``) or the connection ends first (``UNAVAILABLE``)."""
        future: asyncio.Future[RemotingCommand] = self._loop.create_future()
        numbered = self._register(name, command, timeout, lambda result: _settle(future, result))
        if numbered is not None:
            self._timers[numbered.opaque] = self._loop.call_later(timeout, self._expire_one, numbered.opaque)
            try:
                self._write(numbered)
            except TransportError as error:
                self._write_failed(numbered.opaque, error)
        try:
            with contextlib.suppress(OSError):  # the connection closed: the future says why
                await self._writer.drain()  # a peer that reads slowly slows the writer, as in the threaded runtime
            return await future
        except asyncio.CancelledError:
            future.cancel()  # its answer, if it comes, is dropped
            raise

    def send(self, command: RemotingCommand) -> None:
        """Write a oneway request or a response (nothing is awaited)."""
        self._write(command)

    def _write(self, command: RemotingCommand) -> None:
        if self._closed:
            raise TransportError("connection closed", "UNAVAILABLE")
        self._writer.write(encode(command))

    # ------------------------------------------------------------------ reading and deadlines

    async def _read(self) -> None:
        """The connection's reader: every chunk to :meth:`_received` until the end, which closes the connection;
        nothing it meets ends it silently."""
        try:
            while not self._closed:
                try:
                    chunk = await self._reader.read(1 << 16)
                except OSError as error:  # ssl.SSLError and a reset included
                    self._close(TransportError(f"connection to {self.address} failed: {error}", "UNAVAILABLE"))
                    return
                if not chunk:
                    self._close(self._closed_by_peer())
                    return
                self._received(chunk)
        except asyncio.CancelledError:
            self.close()
            raise
        except Exception as error:  # a reader that died would leave every request waiting until its deadline
            log.exception("the remoting reader of %s failed; closing its connection", self.address)
            self._close(TransportError(f"the reader of {self.address} failed: {error}", "INTERNAL"))

    def _take(self, opaque: int) -> Pending | None:
        timer = self._timers.pop(opaque, None)
        if timer is not None:
            timer.cancel()
        return super()._take(opaque)

    def _expire_one(self, opaque: int) -> None:
        """The deadline of request ``opaque`` has come (a loop timer)."""
        pending = self._take(opaque)
        if pending is not None:
            self._expired([pending])

    def _request_received(self, command: RemotingCommand) -> None:
        self._on_request(self, command)

    # ------------------------------------------------------------------ closing

    def _release(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._writer.transport.abort()  # at once, whatever is unsent: the reader sees the end and returns

    def _ended(self, error: TransportError) -> None:
        self._on_close(self, error)
