"""TLS for the remoting wire: the client context :class:`~rocket_rebalance.model.TlsSettings` asks for, the
handshake, and the encryption of an established connection.

A connection stays a plain socket read by the pool's one reader (:class:`~.connection.Reactor`); TLS runs over
two memory buffers (``ssl.MemoryBIO``) instead of an ``ssl.SSLSocket``. With a socket wrapper the reader would
have to handle ``SSLWantReadError`` / ``SSLWantWriteError`` on a non-blocking socket and drain what the SSL layer
holds decrypted (``pending()``) though the socket has nothing readable, and writers on other threads would share
one OpenSSL object with the reader, which OpenSSL does not allow. Over memory buffers the reader feeds whatever
bytes the socket gave and takes out every whole record's plaintext at once (:meth:`TlsSession.decrypt`), writers
encrypt under the connection's write lock (:meth:`TlsSession.encrypt`), and one lock around the OpenSSL object
serialises the two; nothing stays behind in the SSL layer and nothing waits on it.

The handshake is done before the connection is handed to the reader, blocking, within the call timeout. Its
failures are one line each, saying what to change: a certificate that does not verify, a server that does not
speak TLS, a server that wants TLS when it is off (told by :class:`~.connection.Connection`).

The client refuses renegotiation (``ssl.OP_NO_RENEGOTIATION``; Python's default context allows it). RocketMQ
never renegotiates, so a server that asks (a TLS 1.2 HelloRequest) is not a broker behaving as one, and a
renegotiation would be a second handshake run by the reader in the middle of the traffic, with records to send
while it reads (issue 37: that once froze the reader). Refused, OpenSSL answers the request with a
``no_renegotiation`` warning alert and reads on; an OpenSSL server then ends the session with a fatal alert,
which the reader reports as the end of that connection (a :class:`TransportError` to what waits on it; the next
request opens a new one), nothing more. This is defence in depth, not the fix: the alert is still a record made
while reading, and such records never make the reader wait (see :class:`~.connection.Connection`).
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from rocket_rebalance.model import TlsSettings
from rocket_rebalance.runtime.transport import TransportError

__all__ = ["TlsClient", "TlsConfigError", "TlsSession", "closed_in_handshake", "handshake_failure", "tls_client"]

log = logging.getLogger("rocket_rebalance.runtime.remoting")

_insecure_warned = threading.Event()  # tls_verify=False is warned about once per process

_CERTIFICATE = b"-----BEGIN CERTIFICATE-----"
_PRIVATE_KEY = b"PRIVATE KEY-----"  # BEGIN PRIVATE KEY, BEGIN RSA/EC/ENCRYPTED PRIVATE KEY
_NOT_TLS = (  # OpenSSL's reasons when a plaintext answer is read as TLS records
    "WRONG_VERSION_NUMBER",
    "RECORD_LAYER_FAILURE",
    "PACKET_LENGTH_TOO_LONG",
    "HTTP_REQUEST",
    "UNKNOWN_PROTOCOL",
)


class TlsConfigError(ValueError):
    """A TLS setting that cannot work (a file missing, not PEM, a key not matching its certificate), in one line
    naming the file; raised when the transport is made, before anything is sent."""


@dataclass(frozen=True)
class TlsClient:
    """A transport's TLS: the context (built once, shared by every connection) and, for error lines, what the
    servers' certificates are checked against."""

    context: ssl.SSLContext
    trust: str
    settings: TlsSettings


def _read(name: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise TlsConfigError(f"TLS {name} {path}: no such file") from None
    except OSError as error:
        raise TlsConfigError(f"TLS {name} {path}: cannot read it ({error.strerror or error})") from None


def _reason(error: ssl.SSLError) -> str:
    return str(error.reason or error.strerror or error).replace("_", " ").lower()


def tls_client(settings: TlsSettings) -> TlsClient:
    """The client context ``settings`` describe (see :class:`~rocket_rebalance.model.TlsSettings`); every file is
    read and checked here, so a bad one fails now, in one line naming it (:class:`TlsConfigError`)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_RENEGOTIATION  # see the module docstring
    context.check_hostname = False  # brokers are reached by the IP they register; see TlsSettings
    if settings.verify:
        context.verify_mode = ssl.CERT_REQUIRED
        if settings.ca_file is not None:
            if _CERTIFICATE not in _read("CA file", settings.ca_file):
                raise TlsConfigError(f"TLS CA file {settings.ca_file} holds no PEM certificate")
            try:
                context.load_verify_locations(cafile=settings.ca_file)
            except ssl.SSLError as error:
                raise TlsConfigError(f"TLS CA file {settings.ca_file}: {_reason(error)}") from None
            trust = settings.ca_file
        else:
            context.load_default_certs()
            trust = "the system's trusted certificates"
    else:
        context.verify_mode = ssl.CERT_NONE
        trust = "nothing (tls_verify=False)"
        if not _insecure_warned.is_set():
            _insecure_warned.set()
            log.warning(
                "TLS without certificate verification (tls_verify=False / --tls-insecure): any server, or anyone "
                "in between, is trusted; give the cluster's CA file instead"
            )
    if settings.cert_file is not None:
        _client_certificate(context, settings.cert_file, settings.key_file)
    return TlsClient(context, trust, settings)


def _client_certificate(context: ssl.SSLContext, cert_file: str, key_file: str | None) -> None:
    if _CERTIFICATE not in _read("certificate file", cert_file):
        raise TlsConfigError(f"TLS certificate file {cert_file} holds no PEM certificate")
    holder = key_file or cert_file
    if _PRIVATE_KEY not in _read("key file", holder):
        raise TlsConfigError(
            f"TLS key file {holder} holds no PEM private key"
            if key_file is not None
            else f"TLS certificate file {cert_file} holds no private key: give the key file (tls_key_file / --tls-key)"
        )
    try:
        context.load_cert_chain(cert_file, key_file)
    except ssl.SSLError as error:
        if "KEY_VALUES_MISMATCH" in str(error):
            raise TlsConfigError(f"TLS key file {holder} does not match the certificate in {cert_file}") from None
        raise TlsConfigError(f"TLS certificate {cert_file} / key {holder}: {_reason(error)}") from None


class TlsSession:
    """One connection's TLS over memory buffers (see the module docstring); made by :meth:`handshake`."""

    def __init__(self, obj: ssl.SSLObject, incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO) -> None:
        self._obj = obj
        self._incoming = incoming
        self._outgoing = outgoing
        self._lock = threading.Lock()

    @classmethod
    def handshake(cls, sock: socket.socket, address: str, peer: str, client: TlsClient, timeout: float) -> TlsSession:
        """The handshake on the connected ``sock`` (blocking, ``timeout`` seconds in all); ``peer`` names the
        server in errors ("the broker", "the name server"). Every failure is a :class:`TransportError` in one
        line: ``FAILED_PRECONDITION`` when a setting must change, ``UNAVAILABLE`` when it may pass by itself."""
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        host = address.rpartition(":")[0].strip("[]")
        obj = client.context.wrap_bio(incoming, outgoing, server_hostname=host)  # no SNI for an IP address
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    obj.do_handshake()
                except ssl.SSLWantReadError:
                    pass
                else:
                    sock.sendall(outgoing.read())  # the client's Finished (TLS 1.3), if still held
                    return cls(obj, incoming, outgoing)
                sock.sendall(outgoing.read())
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                sock.settimeout(left)
                data = sock.recv(1 << 16)
                if not data:
                    raise closed_in_handshake(address, peer)
                incoming.write(data)
        except TransportError:  # an OSError too: said already
            raise
        except (ssl.SSLError, OSError) as error:  # TimeoutError included
            raise handshake_failure(error, address, peer, client, timeout) from None

    def decrypt(self, data: bytes) -> bytes:
        """The plaintext of every whole record that ``data`` completes (b"" when it completes none); the rest of
        a record waits in the buffer for the next bytes. ``ssl.SSLZeroReturnError`` when the server closed TLS,
        ``ssl.SSLError`` when the stream is corrupt."""
        parts: list[bytes] = []
        with self._lock:
            self._incoming.write(data)
            while True:
                try:
                    part = self._obj.read(1 << 16)
                except ssl.SSLWantReadError:
                    break
                if not part:
                    break
                parts.append(part)
        return b"".join(parts)

    def encrypt(self, data: bytes) -> bytes:
        """``data`` as TLS records, after whatever the session had still to send (see :attr:`has_output`); the
        caller writes the result under the connection's write lock, so records leave in the order made."""
        with self._lock:
            if data:
                self._obj.write(data)
            return self._outgoing.read()

    @property
    def has_output(self) -> bool:
        """Reading made records of the session's own to send (a TLS 1.3 key update's answer, an alert, say): they
        leave through :meth:`encrypt`, with no data from the reader when the write lock is free, else before the
        next writer's data (see :class:`~.connection.Connection`: the reader never waits for a writer)."""
        with self._lock:
            return self._outgoing.pending > 0


def handshake_failure(error: OSError, address: str, peer: str, client: TlsClient, timeout: float) -> TransportError:
    """How a TLS handshake with ``peer`` at ``address`` failed, in one line for both runtimes' handshakes:
    ``FAILED_PRECONDITION`` when a setting must change (a certificate that does not verify, a server that does not
    speak TLS), ``UNAVAILABLE`` when it may pass by itself (no answer in ``timeout`` seconds, a reset)."""
    if isinstance(error, ssl.SSLCertVerificationError):
        return TransportError(
            f"{peer} {address}'s certificate did not verify against {client.trust}: {error.verify_message}",
            "FAILED_PRECONDITION",
        )
    if isinstance(error, ssl.SSLError):
        if any(mark in str(error) for mark in _NOT_TLS):
            return TransportError(
                f"{peer} at {address} answered the TLS handshake in plaintext: it does not speak TLS "
                "(turn TLS off for a plaintext cluster)",
                "FAILED_PRECONDITION",
            )
        return TransportError(f"TLS handshake with {peer} at {address} failed: {_reason(error)}", "FAILED_PRECONDITION")
    if isinstance(error, TimeoutError):
        return TransportError(
            f"TLS handshake with {peer} at {address}: no answer in {timeout:g} s (does it speak TLS?)", "UNAVAILABLE"
        )
    return TransportError(f"TLS handshake with {peer} at {address} failed: {error.strerror or error}", "UNAVAILABLE")


def closed_in_handshake(address: str, peer: str) -> TransportError:
    """The server closed the connection during the TLS handshake."""
    return TransportError(
        f"{peer} at {address} closed the connection during the TLS handshake: it does not seem to speak TLS (turn "
        "TLS off for a plaintext cluster), or it refused our client certificate",
        "FAILED_PRECONDITION",
    )
