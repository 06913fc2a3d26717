"""Keeping the queue's tables the size of the work in flight, not of all work ever done.

Three things grow without end otherwise: the conversations' messages (a run never reads
those its cursor left behind, beyond the context it needs, see
:mod:`memdir.queue._runs`), the audit of committed runs (``memdir_runs``) and finished
procrastinate jobs (failed ones, with their reasons, and succeeded ones a worker was told
to keep). :func:`prune` removes what is older than the operator keeps; workers run it on
a schedule (``WorkerSettings.prune_cron``, ``memdir worker --prune-cron``).

Messages are pruned per session only below what its last committed run read (the start
of its context before the cursor: the next run's starts no earlier), never the host's
system or developer messages (a run reads them wherever they are), and only while the
stored conversation still holds the cursor's message: after a host replaced what it
shipped, the next run reads everything, and nothing of that session is touched until it
has run.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import psycopg

from memdir.queue._app import CONNECT_TIMEOUT, QUEUE_NAME
from memdir.telemetry import Sink, emit

__all__ = ["DAY", "PRUNE_TASK", "PruneResult", "aprune", "prune", "register_prune"]

DAY = 86_400.0
PRUNE_TASK = "memdir.prune"


@dataclass(frozen=True, kw_only=True)
class PruneResult:
    """Rows one prune removed."""

    messages: int = 0
    runs: int = 0
    jobs: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"messages": self.messages, "runs": self.runs, "jobs": self.jobs}


# The sessions with consumed messages to remove, and below which seq. One statement per
# session afterwards, each its own short transaction: a host that replaces a session's
# messages (a compaction) waits at most for that one.
_PRUNABLE = """
SELECT s.dir_id, s.session, LEAST(s.keep_from_seq, s.cursor_seq)
FROM memdir_sessions s
WHERE s.keep_from_seq > 1 AND s.cursor_seq > 1
  AND EXISTS (
      SELECT 1 FROM memdir_messages c
      WHERE c.dir_id = s.dir_id AND c.session = s.session
        AND c.seq = s.cursor_seq AND c.uuid = s.cursor_uuid)
  AND EXISTS (
      SELECT 1 FROM memdir_messages m
      WHERE m.dir_id = s.dir_id AND m.session = s.session
        AND m.seq < LEAST(s.keep_from_seq, s.cursor_seq)
        AND COALESCE(m.body->>'role', '') NOT IN ('system', 'developer'))
"""
# Checked again inside the delete: the session may have moved on, or been replaced by
# its host, since it was listed.
_MESSAGES = """
DELETE FROM memdir_messages m USING memdir_sessions s
WHERE m.dir_id = %(dir)s AND m.session = %(session)s
  AND s.dir_id = m.dir_id AND s.session = m.session
  AND m.seq < %(below)s AND m.seq < LEAST(s.keep_from_seq, s.cursor_seq)
  AND COALESCE(m.body->>'role', '') NOT IN ('system', 'developer')
  AND EXISTS (
      SELECT 1 FROM memdir_messages c
      WHERE c.dir_id = s.dir_id AND c.session = s.session
        AND c.seq = s.cursor_seq AND c.uuid = s.cursor_uuid)
"""
_RUNS = "DELETE FROM memdir_runs WHERE committed_at < clock_timestamp() - %s * interval '1 second'"
# A job's age is its last event's; a job a periodic defer still points at is kept (the
# reference has no cascade).
_JOBS = """
DELETE FROM procrastinate_jobs j
WHERE j.queue_name = %(queue)s
  AND j.status = ANY(%(statuses)s::procrastinate_job_status[])
  AND NOT EXISTS (
      SELECT 1 FROM procrastinate_events e
      WHERE e.job_id = j.id AND e.at >= clock_timestamp() - %(keep)s * interval '1 second')
  AND NOT EXISTS (SELECT 1 FROM procrastinate_periodic_defers d WHERE d.job_id = j.id)
"""
_DONE = ["succeeded", "cancelled", "aborted"]


def _statements(
    keep_runs: float | None,
    keep_jobs: float | None,
    keep_failed_jobs: float | None,
    queue: str,
) -> list[tuple[str, str, Any]]:
    out: list[tuple[str, str, Any]] = []
    if keep_runs is not None:
        out.append(("runs", _RUNS, (keep_runs,)))
    if keep_jobs is not None:
        out.append(("jobs", _JOBS, {"queue": queue, "statuses": _DONE, "keep": keep_jobs}))
    if keep_failed_jobs is not None:
        statuses = ["failed"]
        out.append(
            ("jobs", _JOBS, {"queue": queue, "statuses": statuses, "keep": keep_failed_jobs})
        )
    return out


def _result(counts: list[tuple[str, int]]) -> PruneResult:
    totals = {"messages": 0, "runs": 0, "jobs": 0}
    for kind, count in counts:
        totals[kind] += max(0, count)
    return PruneResult(**totals)


def prune(
    dsn: str,
    *,
    messages: bool = True,
    keep_runs: float | None = 7 * DAY,
    keep_jobs: float | None = DAY,
    keep_failed_jobs: float | None = 7 * DAY,
    queue: str = QUEUE_NAME,
    sink: Sink | None = None,
    dry_run: bool = False,
) -> PruneResult:
    """Remove consumed messages (``messages``), runs committed more than ``keep_runs``
    seconds ago, and the queue's finished jobs older than ``keep_jobs`` (failed ones:
    ``keep_failed_jobs``, their reasons go with them). None keeps that kind for good.
    Each session's messages, the runs and the jobs are each their own transaction, so a
    prune of a large backlog holds no lock for long. ``dry_run`` counts what would go,
    in one transaction rolled back at the end (and reports nothing to ``sink``)."""
    return asyncio.run(
        aprune(
            dsn,
            messages=messages,
            keep_runs=keep_runs,
            keep_jobs=keep_jobs,
            keep_failed_jobs=keep_failed_jobs,
            queue=queue,
            sink=sink,
            dry_run=dry_run,
        )
    )


async def aprune(
    dsn: str,
    *,
    messages: bool = True,
    keep_runs: float | None = 7 * DAY,
    keep_jobs: float | None = DAY,
    keep_failed_jobs: float | None = 7 * DAY,
    queue: str = QUEUE_NAME,
    sink: Sink | None = None,
    dry_run: bool = False,
) -> PruneResult:
    """:func:`prune` for a worker's loop (and the one way both run)."""
    counts: list[tuple[str, int]] = []
    async with await psycopg.AsyncConnection.connect(
        dsn, connect_timeout=CONNECT_TIMEOUT, autocommit=not dry_run
    ) as conn:
        if messages:
            sessions = await (await conn.execute(_PRUNABLE)).fetchall()
            for dir_id, session, below in sessions:
                keys = {"dir": dir_id, "session": session, "below": below}
                counts.append(("messages", (await conn.execute(_MESSAGES, keys)).rowcount))
        for kind, sql, params in _statements(keep_runs, keep_jobs, keep_failed_jobs, queue):
            counts.append((kind, (await conn.execute(sql, params)).rowcount))
        if dry_run:
            await conn.rollback()
    result = _result(counts)
    if not dry_run:
        _report(sink, result)
    return result


def _report(sink: Sink | None, result: PruneResult) -> None:
    emit(sink, "queue.pruned", messages=result.messages, runs=result.runs, jobs=result.jobs)


def register_prune(app: Any, settings: Any) -> None:
    """The prune task on ``app``, deferred by ``settings.prune_cron`` (a
    :class:`~memdir.queue.WorkerSettings`; no schedule when it is None). Its own
    queueing lock: however many workers defer it, one prune waits."""

    async def prune_task(timestamp: int) -> None:
        await aprune(
            settings.dsn,
            keep_runs=settings.keep_runs_seconds,
            keep_jobs=settings.keep_finished_seconds,
            keep_failed_jobs=settings.keep_failed_seconds,
            queue=settings.queue,
            sink=settings.sink,
        )

    task = app.task(name=PRUNE_TASK, queue=settings.queue)(prune_task)
    if settings.prune_cron is not None:
        app.periodic(cron=settings.prune_cron, periodic_id="memdir", queueing_lock=PRUNE_TASK)(task)
