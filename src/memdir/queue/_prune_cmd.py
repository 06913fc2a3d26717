"""What ``memdir queue prune`` removes, until the scheduled pruning lands beside it.

The command is written against :func:`prune` and :class:`PruneReport` only, so it can be
pointed at the fuller pruning (consumed messages included) by changing one import. Here:
run rows committed longer ago than ``older_than``, and extract jobs that ended that long
ago (succeeded, failed, cancelled, aborted; with their events and recorded failure
reasons). Pending turns, running or queued jobs, and messages are never touched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from memdir.queue._app import EXTRACT_TASK

__all__ = ["PruneReport", "prune"]


@dataclass(frozen=True, kw_only=True)
class PruneReport:
    """How many rows a prune removed (or, with ``dry_run``, would remove), per table."""

    removed: dict[str, int]
    older_than_seconds: float
    dry_run: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "removed": self.removed,
            "older_than_seconds": self.older_than_seconds,
            "dry_run": self.dry_run,
        }


_FINISHED_JOBS = (
    "DELETE FROM procrastinate_jobs j WHERE j.task_name = %(task)s "
    "AND j.status IN ('succeeded', 'failed', 'cancelled', 'aborted') "
    "AND COALESCE((SELECT max(e.at) FROM procrastinate_events e WHERE e.job_id = j.id), "
    "'-infinity') < clock_timestamp() - %(age)s * interval '1 second'"
)


def prune(dsn: str, *, older_than: float, dry_run: bool = False) -> PruneReport:
    """Remove what is older than ``older_than`` seconds (one transaction)."""
    with psycopg.connect(dsn) as conn, conn.transaction():
        params = {"task": EXTRACT_TASK, "age": older_than}
        runs = conn.execute(
            "DELETE FROM memdir_runs "
            "WHERE committed_at < clock_timestamp() - %(age)s * interval '1 second'",
            params,
        ).rowcount
        jobs = conn.execute(_FINISHED_JOBS, params).rowcount
        removed = {"memdir_runs": runs, "procrastinate_jobs": jobs}
        if dry_run:
            raise psycopg.Rollback
    return PruneReport(removed=removed, older_than_seconds=older_than, dry_run=dry_run)
