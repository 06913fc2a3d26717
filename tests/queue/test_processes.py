"""The queue backend across processes: several producers, several workers, a crash.

Completion is awaited on the commits' NOTIFY (``memdir_commit``) and on process joins,
never on sleeps.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import os
import signal
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg

from memdir.queue import QueueWorker, WorkerSettings, sweep
from tests.queue._helpers import (
    CONFIG,
    drained,
    memory_name,
    one,
    produce,
    run_until_drained,
    saving_model,
    wait_drained,
    work,
)

_spawn = multiprocessing.get_context("spawn")
_DEADLINE = 90.0


def _stop(processes: Sequence[multiprocessing.process.BaseProcess]) -> None:
    for process in processes:
        if process.is_alive() and process.pid is not None:
            os.kill(process.pid, signal.SIGTERM)
    for process in processes:
        process.join(30)
        if process.is_alive():
            process.kill()
            process.join()


def _check_runs(dsn: str, sessions: dict[tuple[str, str], int]) -> Iterator[str]:
    """Everything the guarantees promise, from the audit rows; yields each problem."""
    with psycopg.connect(dsn) as conn:
        runs = conn.execute(
            "SELECT dir_id, session, generation, from_seq, to_seq, started_at, committed_at, "
            "worker FROM memdir_runs ORDER BY dir_id, generation, session"
        ).fetchall()
        cursors = {
            (d, s): c
            for d, s, c in conn.execute("SELECT dir_id, session, cursor_uuid FROM memdir_sessions")
        }
        files = {(d, p) for d, p in conn.execute("SELECT dir_id, path FROM memdir_files")}
    by_dir: dict[str, list[tuple[Any, ...]]] = {}
    for row in runs:
        by_dir.setdefault(row[0], []).append(row)
    for dir_id, rows in by_dir.items():
        # One interval per generation (a run covers several sessions in one commit).
        spans: dict[int, tuple[Any, Any]] = {}
        for _, _, gen, _, _, start, end, _ in rows:
            spans[gen] = (start, end)
        ordered = [spans[g] for g in sorted(spans)]
        for (_, end), (start, _) in itertools.pairwise(ordered):
            if start < end:
                yield f"{dir_id}: runs overlap ({start} < {end})"
    for (dir_id, session), turns in sessions.items():
        mine = sorted((r[3], r[4]) for r in runs if r[0] == dir_id and r[1] == session)
        expected = 1
        for low, high in mine:
            if low != expected:
                yield f"{dir_id}/{session}: run starts at {low}, expected {expected}"
            expected = high + 1
            # The run's memory is named after the newest turn it saw; it must survive.
            if (dir_id, memory_name(session, high // 2)) not in files:
                yield f"{dir_id}/{session}: the memory of turn {high // 2} is missing"
        if expected != 2 * turns + 1:
            yield f"{dir_id}/{session}: covered up to {expected - 1}, not {2 * turns}"
        if cursors.get((dir_id, session)) != f"{session}-a{turns}":
            yield f"{dir_id}/{session}: cursor {cursors.get((dir_id, session))}"


def _run_load(dsn: str, dirs: int, sessions: int, turns: int, producers: int, workers: int):
    names = [f"d{i:02d}" for i in range(dirs)]
    started = [
        _spawn.Process(target=work, args=(dsn, f"w{i}", 0.002, 4), daemon=True)
        for i in range(workers)
    ]
    feeding = [
        _spawn.Process(target=produce, args=(dsn, names[i::producers], sessions, turns))
        for i in range(producers)
    ]
    for process in [*started, *feeding]:
        process.start()
    try:
        for process in feeding:
            process.join(_DEADLINE)
            assert process.exitcode == 0, "a producer failed"
        wait_drained(dsn)
    finally:
        _stop(started)
    expected = {(d, f"{d}.s{s}"): turns for d in names for s in range(sessions)}
    return list(_check_runs(dsn, expected))


def test_two_workers_four_producers_small(pg_dsn):
    assert _run_load(pg_dsn, dirs=4, sessions=2, turns=10, producers=2, workers=2) == []


def test_thousand_turns_twenty_dirs(pg_dsn):
    # 20 directories x 2 sessions x 25 turns = 1,000 turns, 4 producers, 2 workers.
    problems = _run_load(pg_dsn, dirs=20, sessions=2, turns=25, producers=4, workers=2)
    assert problems == []
    with psycopg.connect(pg_dsn) as conn:
        workers = {w for (w,) in conn.execute("SELECT DISTINCT worker FROM memdir_runs")}
    assert workers == {"w0", "w1"}


def test_a_worker_killed_mid_run_loses_nothing(pg_dsn, tmp_path):
    produce(pg_dsn, ["dk", "dx"], 2, 3)
    started, block = _spawn.Event(), _spawn.Event()
    victim = _spawn.Process(
        target=work,
        args=(pg_dsn, "victim", 0.0, 1),
        kwargs={"block": block, "started": started, "scratch": str(tmp_path)},
    )
    victim.start()
    try:
        assert started.wait(_DEADLINE), "the victim never reached the model"
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        victim.join()
    finally:
        if victim.is_alive():
            victim.kill()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        (stuck,) = one(conn, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'doing'")
        assert stuck == 1
        # Time passing for the dead worker only: its last heartbeat is now old.
        conn.execute(
            "UPDATE procrastinate_workers SET last_heartbeat = now() - interval '1 hour' "
            "WHERE id IN (SELECT worker_id FROM procrastinate_jobs WHERE status = 'doing')"
        )

    async def heal() -> tuple[int, int]:
        model = saving_model()
        rescuer = QueueWorker(WorkerSettings(dsn=pg_dsn, models=lambda _n: model, config=CONFIG))
        async with rescuer.app.open_async():
            healed = await sweep(rescuer.app, pg_dsn, stalled_after=30.0)
        await run_until_drained(rescuer, pg_dsn)
        return healed

    failed, _ = asyncio.run(heal())
    assert failed == 1
    with psycopg.connect(pg_dsn) as conn:
        assert drained(conn)
        (status,) = one(conn, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'failed'")
        assert status == 1
    expected = {(d, f"{d}.s{s}"): 3 for d in ("dk", "dx") for s in range(2)}
    assert list(_check_runs(pg_dsn, expected)) == []
