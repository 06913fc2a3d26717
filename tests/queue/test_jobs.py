"""Retries, telemetry, the host's request and the queue's status, through real jobs."""

from __future__ import annotations

import asyncio
import datetime
import json
from typing import Any

import pytest

pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

import psycopg

from memdir.extract import ExtractConfig, TurnContext
from memdir.fork import CacheSafeParams
from memdir.messages import (
    ImageBlock,
    Message,
    OtherBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from memdir.models import ModelRequest
from memdir.queue import QueueExtractor, QueueWorker, WorkerSettings, queue_status, sweep
from memdir.queue._codec import decode_message, decode_params, encode_message, encode_params
from memdir.telemetry import CollectingSink
from memdir.testing import FunctionModel
from tests.queue._helpers import CONFIG, conversation, one, run_until_drained, saving_model


def _failing_then_saving(failures: int) -> FunctionModel:
    saver = saving_model()
    left = [failures]

    async def answer(request: ModelRequest) -> Any:
        if left[0] > 0:
            left[0] -= 1
            raise RuntimeError("529 overloaded (injected)")
        return await saver.function(request)  # type: ignore[misc]

    return FunctionModel(answer, name="function:flaky")


def _saved_by_host(session: str, turn: int, file_path: str) -> list[Message]:
    """A turn in which the host's own Write saved a memory at ``file_path``."""
    write = ToolUseBlock(id="w", name="Write", input={"file_path": file_path, "content": "x"})
    return [
        Message.user(f"turn {session} {turn}", uuid=f"{session}-u{turn}"),
        Message(role="assistant", uuid=f"{session}-a{turn}", content=(write,)),
    ]


def test_a_failed_run_is_retried_by_a_new_job_with_backoff(pg_dsn):
    host = QueueExtractor(pg_dsn, "dir-r")
    host.on_turn_end(TurnContext(messages=conversation("s1", 1), session_id="s1"))
    host.close()
    model = _failing_then_saving(2)
    sink = CollectingSink()
    settings = WorkerSettings(
        dsn=pg_dsn,
        models=lambda _n: model,
        config=CONFIG,
        backoff_base_seconds=0.0,
        sweep_cron=None,
        poll_interval=0.2,
        sink=sink,
    )
    asyncio.run(run_until_drained(QueueWorker(settings), pg_dsn))
    names = [e.name for e in sink.events if e.name.startswith("extract.")]
    assert names.count("extract.retry_deferred") == 2
    assert names.count("extract.committed") == 3
    attempts = [e.fields["attempt"] for e in sink.events if e.name == "extract.retry_deferred"]
    assert attempts == [1, 2]
    # The extractor's own events, tagged with where they come from.
    errors = [e for e in sink.events if e.name == "extract.error"]
    assert [(e.fields["dir_id"], e.fields["session"]) for e in errors] == [("dir-r", "s1")] * 2
    with psycopg.connect(pg_dsn) as conn:
        assert one(conn, "SELECT count(*) FROM memdir_pending") == (0,)
        assert one(conn, "SELECT cursor_uuid FROM memdir_sessions") == ("s1-a1",)
        # No job left running or stuck: the two failures were plain successful jobs.
        assert one(conn, "SELECT count(*) FROM procrastinate_jobs") == (0,)


def test_status_shows_what_is_queued_and_why_it_failed(pg_dsn):
    host = QueueExtractor(pg_dsn, "dir-f")
    host.on_turn_end(TurnContext(messages=conversation("s1", 1), session_id="s1"))
    host.close()
    model = _failing_then_saving(1)
    worker = QueueWorker(
        WorkerSettings(dsn=pg_dsn, models=lambda _n: model, config=CONFIG, sweep_cron=None)
    )
    run = asyncio.run(worker.extract("dir-f"))
    assert [o.outcome for o in run.sessions] == ["failed"]
    status = queue_status(pg_dsn)
    assert status.jobs == {"todo": 1}
    assert status.pending_sessions == 1
    assert status.pending_dirs == 1
    [failing] = status.failing
    assert failing["dir_id"] == "dir-f"
    assert failing["attempts"] == 1
    assert "overloaded" in failing["error"]
    json.dumps(status.as_dict())


def test_the_hosts_request_reaches_the_worker_and_the_fork_uses_it(pg_dsn):
    host_model = FunctionModel(lambda _r: "unused", name="anthropic:claude-test")
    tools = [{"name": "Write", "description": "write", "input_schema": {"type": "object"}}]
    params = CacheSafeParams(
        model=host_model, system="You are the host.", tools=tools, params={"temperature": 0}
    )
    host = QueueExtractor(pg_dsn, "dir-p")
    host.on_turn_end(
        TurnContext(messages=conversation("s1", 1), session_id="s1", params=params, cwd="/")
    )
    host.close()
    asked: list[str | None] = []
    model = saving_model()

    def models(name: str | None) -> FunctionModel:
        asked.append(name)
        return model

    config = ExtractConfig(skip_index=True, mode="fork")
    worker = QueueWorker(WorkerSettings(dsn=pg_dsn, models=models, config=config))
    run = asyncio.run(worker.extract("dir-p"))
    assert [o.outcome for o in run.sessions] == ["ran"]
    assert asked == ["anthropic:claude-test"]
    first = model.requests[0]
    assert first.system == "You are the host."
    assert [t["name"] for t in first.tools] == ["Write"]


def test_messages_and_params_survive_the_trip_as_json():
    at = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
    message = Message(
        role="assistant",
        uuid="m1",
        timestamp=at,
        is_meta=True,
        extra={"name": "x"},
        content=(
            TextBlock(text="hi", extra={"cache_control": {"type": "ephemeral"}}),
            ThinkingBlock(thinking="hmm", signature="sig"),
            ImageBlock(media_type="image/png", data="AAAA"),
            ToolUseBlock(id="t1", name="Read", input={"file_path": "/x"}, raw_input='{"a":1}'),
            ToolResultBlock(
                tool_use_id="t1", content=(TextBlock(text="ok"), ImageBlock(url="u")), is_error=True
            ),
            OtherBlock(type="document", data={"type": "document", "x": 1}),
        ),
    )
    back = decode_message(json.loads(json.dumps(encode_message(message))))
    assert back == message
    assert back.extra == message.extra
    assert back.content[0].extra == message.content[0].extra  # type: ignore[union-attr]
    model = FunctionModel(lambda _r: "", name="openai:gpt-x")
    params = CacheSafeParams(model=model, system=[{"type": "text", "text": "s"}], wire_replaces=2)
    again = decode_params(json.loads(json.dumps(encode_params(params))), model)
    assert (again.model, again.system, again.params) == (model, params.system, {})
    assert (list(again.tools), again.wire_replaces) == ([], 2)


def test_a_host_saving_memory_itself_is_not_run_again(pg_dsn):
    root = "/home/ana/.claude/projects/-work/memory"
    host = QueueExtractor(pg_dsn, "dir-d", memory_root=root)
    conv = conversation("s1", 1)
    conv += [
        *_saved_by_host("s1", 2, "memory/x.md"),
        Message.assistant("Saved it myself.", uuid="s1-a3"),
    ]
    model = saving_model()
    worker = QueueWorker(WorkerSettings(dsn=pg_dsn, models=lambda _n: model, config=CONFIG))
    host.on_turn_end(TurnContext(messages=conv[:2], session_id="s1"))
    first = asyncio.run(worker.extract("dir-d"))
    # Relative to the host's cwd, as the host's tool would take it.
    host.on_turn_end(
        TurnContext(messages=conv, session_id="s1", cwd="/home/ana/.claude/projects/-work")
    )
    host.close()
    calls = len(model.requests)
    second = asyncio.run(worker.extract("dir-d"))
    assert [o.outcome for o in first.sessions] == ["ran"]
    assert [(o.outcome, o.from_seq, o.to_seq) for o in second.sessions] == [("skipped", 3, 5)]
    assert len(model.requests) == calls
    with psycopg.connect(pg_dsn) as conn:
        assert one(conn, "SELECT cursor_uuid FROM memdir_sessions") == ("s1-a3",)


def test_the_throttle_counts_turns_across_runs(pg_dsn):
    host = QueueExtractor(pg_dsn, "dir-n")
    conv = conversation("s1", 3)
    model = saving_model()
    config = ExtractConfig(skip_index=True, mode="standalone", every_n_turns=3)
    worker = QueueWorker(WorkerSettings(dsn=pg_dsn, models=lambda _n: model, config=config))
    host.on_turn_end(TurnContext(messages=conv[:2], session_id="s1"))
    first = asyncio.run(worker.extract("dir-n"))
    # Two more turns coalesce into one pending row: 1 + 2 reaches the throttle's 3.
    for k in (2, 3):
        host.on_turn_end(TurnContext(messages=conv[: 2 * k], session_id="s1"))
    host.close()
    second = asyncio.run(worker.extract("dir-n"))
    assert [o.outcome for o in first.sessions] == ["throttled"]
    assert [(o.outcome, o.from_seq, o.to_seq) for o in second.sessions] == [("ran", 1, 6)]
    with psycopg.connect(pg_dsn) as conn:
        assert one(conn, "SELECT cursor_uuid, turns_since_run FROM memdir_sessions") == (
            "s1-a3",
            0,
        )


def test_the_sweeper_defers_a_job_for_pending_turns_that_have_none(pg_dsn):
    host = QueueExtractor(pg_dsn, "dir-s")
    host.on_turn_end(TurnContext(messages=conversation("s1", 1), session_id="s1"))
    host.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM procrastinate_jobs")  # a wake-up lost, the turn kept
    model = saving_model()
    sink = CollectingSink()
    worker = QueueWorker(
        WorkerSettings(dsn=pg_dsn, models=lambda _n: model, config=CONFIG, sink=sink)
    )
    assert ("memdir.sweep", "memdir") in worker.app.periodic_registry.periodic_tasks

    async def heal() -> tuple[int, int]:
        async with worker.app.open_async():
            healed = await sweep(worker.app, pg_dsn, sink=sink)
            again = await sweep(worker.app, pg_dsn, sink=sink)
        assert again == (0, 0)  # the job it deferred waits: nothing more to do
        await run_until_drained(worker, pg_dsn)
        return healed

    assert asyncio.run(heal()) == (0, 1)
    assert [e.fields["dir_id"] for e in sink.events if e.name == "queue.redeferred"] == ["dir-s"]
    with psycopg.connect(pg_dsn) as conn:
        assert one(conn, "SELECT cursor_uuid FROM memdir_sessions") == ("s1-a1",)


def _always_failing() -> FunctionModel:
    async def answer(request: ModelRequest) -> Any:
        raise RuntimeError("529 overloaded (injected)")

    return FunctionModel(answer, name="function:down")


def _take_job(conn: Any, job_id: int, worker_id: int | None = None) -> None:
    """Put a job in the state a worker's fetch leaves it in: 'doing', holding the lock."""
    conn.execute(
        "UPDATE procrastinate_jobs SET status = 'doing', worker_id = %s WHERE id = %s",
        (worker_id, job_id),
    )


def test_a_retry_waits_its_backoff_even_behind_a_queued_turn(pg_dsn):
    host = QueueExtractor(pg_dsn, "dir-b")
    conv = conversation("s1", 3)
    host.on_turn_end(TurnContext(messages=conv[:2], session_id="s1"))
    sink = CollectingSink()
    worker = QueueWorker(
        WorkerSettings(
            dsn=pg_dsn,
            models=lambda _n: _always_failing(),
            config=CONFIG,
            backoff_base_seconds=20.0,
            backoff_max_seconds=100.0,
            sweep_cron=None,
            sink=sink,
        )
    )
    # procrastinate's own retry would run into the queueing lock of the job behind it.
    assert worker.app.tasks["memdir.extract"].retry_strategy is None

    def todo(conn: Any) -> list[tuple[int, float]]:
        """The waiting jobs, and how many seconds from now each may start."""
        return [
            (int(i), float(wait))
            for i, wait in conn.execute(
                "SELECT id, extract(epoch FROM coalesce(scheduled_at, now()) - now()) "
                "FROM procrastinate_jobs WHERE status = 'todo' ORDER BY id"
            )
        ]

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        [(first, _)] = todo(conn)
        _take_job(conn, first)
        # A turn arrives during the run: its job waits behind the running one.
        recorded = host.on_turn_end(TurnContext(messages=conv[:4], session_id="s1"))
        assert recorded is not None
        assert recorded.enqueued
        [(behind, wait)] = todo(conn)
        assert wait <= 0
        # The run fails: the job already waiting is the retry, and waits the backoff.
        assert [o.outcome for o in asyncio.run(worker.extract("dir-b")).sessions] == ["failed"]
        [(again, wait)] = todo(conn)
        assert again == behind
        assert 15 < wait <= 20
        # The next attempt, from a running job with nothing behind it: a new job, twice
        # as late.
        conn.execute("DELETE FROM procrastinate_jobs WHERE id = %s", (first,))
        _take_job(conn, behind)
        asyncio.run(worker.extract("dir-b"))
        [(retry, wait)] = todo(conn)
        assert retry not in (first, behind)
        assert 35 < wait <= 40
    host.close()
    delays = [e.fields["delay_seconds"] for e in sink.events if e.name == "extract.retry_deferred"]
    assert delays == [20.0, 40.0]
    [failing] = queue_status(pg_dsn).failing
    assert failing["attempts"] == 2


def test_a_session_that_cannot_start_is_parked_and_its_job_failed_with_why(pg_dsn):
    host = QueueExtractor(pg_dsn, "dir-x")
    host.on_turn_end(TurnContext(messages=conversation("s1", 1), session_id="s1"))
    host.close()

    def no_model(_name: str | None) -> FunctionModel:
        raise RuntimeError("no model configured (injected)")

    sink = CollectingSink()
    # A session that cannot start fails alone, as an attempt (the directory's other
    # sessions run on); at the limit it is parked and the job fails with why.
    worker = QueueWorker(
        WorkerSettings(
            dsn=pg_dsn,
            models=no_model,
            config=CONFIG,
            sweep_cron=None,
            sink=sink,
            max_attempts=1,
        )
    )
    asyncio.run(worker.run(wait=False, install_signal_handlers=False))
    status = queue_status(pg_dsn)
    assert status.jobs == {"failed": 1}
    assert status.pending_sessions == 1  # the turn is kept, for a newer turn or a retry
    [failed] = status.failed_jobs
    assert failed["dir_id"] == "dir-x"
    assert "session s1: RuntimeError: no model configured (injected)" in failed["reason"]
    assert [e.fields["dir_id"] for e in sink.events if e.name == "queue.job_failed"] == ["dir-x"]
    from memdir._cli._queue_ops import _render

    assert "session s1: RuntimeError: no model configured" in _render(status)


def test_a_turn_queued_behind_a_dead_job_runs_once_the_sweeper_fails_it(pg_dsn):
    host = QueueExtractor(pg_dsn, "dir-k")
    conv = conversation("s1", 2)
    host.on_turn_end(TurnContext(messages=conv[:2], session_id="s1"))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        (dead,) = one(
            conn,
            "INSERT INTO procrastinate_workers (last_heartbeat) "
            "VALUES (now() - interval '1 hour') RETURNING id",
        )
        (job,) = one(conn, "SELECT id FROM procrastinate_jobs")
        _take_job(conn, job, dead)
    recorded = host.on_turn_end(TurnContext(messages=conv, session_id="s1"))
    host.close()
    assert recorded is not None
    assert recorded.enqueued  # queued behind the dead one
    model = saving_model()
    worker = QueueWorker(WorkerSettings(dsn=pg_dsn, models=lambda _n: model, config=CONFIG))

    async def heal() -> tuple[int, int]:
        async with worker.app.open_async():
            healed = await sweep(worker.app, pg_dsn)
        await run_until_drained(worker, pg_dsn)
        return healed

    assert asyncio.run(heal()) == (1, 0)  # failed; the turn behind it had its own job
    with psycopg.connect(pg_dsn) as conn:
        assert one(conn, "SELECT cursor_uuid FROM memdir_sessions") == ("s1-a2",)
        assert one(conn, "SELECT from_seq, to_seq FROM memdir_runs") == (1, 4)
    [failed] = queue_status(pg_dsn).failed_jobs
    assert failed["reason"].startswith("stalled")


def test_the_worker_reports_as_one_machine_does(pg_dsn, tmp_path):
    """The same turns through the local extractor and through the queue give the same
    events: throttled, a run, a turn the host saved itself (checked before the throttle)."""
    from memdir.extract import MemoryExtractor

    config = ExtractConfig(skip_index=True, mode="standalone", every_n_turns=2)
    root = tmp_path / "memory"
    conv = conversation("s1", 2)
    conv += _saved_by_host("s1", 3, f"{root}/x.md")
    turns = [conv[:2], conv[:4], conv]

    local = CollectingSink()
    extractor = MemoryExtractor(root, saving_model(), config, sink=local)
    for messages in turns:
        extractor.on_turn_end(TurnContext(messages=messages, session_id="s1"))
        extractor.drain_sync()
    extractor.close()

    queued = CollectingSink()
    model = saving_model()
    worker = QueueWorker(
        WorkerSettings(dsn=pg_dsn, models=lambda _n: model, config=config, sink=queued)
    )
    host = QueueExtractor(pg_dsn, "dir-m", memory_root=root)
    for messages in turns:
        host.on_turn_end(TurnContext(messages=messages, session_id="s1"))
        asyncio.run(worker.extract("dir-m"))
    host.close()

    mine = [e for e in queued.events if e.name in {e.name for e in local.events}]
    assert (
        [e.name for e in mine]
        == [e.name for e in local.events]
        == [
            "extract.throttled",
            "extract.run",
            "extract.skipped_direct_write",
        ]
    )
    for theirs, ours in zip(local.events, mine, strict=True):
        assert set(ours.fields) == set(theirs.fields) | {"dir_id", "session"}
        assert (ours.fields["dir_id"], ours.fields["session"]) == ("dir-m", "s1")
    throttled, _, skipped = zip(local.events, mine, strict=True)
    assert throttled[0].fields == {k: throttled[1].fields[k] for k in throttled[0].fields}
    assert skipped[0].fields == {k: skipped[1].fields[k] for k in skipped[0].fields}


def test_a_turn_the_host_saved_itself_leaves_the_throttle_where_it_was(pg_dsn, tmp_path):
    """Every other turn runs; a turn in between that the host covered by saving memory
    itself is no turn for the throttle, on one machine and on the queue alike."""
    from memdir.extract import MemoryExtractor

    config = ExtractConfig(skip_index=True, mode="standalone", every_n_turns=2)
    root = tmp_path / "memory"
    first = conversation("s1", 1)
    wrote = [*first, *_saved_by_host("s1", 2, f"{root}/x.md")]
    third = [*wrote, Message.user("turn s1 3", uuid="s1-u3"), Message.assistant("ok")]
    turns = [first, wrote, third]
    expected = ["extract.throttled", "extract.skipped_direct_write", "extract.run"]

    local = CollectingSink()
    extractor = MemoryExtractor(root, saving_model(), config, sink=local)
    for messages in turns:
        extractor.on_turn_end(TurnContext(messages=messages, session_id="s1"))
        extractor.drain_sync()
    extractor.close()
    assert [e.name for e in local.events if e.name in expected] == expected

    queued = CollectingSink()
    model = saving_model()
    worker = QueueWorker(
        WorkerSettings(dsn=pg_dsn, models=lambda _n: model, config=config, sink=queued)
    )
    host = QueueExtractor(pg_dsn, "dir-t", memory_root=root)
    for messages in turns:
        host.on_turn_end(TurnContext(messages=messages, session_id="s1"))
        asyncio.run(worker.extract("dir-t"))
    host.close()
    assert [e.name for e in queued.events if e.name in expected] == expected


def test_a_run_past_its_time_fails_and_keeps_the_turn(pg_dsn):
    host = QueueExtractor(pg_dsn, "dir-slow")
    host.on_turn_end(TurnContext(messages=conversation("s1", 1), session_id="s1"))
    host.close()

    async def hung(request: ModelRequest) -> str:
        await asyncio.Event().wait()  # never answers
        return "unreachable"

    model = FunctionModel(hung, name="function:hung")
    worker = QueueWorker(
        WorkerSettings(
            dsn=pg_dsn, models=lambda _n: model, config=CONFIG, sweep_cron=None, run_timeout=0.2
        )
    )
    run = asyncio.run(worker.extract("dir-slow"))
    [outcome] = run.sessions
    assert (outcome.outcome, outcome.error) == ("failed", "the run did not finish in time")
    with psycopg.connect(pg_dsn) as conn:
        assert one(conn, "SELECT attempts FROM memdir_pending") == (1,)
        assert one(conn, "SELECT cursor_uuid FROM memdir_sessions") == (None,)
