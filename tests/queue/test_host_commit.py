"""An acknowledged turn is in the database: the host's connection is terminated by the
server before, and right after, each step of recording a turn (its BEGIN, every
statement, its COMMIT), sync and async, on a first turn and on a coalesced one; a turn
reported recorded is always there, one reported not recorded is shipped by the next."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

import psycopg

from memdir.extract import TurnContext
from memdir.queue import QueueExtractor
from memdir.telemetry import CollectingSink
from tests.queue._helpers import conversation, one


class _Terminator:
    """Wraps ``QueueExtractor._execute``: the server ends the host's connection before
    (or just after) the step numbered ``at``, from another connection, as a restart, a
    failover or a network cut would."""

    def __init__(self, dsn: str) -> None:
        self.admin = psycopg.connect(dsn, autocommit=True)
        self.at: int | None = None
        self.after = False
        self.steps = 0
        self.fired = False
        self._original = QueueExtractor._execute

    def _terminate(self, conn: psycopg.Connection[Any]) -> None:
        self.admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        self.fired = True

    def execute(self, host: QueueExtractor, conn: psycopg.Connection[Any], *args: Any) -> Any:
        step, self.steps = self.steps, self.steps + 1
        if step == self.at and not self.after:
            self._terminate(conn)
        cur = self._original(host, conn, *args)
        if step == self.at and self.after:
            self._terminate(conn)
        return cur

    def arm(self, at: int | None, after: bool = False) -> None:
        self.at, self.after, self.steps, self.fired = at, after, 0, False


@pytest.fixture
def terminator(pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Terminator]:
    term = _Terminator(pg_dsn)
    monkeypatch.setattr(
        QueueExtractor, "_execute", lambda host, conn, *a: term.execute(host, conn, *a)
    )
    yield term
    term.admin.close()


def _record(host: QueueExtractor, turn: TurnContext, use_async: bool) -> Any:
    if use_async:
        return asyncio.run(host.aon_turn_end(turn))
    return host.on_turn_end(turn)


def _stored(dsn: str, dir_id: str) -> tuple[int, int, int, int]:
    """Messages stored, the session's shipped mark, its pending turn, waiting jobs."""
    with psycopg.connect(dsn) as conn:
        row = one(
            conn,
            "SELECT (SELECT count(*) FROM memdir_messages WHERE dir_id = %(d)s), "
            "(SELECT coalesce(max(shipped_seq), 0) FROM memdir_sessions WHERE dir_id = %(d)s), "
            "(SELECT coalesce(max(upto_seq), 0) FROM memdir_pending WHERE dir_id = %(d)s), "
            "(SELECT count(*) FROM procrastinate_jobs "
            " WHERE queueing_lock = %(d)s AND status = 'todo')",
            {"d": dir_id},
        )
    return int(row[0]), int(row[1]), int(row[2]), int(row[3])


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("coalesced", [False, True], ids=["first-turn", "coalesced"])
def test_a_turn_is_recorded_only_when_committed(
    pg_dsn: str, terminator: _Terminator, use_async: bool, coalesced: bool
) -> None:
    conv = conversation("s1", 3)
    before = 2 if coalesced else 0  # messages recorded before the turn under test
    # How many steps the turn takes, counted on a turn left alone.
    probe = QueueExtractor(pg_dsn, "probe")
    if coalesced:
        assert probe.on_turn_end(TurnContext(messages=conv[:2], session_id="s1")) is not None
    terminator.arm(None)
    assert _record(probe, TurnContext(messages=conv[: before + 2], session_id="s1"), use_async)
    steps = terminator.steps
    probe.close()
    assert steps >= 8

    outcomes: list[str] = []
    for at in range(steps):
        for after in (False, True):
            dir_id = f"d{at}{'a' if after else 'b'}"
            sink = CollectingSink()
            host = QueueExtractor(pg_dsn, dir_id, sink=sink)
            if coalesced:
                terminator.arm(None)
                assert host.on_turn_end(TurnContext(messages=conv[:2], session_id="s1"))
            terminator.arm(at, after)
            seen = len(sink.events)
            result = _record(
                host, TurnContext(messages=conv[: before + 2], session_id="s1"), use_async
            )
            assert terminator.fired
            stored = _stored(pg_dsn, dir_id)
            if result is not None:
                # Recorded: every message of it, the mark, the pending turn, a job to wake it.
                assert stored == (before + 2, before + 2, before + 2, 1), (at, after)
                outcomes.append("recorded")
                host.close()
                continue
            assert [e.name for e in sink.events[seen:]] == ["queue.record_error"]
            # Not recorded: nothing of it is there, and the next turn brings it along.
            assert stored[:3] == (before, before, before), (at, after)
            terminator.arm(None)
            again = _record(host, TurnContext(messages=conv, session_id="s1"), use_async)
            assert again is not None
            assert again.shipped == 6 - before
            assert _stored(pg_dsn, dir_id) == (6, 6, 6, 1)
            host.close()
            outcomes.append("refused")
    # Only a termination after the server's COMMIT reply leaves the turn recorded.
    assert outcomes.count("recorded") == 1
    assert outcomes[-1] == "recorded"
