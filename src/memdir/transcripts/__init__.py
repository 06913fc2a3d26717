"""Reading conversations from files: Claude Code sessions, Anthropic and OpenAI JSON.

:func:`load_transcript` tells the format from the content, not the file name.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import stat
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import BinaryIO

from memdir.errors import TranscriptError
from memdir.transcripts._chat import load_chat
from memdir.transcripts._claude_code import is_claude_code_entry, load_claude_code, subagent_files
from memdir.transcripts._lines import (
    DOCUMENT_MAX_BYTES,
    LINE_MAX_BYTES,
    NotRegularError,
    Overlong,
    open_regular,
    overlong_reason,
    read_lines,
    too_big_reason,
)
from memdir.transcripts._types import (
    CacheControlMarker,
    ClaudeCodeRequest,
    SkippedLine,
    Transcript,
    TranscriptFormat,
    host_model,
)

__all__ = [
    "DOCUMENT_MAX_BYTES",
    "LINE_MAX_BYTES",
    "CacheControlMarker",
    "ClaudeCodeRequest",
    "SkippedLine",
    "Transcript",
    "TranscriptFormat",
    "host_model",
    "load_transcript",
]


_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


_BOM = b"\xef\xbb\xbf"


def _not_regular(mode: int) -> str:
    """What a file that is not a regular file is, for its one-line refusal."""
    if stat.S_ISDIR(mode):
        return "is a directory, not a transcript file"
    what = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return f"is {what}, not a regular file: a transcript must be a file on disk"


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[tuple[BinaryIO, int]]:
    """``path`` open for reading with its size; it must be a regular file (after links).

    A named pipe or a device fails at once with one line instead of hanging every caller
    (see :func:`~memdir.transcripts._lines.open_regular`).
    """
    try:
        handle, size = open_regular(path)
    except NotRegularError as exc:
        raise TranscriptError(path, _not_regular(exc.mode)) from None
    except FileNotFoundError as exc:
        raise TranscriptError(path, "no such file") from exc
    except IsADirectoryError as exc:
        raise TranscriptError(path, "is a directory, not a transcript file") from exc
    except OSError as exc:
        if path.is_dir():  # Windows refuses to open a folder with a permission error
            raise TranscriptError(path, "is a directory, not a transcript file") from exc
        raise TranscriptError(path, f"cannot read: {exc.strerror or exc}") from exc
    with handle:
        try:
            yield handle, size
        except IsADirectoryError as exc:
            raise TranscriptError(path, "is a directory, not a transcript file") from exc
        except OSError as exc:
            raise TranscriptError(path, f"cannot read: {exc.strerror or exc}") from exc


def _head(handle: BinaryIO) -> bytes:
    """The first byte that is not white space (after a UTF-8 mark), or b"" for none."""
    first = True
    while chunk := handle.read(64 * 1024):
        if first and chunk.startswith(_BOM):
            chunk = chunk[len(_BOM) :]
        first = False
        stripped = chunk.lstrip()
        if stripped:
            return stripped[:1]
    return b""


def _numbered_lines(
    handle: BinaryIO, skipped: list[SkippedLine]
) -> Generator[tuple[int, str], None, None]:
    """The non-blank lines of ``handle`` as text, read a chunk at a time; lines that are
    not UTF-8 or over :data:`LINE_MAX_BYTES` go to ``skipped`` instead."""
    for number, raw in read_lines(handle):
        if isinstance(raw, Overlong):
            skipped.append(SkippedLine(line=number, reason=overlong_reason(raw.size)))
            continue
        if number == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM) :]
        if not raw.strip():
            continue
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError:
            skipped.append(SkippedLine(line=number, reason="not UTF-8"))


def _is_entry(text: str) -> bool:
    try:
        return is_claude_code_entry(json.loads(text))
    except (ValueError, RecursionError):
        return False


def _sniff_lines(handle: BinaryIO) -> tuple[str, object]:
    """What the first lines of a file that starts with ``{`` say it is, reading no more
    than two lines: ``("lines", None)`` when the first is a JSON value and is a Claude Code
    entry or has lines after it; ``("document", value)`` when it is a JSON value alone in
    the file; ``("unknown", None)`` otherwise (a document spread over lines, or none).

    So a session is never read whole just to learn that it is not one JSON document.
    """
    lines = _numbered_lines(handle, [])
    try:
        first = next(lines, None)
        if first is None:
            return "unknown", None
        try:
            value = json.loads(first[1])
        except (ValueError, RecursionError):
            return "unknown", None
        if is_claude_code_entry(value) or next(lines, None) is not None:
            return "lines", None
        return "document", value
    finally:
        lines.close()


def _first_entry(handle: BinaryIO) -> bool:
    """Whether any line decodes to a Claude Code conversation line; usually the first
    does, so this reads little, and never more than one line at a time."""
    return any(_is_entry(text) for _, text in _numbered_lines(handle, []))


def _whole_json(file: Path, handle: BinaryIO, head: bytes) -> tuple[bool, object]:
    """The file read as one JSON document: (True, its value), or (False, None) when it
    is not one (then it may be JSON lines). A file that starts with ``[`` can only be a
    document, so its errors are the file's."""
    data = handle.read()
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    try:
        return True, json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        if head == b"[":
            raise TranscriptError(file, "not UTF-8 text") from exc
    except json.JSONDecodeError as exc:
        if head == b"[":
            raise TranscriptError(file, f"invalid JSON: {exc.msg}", line=exc.lineno) from exc
    except (ValueError, RecursionError) as exc:  # an over-long integer, too deep nesting
        if head == b"[":
            raise TranscriptError(file, f"invalid JSON: {exc}") from exc
    return False, None


def load_transcript(path: str | os.PathLike[str]) -> Transcript:
    """Read the conversation in ``path``, whatever its format.

    Recognised: a Claude Code session (JSONL), Anthropic Messages JSON and OpenAI Chat
    Completions JSON (a list of messages, or an object with ``messages``). In a JSONL
    session, lines that are not JSON, not objects, of an unknown type or malformed are
    skipped and listed in :attr:`Transcript.skipped` with their line numbers. The
    requests a Claude Code session recorded (2.1.332 and later) are in
    :attr:`Transcript.requests`; :meth:`Transcript.last_main_request` picks the one a
    fork of the main thread would extend.

    Memory stays bounded by what the conversation holds, not by the file: JSON lines are
    read a chunk at a time, a line over :data:`LINE_MAX_BYTES` is skipped (and listed)
    without being kept, and a JSON document over :data:`DOCUMENT_MAX_BYTES` is refused.

    Raises :class:`~memdir.errors.TranscriptError`, naming the file (and line, where
    there is one), when the file is missing, unreadable, not a regular file, or in no
    known format.
    """
    file = Path(path).expanduser()
    with _opened(file) as (handle, size):
        head = _head(handle)
        if head not in (b"[", b"{"):
            what = "an empty file" if not head else "not JSON or JSONL"
            raise TranscriptError(file, f"{what}: no known transcript format")
        if head == b"[" and size > DOCUMENT_MAX_BYTES:
            raise TranscriptError(file, too_big_reason(size))
        handle.seek(0)
        kind, payload = _sniff_lines(handle) if head == b"{" else ("unknown", None)
        if kind == "document":
            return load_chat(file, payload)
        if kind == "unknown" and size <= DOCUMENT_MAX_BYTES:
            handle.seek(0)
            whole, payload = _whole_json(file, handle, head)
            if whole and not is_claude_code_entry(payload):
                return load_chat(file, payload)
        handle.seek(0)
        if not _first_entry(handle):
            why = "JSON lines with no Claude Code user, assistant or system entry"
            if size > DOCUMENT_MAX_BYTES:  # it may be a document, too big to be read whole
                why = f"{why}, or {too_big_reason(size)}"
            raise TranscriptError(file, why, line=None)
        handle.seek(0)
        skipped: list[SkippedLine] = []
        transcript = load_claude_code(file, _numbered_lines(handle, skipped), skipped)
    return _with_subagents(transcript)


def _with_subagents(transcript: Transcript) -> Transcript:
    """Add the conversations of the session's subagent files to its sidechains.

    A subagent file that cannot be read is left out: it never costs the main thread.
    """
    sidechains = dict(transcript.sidechains)
    for file in subagent_files(transcript.path):
        try:
            sub = load_transcript(file)
        except TranscriptError:
            continue
        agent = file.stem.removeprefix("agent-")
        if sub.messages and agent not in sidechains:
            sidechains[agent] = sub.messages
    if len(sidechains) == len(transcript.sidechains):
        return transcript
    return dataclasses.replace(transcript, sidechains=sidechains)
