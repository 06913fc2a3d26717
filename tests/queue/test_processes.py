"""The queue backend across processes: several producers, several workers, a crash.

Completion is awaited on the commits' NOTIFY (``memdir_commit``) and on process joins,
never on sleeps.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import multiprocessing
import os
import signal
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

import psycopg

from memdir.queue import QueueWorker, WorkerSettings, export_dir, queue_status, sweep
from memdir.telemetry import CollectingSink
from tests.queue._helpers import (
    CONFIG,
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


def _run_overlaps(logs: Sequence[Path]) -> Iterator[str]:
    """Jobs of one directory that were under way at the same time, refused ones too,
    from the workers' own events (each job's ``extract.started`` to its
    ``extract.finished``; its sessions commit one by one in between, and a refused one
    says ``extract.conflict``): the lock's promise, seen apart from the generation, which
    would only refuse the second commit."""
    opened: dict[tuple[str, str], list[str]] = {}
    spans: dict[str, list[tuple[str, str]]] = {}
    for log in logs:
        if not log.exists():  # a worker that never got a job reported nothing
            continue
        for line in log.read_text().splitlines():
            record = json.loads(line)
            name, fields = record["event"], record["fields"]
            key = (fields.get("worker", ""), fields.get("dir_id", ""))
            if name == "extract.started":
                opened.setdefault(key, []).append(record["ts"])
            elif name == "extract.conflict":
                yield f"{key[1]}: a commit by {key[0]} was refused"
            elif name == "extract.finished":
                spans.setdefault(key[1], []).append((opened[key].pop(0), record["ts"]))
    for dir_id, chain in spans.items():
        chain.sort()
        for (_, end), (start, _) in itertools.pairwise(chain):
            if start < end:  # the same clock, to the millisecond: equal is in order
                yield f"{dir_id}: a run started at {start}, before {end}"


def _check_runs(dsn: str, sessions: dict[tuple[str, str], int]) -> Iterator[str]:
    """Everything the guarantees promise, from the audit rows; yields each problem."""
    with psycopg.connect(dsn) as conn:
        runs = conn.execute(
            "SELECT dir_id, session, generation, from_seq, to_seq, started_at, committed_at, "
            "worker, job_id FROM memdir_runs ORDER BY dir_id, generation, session"
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
        # One interval per job: its sessions run side by side and commit one by one
        # (a direct call, with no job, is its own).
        spans: dict[Any, tuple[Any, Any]] = {}
        for _, _, gen, _, _, start, end, _, job in rows:
            key = ("job", job) if job is not None else ("generation", gen)
            first, last = spans.get(key, (start, end))
            spans[key] = (min(first, start), max(last, end))
        ordered = sorted(spans.values())
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


def _run_load(
    dsn: str, logs: Path, dirs: int, sessions: int, turns: int, producers: int, workers: int
):
    names = [f"d{i:02d}" for i in range(dirs)]
    events = [logs / f"w{i}.jsonl" for i in range(workers)]
    started = [
        _spawn.Process(
            target=work,
            args=(dsn, f"w{i}", 0.002, 4),
            kwargs={"events": str(events[i])},
            daemon=True,
        )
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
    return list(_run_overlaps(events)) + list(_check_runs(dsn, expected))


def test_two_workers_four_producers_small(pg_dsn, tmp_path):
    problems = _run_load(pg_dsn, tmp_path, dirs=4, sessions=2, turns=10, producers=2, workers=2)
    assert problems == []


def test_thousand_turns_twenty_dirs(pg_dsn, tmp_path):
    # 20 directories x 2 sessions x 25 turns = 1,000 turns, 4 producers, 2 workers.
    problems = _run_load(pg_dsn, tmp_path, dirs=20, sessions=2, turns=25, producers=4, workers=2)
    assert problems == []
    with psycopg.connect(pg_dsn) as conn:
        workers = {w for (w,) in conn.execute("SELECT DISTINCT worker FROM memdir_runs")}
    assert workers == {"w0", "w1"}


def _reported_saved(events: Sequence[tuple[str, dict[str, Any]]]) -> set[tuple[str, str]]:
    return {(f["dir_id"], f["path"]) for name, f in events if name == "queue.memory_saved"}


def test_a_worker_killed_mid_run_loses_nothing(pg_dsn, tmp_path):
    produce(pg_dsn, ["dk", "dx"], 2, 3)
    started, block = _spawn.Event(), _spawn.Event()
    log = tmp_path / "victim.jsonl"
    # One job at a time: dk runs and commits, then dx's run is held in the model.
    victim = _spawn.Process(
        target=work,
        args=(pg_dsn, "victim", 0.0, 1),
        kwargs={
            "block": block,
            "started": started,
            "scratch": str(tmp_path),
            "block_on": "dx",
            "events": str(log),
        },
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
    reported = [
        (line["event"], line["fields"]) for line in map(json.loads, log.read_text().splitlines())
    ]
    assert {d for d, _ in _reported_saved(reported)} == {"dk"}  # dx's run never committed
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        (stuck,) = one(conn, "SELECT lock FROM procrastinate_jobs WHERE status = 'doing'")
        assert stuck == "dx"
        # Time passing for the dead worker only: its last heartbeat is now old.
        conn.execute(
            "UPDATE procrastinate_workers SET last_heartbeat = now() - interval '1 hour' "
            "WHERE id IN (SELECT worker_id FROM procrastinate_jobs WHERE status = 'doing')"
        )
    sink = CollectingSink()

    async def heal() -> tuple[int, int]:
        model = saving_model()
        settings = WorkerSettings(dsn=pg_dsn, models=lambda _n: model, config=CONFIG, sink=sink)
        rescuer = QueueWorker(settings)
        async with rescuer.app.open_async():
            healed = await sweep(rescuer.app, pg_dsn, stalled_after=30.0)
        await run_until_drained(rescuer, pg_dsn)
        # Not blocked: a later turn of each session, the killed directory's too, runs.
        await asyncio.to_thread(produce, pg_dsn, ["dk", "dx"], 2, 4, 4)
        await run_until_drained(rescuer, pg_dsn)
        return healed

    assert asyncio.run(heal()) == (1, 1)  # dx's job failed, and dx deferred again
    [failed] = queue_status(pg_dsn).failed_jobs
    assert failed["dir_id"] == "dx"
    assert failed["reason"].startswith("stalled")
    expected = {(d, f"{d}.s{s}"): 4 for d in ("dk", "dx") for s in range(2)}
    assert list(_check_runs(pg_dsn, expected)) == []
    # Every memory a worker reported saved is in the database and in a synced folder.
    collected = [(e.name, dict(e.fields)) for e in sink.events]
    saved = _reported_saved(reported) | _reported_saved(collected)
    with psycopg.connect(pg_dsn) as conn:
        stored = {(d, p) for d, p in conn.execute("SELECT dir_id, path FROM memdir_files")}
    mirrored: set[tuple[str, str]] = set()
    for dir_id in ("dk", "dx"):
        export_dir(pg_dsn, dir_id, tmp_path / "sync" / dir_id)
        root = tmp_path / "sync" / dir_id
        mirrored |= {(dir_id, p.relative_to(root).as_posix()) for p in root.rglob("*.md")}
    assert saved
    assert saved <= stored
    assert saved <= mirrored
