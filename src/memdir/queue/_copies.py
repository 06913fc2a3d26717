"""A job's working copies: each session's pending row as read (:class:`Pending`), its own
checkout of the directory (:class:`Copy`), where the job's commits stand
(:class:`Commits`), and how one session's changes are rebased onto them and written.

These are the pieces of one job that need no worker: plain data, a checkout in a
scratch folder, and the rebase rule (the index merged by lines, any other file changed
by two sessions a clash). The worker (:mod:`memdir.queue._worker`) drives them.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from memdir.messages import Message
from memdir.queue._runs import RUNNABLE_PENDING, SessionMessages, changed_files, merge_index
from memdir.queue._settings import SessionOutcome
from memdir.queue._store import sha256, write_checkout
from memdir.store import ENTRYPOINT_NAME


@dataclass(frozen=True, kw_only=True)
class Pending:
    dir_id: str
    session: str
    upto_seq: int
    version: int
    turns: int
    attempts: int
    params: Mapping[str, Any] | None
    cwd: str | None
    last_request_at: float | None
    host_memory_root: str | None
    cursor_uuid: str | None
    cursor_seq: int
    turns_since_run: int
    covered_at: float | None
    """When the session's cursor last moved (epoch seconds): memory files changed since
    then, stamped with the session, were written by another agent."""
    read: SessionMessages

    @property
    def messages(self) -> tuple[Message, ...]:
        return self.read.messages

    def uuid_at(self, seq: int) -> str | None:
        """The uuid of the message at ``seq`` among those read (None: none there)."""
        for index, at in enumerate(self.read.seqs):
            if at == seq:
                return self.messages[index].uuid
        return None


SNAPSHOT_PENDING = f"""
SELECT p.session, p.upto_seq, p.version, p.turns,
       CASE WHEN p.parked_version IS NULL THEN p.attempts ELSE 0 END, p.params, p.cwd,
       p.last_request_at, p.host_memory_root,
       s.cursor_uuid, s.cursor_seq, s.turns_since_run, s.covered_at
FROM memdir_pending p JOIN memdir_sessions s USING (dir_id, session)
WHERE p.dir_id = %s AND {RUNNABLE_PENDING} ORDER BY p.session
"""


@dataclass
class Commits:
    """Where a job's commits stand: each session's run commits as soon as it ends, one
    at a time, each fenced by the generation the one before left."""

    generation: int
    files: dict[str, str]
    """What the database holds now, path → sha256: a commit writes what differs."""
    contents: dict[str, tuple[bytes, float]]
    """What the database holds now, path → (content, mtime): a session starting later
    checks this out."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    conflict: bool = False
    db_seconds: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Copy:
    """One session's own working copy: a session's commit carries what *it* wrote, never
    what a session still running has written so far (which would then be committed
    without that session's cursor, and written again when its turns are re-run)."""

    root: Path
    inode: tuple[int, int]
    """(device, inode) of ``root`` at checkout: a copy removed or replaced under a run
    (another process cleaning scratch folders) must not read as every memory deleted."""
    base: dict[str, str]
    """path → sha256 as checked out: what the session changed is what differs."""
    base_contents: dict[str, bytes]
    """The indexes as checked out (the private one, the team's), to merge this session's
    index edits onto newer ones."""

    def intact(self) -> bool:
        try:
            found = os.stat(self.root)
        except OSError:
            return False
        return (found.st_dev, found.st_ino) == self.inode


def check_out(where: Path, dir_id: str, rows: list[tuple[str, bytes, str, float]]) -> Copy:
    """A working copy of ``rows`` (what the database holds now, taken on the event loop:
    a commit may change the job's state while this runs in a thread), for one session."""
    where.mkdir(mode=0o700)
    root = where / "memory"
    root.mkdir(mode=0o700)
    write_checkout(root, dir_id, 0, rows)
    found = os.stat(root)
    return Copy(
        root=root,
        inode=(found.st_dev, found.st_ino),
        base={path: digest for path, _, digest, _ in rows},
        base_contents={path: content for path, content, _, _ in rows if is_index(path)},
    )


CLASH = "clash"


def is_index(path: str) -> bool:
    return posixpath.basename(path) == ENTRYPOINT_NAME


def rebase(copy: Copy, state: Commits) -> list[tuple[str, bytes | None, float]] | str:
    """What one session changed in its copy, onto what the database holds now: a file no
    other commit touched since its checkout goes as it is; the index is merged by lines
    (:func:`~memdir.queue._runs.merge_index`); another file changed by both is a clash
    (``CLASH``): the session's commit is refused and its turns run again."""
    if not copy.intact():
        raise VanishedError
    out: list[tuple[str, bytes | None, float]] = []
    for path, content, mtime in changed_files(copy.root, copy.base):
        committed = state.files.get(path)
        if committed == copy.base.get(path):
            out.append((path, content, mtime))
        elif content is not None and committed == sha256(content):
            continue  # the same bytes are committed already
        elif is_index(path) and content is not None:
            now = state.contents[path][0] if path in state.contents else b""
            merged = merge_index(copy.base_contents.get(path, b""), content, now)
            if sha256(merged) != committed:
                out.append((path, merged, mtime))
        else:
            return CLASH
    if not copy.intact():  # removed while it was being read: what was read is partial
        raise VanishedError
    return out


class VanishedError(Exception):
    """A session's working copy is gone or replaced: its run's writes are unknown."""


def setup_failed(pending: Pending, exc: Exception) -> SessionOutcome:
    """The outcome of a session whose run could not start."""
    return SessionOutcome(
        session=pending.session,
        outcome="failed",
        from_seq=pending.cursor_seq + 1,
        to_seq=pending.cursor_seq,
        error=f"{type(exc).__name__}: {exc}"[:500],
    )


def as_failed(outcome: SessionOutcome, error: str) -> SessionOutcome:
    """``outcome`` turned into a failure that commits nothing."""
    return SessionOutcome(
        session=outcome.session,
        outcome="failed",
        from_seq=outcome.from_seq,
        to_seq=outcome.from_seq - 1,
        error=error,
        rows_read=outcome.rows_read,
    )


async def write_files(
    conn: psycopg.AsyncConnection[Any],
    dir_id: str,
    files: Sequence[tuple[str, bytes | None, float]],
) -> int:
    """Upsert the changed files and delete the removed ones; returns how many."""
    for path, content, mtime in files:
        if content is None:
            await conn.execute(
                "DELETE FROM memdir_files WHERE dir_id = %s AND path = %s", (dir_id, path)
            )
            continue
        await conn.execute(
            "INSERT INTO memdir_files (dir_id, path, content, sha256, mtime) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (dir_id, path) DO UPDATE SET "
            "content = excluded.content, sha256 = excluded.sha256, mtime = excluded.mtime",
            (dir_id, path, content, sha256(content), mtime),
        )
    return len(files)
