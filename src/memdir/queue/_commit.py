"""A job's commit path: one session's run, rebased onto the job's earlier commits and
written in one transaction fenced by the directory's generation, with its cursor, audit
row and pending row; and the retry job a failed or clashing session gets.

Functions, not :class:`~memdir.queue._worker.QueueWorker` methods: they need only the
settings, the app (to defer a retry) and a way to get a connection, so the worker's
life and its runs stay in their own module.
"""

from __future__ import annotations

import asyncio
import posixpath
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import procrastinate
import psycopg
from procrastinate.exceptions import AlreadyEnqueued

from memdir.queue._app import EXTRACT_TASK, NOTIFY_CHANNEL
from memdir.queue._copies import (
    Commits,
    Copy,
    Pending,
    VanishedError,
    as_failed,
    rebase,
    write_files,
)
from memdir.queue._runs import failure_reason
from memdir.queue._settings import DirRun, SessionOutcome, WorkerSettings
from memdir.queue._store import sha256
from memdir.store import ENTRYPOINT_NAME
from memdir.telemetry import emit

__all__ = ["Connect", "commit", "commit_session", "defer_retry", "retry_clash"]

Connect = Callable[[], AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]]
"""The worker's connection for one transaction (its pool's while it runs, else a fresh
one with its timeouts)."""


async def commit(
    state: Commits,
    copy: Copy | None,
    pending: Pending,
    outcome: SessionOutcome,
    started_at: Any,
    job_id: int | None,
    *,
    settings: WorkerSettings,
    app: procrastinate.App,
    connection: Connect,
) -> DirRun:
    """One session's run: what it changed in its own working copy, onto what the
    job's earlier commits left (:func:`rebase`), with the session's cursor and
    pending row, fenced by the generation those commits left (the caller holds
    ``state.lock``). A failed run commits no files: its turns run again, and would
    write them again. A working copy that vanished fails the run instead of reading
    as every memory deleted."""
    dir_id = pending.dir_id
    generation = state.generation
    refused = DirRun(
        dir_id=dir_id,
        generation=generation,
        committed=False,
        conflict=True,
        sessions=(outcome,),
    )
    if state.conflict:
        return refused
    files: list[tuple[str, bytes | None, float]] = []
    if copy is not None and outcome.outcome != "failed":
        try:
            rebased = await asyncio.to_thread(rebase, copy, state)
        except VanishedError:
            outcome = as_failed(outcome, "its working copy was removed during the run")
            rebased = []
        if isinstance(rebased, str):
            # Another session of this job changed a file this one changed too:
            # nothing of this run is committed, its turns run again from the
            # committed state (no attempt counted: nothing failed).
            await retry_clash(
                dir_id, pending.session, settings=settings, app=app, connection=connection
            )
            return DirRun(
                dir_id=dir_id, generation=generation, committed=False, sessions=(outcome,)
            )
        files = rebased
    async with connection() as conn, conn.transaction():
        fenced = await (
            await conn.execute(
                "UPDATE memdir_dirs SET generation = generation + 1, updated_at = now() "
                "WHERE dir_id = %s AND generation = %s RETURNING generation",
                (dir_id, generation),
            )
        ).fetchone()
        if fenced is None:
            # Someone committed since the checkout (this worker was presumed dead, or
            # ran beside another): drop everything, the pending rows are untouched.
            state.conflict = True
            return refused
        changed = await write_files(conn, dir_id, files)
        retry_attempt, parked = await commit_session(
            conn, dir_id, generation, pending, outcome, started_at, job_id, settings=settings
        )
        await conn.execute("SELECT pg_notify(%s, %s)", (NOTIFY_CHANNEL, dir_id))
        if retry_attempt:
            await defer_retry(conn, dir_id, retry_attempt, settings=settings, app=app)
    state.generation = generation + 1
    for path, content, mtime in files:
        if content is None:
            state.files.pop(path, None)
            state.contents.pop(path, None)
        else:
            state.files[path] = sha256(content)
            state.contents[path] = (content, mtime)
    return DirRun(
        dir_id=dir_id,
        generation=generation,
        committed=True,
        sessions=(outcome,),
        files_changed=changed,
        memories=tuple(
            path
            for path, content, _ in files
            if content is not None and posixpath.basename(path) != ENTRYPOINT_NAME
        ),
        commits=1,
        parked=(parked,) if parked is not None else (),
    )


async def retry_clash(
    dir_id: str,
    session: str,
    *,
    settings: WorkerSettings,
    app: procrastinate.App,
    connection: Connect,
) -> None:
    """A retry job for a session whose commit clashed with another's."""
    emit(settings.sink, "extract.clash", dir_id=dir_id, session=session)
    async with connection() as conn, conn.transaction():
        await defer_retry(conn, dir_id, 1, settings=settings, app=app)


async def commit_session(
    conn: psycopg.AsyncConnection[Any],
    dir_id: str,
    generation: int,
    pending: Pending,
    outcome: SessionOutcome,
    started_at: Any,
    job_id: int | None,
    *,
    settings: WorkerSettings,
) -> tuple[int, str | None]:
    """Cursors, the run's audit row and the consumed pending row of one session;
    returns the attempt number to retry it with (0: no retry) and, for a session
    parked now, why."""
    keys = (dir_id, pending.session)
    if outcome.outcome == "failed":
        attempts = pending.attempts + 1
        error = outcome.error or "failed"
        if attempts >= settings.max_attempts:
            reason = failure_reason(pending.session, error, attempts)
            # Parked at the version that failed: a turn that arrived meanwhile is
            # new work, and is retried as usual instead.
            parked = await conn.execute(
                "UPDATE memdir_pending SET attempts = %s, last_error = %s, "
                "parked_version = version, parked_at = clock_timestamp() "
                "WHERE dir_id = %s AND session = %s AND version = %s",
                (attempts, reason, *keys, pending.version),
            )
            if parked.rowcount:
                emit(
                    settings.sink,
                    "extract.parked",
                    dir_id=dir_id,
                    session=pending.session,
                    attempts=attempts,
                    reason=reason,
                )
                return 0, reason
        await conn.execute(
            "UPDATE memdir_pending SET attempts = %s, last_error = %s, "
            "parked_version = NULL, parked_at = NULL WHERE dir_id = %s AND session = %s",
            (attempts, error, *keys),
        )
        return attempts, None
    if outcome.outcome == "throttled":
        await conn.execute(
            "UPDATE memdir_sessions SET turns_since_run = turns_since_run + %s "
            "WHERE dir_id = %s AND session = %s",
            (pending.turns, *keys),
        )
    else:
        cursor = pending.uuid_at(outcome.to_seq) if outcome.to_seq else None
        read = pending.read
        # A turn the host covered by saving memory itself is no turn for the throttle,
        # as on one machine: only a run starts the count again. What the next run can
        # need starts no earlier than what this one read (nothing known after a
        # whole read: keep everything).
        await conn.execute(
            "UPDATE memdir_sessions SET cursor_uuid = %s, cursor_seq = %s, "
            "turns_since_run = CASE WHEN %s THEN turns_since_run ELSE 0 END, "
            "covered_at = %s, keep_from_seq = %s WHERE dir_id = %s AND session = %s",
            (
                cursor,
                outcome.to_seq,
                outcome.outcome == "skipped",
                outcome.covered_at,
                0 if read.whole else read.context_from,
                *keys,
            ),
        )
        if outcome.to_seq >= outcome.from_seq:
            await conn.execute(
                "INSERT INTO memdir_runs (dir_id, session, generation, from_seq, to_seq, "
                "outcome, worker, job_id, started_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    *keys,
                    generation + 1,
                    outcome.from_seq,
                    outcome.to_seq,
                    outcome.outcome,
                    settings.name,
                    job_id,
                    started_at,
                ),
            )
    if outcome.outcome == "ran" and outcome.error is not None and outcome.to_seq < pending.upto_seq:
        # Cut short after covering part of its turns (a chunk timed out or failed):
        # the cursor moved, the rest stays pending and is retried.
        await conn.execute(
            "UPDATE memdir_pending SET last_error = %s WHERE dir_id = %s AND session = %s",
            (outcome.error, *keys),
        )
        return 1, None
    # Only the row this run read: a newer turn bumped the version and stays, with
    # the turns it adds.
    deleted = await conn.execute(
        "DELETE FROM memdir_pending WHERE dir_id = %s AND session = %s AND version = %s",
        (*keys, pending.version),
    )
    if deleted.rowcount == 0:
        await conn.execute(
            "UPDATE memdir_pending SET turns = GREATEST(turns - %s, 1), attempts = 0, "
            "last_error = NULL, parked_version = NULL, parked_at = NULL "
            "WHERE dir_id = %s AND session = %s",
            (pending.turns, *keys),
        )
    return 0, None


async def defer_retry(
    conn: psycopg.AsyncConnection[Any],
    dir_id: str,
    attempt: int,
    *,
    settings: WorkerSettings,
    app: procrastinate.App,
) -> None:
    """A new job for a failed session, later: procrastinate's own retry would run into
    the queueing lock of the job a newer turn already queued (procrastinate#1446)."""
    delay = min(settings.backoff_base_seconds * 2 ** (attempt - 1), settings.backoff_max_seconds)
    deferrer = app.configure_task(
        EXTRACT_TASK,
        lock=dir_id,
        queueing_lock=dir_id,
        queue=settings.queue,
        schedule_in={"milliseconds": int(delay * 1000)},
        connection=conn,
    )
    try:
        async with conn.transaction():
            await deferrer.defer_async(dir_id=dir_id, attempt=attempt)
    except AlreadyEnqueued:
        # A newer turn queued a job during the run; it retries the session too, so it
        # waits the same backoff instead of asking a failing provider again at once.
        await conn.execute(
            "UPDATE procrastinate_jobs SET scheduled_at = GREATEST("
            "COALESCE(scheduled_at, clock_timestamp()), "
            "clock_timestamp() + %s * interval '1 second') "
            "WHERE queueing_lock = %s AND status = 'todo' AND task_name = %s",
            (delay, dir_id, EXTRACT_TASK),
        )
    emit(
        settings.sink,
        "extract.retry_deferred",
        dir_id=dir_id,
        attempt=attempt,
        delay_seconds=delay,
    )
