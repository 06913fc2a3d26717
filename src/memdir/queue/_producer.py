"""The host's side: a finished turn becomes pending rows and a wake-up job, atomically.

``on_turn_end`` writes, in one transaction, the messages the turn added (those after the
last one shipped for its session), the session's pending row (the latest turn, its
request parameters when the host gave them) and the directory's ``extract`` job. The
job carries ``lock`` and ``queueing_lock`` = the directory, so PostgreSQL's unique
indexes allow one run in flight and one waiting: a turn that finds a job waiting has
been coalesced into it (its pending row is already there for that job to read). The
host's cost is its new messages, never the conversation.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import procrastinate
import psycopg
from procrastinate.exceptions import AlreadyEnqueued, ConnectorException
from psycopg.types.json import Jsonb

from memdir.extract import Notify, TurnContext
from memdir.messages import Message
from memdir.messages._native import ConversationReader, MessageTypeError
from memdir.queue._app import EXTRACT_TASK, QUEUE_NAME, make_app
from memdir.queue._codec import encode_message, encode_params
from memdir.telemetry import Sink, emit

__all__ = ["DEFAULT_SESSION", "QueueExtractor", "TurnRecorded"]

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

    ``on_turn_end`` records the turn and returns once it is committed (one round trip of
    a few statements); the run happens on a worker (``memdir worker``). Like the local
    extractor it never raises for the database: a failure becomes a
    ``queue.record_error`` event, and the messages not shipped go with the next turn.
    It takes the local extractor's calls (``notify``, :meth:`drain`), so a host can
    switch between the two; the notice of memories saved is the worker's
    (``queue.memory_saved`` events), since they are saved there, later.
    """

    def __init__(
        self,
        dsn: str,
        dir_id: str,
        *,
        sink: Sink | None = None,
        queue: str = QUEUE_NAME,
        memory_root: str | os.PathLike[str] | None = None,
    ) -> None:
        self.dsn = dsn
        self.dir_id = dir_id
        self.memory_root = os.fspath(memory_root) if memory_root is not None else None
        """Where the host agent writes this memory directory when it saves memory itself
        (its Claude-Code-style path, say); None: the host never does."""
        self.sink = sink
        self.queue = queue
        self._app: procrastinate.App = make_app(dsn)
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._aconn: psycopg.AsyncConnection[Any] | None = None

    # --- sync ---------------------------------------------------------------------------

    def on_turn_end(self, turn: TurnContext, notify: Notify | None = None) -> TurnRecorded | None:
        """Record ``turn`` (synchronously); None when it was ignored or failed.
        ``notify`` is never called here (see the class)."""
        if turn.is_subagent:
            return None
        started = time.monotonic()
        with self._lock:
            try:
                session, messages, length = self._read(turn)
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(self.dsn)
                return self._record_sync(self._conn, turn, session, messages, length)
            except MessageTypeError:
                raise
            except Exception as exc:
                self._drop_connection()
                self._failed(exc, started)
                return None

    def _record_sync(
        self,
        conn: psycopg.Connection[Any],
        turn: TurnContext,
        session: str,
        messages: Sequence[Message],
        length: int,
    ) -> TurnRecorded:
        state = self._sessions[session]
        keys = {"dir": self.dir_id, "session": session}
        with conn.transaction():
            for statement in _PRELUDE:
                conn.execute(statement, keys)
            shipped = state.shipped
            row = conn.execute(_SHIPPED, keys).fetchone()
            if shipped is None or row is None or (row[0], row[1]) != shipped:
                # Another process shipped this session meanwhile: the database is right.
                shipped = (int(row[0]), row[1]) if row else (0, None)
            start, reset = _delta(messages, length, shipped)
            if reset:
                conn.execute(_RESET, keys)
            rows = self._message_rows(messages, start, length, keys)
            if rows:
                with conn.cursor() as cur:
                    cur.executemany(_INSERT_MESSAGE, rows)
            last = messages[length - 1].uuid if length else None
            conn.execute(_MARK_SHIPPED, {**keys, "seq": length, "uuid": last})
            conn.execute(_PENDING, self._pending_row(turn, keys, length, last))
            deferrer = self._deferrer(conn)
            enqueued = True
            try:
                with conn.transaction():
                    deferrer.defer(dir_id=self.dir_id)
            except AlreadyEnqueued:
                enqueued = False
        state.shipped = (length, last)
        return self._done(session, length - start, enqueued, reset)

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception as exc:  # already broken: nothing more to release
                emit(self.sink, "queue.close_error", error_type=type(exc).__name__)

    def close(self) -> None:
        """Close the connection ``on_turn_end`` keeps open."""
        with self._lock:
            self._drop_connection()

    # --- async --------------------------------------------------------------------------

    async def aon_turn_end(
        self, turn: TurnContext, notify: Notify | None = None
    ) -> TurnRecorded | None:
        """:meth:`on_turn_end` for async hosts, on an async connection."""
        if turn.is_subagent:
            return None
        started = time.monotonic()
        try:
            session, messages, length = self._read(turn)
            if self._aconn is None or self._aconn.closed:
                self._aconn = await psycopg.AsyncConnection.connect(self.dsn)
            return await self._record_async(self._aconn, turn, session, messages, length)
        except MessageTypeError:
            raise
        except Exception as exc:
            aconn, self._aconn = self._aconn, None
            if aconn is not None and not aconn.closed:
                await aconn.close()
            self._failed(exc, started)
            return None

    async def _record_async(
        self,
        conn: psycopg.AsyncConnection[Any],
        turn: TurnContext,
        session: str,
        messages: Sequence[Message],
        length: int,
    ) -> TurnRecorded:
        state = self._sessions[session]
        keys = {"dir": self.dir_id, "session": session}
        async with conn.transaction():
            for statement in _PRELUDE:
                await conn.execute(statement, keys)
            shipped = state.shipped
            row = await (await conn.execute(_SHIPPED, keys)).fetchone()
            if shipped is None or row is None or (row[0], row[1]) != shipped:
                shipped = (int(row[0]), row[1]) if row else (0, None)
            start, reset = _delta(messages, length, shipped)
            if reset:
                await conn.execute(_RESET, keys)
            rows = self._message_rows(messages, start, length, keys)
            if rows:
                async with conn.cursor() as cur:
                    await cur.executemany(_INSERT_MESSAGE, rows)
            last = messages[length - 1].uuid if length else None
            await conn.execute(_MARK_SHIPPED, {**keys, "seq": length, "uuid": last})
            await conn.execute(_PENDING, self._pending_row(turn, keys, length, last))
            deferrer = self._deferrer(conn)
            enqueued = True
            try:
                async with conn.transaction():
                    await deferrer.defer_async(dir_id=self.dir_id)
            except AlreadyEnqueued:
                enqueued = False
        state.shipped = (length, last)
        return self._done(session, length - start, enqueued, reset)

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

    async def aclose(self) -> None:
        """Close the connection ``aon_turn_end`` keeps open."""
        aconn, self._aconn = self._aconn, None
        if aconn is not None:
            await aconn.close()

    # --- shared -------------------------------------------------------------------------

    def _read(self, turn: TurnContext) -> tuple[str, Sequence[Message], int]:
        session = turn.session_id or DEFAULT_SESSION
        state = self._sessions.setdefault(session, _Session())
        messages, length = state.reader.read(turn.messages)
        return session, messages, length

    def _deferrer(self, conn: object) -> Any:
        return self._app.configure_task(
            EXTRACT_TASK,
            lock=self.dir_id,
            queueing_lock=self.dir_id,
            queue=self.queue,
            connection=conn,
        )

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
