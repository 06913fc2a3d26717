"""Reading conversations from files: Claude Code sessions, Anthropic and OpenAI JSON.

:func:`load_transcript` tells the format from the content, not the file name.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from memdir.errors import TranscriptError
from memdir.transcripts._chat import load_chat
from memdir.transcripts._claude_code import is_claude_code_entry, load_claude_code, subagent_files
from memdir.transcripts._types import (
    CacheControlMarker,
    ClaudeCodeRequest,
    SkippedLine,
    Transcript,
    TranscriptFormat,
    host_model,
)

__all__ = [
    "CacheControlMarker",
    "ClaudeCodeRequest",
    "SkippedLine",
    "Transcript",
    "TranscriptFormat",
    "host_model",
    "load_transcript",
]


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise TranscriptError(path, "no such file") from exc
    except IsADirectoryError as exc:
        raise TranscriptError(path, "is a directory, not a transcript file") from exc
    except OSError as exc:
        raise TranscriptError(path, f"cannot read: {exc.strerror or exc}") from exc


def _numbered_lines(data: bytes, skipped: list[SkippedLine]) -> list[tuple[int, str]]:
    lines: list[tuple[int, str]] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            lines.append((number, raw.decode("utf-8")))
        except UnicodeDecodeError:
            skipped.append(SkippedLine(line=number, reason="not UTF-8"))
    return lines


def _first_entry(lines: list[tuple[int, str]]) -> bool:
    """Whether any line decodes to a Claude Code conversation line."""
    for _, text in lines:
        try:
            if is_claude_code_entry(json.loads(text)):
                return True
        except (ValueError, RecursionError):
            continue
    return False


def load_transcript(path: str | os.PathLike[str]) -> Transcript:
    """Read the conversation in ``path``, whatever its format.

    Recognised: a Claude Code session (JSONL), Anthropic Messages JSON and OpenAI Chat
    Completions JSON (a list of messages, or an object with ``messages``). In a JSONL
    session, lines that are not JSON, not objects, of an unknown type or malformed are
    skipped and listed in :attr:`Transcript.skipped` with their line numbers. The
    requests a Claude Code session recorded (2.1.332 and later) are in
    :attr:`Transcript.requests`; :meth:`Transcript.last_main_request` picks the one a
    fork of the main thread would extend.

    Raises :class:`~memdir.errors.TranscriptError`, naming the file (and line, where
    there is one), when the file is missing or unreadable or in no known format.
    """
    file = Path(path).expanduser()
    data = _read(file)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    head = data.lstrip()[:1]
    if head not in (b"[", b"{"):
        what = "an empty file" if not head else "not JSON or JSONL"
        raise TranscriptError(file, f"{what}: no known transcript format")

    payload: object = None
    whole_json = True
    try:
        payload = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        if head == b"[":
            raise TranscriptError(file, "not UTF-8 text") from exc
        whole_json = False
    except json.JSONDecodeError as exc:
        if head == b"[":
            raise TranscriptError(file, f"invalid JSON: {exc.msg}", line=exc.lineno) from exc
        whole_json = False
    except (ValueError, RecursionError) as exc:  # an over-long integer, too deep nesting
        if head == b"[":
            raise TranscriptError(file, f"invalid JSON: {exc}") from exc
        whole_json = False

    if whole_json and not is_claude_code_entry(payload):
        return load_chat(file, payload)

    skipped: list[SkippedLine] = []
    lines = _numbered_lines(data, skipped)
    if not _first_entry(lines):
        raise TranscriptError(
            file, "JSON lines with no Claude Code user, assistant or system entry", line=None
        )
    transcript = load_claude_code(file, lines, skipped)
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
