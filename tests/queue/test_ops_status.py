"""An operator's tools: ``memdir queue status`` tells live workers from dead ones and
running jobs from stalled ones, with ages, throughput and failures by reason;
``memdir queue retry`` runs failed directories again now; ``memdir queue prune``
removes old rows and only those."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

import psycopg
from click.testing import CliRunner

from memdir._cli._queue import queue_group
from memdir._cli._queue_ops import _duration
from memdir.extract import TurnContext
from memdir.queue import QueueExtractor, queue_status
from tests.queue._helpers import conversation, one

_STALLED = "stalled: its worker sent no heartbeat for 30 s"


def _record(dsn: str, *dirs: str) -> None:
    for dir_id in dirs:
        host = QueueExtractor(dsn, dir_id)
        host.on_turn_end(TurnContext(messages=conversation("s1", 1), session_id="s1"))
        host.close()


def _job(conn: Any, dir_id: str) -> int:
    (job,) = one(
        conn, "SELECT id FROM procrastinate_jobs WHERE lock = %s AND status = 'todo'", (dir_id,)
    )
    return int(job)


def _worker(conn: Any, heartbeat_ago: str) -> int:
    (worker,) = one(
        conn,
        "INSERT INTO procrastinate_workers (last_heartbeat) "
        "VALUES (now() - %s::interval) RETURNING id",
        (heartbeat_ago,),
    )
    return int(worker)


def _take(conn: Any, job: int, worker: int, started_ago: str) -> None:
    conn.execute(
        "UPDATE procrastinate_jobs SET status = 'doing', worker_id = %s WHERE id = %s",
        (worker, job),
    )
    # procrastinate's trigger logged the start; move it back in time.
    conn.execute(
        "UPDATE procrastinate_events SET at = now() - %s::interval "
        "WHERE job_id = %s AND type = 'started'",
        (started_ago, job),
    )


def _fail(conn: Any, job: int, reason: str, ago: str) -> None:
    conn.execute("UPDATE procrastinate_jobs SET status = 'failed' WHERE id = %s", (job,))
    conn.execute(
        "INSERT INTO memdir_job_failures (job_id, reason, failed_at) "
        "VALUES (%s, %s, clock_timestamp() - %s::interval)",
        (job, reason, ago),
    )
    conn.execute(
        "UPDATE procrastinate_events SET at = now() - %s::interval WHERE job_id = %s", (ago, job)
    )


def _fleet(dsn: str) -> None:
    """Two directories running (one on a live worker, one on a dead one), two failed
    the same way, one session failing, one run committed a minute ago."""
    _record(dsn, "run", "dead", "f1", "f2", "slow")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE memdir_pending SET recorded_at = clock_timestamp() - interval '10 minutes' "
            "WHERE dir_id = 'slow'"
        )
        conn.execute(
            "UPDATE memdir_pending SET attempts = 2, last_error = 'overloaded (529)\nmore' "
            "WHERE dir_id = 'slow'"
        )
        alive, dead = _worker(conn, "1 second"), _worker(conn, "1 hour")
        _take(conn, _job(conn, "run"), alive, "40 seconds")
        _take(conn, _job(conn, "dead"), dead, "2 hours")
        _fail(conn, _job(conn, "f1"), _STALLED, "3 hours")
        _fail(conn, _job(conn, "f2"), _STALLED, "5 minutes")
        conn.execute(
            "INSERT INTO memdir_runs (dir_id, session, generation, from_seq, to_seq, outcome, "
            "started_at, committed_at) VALUES ('x', 's', 1, 1, 4, 'ran', now(), "
            "clock_timestamp() - interval '1 minute')"
        )


def test_status_tells_live_from_dead_with_ages(pg_dsn: str) -> None:
    _fleet(pg_dsn)
    status = queue_status(pg_dsn)
    assert status.jobs["doing"] == 2  # procrastinate's own count...
    assert (status.running, status.stalled) == (1, 1)  # ...and what is really running
    assert [w["alive"] for w in status.workers] == [True, False]
    assert [w["jobs"] for w in status.workers] == [1, 1]
    running = {j["dir_id"]: j for j in status.running_jobs}
    assert running["run"]["alive"]
    assert not running["dead"]["alive"]
    assert 39 <= running["run"]["age_seconds"] < 120
    assert running["dead"]["age_seconds"] >= 7200
    assert status.oldest_pending is not None
    assert status.oldest_pending["dir_id"] == "slow"
    assert status.oldest_pending["age_seconds"] >= 600
    assert status.throughput["runs"] == 1
    assert status.throughput["messages"] == 4
    [stalled, session] = status.failures
    assert (stalled["kind"], stalled["reason"], stalled["count"]) == ("job", _STALLED, 2)
    assert 300 <= stalled["newest_age_seconds"] < 3 * 3600 <= stalled["oldest_age_seconds"]
    assert (session["kind"], session["reason"]) == ("session", "overloaded (529)")
    assert all(f["age_seconds"] >= 300 for f in status.failed_jobs)
    text = CliRunner().invoke(queue_group, ["status", "--db", pg_dsn]).output
    assert "workers  1 alive, 1 dead" in text
    assert "running  1\n" in text
    assert "stalled  1 (on dead workers" in text
    assert "oldest 10 min (slow s1)" in text
    assert "(its worker is dead)" in text
    assert f"2 jobs, newest 5 min ago, oldest 3 h ago: {_STALLED}" in text
    result = CliRunner().invoke(queue_group, ["status", "--db", pg_dsn, "--json"])
    assert json.loads(result.output)["stalled"] == 1


def test_retry_runs_failed_directories_again_now(pg_dsn: str) -> None:
    _fleet(pg_dsn)
    runner = CliRunner()
    dry = runner.invoke(queue_group, ["retry", "--db", pg_dsn, "--all-failed", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "would retry 3 directories: 2 jobs queued, 1 sessions reset" in dry.output
    assert queue_status(pg_dsn).jobs["failed"] == 2  # nothing changed
    result = runner.invoke(queue_group, ["retry", "--db", pg_dsn, "--all-failed", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["dirs"] == ["f1", "f2", "slow"]
    # f1 and f2 get a job; slow's waiting job is due now instead of a second one.
    assert (report["deferred"], report["jobs_removed"], report["sessions_reset"]) == (2, 2, 1)
    status = queue_status(pg_dsn)
    assert "failed" not in status.jobs
    assert status.failing == []
    assert status.failures == []
    with psycopg.connect(pg_dsn) as conn:
        todo: dict[str, Any] = dict(
            conn.execute("SELECT lock, scheduled_at FROM procrastinate_jobs WHERE status = 'todo'")
        )
    assert todo == {"f1": None, "f2": None, "slow": None}


def test_retry_needs_a_directory_or_all_failed(pg_dsn: str) -> None:
    result = CliRunner().invoke(queue_group, ["retry", "--db", pg_dsn])
    assert result.exit_code == 2
    assert "--all-failed" in result.output


def test_prune_removes_old_rows_only(pg_dsn: str) -> None:
    _fleet(pg_dsn)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO memdir_runs (dir_id, session, generation, from_seq, to_seq, outcome, "
            "started_at, committed_at) VALUES ('x', 's', 0, 1, 2, 'ran', now(), "
            "clock_timestamp() - interval '8 days')"
        )
        (old,) = one(
            conn,
            "INSERT INTO procrastinate_jobs (queue_name, task_name, lock, status) "
            "VALUES ('memdir', 'memdir.extract', 'gone', 'succeeded') RETURNING id",
        )
        conn.execute(
            "INSERT INTO procrastinate_events (job_id, type, at) "
            "VALUES (%s, 'succeeded', now() - interval '9 days')",
            (old,),
        )
    runner = CliRunner()
    dry = runner.invoke(queue_group, ["prune", "--db", pg_dsn, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert dry.output.strip() == (
        "memdir: would remove 0 consumed messages, 1 run rows, 1 finished jobs (older than 7d)"
    )
    result = runner.invoke(queue_group, ["prune", "--db", pg_dsn, "--older-than", "2h", "--json"])
    assert result.exit_code == 0, result.output
    # The old run and job, and f1's job that failed 3 hours ago; the rest is recent or live.
    removed = json.loads(result.output)
    assert (removed["messages"], removed["runs"], removed["jobs"]) == (0, 1, 2)
    status = queue_status(pg_dsn)
    assert status.jobs == {"todo": 1, "doing": 2, "failed": 1}
    assert status.pending_sessions == 5


def test_durations() -> None:
    assert [_duration(t) for t in ("7d", "12h", "30m", "90s", "45", "2w", "5min")] == [
        604800.0,
        43200.0,
        1800.0,
        90.0,
        45.0,
        1209600.0,
        300.0,
    ]
    result = CliRunner().invoke(queue_group, ["prune", "--db", "x", "--older-than", "soon"])
    assert result.exit_code == 2


def test_retry_runs_a_parked_session_again(pg_dsn: str) -> None:
    """A session parked after its last attempt is listed as failed, and `retry` makes it
    runnable: the next run covers it (it neither stays parked nor drops out of sight)."""
    import asyncio

    from memdir.models import ModelRequest
    from memdir.queue import QueueWorker, WorkerSettings
    from memdir.queue._retry import failed_dirs
    from memdir.testing import FunctionModel
    from tests.queue._helpers import CONFIG

    host = QueueExtractor(pg_dsn, "dir-p")
    assert host.on_turn_end(TurnContext(messages=conversation("s1", 1), session_id="s1"))
    host.close()
    up = False

    async def answer(request: ModelRequest) -> Any:
        if not up:
            raise RuntimeError("529 overloaded (injected)")
        return "Nothing to save."

    model = FunctionModel(answer, name="function:flaky")
    settings = WorkerSettings(
        dsn=pg_dsn,
        models=lambda _name: model,
        config=CONFIG,
        sweep_cron=None,
        max_attempts=2,
        backoff_base_seconds=0.0,
    )
    worker = QueueWorker(settings)
    runs = [asyncio.run(worker.extract("dir-p")) for _ in range(2)]
    assert runs[-1].parked
    assert failed_dirs(pg_dsn) == ["dir-p"]
    result = CliRunner().invoke(queue_group, ["retry", "--db", pg_dsn, "--all-failed"])
    assert result.exit_code == 0, result.output
    with psycopg.connect(pg_dsn) as conn:
        (parked,) = one(conn, "SELECT parked_version FROM memdir_pending WHERE dir_id = 'dir-p'")
    assert parked is None
    up = True
    again = asyncio.run(worker.extract("dir-p"))
    assert again.committed
    assert queue_status(pg_dsn).pending_sessions == 0
