"""JSON as fastjson 1.x writes it, read and written.

RocketMQ serialises bodies with fastjson, which writes a map with non-string keys without quoting or converting
them: integer keys bare (``{"brokerAddrs":{0:"127.0.0.1:10911"}}``) and object keys as objects
(``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}}``). Neither is JSON, and several bodies a
client reads keep them in 5.3.3 (cluster info, consume stats, consumer running info). :func:`loads` tries the
standard parser first and falls back to a parser that accepts any JSON value as an object key: a number stays a
number, an object becomes a :class:`FrozenJson`, an array a tuple, so every key stays hashable.

:func:`dumps` writes the same dialect, so a Python consumer can answer a broker's GET_CONSUMER_RUNNING_INFO exactly
as a Java client does. Every invalid document is a :class:`ProtocolError` with its position, never a
``RecursionError``: the fallback parser keeps its own stack and refuses nesting deeper than :data:`MAX_DEPTH`. How deep
the standard parser goes before it gives up (and the fallback refuses) depends on the Python: about 1,000 levels on
3.11, 1,500 on 3.12, 10,000 on 3.13.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from rocket_rebalance.model import MessageQueue, java_string_key
from rocket_rebalance.remoting.frame import ProtocolError

__all__ = ["MAX_DEPTH", "FrozenJson", "dumps", "loads", "queue_from_json"]

MAX_DEPTH = 200
"""Deepest nesting :func:`loads` accepts in fastjson's own dialect (standard JSON: what the Python's parser takes);
RocketMQ bodies nest about 5 deep."""


class FrozenJson(Mapping[Any, Any]):
    """An immutable, hashable JSON object: what an object used as a map key parses into.

    Keys keep the order of the document; equality is that of mappings (order-blind, and equal to a ``dict`` with
    the same items), and the hash is order-blind to match. Nested objects and arrays are frozen too.
    """

    __slots__ = ("_items", "_hash")

    def __init__(self, items: Mapping[Any, Any] | Iterable[tuple[Any, Any]] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self._items: dict[Any, Any] = {key: _freeze(value) for key, value in pairs}
        self._hash: int | None = None

    def __getitem__(self, key: Any) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._items.items()))
        return self._hash

    def __repr__(self) -> str:
        return f"FrozenJson({self._items!r})"

    def to_dict(self) -> dict[Any, Any]:
        """A plain, mutable copy: nested frozen objects become dicts and tuples lists."""
        return {key: _thaw(value) for key, value in self._items.items()}


def _freeze(value: Any) -> Any:
    if isinstance(value, FrozenJson):
        return value
    if isinstance(value, Mapping):
        return FrozenJson(value)
    if isinstance(value, list | tuple):
        return tuple(_freeze(item) for item in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, FrozenJson):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_thaw(item) for item in value]
    return value


def queue_from_json(value: object) -> MessageQueue:
    """A ``MessageQueue`` from its JSON object (a dict, or a :class:`FrozenJson` when it was a map key)."""
    if not isinstance(value, Mapping):
        raise ProtocolError(f"a message queue must be an object, got {value!r}")
    try:
        return MessageQueue.from_dict(value)
    except (TypeError, ValueError) as error:
        raise ProtocolError(f"not a message queue: {error}") from None


# ----------------------------------------------------------------------------------------------------------- reading


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# Strings and numbers are read by the standard decoder (it is exact and fast); only containers are parsed here.
_SCALARS = json.JSONDecoder(parse_constant=_reject_constant)
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_MISSING = object()


def _skip(text: str, position: int) -> int:
    match = _WHITESPACE.match(text, position)
    return match.end() if match else position


def loads(text: str | bytes) -> Any:
    """Parse fastjson output; any valid JSON document parses as ``json.loads`` would parse it."""
    if isinstance(text, bytes | bytearray):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ProtocolError(f"JSON is not valid UTF-8: {error}") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return _parse(text)


class _Object:
    """An object being parsed: its items so far and the key waiting for its value."""

    __slots__ = ("items", "key")

    def __init__(self) -> None:
        self.items: dict[Any, Any] = {}
        self.key: Any = _MISSING


def _fail(text: str, position: int, message: str) -> ProtocolError:
    near = text[position : position + 20]
    return ProtocolError(f"invalid JSON at position {position}: {message} (near {near!r})")


def _parse(text: str) -> Any:
    """An explicit-stack parser: containers are pushed and popped, so depth costs no Python recursion."""
    stack: list[_Object | list[Any]] = []
    position = _skip(text, 0)
    while True:
        # A value starts at `position`.
        char = text[position : position + 1]
        value: Any
        if char in ("{", "["):
            if len(stack) >= MAX_DEPTH:
                raise _fail(text, position, f"nesting deeper than {MAX_DEPTH}")
            position = _skip(text, position + 1)
            closing = "}" if char == "{" else "]"
            if text[position : position + 1] != closing:
                stack.append(_Object() if char == "{" else [])
                continue
            position += 1
            value = {} if char == "{" else []
        elif not char:
            raise _fail(text, position, "expected a value, found the end")
        else:
            try:
                value, position = _SCALARS.raw_decode(text, position)
            except ValueError as error:  # JSONDecodeError, or an integer too long to convert
                raise _fail(text, position, f"expected a value ({error})") from None
        # Hand the finished value to the container it belongs to, closing containers as they end.
        while True:
            position = _skip(text, position)
            if not stack:
                if position != len(text):
                    raise _fail(text, position, "extra data after the document")
                return value
            top = stack[-1]
            separator = text[position : position + 1]
            if isinstance(top, list):
                top.append(value)
                closing = "]"
            elif top.key is _MISSING:
                top.key = _freeze(value)
                if separator != ":":
                    raise _fail(text, position, "expected ':' after an object key")
                position = _skip(text, position + 1)
                break
            else:
                top.items[top.key] = value
                top.key = _MISSING
                closing = "}"
            if separator == ",":
                position = _skip(text, position + 1)
                break
            if separator != closing:
                raise _fail(text, position, f"expected ',' or {closing!r}")
            position += 1
            stack.pop()
            value = top if isinstance(top, list) else top.items


# ----------------------------------------------------------------------------------------------------------- writing


def dumps(value: Any) -> str:
    """Write ``value`` as fastjson would: compact, map keys sorted, non-string keys unquoted or as objects.

    Map keys are sorted as fastjson's ``SortField``/``TreeMap`` order them where Java defines an order: strings in
    Java ``String`` order, message queues in ``MessageQueue.compareTo`` order, numbers by value. A
    ``MessageQueue`` (key or value) is written as ``{"brokerName":..,"queueId":..,"topic":..}``. Sets are written
    as sorted arrays, other sequences in order. Only JSON types, mappings, sequences, sets and message queues are
    accepted (a ``TypeError`` otherwise); a NaN or infinite float is a ``ValueError``, as fastjson cannot read it.
    """
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _string(text: str) -> str:
    # Raw UTF-8 like fastjson; a lone surrogate (no UTF-8 form) is escaped instead, as Java would read it back.
    return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", json.dumps(text, ensure_ascii=False))


def _sort_key(key: Any) -> tuple[int, Any]:
    if isinstance(key, bool | int | float):
        return (0, key)
    if isinstance(key, str):
        return (1, java_string_key(key))
    if isinstance(key, MessageQueue):
        return (2, key.sort_key)
    return (3, dumps(key))


def _write(value: Any, parts: list[str]) -> None:
    if value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, int):
        parts.append(str(int(value)))
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value} cannot be written as JSON")
        parts.append(repr(value))
    elif isinstance(value, str):
        parts.append(_string(value))
    elif isinstance(value, MessageQueue):
        _write_object(value.to_dict(), parts)
    elif isinstance(value, Mapping):
        _write_object(value, parts)
    elif isinstance(value, set | frozenset):
        _write_array(sorted(value, key=_sort_key), parts)
    elif isinstance(value, list | tuple):
        _write_array(value, parts)
    else:
        raise TypeError(f"cannot write {type(value).__name__} as JSON: {value!r}")


def _write_array(items: Iterable[Any], parts: list[str]) -> None:
    parts.append("[")
    for index, item in enumerate(items):
        if index:
            parts.append(",")
        _write(item, parts)
    parts.append("]")


def _write_object(items: Mapping[Any, Any], parts: list[str]) -> None:
    parts.append("{")
    for index, key in enumerate(sorted(items, key=_sort_key)):
        if index:
            parts.append(",")
        _write(key, parts)
        parts.append(":")
        _write(items[key], parts)
    parts.append("}")
