"""Reading transcript files in bounded memory.

A session file grows for as long as the session lasts and nothing stops another tool, a
sync or a mistake from putting anything at its path. So nothing here reads a file whole
to find its lines: :func:`read_lines` reads fixed-size chunks and hands out one line at a
time, and a line longer than :data:`LINE_MAX_BYTES` is scanned past to the next newline
without being kept (a file with no newline at all is one such line). Only a JSON
document, which has no lines to stream, is read whole, and only up to
:data:`DOCUMENT_MAX_BYTES`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

__all__ = [
    "DOCUMENT_MAX_BYTES",
    "LINE_MAX_BYTES",
    "NotRegularError",
    "Overlong",
    "is_overlong",
    "open_regular",
    "overlong_reason",
    "read_lines",
    "too_big_reason",
]

LINE_MAX_BYTES = 32 * 2**20
"""The longest line kept. 32 MB is the Messages API's request size limit: a longer line
cannot be a message of any request a model was sent, so it is skipped, not read."""

DOCUMENT_MAX_BYTES = 64 * 2**20
"""The largest JSON document (an Anthropic or OpenAI conversation) read whole: the
messages of one request (at most 32 MB, see :data:`LINE_MAX_BYTES`) with room for
indentation. JSONL has no such cap: it is read line by line."""

_CHUNK_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Overlong:
    """A line longer than the cap, skipped: only its length is known."""

    size: int
    """Its length in bytes, without the newline."""


_UNREAD = "skipped unread"


def overlong_reason(size: int, cap: int = LINE_MAX_BYTES) -> str:
    """The one-line reason given for a skipped over-long line."""
    return f"{_mb(size)}, longer than the {_mb(cap)} a line may hold; {_UNREAD}"


def is_overlong(reason: str) -> bool:
    """Whether a skipped line's ``reason`` is :func:`overlong_reason`'s."""
    return reason.endswith(_UNREAD)


def too_big_reason(size: int, cap: int = DOCUMENT_MAX_BYTES) -> str:
    """The one-line refusal of a JSON document over :data:`DOCUMENT_MAX_BYTES`."""
    return (
        f"a JSON document of {_mb(size)}, over the {_mb(cap)} memdir reads whole "
        "(a session in JSON lines has no such limit)"
    )


def _mb(size: int) -> str:
    return f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size:,} bytes"


def read_lines(
    stream: BinaryIO, *, max_line: int = LINE_MAX_BYTES, chunk: int = _CHUNK_BYTES
) -> Iterator[tuple[int, bytes | Overlong]]:
    """The lines of ``stream`` with their numbers (from 1), without their newlines.

    A line longer than ``max_line`` bytes comes as :class:`Overlong`: once it passes the
    cap, its bytes are dropped as they are read, so memory stays within ``max_line`` plus
    one chunk whatever the file holds.
    """
    number = 0
    pending = bytearray()  # the start of the current line, never over max_line
    skipped = -1  # bytes of the current line seen so far once it went over; -1: not over
    while block := stream.read(chunk):
        start = 0
        while (end := block.find(b"\n", start)) >= 0:
            number += 1
            size = (skipped if skipped >= 0 else len(pending)) + end - start
            if skipped >= 0 or size > max_line:
                yield number, Overlong(size)
            elif pending:
                pending += block[start:end]
                yield number, bytes(pending)
            else:
                yield number, block[start:end]
            pending = bytearray()
            skipped = -1
            start = end + 1
        rest = len(block) - start
        if skipped >= 0:
            skipped += rest
        elif len(pending) + rest > max_line:
            skipped = len(pending) + rest
            pending = bytearray()
        else:
            pending += block[start:]
    if skipped >= 0:
        yield number + 1, Overlong(skipped)
    elif pending:
        yield number + 1, bytes(pending)


def open_regular(path: os.PathLike[str] | str) -> tuple[BinaryIO, int]:
    """``path`` opened for reading, with its size, when it is a regular file.

    A named pipe blocks its reader until something writes and a device may never end, so
    the file is opened without blocking and checked before a byte is read. Raises
    :class:`OSError` as ``open`` does, and :class:`NotRegularError` for anything else.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularError(st.st_mode)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), st.st_size
    except BaseException:
        os.close(fd)
        raise


class NotRegularError(Exception):
    """The file opened is not a regular file; :attr:`mode` says what it is."""

    def __init__(self, mode: int) -> None:
        super().__init__(mode)
        self.mode = mode
