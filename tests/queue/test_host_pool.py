"""Coalesced turns leave no ERROR in PostgreSQL's log, and a host process's directories
share one small pool of connections (each extractor held its own before: 20 directories
made 20 server connections)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

import psycopg

from memdir.extract import TurnContext
from memdir.queue import QueueExtractor, TemporaryPostgres
from memdir.queue._pool import open_pools
from tests.queue._helpers import conversation, one


def _errors(server: TemporaryPostgres) -> int:
    """ERROR lines in the server's log so far (the log is written before the client
    hears of the error, so a count taken after a call includes it)."""
    assert server._base is not None
    log = Path(server._base) / "server.log"
    return sum(1 for line in log.read_text(errors="replace").splitlines() if "ERROR:" in line)


def _todo(dsn: str, dir_id: str) -> int:
    with psycopg.connect(dsn) as conn:
        (count,) = one(
            conn,
            "SELECT count(*) FROM procrastinate_jobs WHERE queueing_lock = %s AND status = 'todo'",
            (dir_id,),
        )
    return int(count)


def test_the_log_counts_what_a_duplicate_defer_does(pg_cluster: TemporaryPostgres, pg_dsn: str):
    """The counter below sees procrastinate's queueing-lock violation (what every
    coalesced turn used to leave in the log)."""
    before = _errors(pg_cluster)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        insert = (
            "INSERT INTO procrastinate_jobs (queue_name, task_name, lock, queueing_lock) "
            "VALUES ('memdir', 'memdir.extract', 'x', 'x')"
        )
        conn.execute(insert)
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(insert)
    assert _errors(pg_cluster) == before + 1


def test_coalesced_turns_leave_no_error_in_the_servers_log(
    pg_cluster: TemporaryPostgres, pg_dsn: str
) -> None:
    before = _errors(pg_cluster)
    hosts = [QueueExtractor(pg_dsn, "dir-c") for _ in range(4)]
    results: dict[int, list[Any]] = {}

    def report(n: int) -> None:
        conv = conversation(f"s{n}", 10)
        results[n] = [
            hosts[n].on_turn_end(TurnContext(messages=conv[: 2 * k], session_id=f"s{n}"))
            for k in range(1, 11)
        ]

    threads = [threading.Thread(target=report, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for host in hosts:
        host.close()
    recorded = [r for rs in results.values() for r in rs]
    assert all(r is not None for r in recorded)
    # One job deferred, 39 turns coalesced into it, and not one error on the server.
    assert sum(r.enqueued for r in recorded) == 1
    assert _todo(pg_dsn, "dir-c") == 1
    assert _errors(pg_cluster) == before


def _wait_for_lock_waiter(conn: psycopg.Connection[Any]) -> None:
    end = time.monotonic() + 30
    while not conn.execute(
        "SELECT count(*) > 0 FROM pg_locks WHERE NOT granted AND locktype IN "
        "('transactionid', 'tuple')"
    ).fetchone()[0]:  # type: ignore[index]
        assert time.monotonic() < end, "the host never waited on the job"
        conn.execute("SELECT pg_sleep(0.01)")


def test_a_job_a_worker_takes_meanwhile_leaves_one_for_the_turn(
    pg_cluster: TemporaryPostgres, pg_dsn: str
) -> None:
    """The race with a worker fetching the directory's waiting job: the turn waits for
    the fetch to end, finds the job no longer waiting, and defers the next one."""
    before = _errors(pg_cluster)
    host = QueueExtractor(pg_dsn, "dir-r", lock_timeout=10.0, record_timeout=20.0)
    conv = conversation("s1", 2)
    first = host.on_turn_end(TurnContext(messages=conv[:2], session_id="s1"))
    assert first is not None
    assert first.enqueued
    outcome: list[Any] = []
    with (
        psycopg.connect(pg_dsn) as fetching,
        psycopg.connect(pg_dsn, autocommit=True) as watcher,
    ):
        # What procrastinate's fetch does: lock the waiting job and mark it taken.
        fetching.execute(
            "SELECT id FROM procrastinate_jobs WHERE queueing_lock = 'dir-r' FOR UPDATE"
        )
        fetching.execute(
            "UPDATE procrastinate_jobs SET status = 'doing' WHERE queueing_lock = 'dir-r'"
        )
        turn = threading.Thread(
            target=lambda: outcome.append(
                host.on_turn_end(TurnContext(messages=conv, session_id="s1"))
            )
        )
        turn.start()
        _wait_for_lock_waiter(watcher)
        fetching.commit()
        turn.join()
    host.close()
    (second,) = outcome
    assert second is not None
    assert second.enqueued  # a new job waits behind the run that took the first
    assert _todo(pg_dsn, "dir-r") == 1
    assert _errors(pg_cluster) == before


def _backends(conn: psycopg.Connection[Any]) -> int:
    (count,) = one(
        conn,
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    return int(count)


def test_a_host_process_shares_one_pool_across_its_directories(pg_dsn: str) -> None:
    hosts = [QueueExtractor(pg_dsn, f"dir-{n:02d}") for n in range(20)]
    with psycopg.connect(pg_dsn, autocommit=True) as watcher:
        # One after another: one connection serves all twenty directories.
        for n, host in enumerate(hosts):
            assert host.on_turn_end(TurnContext(messages=conversation(f"s{n}", 1)))
        assert _backends(watcher) == 1
        # All at once, sync and async: never more than the pool's size.
        ready = threading.Barrier(20)

        def report(n: int) -> None:
            ready.wait()
            turn = TurnContext(messages=conversation(f"s{n}", 2))
            if n % 2:
                assert asyncio.run(hosts[n].aon_turn_end(turn)) is not None
            else:
                assert hosts[n].on_turn_end(turn) is not None

        threads = [threading.Thread(target=report, args=(n,)) for n in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert 1 <= _backends(watcher) <= hosts[0].limits.pool_size
        assert len(open_pools()) == 1
        for host in hosts:
            host.close()
        # The last share closes the pool and its connections.
        assert open_pools() == {}
        end = time.monotonic() + 10
        while _backends(watcher):  # a closed socket's backend takes a moment to exit
            assert time.monotonic() < end
            watcher.execute("SELECT pg_sleep(0.01)")


def test_a_host_connection_waits_briefly_and_never_idles_in_a_transaction(pg_dsn: str) -> None:
    host = QueueExtractor(pg_dsn, "dir-t", lock_timeout=0.25, statement_timeout=0.75)
    assert host.on_turn_end(TurnContext(messages=conversation("s1", 1))) is not None
    with host._shared_pool().connection() as conn:
        settings = [
            conn.execute(f"SHOW {name}").fetchone()
            for name in ("lock_timeout", "statement_timeout", "idle_in_transaction_session_timeout")
        ]
        unacknowledged = conn.info.get_parameters().get("tcp_user_timeout")
    host.close()
    assert settings == [("250ms",), ("750ms",), ("10s",)]
    assert unacknowledged == "1500"
