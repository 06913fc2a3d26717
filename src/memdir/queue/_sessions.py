"""A job's sessions: reading what the directory has pending (with the messages each run
needs), running one session's turns with memdir's own extractor, and the events a
commit reports.

Functions of what they need (the settings, a way to get a connection), apart from
:class:`~memdir.queue._worker.QueueWorker`, whose module keeps the worker's life and
the job that ties these together.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import psycopg

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.extract._coordinator import Outcome, host_memory_paths, start_after
from memdir.queue._codec import decode_params, model_name
from memdir.queue._commit import Connect
from memdir.queue._copies import SNAPSHOT_PENDING, Pending
from memdir.queue._runs import read_session
from memdir.queue._settings import DirRun, SessionOutcome, WorkerSettings
from memdir.queue._store import FILES_SQL
from memdir.telemetry import CollectingSink, Event, emit

__all__ = ["more_pendings", "read_pendings", "report", "run_session", "take_snapshot"]


def report(
    run: DirRun,
    reports: Sequence[tuple[SessionOutcome, list[Event]]],
    started: float,
    *,
    settings: WorkerSettings,
) -> None:
    """The events of one commit. The runs' own go out only now: on one machine
    extract.run means the memories are on disk, here it means they are committed. A
    refused commit's runs are still reported (their tokens were spent), marked
    discarded."""
    dir_id = run.dir_id
    discarded = {} if run.committed else {"discarded": True}
    for outcome, events in reports:
        for event in events:
            tags = {"dir_id": dir_id, "session": outcome.session, **discarded}
            emit(settings.sink, event.name, **{**event.fields, **tags})
    if not (run.committed or run.conflict):
        return  # a clash: extract.clash said so, and the session runs again
    emit(
        settings.sink,
        "extract.conflict" if run.conflict else "extract.committed",
        dir_id=dir_id,
        generation=run.generation,
        sessions=len(run.sessions),
        failed=sum(1 for o in run.sessions if o.outcome == "failed"),
        files_changed=run.files_changed,
        memories_saved=len(run.memories),
        rows_read=sum(o.rows_read for o in run.sessions),
        duration_ms=int((time.monotonic() - started) * 1000),
        worker=settings.name,
    )
    for path in run.memories:
        emit(
            settings.sink,
            "queue.memory_saved",
            dir_id=dir_id,
            path=path,
            generation=run.generation + 1,
        )


async def take_snapshot(
    dir_id: str, *, config: ExtractConfig, connection: Connect
) -> tuple[int, list[tuple[str, bytes, str, float]], list[Pending], Any]:
    """What the job starts from: the generation, the directory's files and its runnable
    pending rows, in one consistent view, with the database's clock then."""
    async with connection() as conn, conn.transaction():
        # One consistent view of files, generation, cursors and pending rows.
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        head = await (
            await conn.execute(
                "SELECT clock_timestamp(), (SELECT generation FROM memdir_dirs WHERE dir_id = %s)",
                (dir_id,),
            )
        ).fetchone()
        clock, generation = head if head else (None, None)
        files = await (await conn.execute(FILES_SQL, (dir_id,))).fetchall()
        pendings = await read_pendings(conn, dir_id, (), config=config)
    rows = [(path, bytes(content), digest, mtime) for path, content, digest, mtime in files]
    return int(generation or 0), rows, pendings, clock


async def read_pendings(
    conn: psycopg.AsyncConnection[Any],
    dir_id: str,
    skip: Collection[str],
    *,
    config: ExtractConfig,
) -> list[Pending]:
    """The directory's runnable pending rows, but those of the sessions in ``skip``,
    each with the messages its run reads."""
    pendings: list[Pending] = []
    rows = await (await conn.execute(SNAPSHOT_PENDING, (dir_id,))).fetchall()
    for row in rows:
        session, upto, version, turns, attempts, params, cwd, sent = row[:8]
        host_root, cursor_uuid, cursor_seq, since, covered_at = row[8:]
        if session in skip:
            continue
        # The new messages and the context before the cursor a run needs, never the
        # whole conversation (see memdir.queue._runs).
        read = await read_session(
            conn,
            dir_id,
            session,
            cursor_seq=int(cursor_seq),
            cursor_uuid=cursor_uuid,
            upto=int(upto),
            window_tokens=config.window_tokens,
            tool_result_chars=config.tool_result_chars,
        )
        pendings.append(
            Pending(
                dir_id=dir_id,
                session=session,
                upto_seq=int(upto),
                version=int(version),
                turns=int(turns),
                attempts=int(attempts),
                params=params,
                cwd=cwd,
                last_request_at=sent,
                host_memory_root=host_root,
                cursor_uuid=cursor_uuid,
                cursor_seq=int(cursor_seq),
                turns_since_run=int(since),
                covered_at=covered_at,
                read=read,
            )
        )
    return pendings


async def more_pendings(
    dir_id: str,
    generation: int,
    skip: Collection[str],
    *,
    config: ExtractConfig,
    connection: Connect,
) -> list[Pending]:
    """Turns that arrived while the job's runs went on, for sessions not running now
    (``skip``); none when the directory moved past ``generation`` (another worker
    committed: this job's next commit would be refused anyway)."""
    async with connection() as conn, conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        head = await (
            await conn.execute("SELECT generation FROM memdir_dirs WHERE dir_id = %s", (dir_id,))
        ).fetchone()
        if head is None or int(head[0]) != generation:
            return []
        return await read_pendings(conn, dir_id, skip, config=config)


async def run_session(
    root: Path, pending: Pending, *, settings: WorkerSettings
) -> tuple[SessionOutcome, list[Event]]:
    """One session's turns, decided and run by the extractor as one machine does;
    with the events one machine would have emitted, held for the job
    (:meth:`~memdir.queue._worker.QueueWorker.extract`) to send after the commit. What
    happened is read from the returned outcome."""
    messages = pending.messages
    read = pending.read
    start = start_after(messages, pending.cursor_uuid)
    name = model_name(pending.params) if pending.params is not None else None
    model = settings.models(name)
    params = decode_params(pending.params, model) if pending.params is not None else None
    collected = CollectingSink()
    extractor = MemoryExtractor(
        root,
        model,
        settings.config,
        sink=collected,
        # The host saved memory itself when it wrote into *its* memory directory:
        # its paths are on its machine, not in this working copy.
        host_memory=host_memory_paths(pending.host_memory_root, pending.cwd),
    )
    extractor.restore(pending.cursor_uuid, pending.turns_since_run, covered_at=pending.covered_at)
    turn = TurnContext(
        messages=messages,
        params=params,
        cwd=pending.cwd,
        session_id=pending.session,
        last_request_at=pending.last_request_at,
    )
    try:
        # In this task, not a new one: at the deadline the model's call is cancelled
        # where it waits, and unwound before this returns; nothing keeps running.
        async with asyncio.timeout(settings.run_timeout):
            outcome = await extractor.process(turn, turns=pending.turns)
    except TimeoutError:
        # Cancelled: what a run covered before the time ran out still counts.
        end = start_after(messages, extractor.cursor) if extractor.cursor else start
        outcome = Outcome(
            status="ran" if end > start else "failed",
            start=start,
            end=end,
            error="the run did not finish in time",
        )
    events = list(collected.events)
    covered_at = extractor.position.covered_at
    first, before = read.seq_before(start) + 1, read.seq_before(start)
    if outcome.status == "throttled":
        result = SessionOutcome(
            session=pending.session,
            outcome="throttled",
            from_seq=first,
            to_seq=before,
            rows_read=read.rows,
        )
    elif outcome.status == "failed":
        result = SessionOutcome(
            session=pending.session,
            outcome="failed",
            from_seq=first,
            to_seq=before,
            error=outcome.error or "failed",
            rows_read=read.rows,
        )
    else:
        end = outcome.end if outcome.status in ("ran", "skipped") else start
        result = SessionOutcome(
            session=pending.session,
            outcome="skipped" if outcome.status == "skipped" else "ran",
            from_seq=first,
            to_seq=read.seq_before(end),
            # Set when the run was cut short after covering some of the turns.
            error=outcome.error if outcome.status == "ran" else None,
            covered_at=covered_at if covered_at is not None else time.time(),
            rows_read=read.rows,
        )
    return result, events
