"""What the search index is made of and reads: its hits and pass statistics, the
session files of a project's transcript folder, and the byte-level helpers that let a
pass read only what a transcript added since the last one (a capped reader, the
fingerprints that tell growth from a rewrite)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Literal, TypeAlias

__all__ = [
    "CappedReader",
    "HitKind",
    "IndexStats",
    "SearchHit",
    "SessionMark",
    "digest",
    "fts5_available",
    "is_json",
    "parse_time",
    "read_at",
    "session_files",
]

HitKind: TypeAlias = Literal["turn", "memory"]


@functools.cache
def fts5_available() -> bool:
    """Whether this Python's ``sqlite3`` was built with FTS5 (search needs it)."""
    connection = sqlite3.connect(":memory:")
    try:
        connection.execute("CREATE VIRTUAL TABLE probe USING fts5(text)")
    except sqlite3.OperationalError:
        return False
    finally:
        connection.close()
    return True


@dataclass(frozen=True, kw_only=True)
class SearchHit:
    """One passage that matched a query, with where it was said or saved."""

    kind: HitKind
    """``turn``: said in a session; ``memory``: saved in a memory file."""
    text: str
    """The passage: a turn's text, or a few paragraphs of it (or of the memory)."""
    score: float
    """How well it matched (FTS5's BM25, sign turned so higher is better)."""
    session_id: str | None
    """The session it was said in (the transcript's file name without ``.jsonl``)."""
    uuid: str | None
    """The message's uuid in that session."""
    timestamp: datetime | None
    """When the message was written, or the memory file last saved."""
    role: str | None
    """``user`` or ``assistant`` for a turn; None for a memory."""
    memory_file: str | None
    """For a memory, its path relative to the memory directory (``team/x.md``)."""
    path: Path
    """The transcript or the memory file."""


@dataclass(kw_only=True)
class IndexStats:
    """What one indexing pass did: what it read and what it added."""

    sessions_seen: int = 0
    """Session files looked at."""
    sessions_unchanged: int = 0
    """Sessions passed over unread: same size and modification time as last pass."""
    sessions_updated: int = 0
    """Sessions that had new lines."""
    sessions_reindexed: int = 0
    """Sessions read again from the start: the file was rewritten or cut."""
    lines_read: int = 0
    """Transcript lines read (new ones only, unless the session was re-indexed)."""
    bytes_read: int = 0
    """Transcript bytes read, fingerprints aside."""
    passages_added: int = 0
    """Passages written to the index (turns and memories)."""
    memories_indexed: int = 0
    """Memory files new or changed since the last pass, indexed."""
    memories_removed: int = 0
    """Memory files gone since the last pass, dropped from the index."""
    errors: list[str] = field(default_factory=list)
    """One line for each file that could not be read (it is tried again next pass)."""


def session_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The ``<session>.jsonl`` files directly in ``folder`` (Claude Code's layout for a
    project's sessions), subagent files aside; [] when the folder cannot be listed."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    found = []
    for entry in entries:
        if not entry.name.endswith(".jsonl") or entry.name.startswith("agent-"):
            continue
        with contextlib.suppress(OSError):
            if entry.is_file():
                found.append(Path(entry.path))
    return sorted(found)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_at(handle: BinaryIO, start: int, size: int) -> bytes:
    handle.seek(start)
    return handle.read(size)


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class CappedReader:
    """A binary stream that reads no further than ``limit`` bytes from where it starts,
    so a line being written while the pass reads is left for the next pass."""

    def __init__(self, handle: BinaryIO, limit: int) -> None:
        self._handle = handle
        self._left = limit

    def read(self, size: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        wanted = self._left if size < 0 else min(size, self._left)
        data = self._handle.read(wanted)
        self._left -= len(data)
        return data


@dataclass
class SessionMark:
    offset: int
    last_uuid: str | None
    head: str
    tail: str


def is_json(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return True
