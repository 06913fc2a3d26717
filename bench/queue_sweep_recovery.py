"""How long a killed worker's directory waits under a backlog, with the sweeper and the
jobs it defers again behind the extract jobs (priority 0, as before) and ahead of them
(memdir's defaults: 100 for the sweep, 50 for what it defers).

A throwaway PostgreSQL holds the queue. A victim worker starts the victim directory's
run, whose model never answers, and is SIGKILLed there; meanwhile ``--backlog``
directories have one turn each waiting. A rescuer worker (``--concurrency`` slots, a
model of ``--latency-ms``, the sweep every second, a worker counted stalled after
``--stalled`` seconds of silence) then works the queue. Only the sweeper frees the
victim directory (its job is still 'doing' under a dead worker): reported is the time
from the kill to the victim's turn committed, and to the whole backlog drained.

    python bench/queue_sweep_recovery.py [--backlog 60] [--latency-ms 300]
        [--concurrency 2] [--stalled 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Any

import psycopg

from memdir.extract import ExtractConfig, TurnContext
from memdir.messages import Message
from memdir.queue import (
    QueueExtractor,
    QueueWorker,
    TemporaryPostgres,
    WorkerSettings,
    migrate_schema,
)
from memdir.testing import FunctionModel

CONFIG = ExtractConfig(skip_index=True, mode="standalone")
_spawn = multiprocessing.get_context("spawn")


def _record(dsn: str, dir_id: str) -> None:
    host = QueueExtractor(dsn, dir_id)
    try:
        conv = [Message.user(f"hello {dir_id}", uuid="u1"), Message.assistant("hi", uuid="a1")]
        host.on_turn_end(TurnContext(messages=conv, session_id="s"))
    finally:
        host.close()


def _victim(dsn: str, started: Any, scratch: str) -> None:
    async def hang(_request: Any) -> str:
        started.set()
        await asyncio.Event().wait()
        return ""

    model = FunctionModel(hang, name="function:hang")
    settings = WorkerSettings(
        dsn=dsn,
        models=lambda _n: model,
        config=CONFIG,
        name="victim",
        concurrency=1,
        heartbeat_interval=0.5,
        sweep_cron=None,
        scratch=Path(scratch),
    )
    asyncio.run(QueueWorker(settings).run())


def _covered(dsn: str, dir_id: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT cursor_uuid FROM memdir_sessions WHERE dir_id = %s", (dir_id,)
        ).fetchone()
    return row is not None and row[0] == "a1"


def _drained(dsn: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM memdir_pending").fetchone()
    return row is not None and row[0] == 0


async def _rescue(dsn: str, args: argparse.Namespace, priority: int) -> tuple[float, float]:
    async def answer(_request: Any) -> str:
        await asyncio.sleep(args.latency_ms / 1000)  # the model's think time
        return "Nothing to save."

    model = FunctionModel(answer, name="function:slow")
    settings = WorkerSettings(
        dsn=dsn,
        models=lambda _n: model,
        config=CONFIG,
        name="rescuer",
        concurrency=args.concurrency,
        heartbeat_interval=0.5,
        poll_interval=0.5,
        sweep_cron="* * * * * *",
        stalled_after=args.stalled,
        sweep_priority=priority,
        redefer_priority=priority // 2,
    )
    began = time.monotonic()
    task = asyncio.create_task(QueueWorker(settings).run(install_signal_handlers=False))
    victim_at = drained_at = 0.0
    try:
        while not (victim_at and drained_at):
            await asyncio.sleep(0.05)  # a poll interval
            now = time.monotonic() - began
            if not victim_at and await asyncio.to_thread(_covered, dsn, "victim"):
                victim_at = now
            if not drained_at and await asyncio.to_thread(_drained, dsn):
                drained_at = now
            if now > 600:
                raise RuntimeError("no recovery within 10 minutes")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return victim_at, drained_at


def _one(server: TemporaryPostgres, args: argparse.Namespace, priority: int, n: int) -> str:
    name = f"recovery_{n}"
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    dsn = server.dsn(name)
    migrate_schema(dsn)
    _record(dsn, "victim")
    started = _spawn.Event()
    scratch = Path(f"/tmp/memdir-bench-{os.getpid()}")
    scratch.mkdir(exist_ok=True)
    victim = _spawn.Process(target=_victim, args=(dsn, started, str(scratch)))
    victim.start()
    if not started.wait(60):
        raise RuntimeError("the victim never started its run")
    for k in range(args.backlog):
        _record(dsn, f"b{k:03d}")
    assert victim.pid is not None
    os.kill(victim.pid, signal.SIGKILL)
    victim.join()
    victim_at, drained_at = asyncio.run(_rescue(dsn, args, priority))
    return (
        f"| {priority} | {args.backlog} | {victim_at:.1f} s | {drained_at:.1f} s |"
        f" {args.backlog * args.latency_ms / 1000 / args.concurrency:.1f} s |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=60)
    parser.add_argument("--latency-ms", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--stalled", type=float, default=2.0)
    args = parser.parse_args()
    rows = [
        "| Sweep priority | Backlog | Victim covered after | Backlog drained after "
        "| Backlog's own time |",
        "|---|---:|---:|---:|---:|",
    ]
    with TemporaryPostgres() as server:
        for n, priority in enumerate((0, 100)):
            rows.append(_one(server, args, priority, n))
            print(rows[-1], flush=True)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
