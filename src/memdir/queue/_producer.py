"""The host's side: a finished turn becomes pending rows and a wake-up job, atomically.

``on_turn_end`` writes, in one transaction, the messages the turn added (those after the
last one shipped for its session), the session's pending row (the latest turn, its
request parameters when the host gave them) and the directory's ``extract`` job. The
job carries ``lock`` and ``queueing_lock`` = the directory, so PostgreSQL's unique
indexes allow one run in flight and one waiting: a turn that finds a job waiting has
been coalesced into it (its pending row is already there for that job to read), and
finds it without provoking the unique violation (an ERROR in the server's log per turn).
The host's cost is its new messages, never the conversation; it waits on no worker
(short lock and statement timeouts) and says recorded only after a COMMIT it saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from procrastinate.exceptions import ConnectorException
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from memdir.extract import Notify, TurnContext
from memdir.messages import Message
from memdir.messages._native import ConversationReader, MessageTypeError
from memdir.queue._app import EXTRACT_TASK, QUEUE_NAME
from memdir.queue._codec import encode_message, encode_params
from memdir.queue._pool import HostLimits, acquire_pool, release_pool
from memdir.telemetry import Sink, emit

__all__ = ["DEFAULT_SESSION", "NotCommittedError", "QueueExtractor", "TurnRecorded"]

DEFAULT_SESSION = "default"
"""The session of turns whose host gave no ``session_id``."""


@dataclass(frozen=True, kw_only=True)
class TurnRecorded:
    """What recording one turn did."""

    session: str
    shipped: int
    """Messages sent to the database for this turn (the turn's new ones, or all of them
    after a compaction or rewind changed what was shipped before)."""
    enqueued: bool
    """A new job was deferred; False: one was already waiting and takes this turn too."""
    reset: bool = False
    """What was shipped before no longer matched the conversation, so it was replaced."""


class NotCommittedError(Exception):
    """A turn's transaction ended without the server's COMMIT (reported, never raised
    to the host)."""


_PRELUDE = (
    "INSERT INTO memdir_dirs (dir_id) VALUES (%(dir)s) ON CONFLICT DO NOTHING",
    "INSERT INTO memdir_sessions (dir_id, session) VALUES (%(dir)s, %(session)s) "
    "ON CONFLICT DO NOTHING",
)
# Row-locks the session, so two processes reporting one session ship in turn.
_SHIPPED = (
    "SELECT shipped_seq, shipped_uuid FROM memdir_sessions "
    "WHERE dir_id = %(dir)s AND session = %(session)s FOR UPDATE"
)
_RESET = "DELETE FROM memdir_messages WHERE dir_id = %(dir)s AND session = %(session)s"
_INSERT_MESSAGE = (
    "INSERT INTO memdir_messages (dir_id, session, seq, uuid, body) "
    "VALUES (%(dir)s, %(session)s, %(seq)s, %(uuid)s, %(body)s)"
)
_MARK_SHIPPED = (
    "UPDATE memdir_sessions SET shipped_seq = %(seq)s, shipped_uuid = %(uuid)s "
    "WHERE dir_id = %(dir)s AND session = %(session)s"
)
_PENDING = """
INSERT INTO memdir_pending
    (dir_id, session, upto_seq, upto_uuid, params, cwd, host_memory_root, last_request_at)
VALUES (%(dir)s, %(session)s, %(seq)s, %(uuid)s, %(params)s, %(cwd)s, %(root)s, %(sent)s)
ON CONFLICT (dir_id, session) DO UPDATE SET
    upto_seq = excluded.upto_seq,
    upto_uuid = excluded.upto_uuid,
    params = excluded.params,
    cwd = excluded.cwd,
    host_memory_root = excluded.host_memory_root,
    last_request_at = excluded.last_request_at,
    turns = memdir_pending.turns + 1,
    version = memdir_pending.version + 1,
    recorded_at = clock_timestamp()
"""
# The directory's waiting job, row-locked so no worker starts it before this turn
# commits; and whether it waits behind a run of the directory (then nobody needs waking).
_WAITING_JOB = """
SELECT job.id, EXISTS (
    SELECT 1 FROM procrastinate_jobs AS run
    WHERE run.lock = job.lock AND run.status = 'doing'
)
FROM procrastinate_jobs AS job
WHERE job.queueing_lock = %(dir)s AND job.status = 'todo'
FOR UPDATE OF job
"""
# procrastinate's defer, as its procrastinate_defer_jobs_v1 inserts the row (its insert
# triggers notify the workers and log the event), less the error on a waiting job.
_DEFER = """
INSERT INTO procrastinate_jobs (queue_name, task_name, priority, lock, queueing_lock, args)
VALUES (%(queue)s, %(task)s, 0, %(dir)s, %(dir)s, %(args)s)
ON CONFLICT (queueing_lock) WHERE status = 'todo' DO NOTHING
RETURNING id
"""
_NOTIFY = """
SELECT pg_notify('procrastinate_queue_v1#' || %(queue)s, payload),
       pg_notify('procrastinate_any_queue_v1', payload)
FROM (SELECT json_build_object('type', 'job_inserted', 'job_id', %(job)s::bigint)::text
      AS payload) AS message
"""


class _Session:
    """One session as this process has read and shipped it."""

    def __init__(self) -> None:
        self.reader = ConversationReader()
        self.shipped: tuple[int, str | None] | None = None
        """How many messages are in the database and the last one's uuid, as of this
        process's last successful commit; None: not known yet (read it from the row)."""


def _reason(exc: Exception) -> str:
    """What went wrong, in a line: procrastinate wraps the database's own error in a
    bare "Database error.", so that one is given by its cause."""
    if isinstance(exc, ConnectorException) and isinstance(exc.__cause__, Exception):
        exc = exc.__cause__
    return " ".join(str(exc).split())[:200]


def _delta(
    messages: Sequence[Message], length: int, shipped: tuple[int, str | None]
) -> tuple[int, bool]:
    """Where the unshipped messages start, and whether the shipped ones must be replaced."""
    count, last = shipped
    if count == 0:
        return 0, False
    if count <= length and messages[count - 1].uuid == last:
        return count, False
    return 0, True


class QueueExtractor:
    """The queue backend's stand-in for :class:`~memdir.MemoryExtractor` on a host.

    ``on_turn_end`` records the turn and returns once it is committed (one transaction of
    a few statements); the run happens on a worker (``memdir worker``). Like the local
    extractor it never raises for the database and never waits on it for long: a
    failure, or a lock held longer than ``lock_timeout`` (a worker frozen inside its
    commit, say), becomes a ``queue.record_error`` event and a None result, and the
    messages not shipped go with the next turn. A turn is reported recorded only once
    the server has answered its COMMIT.

    It takes the local extractor's calls (``notify``, :meth:`drain`), so a host can
    switch between the two; the notice of memories saved is the worker's
    (``queue.memory_saved`` events), since they are saved there, later.

    The keyword limits (seconds) bound a turn's time: ``lock_timeout`` for each row lock
    waited on, ``statement_timeout`` for each statement, ``connect_timeout`` to get a
    connection; a turn starts no statement after ``record_timeout``. A turn whose rows a
    worker holds gives up after ``lock_timeout``; at worst (a server slow to answer
    everything) one takes ``record_timeout`` plus one ``statement_timeout``. The server
    also ends a host transaction left idle for 10 s (the host process frozen mid-turn),
    so a host never holds a worker up for long either. Connections come from one pool
    per process, DSN and limits, shared by every extractor in it (at most ``pool_size``
    connections, none while idle); :meth:`close` gives this extractor's share back.
    """

    def __init__(
        self,
        dsn: str,
        dir_id: str,
        *,
        sink: Sink | None = None,
        queue: str = QUEUE_NAME,
        memory_root: str | os.PathLike[str] | None = None,
        lock_timeout: float = 0.5,
        statement_timeout: float = 1.0,
        connect_timeout: float = 1.0,
        record_timeout: float = 1.5,
        pool_size: int = 4,
    ) -> None:
        self.dsn = dsn
        self.dir_id = dir_id
        self.memory_root = os.fspath(memory_root) if memory_root is not None else None
        """Where the host agent writes this memory directory when it saves memory itself
        (its Claude-Code-style path, say); None: the host never does."""
        self.sink = sink
        self.queue = queue
        self.record_timeout = record_timeout
        self.limits = HostLimits(
            lock_timeout=lock_timeout,
            statement_timeout=statement_timeout,
            connect_timeout=connect_timeout,
            pool_size=pool_size,
        )
        self._pool: ConnectionPool | None = None
        self._pool_key = (dsn, self.limits)
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()

    # --- recording ----------------------------------------------------------------------

    def on_turn_end(self, turn: TurnContext, notify: Notify | None = None) -> TurnRecorded | None:
        """Record ``turn`` (synchronously); None when it was ignored or not recorded.
        ``notify`` is never called here (see the class)."""
        if turn.is_subagent:
            return None
        started = time.monotonic()
        with self._lock:
            try:
                session, messages, length = self._read(turn)
                pool = self._shared_pool()
                with pool.connection(timeout=self.limits.connect_timeout) as conn:
                    return self._record(conn, turn, session, messages, length, started)
            except MessageTypeError:
                raise
            except Exception as exc:
                self._failed(exc, started)
                return None

    async def aon_turn_end(
        self, turn: TurnContext, notify: Notify | None = None
    ) -> TurnRecorded | None:
        """:meth:`on_turn_end` for async hosts. The turn is recorded on a thread, on the
        same pooled connections as sync hosts use: a pool is then shared by every
        directory and event loop of the process, and the loop never waits on the
        database."""
        if turn.is_subagent:
            return None
        return await asyncio.to_thread(self.on_turn_end, turn, notify)

    def _shared_pool(self) -> ConnectionPool:
        """This extractor's share of the process's pool, for its current ``dsn`` (a host
        may point an extractor elsewhere between turns)."""
        if self._pool is not None and self._pool_key != (self.dsn, self.limits):
            self._release()
        if self._pool is None:
            self._pool = acquire_pool(self.dsn, self.limits)
            self._pool_key = (self.dsn, self.limits)
        return self._pool

    def _release(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            release_pool(*self._pool_key)

    def _record(
        self,
        conn: psycopg.Connection[Any],
        turn: TurnContext,
        session: str,
        messages: Sequence[Message],
        length: int,
        started: float,
    ) -> TurnRecorded:
        """One transaction, spelled out (the connection is in autocommit): nothing but
        the server's own "COMMIT" reply makes the turn recorded, and the shipped cursor
        moves only then."""
        deadline = started + self.record_timeout
        state = self._sessions[session]
        keys = {"dir": self.dir_id, "session": session}
        try:
            self._execute(conn, "BEGIN", None, deadline)
            for statement in _PRELUDE:
                self._execute(conn, statement, keys, deadline)
            shipped = state.shipped
            row = self._execute(conn, _SHIPPED, keys, deadline).fetchone()
            if shipped is None or row is None or (row[0], row[1]) != shipped:
                # Another process shipped this session meanwhile: the database is right.
                shipped = (int(row[0]), row[1]) if row else (0, None)
            start, reset = _delta(messages, length, shipped)
            if reset:
                self._execute(conn, _RESET, keys, deadline)
            rows = self._message_rows(messages, start, length, keys)
            if rows:
                self._execute(conn, _INSERT_MESSAGE, rows, deadline)
            last = messages[length - 1].uuid if length else None
            self._execute(conn, _MARK_SHIPPED, {**keys, "seq": length, "uuid": last}, deadline)
            pending = self._pending_row(turn, keys, length, last)
            self._execute(conn, _PENDING, pending, deadline)
            enqueued = self._wake(conn, deadline)
            reply = self._execute(conn, "COMMIT", None, deadline).statusmessage
            if reply != "COMMIT":
                raise NotCommittedError(f"the server answered {reply!r} to COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):  # broken already: the pool discards it
                if not conn.broken:
                    conn.execute("ROLLBACK")
            raise
        state.shipped = (length, last)
        return self._done(session, length - start, enqueued, reset)

    def _wake(self, conn: psycopg.Connection[Any], deadline: float) -> bool:
        """Make sure a job waits for the directory; True: this turn deferred it.

        Without an error on the server for a coalesced turn: a waiting job is row-locked
        (a worker fetching it skips it until this turn commits, so its run reads this
        turn's pending row), else one is inserted with ``ON CONFLICT DO NOTHING`` on
        procrastinate's queueing-lock index (the insert of another host or of the
        sweeper wins without an error, and the next round locks that job). A job a worker
        took meanwhile is ``doing``, not waiting: the lock finds none and this turn
        defers the next one.
        """
        keys = {
            "dir": self.dir_id,
            "queue": self.queue,
            "task": EXTRACT_TASK,
            "args": Jsonb({"dir_id": self.dir_id}),
        }
        for _ in range(3):
            found = self._execute(conn, _WAITING_JOB, keys, deadline).fetchone()
            if found is not None:
                job_id, behind_a_run = found
                if not behind_a_run:
                    # A worker may have skipped the job while it was locked here: tell
                    # the workers again, on commit, as procrastinate does on an insert.
                    self._execute(conn, _NOTIFY, {**keys, "job": job_id}, deadline)
                return False
            if self._execute(conn, _DEFER, keys, deadline).fetchone() is not None:
                return True
        raise NotCommittedError("the directory's waiting job kept changing hands")

    def _execute(
        self,
        conn: psycopg.Connection[Any],
        statement: str,
        params: dict[str, Any] | list[dict[str, Any]] | None,
        deadline: float,
    ) -> psycopg.Cursor[Any]:
        """Run one step of a turn's transaction; none starts past the deadline."""
        if time.monotonic() > deadline:
            raise TimeoutError(f"recording took over {self.record_timeout:g} s")
        cur = conn.cursor()
        if isinstance(params, list):
            cur.executemany(statement, params)
        else:
            cur.execute(statement, params)
        return cur

    def close(self) -> None:
        """Give back this extractor's share of the process's connection pool (the last
        share closes it). Safe to call twice; a later turn takes a share again."""
        with self._lock:
            self._release()

    async def aclose(self) -> None:
        """:meth:`close` for async hosts."""
        await asyncio.to_thread(self.close)

    def _failed(self, exc: Exception, started: float) -> None:
        """A turn not recorded: its messages go with the next one (the host never sees it)."""
        emit(
            self.sink,
            "queue.record_error",
            error_type=type(exc).__name__,
            reason=_reason(exc),
            duration_ms=int((time.monotonic() - started) * 1000),
        )

    async def drain(self, timeout: float = 60.0) -> None:  # noqa: ASYNC109 (the contract)
        """Nothing to wait for: each turn was committed before ``on_turn_end`` returned."""

    def drain_sync(self, timeout: float = 60.0) -> None:
        """:meth:`drain` for synchronous hosts: returns at once."""

    # --- shared -------------------------------------------------------------------------

    def _read(self, turn: TurnContext) -> tuple[str, Sequence[Message], int]:
        session = turn.session_id or DEFAULT_SESSION
        state = self._sessions.setdefault(session, _Session())
        messages, length = state.reader.read(turn.messages)
        return session, messages, length

    @staticmethod
    def _message_rows(
        messages: Sequence[Message], start: int, length: int, keys: dict[str, str]
    ) -> list[dict[str, Any]]:
        return [
            {
                **keys,
                "seq": index + 1,
                "uuid": messages[index].uuid,
                "body": Jsonb(encode_message(messages[index])),
            }
            for index in range(start, length)
        ]

    def _pending_row(
        self, turn: TurnContext, keys: dict[str, str], length: int, last: str | None
    ) -> dict[str, Any]:
        return {
            **keys,
            "seq": length,
            "uuid": last,
            "params": Jsonb(encode_params(turn.params)) if turn.params is not None else None,
            "cwd": turn.cwd,
            "root": self.memory_root,
            "sent": turn.last_request_at,
        }

    def _done(self, session: str, shipped: int, enqueued: bool, reset: bool) -> TurnRecorded:
        emit(
            self.sink,
            "queue.turn_recorded" if enqueued else "extract.coalesced",
            dir_id=self.dir_id,
            session=session,
            shipped=shipped,
        )
        return TurnRecorded(session=session, shipped=shipped, enqueued=enqueued, reset=reset)
