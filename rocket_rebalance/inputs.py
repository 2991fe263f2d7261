"""Reading a file a person named on the command line or in the API: a route, a member list, a scenario, an
offsets file. Such a path can be anything: ``/dev/zero`` (endless: reading it whole grows memory by a gigabyte a
second), a FIFO (blocks forever), a folder, or a file far larger than any real input (a ``MemoryError`` traceback).
So only a regular file is read, at most ``limit`` bytes of it, and anything else is one :class:`InputFileError`
naming the path and what is wrong, before a byte is read."""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["MAX_INPUT_BYTES", "InputFileError", "read_input_text"]

MAX_INPUT_BYTES = 64 * 1024 * 1024
"""64 MiB: far above a real route (a few KiB), member list (500,000 client IDs are about 15 MiB), scenario or
offsets file, and far below what this machine's memory would suffer."""


class InputFileError(ValueError):
    """A named input file that is not a regular file, is too large, or cannot be read (one line)."""


def read_input_text(path: Path, what: str, limit: int = MAX_INPUT_BYTES) -> str:
    """The text of ``path`` (UTF-8), refused unless it is a regular file of at most ``limit`` bytes.

    The file is opened without blocking (a FIFO with no writer would otherwise hang the open itself), then checked
    on the open descriptor, so what is checked is what is read. An ``OSError`` of the open itself passes through
    unchanged (it names the path): to some callers a missing file means something (a first start)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise InputFileError(f"{what} {path}: not a regular file")
        if info.st_size > limit:
            raise InputFileError(f"{what} {path}: {info.st_size} bytes, larger than the {limit} bytes an input may be")
        data = b""
        while chunk := os.read(descriptor, limit + 1 - len(data)):  # a file growing meanwhile is cut off, not followed
            data += chunk
            if len(data) > limit:
                break
    finally:
        os.close(descriptor)
    if len(data) > limit:
        raise InputFileError(f"{what} {path}: larger than the {limit} bytes an input may be")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputFileError(f"{what} {path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
