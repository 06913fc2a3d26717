"""No host waits on a worker: a worker frozen inside its commit (SIGSTOP, a paused VM, a
partition that leaves its connection open) keeps its row locks, and every turn for its
directory still returns within 2 s, reported not recorded; the next turn after the
worker goes on records both."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

import psycopg

from memdir.extract import TurnContext
from memdir.queue import QueueExtractor
from memdir.telemetry import CollectingSink
from tests.queue._helpers import conversation, one, work

_BOUND = 2.0
_spawn = multiprocessing.get_context("spawn")

# What a worker's commit writes for a directory and one of its sessions, so what its
# transaction holds locked until it ends.
_COMMIT_LOCKS = (
    "UPDATE memdir_dirs SET generation = generation + 1 WHERE dir_id = %(dir)s",
    "UPDATE memdir_sessions SET cursor_seq = 2 WHERE dir_id = %(dir)s AND session = %(s)s",
    "DELETE FROM memdir_pending WHERE dir_id = %(dir)s AND session = %(s)s",
)


def _turn(session: str, turns: int) -> TurnContext:
    return TurnContext(messages=conversation(session, turns), session_id=session)


def _timed(host: QueueExtractor, turn: TurnContext, use_async: bool) -> tuple[Any, float]:
    started = time.monotonic()
    if use_async:
        result: Any = asyncio.run(host.aon_turn_end(turn))
    else:
        result = host.on_turn_end(turn)
    return result, time.monotonic() - started


def _shipped(dsn: str, dir_id: str, session: str) -> tuple[Any, ...]:
    with psycopg.connect(dsn) as conn:
        return one(
            conn,
            "SELECT s.shipped_seq, p.upto_seq, (SELECT count(*) FROM memdir_messages m "
            "WHERE m.dir_id = s.dir_id AND m.session = s.session) FROM memdir_sessions s "
            "JOIN memdir_pending p USING (dir_id, session) "
            "WHERE s.dir_id = %s AND s.session = %s",
            (dir_id, session),
        )


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_turn_waits_on_no_lock_a_frozen_commit_holds(pg_dsn: str, use_async: bool) -> None:
    sink = CollectingSink()
    host = QueueExtractor(pg_dsn, "dir-f", sink=sink)
    other = QueueExtractor(pg_dsn, "dir-g")
    assert host.on_turn_end(_turn("s1", 1)) is not None
    with psycopg.connect(pg_dsn) as frozen:
        for statement in _COMMIT_LOCKS:
            frozen.execute(statement, {"dir": "dir-f", "s": "s1"})
        # The worker's transaction stays open: each turn of its directory gives up in time.
        for session in ("s1", "s2"):
            result, took = _timed(host, _turn(session, 2), use_async)
            assert result is None
            assert took < _BOUND, f"on_turn_end took {took:.2f} s"
        # Another directory of the same host (and pool) is not held up.
        result, took = _timed(other, _turn("t1", 1), use_async)
        assert result is not None
        assert took < _BOUND
        frozen.rollback()
    errors = [e for e in sink.events if e.name == "queue.record_error"]
    assert len(errors) == 2
    assert all(e.fields["error_type"] == "LockNotAvailable" for e in errors)
    # The lock gone, the next turn ships what the refused one could not.
    recorded = host.on_turn_end(_turn("s1", 3))
    assert recorded is not None
    assert recorded.shipped == 4
    assert _shipped(pg_dsn, "dir-f", "s1") == (6, 6, 6)
    host.close()
    other.close()


_HOLD = 726_001  # the advisory lock the commit's trigger waits on while the test holds it
_TRAP = """
CREATE FUNCTION memdir_test_trap() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(726001);
    RETURN NEW;
END;
$$;
CREATE TRIGGER memdir_test_trap BEFORE INSERT ON memdir_runs
    FOR EACH ROW EXECUTE FUNCTION memdir_test_trap();
"""


def _waiting_on_hold(conn: psycopg.Connection[Any]) -> int | None:
    row = conn.execute(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = %s AND NOT granted",
        (_HOLD,),
    ).fetchone()
    return None if row is None else int(row[0])


@pytest.fixture
def stopped() -> Iterator[list[int]]:
    """Processes the test SIGSTOPs: continued and ended however the test ends."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            continue


def test_a_real_worker_stopped_inside_its_commit(pg_dsn: str, stopped: list[int]) -> None:
    """``memdir worker``'s own process, SIGSTOPped while its commit holds the directory's
    rows: it is caught inside the commit by a trigger that waits on a lock the test
    holds; once it is waiting, the test stops it and lets the statement finish, so the
    transaction stays open with nobody to end it."""
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(_TRAP)
        admin.execute("SELECT pg_advisory_lock(%s)", (_HOLD,))
        host = QueueExtractor(pg_dsn, "dir-w")
        assert host.on_turn_end(_turn("s1", 1)) is not None
        worker = _spawn.Process(target=work, args=(pg_dsn, "w-frozen"), daemon=True)
        worker.start()
        try:
            end = time.monotonic() + 60
            while (pid := _waiting_on_hold(admin)) is None:
                assert worker.is_alive(), "the worker died before its commit"
                assert time.monotonic() < end, "no commit arrived"
                admin.execute("SELECT pg_sleep(0.05)")  # the server is where it happens
            assert worker.pid is not None
            os.kill(worker.pid, signal.SIGSTOP)
            stopped.append(worker.pid)
            admin.execute("SELECT pg_advisory_unlock(%s)", (_HOLD,))
            # The commit's statement finishes; its transaction is held open by nobody.
            while _waiting_on_hold(admin) == pid:
                admin.execute("SELECT pg_sleep(0.01)")
            for session in ("s1", "s2"):
                result, took = _timed(host, _turn(session, 2), use_async=False)
                assert result is None
                assert took < _BOUND, f"on_turn_end took {took:.2f} s"
            os.kill(worker.pid, signal.SIGCONT)
            stopped.clear()
            # The worker's commit goes through; the next turn records the refused ones.
            for session in ("s1", "s2"):
                recorded = host.on_turn_end(_turn(session, 3))
                assert recorded is not None
                assert recorded.shipped == (4 if session == "s1" else 6)
        finally:
            if worker.pid is not None and worker.is_alive():
                os.kill(worker.pid, signal.SIGCONT)
                os.kill(worker.pid, signal.SIGTERM)
            worker.join(30)
            if worker.is_alive():
                worker.kill()
                worker.join()
            host.close()
