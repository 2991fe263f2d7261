"""A pull answer's records as :class:`~rocket_rebalance.runtime.transport.Message` objects: compiled where the
package was built with a C compiler, else the pure codec.

Decoding was the largest part of a draining consumer's time (issue 42's profile: 42 % of the samples holding the
GIL at batch 32, 5 to 7 us a message): a record read field by field into a
:class:`~rocket_rebalance.remoting.message.StoredMessage`, its properties split, then copied into a ``Message``.
The compiled decoder (``_pulled.c``, built into the wheel by ``hatch_build.py``) reads each plain record (V1, IPv4
hosts, sound, neither compressed nor an inner batch: what a pull answer almost always holds) straight into its
``Message`` in one pass, at about a fifth of the cost. When any record of an answer is anything else, it says so
and the whole answer is read here the pure way, which also inflates bodies, splits inner batches and names what is
wrong with a bad record; so for any bytes the two give the same messages or the same error
(``tests/runtime/test_pulled.py`` holds them to that, the damaged and truncated bodies included).

Without a compiler the wheel is pure Python and every answer is read the pure way: the same messages, at the
pure cost. ``ROCKET_REBALANCE_PURE_PYTHON=1`` in the environment makes a consumer ignore a built decoder (to rule
it out, or to measure the difference).
"""

from __future__ import annotations

import os
from types import ModuleType

from rocket_rebalance.model import MessageQueue
from rocket_rebalance.remoting import message
from rocket_rebalance.runtime.transport import Message
from rocket_rebalance.runtime.transport.remoting_wire import stored_message

__all__ = ["PURE_PYTHON_ENV", "PURE_REQUESTED", "compiled", "pulled_messages", "pure_messages"]

PURE_PYTHON_ENV = "ROCKET_REBALANCE_PURE_PYTHON"
PURE_REQUESTED = os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")
"""Whether the environment asks for the pure decoder (``ROCKET_REBALANCE_PURE_PYTHON`` set, not 0)."""


def _compiled() -> ModuleType | None:
    if PURE_REQUESTED:
        return None
    try:
        from rocket_rebalance.runtime.transport import _pulled
    except ImportError:  # built without a C compiler: the pure codec reads every answer
        return None
    return _pulled


compiled = _compiled()
"""The compiled decoder, or None (not built, or ``ROCKET_REBALANCE_PURE_PYTHON`` set)."""


def pulled_messages(mq: MessageQueue, body: bytes) -> tuple[Message, ...]:
    """The messages of a PULL_MESSAGE answer's ``body`` from ``mq``, each inner batch split into its messages; a
    record that cannot be read is a :class:`~rocket_rebalance.remoting.ProtocolError` naming it."""
    if compiled is not None:
        messages: tuple[Message, ...] | None = compiled.plain_messages(body, mq, Message)
        if messages is not None:
            return messages
    return pure_messages(mq, body)


def pure_messages(mq: MessageQueue, body: bytes) -> tuple[Message, ...]:
    """:func:`pulled_messages` by the pure codec alone."""
    stored = message.unwrap_inner_batches(message.decode_messages(body))
    return tuple(stored_message(mq, item) for item in stored)
