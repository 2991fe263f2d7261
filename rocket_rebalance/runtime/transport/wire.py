"""The wire an address names, opened: ``grpc://host:port`` is the stub over gRPC, ``host:port[;host:port...]`` a
RocketMQ name-server list spoken to in remoting.

Apart from the interface (the package's ``__init__``) because it imports both wires, lazily: the interface
imports none, so each wire can import the interface without an import cycle.
"""

from __future__ import annotations

import importlib.util
import re

from rocket_rebalance.model import AclCredentials, TlsSettings
from rocket_rebalance.runtime.transport import (
    GRPC_SCHEME,
    AdminTransport,
    AsyncTransport,
    StubWireUnavailableError,
)

__all__ = ["open_async_transport", "open_transport", "parse_address", "require_stub_extra"]

_HOST_PORT = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9_.-]+)):(?P<port>[0-9]{1,5})")


def parse_address(address: str) -> tuple[str, list[str]]:
    """Split a name-server address into (wire, ``host:port`` list): ``grpc://host:port`` is the stub over gRPC,
    ``host:port[;host:port...]`` a RocketMQ name-server list spoken to in remoting. Anything else is a
    ``ValueError`` in one line that shows both forms."""
    if not isinstance(address, str):
        raise TypeError(f"a name-server address must be a str, got {type(address).__name__}")
    wire, rest = ("grpc", address[len(GRPC_SCHEME) :]) if address.startswith(GRPC_SCHEME) else ("remoting", address)
    parts = [part.strip() for part in rest.split(";")] if wire == "remoting" else [rest]
    parts = [part for part in parts if part] if wire == "remoting" else parts
    bad = [part for part in parts if not _valid_host_port(part)]
    if not parts or bad:
        shown = bad[0] if bad else address
        raise ValueError(
            f"name-server address {shown!r} is not HOST:PORT: give a RocketMQ name-server list like "
            f"127.0.0.1:9876;127.0.0.2:9876, or grpc://HOST:PORT for nameserver_stub"
        )
    return wire, parts


def _valid_host_port(part: str) -> bool:
    match = _HOST_PORT.fullmatch(part)
    return match is not None and 0 < int(match["port"]) < 65536


def _checked(
    address: str, token: str | None, credentials: AclCredentials | None, tls: TlsSettings | None
) -> tuple[str, list[str]]:
    """The wire and addresses of ``address``, with the options that belong to the other wire refused: ``token`` is
    the stub's shared token, ``credentials`` RocketMQ's ACL keys and ``tls`` RocketMQ's TLS, and each given to the
    wrong wire is refused in one line rather than ignored (a cluster that wants credentials would otherwise refuse
    every request; a TLS setting silently dropped would send in the clear what was meant to be encrypted)."""
    wire, addresses = parse_address(address)
    if wire == "grpc":
        if credentials is not None:
            raise ValueError(
                "RocketMQ ACL credentials (access key, secret key) are for a RocketMQ name server, not "
                "nameserver_stub (grpc://...): use --token for the stub"
            )
        if tls is not None:
            raise ValueError(
                "TLS options (tls, --tls and the --tls-* files) are for a RocketMQ name server, not "
                "nameserver_stub (grpc://...), which this library reaches in plaintext"
            )
    elif token:
        raise ValueError(
            "--token is for nameserver_stub (grpc://...); a RocketMQ cluster takes ACL credentials "
            "(--access-key with --secret-key-file or ROCKETMQ_SECRET_KEY)"
        )
    return wire, addresses


_STUB_EXTRA_MODULES = ("grpc", "grpc_health", "google.protobuf")  # what the `stub` extra installs
_STUB_ADDRESS = "{address} (nameserver_stub's gRPC wire; a RocketMQ name server is HOST:PORT, without grpc://)"


def require_stub_extra(what: str) -> None:
    """Refuse ``what`` (a ``grpc://`` address, the live demo) with :class:`StubWireUnavailableError` unless the
    ``stub`` extra is installed; looked up without importing, so the check loads no grpc."""
    for name in _STUB_EXTRA_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # google.protobuf's parent package is missing too
            found = False
        if not found:
            raise StubWireUnavailableError(what)


def open_transport(
    address: str,
    token: str | None = None,
    timeout: float = 5.0,
    credentials: AclCredentials | None = None,
    tls: TlsSettings | None = None,
) -> AdminTransport:
    """The transport that ``address`` asks for (see :func:`parse_address` and :func:`_checked`)."""
    wire, addresses = _checked(address, token, credentials, tls)
    if wire == "grpc":
        require_stub_extra(_STUB_ADDRESS.format(address=address))
        from rocket_rebalance.runtime.transport.grpc import GrpcTransport

        return GrpcTransport(addresses[0], token=token, timeout=timeout)
    from rocket_rebalance.runtime.transport.remoting import RemotingTransport

    return RemotingTransport(addresses, timeout=timeout, credentials=credentials, tls=tls)


def open_async_transport(
    address: str,
    token: str | None = None,
    timeout: float = 5.0,
    credentials: AclCredentials | None = None,
    tls: TlsSettings | None = None,
) -> AsyncTransport:
    """The asyncio transport that ``address`` asks for, as :func:`open_transport` chooses: RocketMQ's remoting
    protocol on asyncio streams, or ``grpc.aio`` to the stub. It connects lazily, on the loop of its first call."""
    wire, addresses = _checked(address, token, credentials, tls)
    if wire == "grpc":
        require_stub_extra(_STUB_ADDRESS.format(address=address))
        from rocket_rebalance.runtime.transport.grpc_async import AsyncGrpcTransport

        return AsyncGrpcTransport(addresses[0], token=token, timeout=timeout)
    from rocket_rebalance.runtime.transport.remoting_async import AsyncRemotingTransport

    return AsyncRemotingTransport(addresses, timeout=timeout, credentials=credentials, tls=tls)
