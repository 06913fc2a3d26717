"""``memdir queue status``: what is queued, running and failed, and why.

Running means running: a job procrastinate still marks ``doing`` whose worker stopped
heart-beating (killed, frozen, cut off by a server restart) is counted *stalled*, not
running, until the sweeper fails it. Every failure and the oldest pending turn carry
their age, so an operator tells a fleet that is behind from one that is stuck.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg

from memdir.queue._app import CONNECT_TIMEOUT, EXTRACT_TASK

__all__ = ["QueueStatus", "queue_status"]

_REASON_CHARS = 160
"""Failures are grouped by the first line of their reason, cut to this length."""


@dataclass(frozen=True, kw_only=True)
class QueueStatus:
    """The queue at one moment."""

    jobs: dict[str, int] = field(default_factory=dict)
    """Extract jobs by procrastinate status (``todo``, ``doing``, ``failed``, …), as
    procrastinate has them: ``doing`` counts stalled jobs too."""
    running: int = 0
    """Extract jobs ``doing`` on a worker that is alive."""
    stalled: int = 0
    """Extract jobs ``doing`` on a worker that is dead or gone: the sweeper fails them
    (their turns are kept and deferred again)."""
    pending_sessions: int = 0
    """Sessions with a turn not yet extracted."""
    pending_dirs: int = 0
    oldest_pending: dict[str, Any] | None = None
    """The pending turn waiting longest: directory, session, ``age_seconds``."""
    workers: list[dict[str, Any]] = field(default_factory=list)
    """Every registered worker: ``id``, ``alive``, ``heartbeat_age_seconds``, ``jobs``
    (extract jobs it holds ``doing``)."""
    running_jobs: list[dict[str, Any]] = field(default_factory=list)
    """Jobs ``doing``, oldest first: ``job_id``, ``dir_id``, ``worker_id``,
    ``age_seconds`` (since it started), ``alive`` (its worker heart-beats)."""
    throughput: dict[str, Any] = field(default_factory=dict)
    """Runs committed in the last ``minutes``: ``runs`` (one per session covered),
    ``dirs``, ``messages`` and ``runs_per_minute``."""
    failures: list[dict[str, Any]] = field(default_factory=list)
    """Failures grouped by reason, most frequent first: ``kind`` (``job`` failed, or
    ``session`` retried with backoff), ``reason``, ``count``, ``newest_age_seconds``,
    ``oldest_age_seconds``."""
    failing: list[dict[str, Any]] = field(default_factory=list)
    """Sessions whose last run failed: directory, session, attempts, the error and
    ``age_seconds`` (since the turn was recorded)."""
    failed_jobs: list[dict[str, Any]] = field(default_factory=list)
    """The most recent failed jobs, newest first: directory, attempts, why (a stalled
    worker, failed by the sweeper, or what the job raised) and ``age_seconds``."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs,
            "running": self.running,
            "stalled": self.stalled,
            "pending_sessions": self.pending_sessions,
            "pending_dirs": self.pending_dirs,
            "oldest_pending": self.oldest_pending,
            "workers": self.workers,
            "running_jobs": self.running_jobs,
            "throughput": self.throughput,
            "failures": self.failures,
            "failing": self.failing,
            "failed_jobs": self.failed_jobs,
        }


def _age(value: Any) -> float | None:
    return None if value is None else round(float(value), 1)


def _reason(text: str | None) -> str:
    if not text:
        return "not recorded"
    first = text.strip().splitlines()[0] if text.strip() else "not recorded"
    return first[:_REASON_CHARS]


def queue_status(
    dsn: str, *, limit: int = 20, stalled_after: float = 30.0, minutes: float = 5.0
) -> QueueStatus:
    """Read the queue's state from the database (one short read-only transaction).

    ``stalled_after``: seconds without a heartbeat after which a worker counts as dead
    (the sweeper's own threshold by default). ``minutes``: the throughput's window.
    """
    with psycopg.connect(dsn, connect_timeout=CONNECT_TIMEOUT) as conn, conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
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
        oldest = conn.execute(
            "SELECT dir_id, session, extract(epoch FROM clock_timestamp() - recorded_at) "
            "FROM memdir_pending ORDER BY recorded_at LIMIT 1"
        ).fetchone()
        workers = [
            {"id": int(i), "alive": bool(alive), "heartbeat_age_seconds": _age(age), "jobs": n}
            for i, alive, age, n in conn.execute(
                "SELECT w.id, w.last_heartbeat > now() - %s * interval '1 second', "
                "extract(epoch FROM now() - w.last_heartbeat), "
                "(SELECT count(*) FROM procrastinate_jobs j WHERE j.worker_id = w.id "
                " AND j.status = 'doing' AND j.task_name = %s) "
                "FROM procrastinate_workers w ORDER BY w.id",
                (stalled_after, EXTRACT_TASK),
            )
        ]
        running_jobs = [
            {
                "job_id": int(i),
                "dir_id": lock,
                "worker_id": worker,
                "age_seconds": _age(age),
                "alive": bool(alive),
            }
            for i, lock, worker, age, alive in conn.execute(
                "SELECT j.id, j.lock, j.worker_id, "
                "extract(epoch FROM now() - (SELECT max(e.at) FROM procrastinate_events e "
                "  WHERE e.job_id = j.id AND e.type = 'started')), "
                "COALESCE(w.last_heartbeat > now() - %s * interval '1 second', false) "
                "FROM procrastinate_jobs j LEFT JOIN procrastinate_workers w "
                "ON w.id = j.worker_id "
                "WHERE j.task_name = %s AND j.status = 'doing' ORDER BY j.id",
                (stalled_after, EXTRACT_TASK),
            )
        ]
        window = conn.execute(
            "SELECT count(*), count(DISTINCT dir_id), COALESCE(sum(to_seq - from_seq + 1), 0) "
            "FROM memdir_runs WHERE committed_at > clock_timestamp() - %s * interval '1 minute'",
            (minutes,),
        ).fetchone()
        failing = [
            {"dir_id": d, "session": s, "attempts": a, "error": e, "age_seconds": _age(age)}
            for d, s, a, e, age in conn.execute(
                "SELECT dir_id, session, attempts, last_error, "
                "extract(epoch FROM clock_timestamp() - recorded_at) FROM memdir_pending "
                "WHERE last_error IS NOT NULL ORDER BY recorded_at DESC LIMIT %s",
                (limit,),
            )
        ]
        failed_rows = conn.execute(
            "SELECT j.id, j.lock, j.attempts, f.reason, "
            "extract(epoch FROM clock_timestamp() - f.failed_at) FROM procrastinate_jobs j "
            "LEFT JOIN memdir_job_failures f ON f.job_id = j.id "
            "WHERE j.task_name = %s AND j.status = 'failed' ORDER BY j.id DESC",
            (EXTRACT_TASK,),
        ).fetchall()
        session_errors = conn.execute(
            "SELECT last_error, extract(epoch FROM clock_timestamp() - recorded_at) "
            "FROM memdir_pending WHERE last_error IS NOT NULL"
        ).fetchall()
    failed_jobs = [
        {
            "job_id": i,
            "dir_id": lock,
            "attempts": a,
            "reason": reason or "not recorded",
            "age_seconds": _age(age),
        }
        for i, lock, a, reason, age in failed_rows[:limit]
    ]
    running = sum(1 for job in running_jobs if job["alive"])
    return QueueStatus(
        jobs=jobs,
        running=running,
        stalled=len(running_jobs) - running,
        pending_sessions=int(counts[0]) if counts else 0,
        pending_dirs=int(counts[1]) if counts else 0,
        oldest_pending=(
            {"dir_id": oldest[0], "session": oldest[1], "age_seconds": _age(oldest[2])}
            if oldest
            else None
        ),
        workers=workers,
        running_jobs=running_jobs[:limit],
        throughput=_throughput(window, minutes),
        failures=_group(
            [("job", reason, age) for _, _, _, reason, age in failed_rows]
            + [("session", error, age) for error, age in session_errors]
        ),
        failing=failing,
        failed_jobs=failed_jobs,
    )


def _throughput(window: Any, minutes: float) -> dict[str, Any]:
    runs, dirs, messages = (int(v) for v in window) if window else (0, 0, 0)
    return {
        "minutes": minutes,
        "runs": runs,
        "dirs": dirs,
        "messages": messages,
        "runs_per_minute": round(runs / minutes, 2) if minutes else 0.0,
    }


def _group(rows: list[tuple[str, str | None, Any]]) -> list[dict[str, Any]]:
    """Failures by (kind, reason's first line), with how many and how old."""
    groups: dict[tuple[str, str], list[float]] = {}
    for kind, reason, age in rows:
        groups.setdefault((kind, _reason(reason)), []).append(float(age or 0.0))
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0][1]))
    return [
        {
            "kind": kind,
            "reason": reason,
            "count": len(ages),
            "newest_age_seconds": _age(min(ages)),
            "oldest_age_seconds": _age(max(ages)),
        }
        for (kind, reason), ages in ordered
    ]
