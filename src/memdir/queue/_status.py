"""``memdir queue status``: what is queued, running and failed, and why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg

from memdir.queue._app import EXTRACT_TASK

__all__ = ["QueueStatus", "queue_status"]


@dataclass(frozen=True, kw_only=True)
class QueueStatus:
    """The queue at one moment."""

    jobs: dict[str, int] = field(default_factory=dict)
    """Extract jobs by procrastinate status (``todo``, ``doing``, ``failed``, …)."""
    pending_sessions: int = 0
    """Sessions with a turn not yet extracted."""
    pending_dirs: int = 0
    failing: list[dict[str, Any]] = field(default_factory=list)
    """Sessions whose last run failed: directory, session, attempts and the error."""
    failed_jobs: list[dict[str, Any]] = field(default_factory=list)
    """The most recent failed jobs, newest first: directory, attempts and why (a stalled
    worker, failed by the sweeper, or what the job raised)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs,
            "pending_sessions": self.pending_sessions,
            "pending_dirs": self.pending_dirs,
            "failing": self.failing,
            "failed_jobs": self.failed_jobs,
        }


def queue_status(dsn: str, *, limit: int = 20) -> QueueStatus:
    """Read the queue's state from the database (one short read-only transaction)."""
    with psycopg.connect(dsn) as conn, conn.transaction():
        conn.execute("SET TRANSACTION READ ONLY")
        jobs = {
            str(status): int(count)
            for status, count in conn.execute(
                "SELECT status::text, count(*) FROM procrastinate_jobs WHERE task_name = %s "
                "GROUP BY status",
                (EXTRACT_TASK,),
            )
        }
        counts = conn.execute(
            "SELECT count(*), count(DISTINCT dir_id) FROM memdir_pending"
        ).fetchone()
        failing = [
            {"dir_id": d, "session": s, "attempts": a, "error": e}
            for d, s, a, e in conn.execute(
                "SELECT dir_id, session, attempts, last_error FROM memdir_pending "
                "WHERE last_error IS NOT NULL ORDER BY recorded_at DESC LIMIT %s",
                (limit,),
            )
        ]
        failed_jobs = [
            {"job_id": i, "dir_id": lock, "attempts": a, "reason": reason or "not recorded"}
            for i, lock, a, reason in conn.execute(
                "SELECT j.id, j.lock, j.attempts, f.reason FROM procrastinate_jobs j "
                "LEFT JOIN memdir_job_failures f ON f.job_id = j.id "
                "WHERE j.task_name = %s AND j.status = 'failed' ORDER BY j.id DESC LIMIT %s",
                (EXTRACT_TASK, limit),
            )
        ]
    return QueueStatus(
        jobs=jobs,
        pending_sessions=int(counts[0]) if counts else 0,
        pending_dirs=int(counts[1]) if counts else 0,
        failing=failing,
        failed_jobs=failed_jobs,
    )
