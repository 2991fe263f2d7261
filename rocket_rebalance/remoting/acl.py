"""RocketMQ ACL request signing, as the Java client's ``AclClientRPCHook`` (rocketmq-client 5.3.3) signs.

A secured broker (ACL 1.0, or ACL 2.0's authentication) reads three header fields of every request: ``AccessKey``,
the optional ``SecurityToken`` and ``Signature``. The signature is HmacSHA1, keyed with the secret key's UTF-8
bytes, over the values of every other header field, concatenated in the order of their keys as Java's ``TreeMap``
sorts them (UTF-16 code units, not code points: the two differ for characters beyond U+FFFF), encoded in UTF-8,
followed by the body's bytes; Base64. The broker recomputes it from the fields it received, so the fields must be
signed exactly as they are sent: signing is the last thing done to a request.

The credentials themselves are :class:`rocket_rebalance.model.AclCredentials` (wire-neutral, so code written
against the transport interface can hold them without loading this codec).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import replace

from rocket_rebalance.model import AclCredentials
from rocket_rebalance.remoting.frame import RemotingCommand

__all__ = ["ACCESS_KEY", "SECURITY_TOKEN", "SIGNATURE", "sign", "signature"]

ACCESS_KEY = "AccessKey"
SECURITY_TOKEN = "SecurityToken"
SIGNATURE = "Signature"


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
