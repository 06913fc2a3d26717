"""A run's cost follows its new work: the rows it reads do not grow with the history, and
pruning leaves what later runs need."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

import psycopg

from memdir.extract import TurnContext
from memdir.messages import Message, TextBlock
from memdir.models import ModelRequest
from memdir.queue import PruneResult, QueueExtractor, QueueWorker, WorkerSettings, prune
from memdir.queue._runs import BACK_ROWS_CAP
from memdir.testing import FunctionModel
from tests.queue._helpers import CONFIG, conversation, one, saving_model

# A small window, so that a short test history is already longer than it.
SMALL = dataclasses.replace(CONFIG, window_tokens=200)


class _Seen:
    """The saving model, keeping the text of every request it got."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.saver = saving_model()
        self.model = FunctionModel(self.answer, name="function:seen")

    async def answer(self, request: ModelRequest) -> Any:
        self.requests.append("\n".join(m.text for m in request.messages))
        return await self.saver.function(request)  # type: ignore[misc]


def _worker(dsn: str, seen: _Seen, **kw: Any) -> QueueWorker:
    settings: dict[str, Any] = {"sweep_cron": None, "prune_cron": None, **kw}
    return QueueWorker(
        WorkerSettings(dsn=dsn, models=lambda _n: seen.model, config=SMALL, **settings)
    )


def _history(session: str, turns: int) -> list[Message]:
    """``turns`` turns after a system message, as an OpenAI host's conversation starts."""
    system = Message(role="system", content=(TextBlock(text="Be brief."),), uuid=f"{session}-sys")
    return [system, *conversation(session, turns)]


def _rows_of_next_run(dsn: str, dir_id: str, turns: int) -> tuple[int, tuple[int, int]]:
    """Record ``turns`` turns at once and run them, then one more turn: the rows that
    run read and the seqs it covered."""
    seen = _Seen()
    host = QueueExtractor(dsn, dir_id)
    conv = _history("s1", turns + 1)
    host.on_turn_end(TurnContext(messages=conv[: 1 + 2 * turns], session_id="s1"))
    worker = _worker(dsn, seen)
    asyncio.run(worker.extract(dir_id))
    host.on_turn_end(TurnContext(messages=conv, session_id="s1"))
    host.close()
    run = asyncio.run(worker.extract(dir_id))
    [outcome] = run.sessions
    assert outcome.outcome == "ran"
    # The window's context reached the model: the turn before the new one.
    assert f"turn s1 {turns}" in seen.requests[-1]
    return outcome.rows_read, (outcome.from_seq, outcome.to_seq)


def test_rows_read_per_run_do_not_grow_with_the_history(pg_dsn):
    short_rows, short_span = _rows_of_next_run(pg_dsn, "dir-short", 200)
    long_rows, long_span = _rows_of_next_run(pg_dsn, "dir-long", 1_000)
    assert short_span == (402, 403)
    assert long_span == (2_002, 2_003)
    assert short_rows == long_rows
    # The cursor's check, the window's pages of context (these messages are a few
    # tokens each), the system message, the two new ones: not the 2,000 before.
    assert long_rows <= 1 + 2 * BACK_ROWS_CAP + 1 + 2


def test_a_cursor_gone_from_the_stored_conversation_reads_it_whole(pg_dsn):
    seen = _Seen()
    host = QueueExtractor(pg_dsn, "dir-reset")
    conv = conversation("s1", 3)
    host.on_turn_end(TurnContext(messages=conv[:4], session_id="s1"))
    worker = _worker(pg_dsn, seen)
    asyncio.run(worker.extract("dir-reset"))
    # A rewind: the host's conversation no longer holds what was shipped.
    rewound = [conv[0], conv[1], Message.user("turn s1 9", uuid="s1-u9")]
    recorded = host.on_turn_end(TurnContext(messages=rewound, session_id="s1"))
    host.close()
    assert recorded is not None
    assert recorded.reset
    [outcome] = asyncio.run(worker.extract("dir-reset")).sessions
    # The cursor (s1-a2) is gone: everything counts again, read whole, as before.
    assert (outcome.outcome, outcome.from_seq, outcome.to_seq) == ("ran", 1, 3)
    assert outcome.rows_read == 3


def test_prune_keeps_what_the_next_run_needs_and_it_covers_exactly_once(pg_dsn):
    seen = _Seen()
    host = QueueExtractor(pg_dsn, "dir-p")
    conv = _history("s1", 203)
    host.on_turn_end(TurnContext(messages=conv[:401], session_id="s1"))  # 200 turns
    worker = _worker(pg_dsn, seen, keep_jobs=True)
    asyncio.run(worker.run(wait=False, install_signal_handlers=False))
    host.on_turn_end(TurnContext(messages=conv[:403], session_id="s1"))
    asyncio.run(worker.run(wait=False, install_signal_handlers=False))

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        (keep_from,) = one(conn, "SELECT keep_from_seq FROM memdir_sessions")
        assert 1 < keep_from <= 401
        before = one(conn, "SELECT count(*) FROM memdir_messages")[0]
        assert before == 403
        assert one(conn, "SELECT count(*) FROM memdir_runs") == (2,)
        assert (
            one(conn, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'")[0] == 2
        )
        # With the defaults, no run or job is old enough yet; consumed messages go.
        assert prune(pg_dsn) == PruneResult(messages=keep_from - 2, runs=0, jobs=0)
        assert prune(pg_dsn, keep_runs=0, keep_jobs=0) == PruneResult(runs=2, jobs=2)
        assert one(conn, "SELECT count(*) FROM memdir_runs") == (0,)
        assert one(conn, "SELECT count(*) FROM procrastinate_jobs") == (0,)
        # Below what the last run read, only the system message is left.
        assert one(conn, "SELECT min(seq) FROM memdir_messages WHERE seq > 1") == (keep_from,)
        assert one(conn, "SELECT count(*) FROM memdir_messages WHERE seq < %s", (keep_from,)) == (
            1,
        )

    # Later turns still run, each message covered once.
    for k in (202, 203):
        host.on_turn_end(TurnContext(messages=conv[: 1 + 2 * k], session_id="s1"))
        asyncio.run(worker.run(wait=False, install_signal_handlers=False))
    host.close()
    assert "turn s1 202" in seen.requests[-1]
    with psycopg.connect(pg_dsn) as conn:
        spans = conn.execute("SELECT from_seq, to_seq FROM memdir_runs ORDER BY id").fetchall()
        assert spans == [(404, 405), (406, 407)]
        assert one(conn, "SELECT cursor_uuid FROM memdir_sessions") == ("s1-a203",)
        assert one(conn, "SELECT count(*) FROM memdir_pending") == (0,)


def test_prune_leaves_a_session_whose_host_replaced_its_messages(pg_dsn):
    seen = _Seen()
    host = QueueExtractor(pg_dsn, "dir-q")
    conv = conversation("s1", 200)
    host.on_turn_end(TurnContext(messages=conv[:398], session_id="s1"))
    worker = _worker(pg_dsn, seen)
    asyncio.run(worker.extract("dir-q"))
    host.on_turn_end(TurnContext(messages=conv, session_id="s1"))
    asyncio.run(worker.extract("dir-q"))
    # A compaction on the host: a summary and the last turn, re-shipped from seq 1.
    compacted = [Message.user("summary", uuid="sum"), *conv[-2:]]
    assert host.on_turn_end(TurnContext(messages=compacted, session_id="s1"))
    host.close()
    assert prune(pg_dsn, keep_runs=None, keep_jobs=None, keep_failed_jobs=None).messages == 0
    with psycopg.connect(pg_dsn) as conn:
        assert one(conn, "SELECT count(*) FROM memdir_messages") == (3,)


def test_a_worker_prunes_on_the_schedule_it_was_given(pg_dsn):
    seen = _Seen()
    host = QueueExtractor(pg_dsn, "dir-s")
    conv = conversation("s1", 201)
    host.on_turn_end(TurnContext(messages=conv[:400], session_id="s1"))
    worker = _worker(pg_dsn, seen, prune_cron="*/10 * * * *", keep_runs_seconds=0)
    asyncio.run(worker.extract("dir-s"))
    host.on_turn_end(TurnContext(messages=conv, session_id="s1"))
    host.close()
    asyncio.run(worker.extract("dir-s"))
    [periodic] = [
        p
        for (name, _), p in worker.app.periodic_registry.periodic_tasks.items()
        if name == "memdir.prune"
    ]
    assert periodic.cron == "*/10 * * * *"
    assert _worker(pg_dsn, seen).app.periodic_registry.periodic_tasks == {}
    # What the schedule runs: the consumed messages and (kept 0 s) the runs go.
    asyncio.run(worker.app.tasks["memdir.prune"](timestamp=0))
    with psycopg.connect(pg_dsn) as conn:
        (keep_from,) = one(conn, "SELECT keep_from_seq FROM memdir_sessions")
        assert one(conn, "SELECT min(seq), count(*) FROM memdir_messages") == (
            keep_from,
            403 - keep_from,
        )
        assert one(conn, "SELECT count(*) FROM memdir_runs") == (0,)
