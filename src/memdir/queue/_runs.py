"""What one run reads, how long it may take, and what it leaves when it keeps failing.

A run's cost follows its new work, not the conversation's length: it reads the messages
after the session's cursor and, before the cursor, only what a fresh extractor can look
at — the standalone window (the last quarter of ``window_tokens`` before the new
messages, read here up to the whole of it), the last few stamped user messages its
first-run statistics are seeded from, the start of the turn under way, and the host's
system or developer messages, wherever they are. The cursor is checked against the
stored conversation first: after a host replaced what it shipped (a compaction, a
rewind) the cursor may be gone, and the run reads everything, as before.

A run that does not finish in ``run_timeout`` seconds is cancelled in its own task (the
model's call with it, nothing left running), retried with backoff, and after
``max_attempts`` failed attempts its session is *parked*: its pending row stays (the
turn is never lost) with why in ``last_error``, no job retries it, and the job fails
with that reason (``memdir_job_failures``). A newer turn of the session, or an
operator's ``memdir queue retry``, makes it runnable again.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from memdir.extract._standalone import rendered_tokens
from memdir.messages import Message
from memdir.queue._codec import decode_message
from memdir.queue._store import sha256
from memdir.store._atomic import STATE_DIR_NAME, TEMP_FILE

__all__ = [
    "RUNNABLE_PENDING",
    "SessionMessages",
    "SessionsParkedError",
    "changed_files",
    "failure_reason",
    "merge_index",
    "read_session",
    "unpark",
]

RUNNABLE_PENDING = "(p.parked_version IS NULL OR p.version > p.parked_version)"
"""A pending row (aliased ``p``) some job should run: not parked, or parked before a
newer turn arrived. The sweeper defers jobs only for these."""

GAP_MESSAGES = 11
"""Stamped user messages a fresh extractor seeds its pause statistics from (its
``_SEEDED_GAPS`` gaps need one more message than gaps)."""
BACK_ROWS_CAP = PAGE = 64
"""The most messages before the cursor read for the statistics or the turn's start
alone (the window's tokens are always read in full), and how many are read per step
back from the cursor."""
PINNED_CAP = 16
"""The most system or developer messages read from before the window."""


class SessionsParkedError(Exception):
    """A job's sessions failed ``max_attempts`` times and wait for a newer turn or
    ``memdir queue retry``; raised so that the job ends failed with this reason."""


@dataclass(frozen=True, kw_only=True)
class SessionMessages:
    """The part of a session's conversation a run reads, with each message's seq."""

    messages: tuple[Message, ...]
    seqs: tuple[int, ...]
    rows: int
    """Rows fetched from ``memdir_messages`` (what the run's reading cost)."""
    whole: bool
    """Read from the first message (the cursor was gone, or there was none)."""
    context_from: int = 0
    """The lowest seq read contiguously up to the cursor (system or developer messages
    from further back left out): what a later run can still need starts no earlier;
    0 for a whole read."""

    def seq_before(self, index: int) -> int:
        """The seq of the message before ``index`` (the last one a run ending at ``index``
        covers); for 0, the seq before the first message read."""
        if index > 0:
            return self.seqs[index - 1]
        return self.seqs[0] - 1 if self.seqs else 0


_AT_CURSOR = "SELECT uuid FROM memdir_messages WHERE dir_id = %s AND session = %s AND seq = %s"
_ALL = (
    "SELECT seq, body FROM memdir_messages WHERE dir_id = %s AND session = %s "
    "AND seq <= %s ORDER BY seq"
)
_NEW = (
    "SELECT seq, body FROM memdir_messages WHERE dir_id = %s AND session = %s "
    "AND seq > %s AND seq <= %s ORDER BY seq"
)
_BACK = (
    "SELECT seq, body FROM memdir_messages WHERE dir_id = %s AND session = %s "
    "AND seq <= %s AND body->>'role' NOT IN ('system', 'developer') "
    "ORDER BY seq DESC LIMIT %s"
)
"""A page back from the cursor, without the pinned system or developer messages (read
by ``_PINNED``): pruning keeps those below the context, so a page that counted them
could walk down to seq 1 across a pruned gap and call the read whole."""
_PINNED = (
    "SELECT seq, body FROM memdir_messages WHERE dir_id = %s AND session = %s "
    "AND seq < %s AND body->>'role' IN ('system', 'developer') ORDER BY seq LIMIT %s"
)


def _plain_user(message: Message) -> bool:
    return message.role == "user" and not message.is_tool_result


async def read_session(
    conn: psycopg.AsyncConnection[Any],
    dir_id: str,
    session: str,
    *,
    cursor_seq: int,
    cursor_uuid: str | None,
    upto: int,
    window_tokens: int,
    tool_result_chars: int,
) -> SessionMessages:
    """The messages a run of ``session`` up to ``upto`` reads (module docstring)."""
    keys = (dir_id, session)
    aligned = False
    if cursor_uuid is not None and 0 < cursor_seq <= upto:
        row = await (await conn.execute(_AT_CURSOR, (*keys, cursor_seq))).fetchone()
        aligned = row is not None and row[0] == cursor_uuid
    if not aligned:
        rows = await (await conn.execute(_ALL, (*keys, upto))).fetchall()
        return SessionMessages(
            messages=tuple(decode_message(body) for _, body in rows),
            seqs=tuple(int(seq) for seq, _ in rows),
            rows=len(rows),
            whole=True,
        )
    new_rows = await (await conn.execute(_NEW, (*keys, cursor_seq, upto))).fetchall()
    new = [(int(seq), decode_message(body)) for seq, body in new_rows]
    stamped = sum(1 for _, m in new if _plain_user(m) and m.timestamp is not None)
    back: list[tuple[int, Message]] = []  # newest first
    tokens = 0
    turn_start = False
    below = cursor_seq
    fetched = len(new_rows) + 1  # the cursor's own check
    while below > 0:
        page = await (await conn.execute(_BACK, (*keys, below, PAGE))).fetchall()
        fetched += len(page)
        for seq, body in page:
            message = decode_message(body)
            back.append((int(seq), message))
            tokens += rendered_tokens(message, tool_result_chars)
            if _plain_user(message):
                turn_start = True
                stamped += message.timestamp is not None
        below = int(page[-1][0]) - 1 if len(page) == PAGE else 0
        enough_context = (stamped >= GAP_MESSAGES and turn_start) or len(back) >= BACK_ROWS_CAP
        if tokens >= window_tokens and enough_context:
            break
    back.reverse()
    first = back[0][0] if back else cursor_seq + 1
    pinned: list[tuple[int, Message]] = []
    if first > 1:
        rows = await (await conn.execute(_PINNED, (*keys, first, PINNED_CAP))).fetchall()
        fetched += len(rows)
        pinned = [(int(seq), decode_message(body)) for seq, body in rows]
    read = [*pinned, *back, *new]
    return SessionMessages(
        messages=tuple(m for _, m in read),
        seqs=tuple(seq for seq, _ in read),
        rows=fetched,
        whole=first <= 1,
        context_from=first,
    )


def _files(root: Path) -> Iterator[tuple[str, bytes, float]]:
    """The working copy's files, as :func:`~memdir.queue._store.local_files_with_times`
    reads them, while other sessions' runs may still be writing: their temporary files
    are left out, and a file gone between listing and reading is skipped."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != STATE_DIR_NAME)
        for name in sorted(filenames):
            if TEMP_FILE.fullmatch(name):
                continue
            path = Path(dirpath) / name
            try:
                if path.is_symlink() or not path.is_file():
                    continue
                content = path.read_bytes()
                mtime = path.stat().st_mtime
            except FileNotFoundError:
                continue
            yield path.relative_to(root).as_posix(), content, mtime


def changed_files(root: Path, baseline: Mapping[str, str]) -> list[tuple[str, bytes | None, float]]:
    """What differs in the working copy from ``baseline`` (path → sha256 of what the
    database holds): (path, content, mtime) per written file, (path, None, 0) per
    removed one."""
    seen: set[str] = set()
    out: list[tuple[str, bytes | None, float]] = []
    for path, content, mtime in _files(root):
        seen.add(path)
        if baseline.get(path) != sha256(content):
            out.append((path, content, mtime))
    out.extend((path, None, 0.0) for path in sorted(baseline.keys() - seen))
    return out


def merge_index(base: bytes, mine: bytes, committed: bytes) -> bytes:
    """The index (``MEMORY.md``) a session commits when another session's commit
    changed it since this session's checkout: the committed index with this session's
    own edits applied, line by line (lines it added, appended; lines it removed,
    dropped). The index is one line per memory file, each written with its file, so
    lines are independent: the result lists exactly the committed sessions' memories,
    and never a line for a memory still only in another session's working copy."""
    base_lines = set(base.decode("utf-8", "replace").splitlines())
    mine_lines = mine.decode("utf-8", "replace").splitlines()
    mine_set = set(mine_lines)
    removed = {line for line in base_lines - mine_set if line.strip()}
    out = [
        line for line in committed.decode("utf-8", "replace").splitlines() if line not in removed
    ]
    present = set(out)
    for line in mine_lines:
        if line not in base_lines and line not in present:
            out.append(line)
            present.add(line)
    return ("\n".join(out) + "\n").encode() if out else b""


def failure_reason(session: str, error: str, attempts: int) -> str:
    """Why a session was parked, as ``memdir queue status`` shows it."""
    return f"session {session}: {error} ({attempts} attempts; parked until its next turn)"[:500]


def unpark(dsn: str, dir_id: str | None = None) -> list[str]:
    """Make parked sessions runnable again, from a fresh count of attempts (all of them,
    or one directory's), for ``memdir queue retry``; returns the directories touched.
    Their jobs come from :func:`~memdir.queue.sweep`, or from a defer by the caller."""
    sql = (
        "UPDATE memdir_pending SET parked_version = NULL, parked_at = NULL, attempts = 0 "
        "WHERE parked_version IS NOT NULL"
    )
    params: tuple[str, ...] = ()
    if dir_id is not None:
        sql += " AND dir_id = %s"
        params = (dir_id,)
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(sql + " RETURNING dir_id", params).fetchall()
    return sorted({row[0] for row in rows})
