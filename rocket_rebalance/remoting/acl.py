"""RocketMQ ACL request signing, as the Java client's ``AclClientRPCHook`` (rocketmq-client 5.3.3) signs.

A secured broker (ACL 1.0, or ACL 2.0's authentication) reads three header fields of every request: ``AccessKey``,
the optional ``SecurityToken`` and ``Signature``. The signature is HmacSHA1, keyed with the secret key's UTF-8
bytes, over the values of every other header field, concatenated in the order of their keys as Java's ``TreeMap``
sorts them (UTF-16 code units, not code points: the two differ for characters beyond U+FFFF), encoded in UTF-8,
followed by the body's bytes; Base64. The broker recomputes it from the fields it received, so the fields must be
signed exactly as they are sent: signing is the last thing done to a request.

The secret key never leaves :class:`AclCredentials`: its ``repr`` and ``str`` show the access key only, because a
credentials object ends up in tracebacks, ``describe()`` output and log lines.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from rocket_rebalance.remoting.frame import RemotingCommand

__all__ = ["ACCESS_KEY", "SECURITY_TOKEN", "SIGNATURE", "AclCredentials", "sign", "signature"]

ACCESS_KEY = "AccessKey"
SECURITY_TOKEN = "SecurityToken"
SIGNATURE = "Signature"


@dataclass(frozen=True)
class AclCredentials:
    """An access key and its secret (and, for temporary credentials, a security token), as Java's
    ``SessionCredentials``. Blank keys are refused here: the Java client would silently not sign at all."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("access_key", "secret_key"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a str, got {type(value).__name__}")
            if not value.strip():
                raise ValueError(f"{name} must not be blank")
        if self.security_token is not None and not isinstance(self.security_token, str):
            raise TypeError(f"security_token must be a str or None, got {type(self.security_token).__name__}")

    def __str__(self) -> str:
        return f"access key {self.access_key}"


def _java_order(key: str) -> bytes:
    """A key as Java's ``String.compareTo`` orders it: by UTF-16 code units."""
    return key.encode("utf-16-be", "surrogatepass")


def signature(fields: Mapping[str, str], body: bytes, secret_key: str) -> str:
    """The Base64 HmacSHA1 signature of a request's header ``fields`` (any ``Signature`` among them is left out)
    and ``body``, keyed with ``secret_key``."""
    content = "".join(fields[key] for key in sorted(fields, key=_java_order) if key != SIGNATURE)
    digest = hmac.new(secret_key.encode("utf-8"), content.encode("utf-8") + body, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def sign(command: RemotingCommand, credentials: AclCredentials) -> RemotingCommand:
    """``command`` with ``AccessKey`` (and ``SecurityToken``) added to its header fields and then ``Signature``
    over all of them and the body, as ``AclClientRPCHook.doBeforeRequest`` does."""
    ext = dict(command.ext)
    ext[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        ext[SECURITY_TOKEN] = credentials.security_token
    ext[SIGNATURE] = signature(ext, command.body, credentials.secret_key)
    return replace(command, ext=ext)
