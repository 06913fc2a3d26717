"""``memdir queue retry``: run a failed directory's pending turns again, now.

A session that keeps failing is retried with backoff and a job that failed (a stalled
worker, an exception) is kept for ``memdir queue status``; once the operator has fixed
the cause (the provider's key, the model, a full disk) they want the turns run without
waiting for the backoff or the sweeper. Retrying a directory resets its sessions'
attempts and errors, removes its failed jobs (the failure is dealt with; they would
otherwise be listed forever) and queues one job for it at once: the turns themselves
were never consumed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from procrastinate.exceptions import AlreadyEnqueued

from memdir.queue._app import CONNECT_TIMEOUT, EXTRACT_TASK, QUEUE_NAME, make_app

__all__ = ["RetryResult", "failed_dirs", "retry"]


@dataclass(frozen=True, kw_only=True)
class RetryResult:
    """What a retry did (or, with ``dry_run``, would do)."""

    dirs: list[str] = field(default_factory=list)
    """The directories retried."""
    sessions_reset: int = 0
    """Pending sessions whose attempts and error were cleared."""
    jobs_removed: int = 0
    """Failed jobs removed."""
    deferred: int = 0
    """Directories given a new job (the others had one waiting, now due at once)."""
    dry_run: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "dirs": self.dirs,
            "sessions_reset": self.sessions_reset,
            "jobs_removed": self.jobs_removed,
            "deferred": self.deferred,
            "dry_run": self.dry_run,
        }


_FAILED_DIRS = (
    "SELECT lock FROM procrastinate_jobs WHERE task_name = %s AND status = 'failed' "
    "AND lock IS NOT NULL UNION SELECT dir_id FROM memdir_pending "
    "WHERE last_error IS NOT NULL OR parked_version IS NOT NULL"
)


def failed_dirs(dsn: str) -> list[str]:
    """Directories with a failed job or a session whose last run failed."""
    with psycopg.connect(dsn, connect_timeout=CONNECT_TIMEOUT) as conn:
        return sorted(str(d) for (d,) in conn.execute(_FAILED_DIRS, (EXTRACT_TASK,)))


def retry(
    dsn: str,
    dir_ids: Sequence[str] = (),
    *,
    all_failed: bool = False,
    queue: str = QUEUE_NAME,
    dry_run: bool = False,
) -> RetryResult:
    """Retry ``dir_ids`` (and, with ``all_failed``, every failed directory) now; one
    transaction, so a concurrent host's turn either lands before (and runs in the new
    job) or after (and queues behind it)."""
    app = make_app(dsn)
    with psycopg.connect(dsn, connect_timeout=CONNECT_TIMEOUT) as conn, conn.transaction():
        wanted = set(dir_ids)
        if all_failed:
            wanted |= {str(d) for (d,) in conn.execute(_FAILED_DIRS, (EXTRACT_TASK,))}
        dirs = sorted(wanted)
        reset = removed = deferred = 0
        for dir_id in dirs:
            reset += conn.execute(
                "UPDATE memdir_pending SET attempts = 0, last_error = NULL, "
                "parked_version = NULL, parked_at = NULL WHERE dir_id = %s "
                "AND (attempts > 0 OR last_error IS NOT NULL OR parked_version IS NOT NULL)",
                (dir_id,),
            ).rowcount
            removed += conn.execute(
                "DELETE FROM procrastinate_jobs WHERE task_name = %s AND lock = %s "
                "AND status = 'failed'",
                (EXTRACT_TASK, dir_id),
            ).rowcount
            pending = conn.execute(
                "SELECT 1 FROM memdir_pending WHERE dir_id = %s LIMIT 1", (dir_id,)
            ).fetchone()
            if pending is None:
                continue
            # A job waiting out a backoff is due now.
            conn.execute(
                "UPDATE procrastinate_jobs SET scheduled_at = NULL WHERE task_name = %s "
                "AND queueing_lock = %s AND status = 'todo'",
                (EXTRACT_TASK, dir_id),
            )
            deferrer = app.configure_task(
                EXTRACT_TASK, lock=dir_id, queueing_lock=dir_id, queue=queue, connection=conn
            )
            try:
                with conn.transaction():
                    deferrer.defer(dir_id=dir_id)
                deferred += 1
            except AlreadyEnqueued:
                pass
        if dry_run:
            raise psycopg.Rollback  # the counts are what it would do; nothing is kept
    return RetryResult(
        dirs=dirs, sessions_reset=reset, jobs_removed=removed, deferred=deferred, dry_run=dry_run
    )
