"""A run that never returns: cancelled at the run timeout, the directory's other sessions
covered meanwhile, retried up to the limit, then parked with why."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

import psycopg
from click.testing import CliRunner

from memdir.extract import TurnContext
from memdir.models import ModelRequest
from memdir.queue import (
    QueueExtractor,
    QueueWorker,
    WorkerSettings,
    prune,
    queue_status,
    sweep,
    unpark,
)
from memdir.telemetry import CollectingSink
from memdir.testing import FunctionModel
from tests.queue._helpers import CONFIG, conversation, one, saving_model


class _Hanging:
    """Answers the ``tail`` session; never answers the ``stuck`` one while ``hang`` is
    set. Counts the hung calls entered and unwound, and what the database held for the
    other session at the moment each hung call was cancelled. The host's next turn of
    ``tail`` arrives during tail's first run (once)."""

    def __init__(self, dsn: str, sink: CollectingSink) -> None:
        self.dsn = dsn
        self.sink = sink
        self.unwound_at: list[int] = []
        """How many events the worker had sent when each hung call was unwound."""
        self.hang = True
        self.entered = 0
        self.unwound = 0
        self.other_cursor_when_cancelled: list[Any] = []
        self.saver = saving_model()
        self.next_turn_sent = False

    async def answer(self, request: ModelRequest) -> Any:
        stuck = any("turn stuck " in m.text for m in request.messages)
        if stuck and self.hang:
            self.entered += 1
            try:
                await asyncio.Event().wait()  # never answers
            except asyncio.CancelledError:
                with psycopg.connect(self.dsn) as conn:
                    row = conn.execute(
                        "SELECT cursor_uuid FROM memdir_sessions WHERE session = 'tail'"
                    ).fetchone()
                self.other_cursor_when_cancelled.append(row[0] if row else None)
                raise
            finally:
                self.unwound += 1
                self.unwound_at.append(len(self.sink.events))
        if not stuck and not self.next_turn_sent:
            self.next_turn_sent = True
            _record(self.dsn, "tail", 2)
        return await self.saver.function(request)  # type: ignore[misc]


def _record(dsn: str, session: str, turns: int) -> None:
    host = QueueExtractor(dsn, "dir-h")
    assert host.on_turn_end(TurnContext(messages=conversation(session, turns), session_id=session))
    host.close()


def test_a_run_that_never_returns_is_cancelled_retried_then_parked(pg_dsn):
    # "stuck" sorts first: run one after another, it would hold "tail" back.
    _record(pg_dsn, "stuck", 1)
    _record(pg_dsn, "tail", 1)
    sink = CollectingSink()
    hanging = _Hanging(pg_dsn, sink)
    model = FunctionModel(hanging.answer, name="function:hanging")
    worker = QueueWorker(
        WorkerSettings(
            dsn=pg_dsn,
            models=lambda _n: model,
            config=CONFIG,
            sweep_cron=None,
            prune_cron=None,
            run_timeout=2.0,
            poll_interval=60.0,  # what wakes the job here is the end of tail's run
            max_attempts=2,
            backoff_base_seconds=0.0,
            sink=sink,
        )
    )
    # Each pass runs what is due: the first attempt, then its retry (no backoff here).
    for _ in range(4):
        asyncio.run(worker.run(wait=False, install_signal_handlers=False))
        if queue_status(pg_dsn).jobs.get("todo", 0) == 0:
            break

    # Cancelled at the timeout, twice (the limit), and unwound each time: nothing left
    # running.
    assert (hanging.entered, hanging.unwound) == (2, 2)
    # The other session was covered meanwhile, its turn that arrived during the job too.
    assert hanging.other_cursor_when_cancelled[0] == "tail-a2"
    # Unwound before its failure was committed, not left to run on beside the retries.
    failed_commits = [
        i
        for i, e in enumerate(sink.events)
        if e.name == "extract.committed" and e.fields["failed"] == 1
    ]
    assert len(failed_commits) == 2
    assert all(u <= c for u, c in zip(hanging.unwound_at, failed_commits, strict=True))
    status = queue_status(pg_dsn)
    assert status.jobs == {"failed": 1}
    [failed] = status.failed_jobs
    assert failed["dir_id"] == "dir-h"
    assert "session stuck: the run did not finish in time (2 attempts" in failed["reason"]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        # The turn is kept, parked, with why.
        attempts, error, parked = one(
            conn, "SELECT attempts, last_error, parked_version IS NOT NULL FROM memdir_pending"
        )
        assert (attempts, parked) == (2, True)
        assert "did not finish in time" in error
        assert one(conn, "SELECT cursor_uuid FROM memdir_sessions WHERE session = 'stuck'") == (
            None,
        )
        runs = conn.execute("SELECT session, from_seq, to_seq FROM memdir_runs").fetchall()
    assert runs == [("tail", 1, 2), ("tail", 3, 4)]
    parked_events = [e for e in sink.events if e.name == "extract.parked"]
    assert [(e.fields["session"], e.fields["attempts"]) for e in parked_events] == [("stuck", 2)]

    # The sweeper leaves a parked session alone: no job retries it for ever.
    async def sweep_once() -> tuple[int, int]:
        async with worker.app.open_async():
            return await sweep(worker.app, pg_dsn)

    assert asyncio.run(sweep_once()) == (0, 0)

    # A prune keeps a failed job, and why, for a week unless told otherwise.
    assert prune(pg_dsn).jobs == 0
    assert prune(pg_dsn, keep_failed_jobs=0).jobs == 1
    with psycopg.connect(pg_dsn) as conn:
        assert one(conn, "SELECT count(*) FROM memdir_job_failures") == (0,)

    # A newer turn is new work: the session runs again, from a fresh count.
    hanging.hang = False
    _record(pg_dsn, "stuck", 2)
    asyncio.run(worker.run(wait=False, install_signal_handlers=False))
    with psycopg.connect(pg_dsn) as conn:
        assert one(conn, "SELECT count(*) FROM memdir_pending") == (0,)
        assert one(conn, "SELECT cursor_uuid FROM memdir_sessions WHERE session = 'stuck'") == (
            "stuck-a2",
        )
        assert conn.execute(
            "SELECT from_seq, to_seq FROM memdir_runs WHERE session = 'stuck'"
        ).fetchall() == [(1, 4)]


def test_a_failed_session_retries_until_the_limit(pg_dsn):
    _record(pg_dsn, "s1", 1)

    async def down(request: ModelRequest) -> Any:
        raise RuntimeError("529 overloaded (injected)")

    model = FunctionModel(down, name="function:down")
    worker = QueueWorker(
        WorkerSettings(
            dsn=pg_dsn,
            models=lambda _n: model,
            config=CONFIG,
            sweep_cron=None,
            max_attempts=3,
            backoff_base_seconds=0.0,
        )
    )
    runs = [asyncio.run(worker.extract("dir-h")) for _ in range(3)]
    assert [r.parked for r in runs[:2]] == [(), ()]
    [reason] = runs[2].parked
    assert reason.startswith("session s1: function:down: RuntimeError: 529 overloaded")
    assert "(3 attempts; parked" in reason
    # Parked: a fourth job finds nothing to run.
    fourth = asyncio.run(worker.extract("dir-h"))
    assert (fourth.committed, fourth.sessions) == (False, ())
    # What `memdir queue retry` does: runnable again, from a fresh count.
    assert unpark(pg_dsn, "dir-other") == []
    assert unpark(pg_dsn) == ["dir-h"]
    [again] = asyncio.run(worker.extract("dir-h")).sessions
    assert again.outcome == "failed"
    with psycopg.connect(pg_dsn) as conn:
        assert one(conn, "SELECT attempts, parked_version FROM memdir_pending") == (1, None)


def test_the_worker_command_takes_the_run_timeout_and_the_retry_limit(monkeypatch):
    from memdir._cli._queue import worker_command

    seen: dict[str, Any] = {}

    async def fake_run(self: QueueWorker, **_kw: Any) -> None:
        seen["settings"] = self.settings

    monkeypatch.setattr(QueueWorker, "run", fake_run)
    result = CliRunner().invoke(
        worker_command,
        [
            "--model",
            "offline",
            "--db",
            "postgresql://127.0.0.1:1/none",
            "--no-init",
            "--run-timeout",
            "1.5",
            "--max-attempts",
            "5",
            "--prune-cron",
            "off",
        ],
    )
    assert result.exit_code == 0, result.output
    settings = seen["settings"]
    assert (settings.run_timeout, settings.max_attempts, settings.prune_cron) == (1.5, 5, None)
