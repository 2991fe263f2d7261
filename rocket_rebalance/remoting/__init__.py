"""RocketMQ's own TCP protocol ("remoting"), as a pure codec: bytes in, objects out.

What Apache RocketMQ 5.3.3 name servers and brokers speak, from the Java sources (``remoting/``, ``common/``):

* :mod:`.frame`: frames and :class:`RemotingCommand` (JSON or binary headers), an incremental
  :class:`FrameDecoder`, and :func:`sniff_non_remoting` to name a server that answers in another protocol.
* :mod:`.codes`: request and response codes, the flag bits.
* :mod:`.headers`: request headers ("extFields") as the Java client fills them; numbers from response headers.
* :mod:`.bodies`: typed JSON bodies (routes, heartbeats, locks, admin answers, consumer running info).
* :mod:`.fastjson`: reading and writing fastjson's non-standard JSON (bare integer and object map keys).
* :mod:`.message`: the stored-message records of a pull response.

Rules: nothing here opens a socket, starts a thread, reads a clock or logs (times are passed in), and the only
imports are the standard library, :mod:`rocket_rebalance.model` and :mod:`rocket_rebalance.route`. Malformed input
raises :class:`ProtocolError` (a ``ValueError``) naming what was wrong, never an ``IndexError``, ``struct.error``,
``UnicodeDecodeError``, JSON error or ``RecursionError``; bad arguments from our own side are ``TypeError`` or
``ValueError``. Field names, value spellings and defaults follow the Java client, because a broker treats a Python
consumer exactly as it treats the Java consumers of the same group.
"""

from __future__ import annotations

from rocket_rebalance.remoting import bodies, fastjson, headers, message
from rocket_rebalance.remoting.codes import RPC_ONEWAY, RPC_TYPE, RequestCode, ResponseCode
from rocket_rebalance.remoting.frame import (
    LANGUAGE_CODES,
    MAX_FRAME_LENGTH,
    SERIALIZE_JSON,
    SERIALIZE_ROCKETMQ,
    VERSION_5_3_3,
    FrameDecoder,
    ProtocolError,
    RemotingCommand,
    decode,
    encode,
    request,
    response_to,
    sniff_non_remoting,
)

__all__ = [
    "LANGUAGE_CODES",
    "MAX_FRAME_LENGTH",
    "RPC_ONEWAY",
    "RPC_TYPE",
    "SERIALIZE_JSON",
    "SERIALIZE_ROCKETMQ",
    "VERSION_5_3_3",
    "FrameDecoder",
    "ProtocolError",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "bodies",
    "decode",
    "encode",
    "fastjson",
    "headers",
    "message",
    "request",
    "response_to",
    "sniff_non_remoting",
]
