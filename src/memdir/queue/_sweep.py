"""The sweeper: fails the jobs of workers that stopped heart-beating and defers a job
for every directory left with pending turns and none waiting.

Apart from the worker because it runs as its own periodic task, and an operator may
run it without a worker; it needs only an open app and a connection string.
"""

from __future__ import annotations

import procrastinate
import psycopg
from procrastinate.exceptions import AlreadyEnqueued

from memdir.queue._app import EXTRACT_TASK, QUEUE_NAME
from memdir.queue._runs import RUNNABLE_PENDING
from memdir.telemetry import Sink, emit

__all__ = ["RECORD_FAILURE", "sweep"]

RECORD_FAILURE = (
    "INSERT INTO memdir_job_failures (job_id, reason) VALUES (%s, %s) "
    "ON CONFLICT (job_id) DO UPDATE SET reason = excluded.reason, failed_at = clock_timestamp()"
)


async def sweep(
    app: procrastinate.App,
    dsn: str,
    *,
    queue: str = QUEUE_NAME,
    stalled_after: float = 30.0,
    sink: Sink | None = None,
    priority: int = 50,
) -> tuple[int, int]:
    """Heal what crashes leave behind; returns (jobs failed, directories re-deferred).

    A job whose worker stopped heart-beating for ``stalled_after`` seconds is marked
    **failed** (retrying it would collide with the queueing lock of the job waiting
    behind it, procrastinate#1446), with why, for ``memdir queue status``; its pending
    rows were never consumed. Then every
    directory with pending rows and no job waiting or running gets one, at ``priority``
    (ahead of ordinary jobs: it has waited already). ``app`` must be open.
    """
    failed = 0
    deferred = 0
    reason = f"stalled: its worker sent no heartbeat for {stalled_after:g} s"
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        for job in await app.job_manager.get_stalled_jobs(
            queue=queue, task_name=EXTRACT_TASK, seconds_since_heartbeat=stalled_after
        ):
            await app.job_manager.finish_job(
                job, status=procrastinate.jobs.Status.FAILED, delete_job=False
            )
            await conn.execute(RECORD_FAILURE, (job.id, reason))
            failed += 1
            emit(sink, "queue.stalled_failed", job_id=job.id, dir_id=job.lock or "")
        rows = await (
            await conn.execute(
                "SELECT DISTINCT p.dir_id FROM memdir_pending p WHERE NOT EXISTS ("
                " SELECT 1 FROM procrastinate_jobs j WHERE j.lock = p.dir_id"
                f" AND j.task_name = %s AND j.status IN ('todo', 'doing')) AND {RUNNABLE_PENDING}",
                (EXTRACT_TASK,),
            )
        ).fetchall()
        for (dir_id,) in rows:
            deferrer = app.configure_task(
                EXTRACT_TASK,
                lock=dir_id,
                queueing_lock=dir_id,
                queue=queue,
                priority=priority,
                connection=conn,
            )
            try:
                async with conn.transaction():
                    await deferrer.defer_async(dir_id=dir_id)
                deferred += 1
                emit(sink, "queue.redeferred", dir_id=dir_id)
            except AlreadyEnqueued:
                pass
    return failed, deferred
