"""Extraction as jobs on PostgreSQL: throughput with 1, 2 and 4 workers, pickup latency,
memory freshness, and what a turn costs the host.

A throwaway PostgreSQL (``memdir.queue.TemporaryPostgres``) holds the queue. For each
worker count, in a fresh database: producer processes play ``--dirs`` directories x
``--sessions`` sessions, each session finishing one turn every ``--interval-ms`` (the
hosts' pace) for ``--turns`` turns, through ``QueueExtractor.on_turn_end``; worker
processes (``--concurrency`` jobs each) run the jobs with a scripted model that takes
``--latency-ms`` per request and saves one memory per run. The run ends when nothing is
pending and no job waits, awaited on the commits' NOTIFY.

Reported per worker count, side by side:

* runs/s and turns/s: committed runs (one per directory job) and turns covered, over the
  time from the first turn to the last commit; turns per run shows the coalescing;
* wait: a job's start minus the moment it could start (deferred, or its directory's
  previous job ended, whichever is later), from ``procrastinate_events``: under load,
  mostly waiting for a free worker;
* idle pickup: defer to start with every worker idle (``--idle-turns`` single turns,
  one at a time): the latency of the mechanism itself (LISTEN/NOTIFY, the fetch);
* freshness: a turn's commit (the first run whose range covers it) minus its recording:
  how stale memory is, which is what a user sees;
* host cost of ``on_turn_end`` (p50/p95), and separately at conversation lengths 2 and
  2,000 messages, to show it grows with the new messages only.

    python bench/scale_out.py [--workers 1 2 4] [--dirs 20] [--sessions 2] [--turns 25]
        [--interval-ms 400] [--latency-ms 100] [--concurrency 1] [--producers 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import re
import shutil
import signal
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from memdir.extract import ExtractConfig, TurnContext
from memdir.messages import Message, ToolUseBlock
from memdir.models import ModelRequest
from memdir.queue import (
    NOTIFY_CHANNEL,
    QueueExtractor,
    QueueWorker,
    TemporaryPostgres,
    WorkerSettings,
    apply_schema,
)
from memdir.testing import FunctionModel

_DIR_RE = re.compile(r"The memory directory is `([^`]+)`")
_TURN_RE = re.compile(r"^turn (\S+) (\d+)$", re.MULTILINE)
CONFIG = ExtractConfig(skip_index=True, mode="standalone")


def conversation(session: str, turns: int) -> list[Message]:
    out: list[Message] = []
    for k in range(1, turns + 1):
        out.append(Message.user(f"turn {session} {k}", uuid=f"{session}-u{k}"))
        out.append(Message.assistant(f"noted {k}", uuid=f"{session}-a{k}"))
    return out


def scripted_model(latency: float) -> FunctionModel:
    """Thinks ``latency`` seconds, then saves one memory named after the newest turn."""

    async def answer(request: ModelRequest) -> Message | str:
        await asyncio.sleep(latency)
        if any(m.role == "assistant" and m.tool_uses for m in request.messages):
            return "Saved."
        text = "\n".join(m.text for m in request.messages)
        where = _DIR_RE.search(text)
        turns = _TURN_RE.findall(text)
        if where is None or not turns:
            return "Nothing to save."
        session, k = turns[-1]
        body = f"---\nname: {session}-{k}\ndescription: turn {k}\ntype: project\n---\nTurn {k}.\n"
        use = ToolUseBlock(
            id="w",
            name="Write",
            input={"file_path": f"{where[1]}/{session}-{k}.md", "content": body},
        )
        return Message(role="assistant", content=(use,))

    return FunctionModel(answer, name="function:scripted")


def produce(
    dsn: str, dirs: list[str], sessions: int, turns: int, interval: float, out: str
) -> None:
    hosts = {d: QueueExtractor(dsn, d) for d in dirs}
    convs = {
        (d, f"{d}.s{s}"): conversation(f"{d}.s{s}", turns) for d in dirs for s in range(sessions)
    }
    lines: list[str] = []
    start = time.monotonic()
    for k in range(1, turns + 1):
        for (d, session), conv in convs.items():
            t0 = time.perf_counter()
            recorded_at = time.time()
            hosts[d].on_turn_end(TurnContext(messages=conv[: 2 * k], session_id=session))
            cost = time.perf_counter() - t0
            lines.append(json.dumps([d, session, k, recorded_at, cost]))
        # The hosts' pace: the next round of turns is due `interval` after this one began.
        delay = start + k * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    Path(out).write_text("\n".join(lines) + "\n")
    for host in hosts.values():
        host.close()


def work(dsn: str, name: str, latency: float, concurrency: int) -> None:
    model = scripted_model(latency)
    settings = WorkerSettings(
        dsn=dsn,
        models=lambda _n: model,
        config=CONFIG,
        name=name,
        concurrency=concurrency,
        keep_jobs=True,
        sweep_cron=None,
    )
    asyncio.run(QueueWorker(settings).run(wait=True))


def wait_drained(dsn: str, deadline: float) -> None:
    end = time.monotonic() + deadline
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
        while True:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM memdir_pending), (SELECT count(*) FROM "
                "procrastinate_jobs WHERE status IN ('todo', 'doing'))"
            ).fetchone()
            if row == (0, 0):
                return
            if time.monotonic() > end:
                raise SystemExit("the queue did not drain in time")
            for _ in conn.notifies(timeout=2.0, stop_after=1):
                pass


def wait_registered(dsn: str, workers: int, deadline: float = 120.0) -> None:
    """Until every worker has registered with procrastinate: the hosts start only then,
    so a slow start (imports, on a busy machine) does not pass for slow work. Polled:
    procrastinate announces no registration."""
    end = time.monotonic() + deadline
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            row = conn.execute("SELECT count(*) FROM procrastinate_workers").fetchone()
            if row is not None and row[0] >= workers:
                return
            if time.monotonic() > end:
                raise SystemExit("the workers did not start in time")
            time.sleep(0.05)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(len(ordered) * fraction) - 1))]


def measure(server: TemporaryPostgres, workers: int, args: argparse.Namespace) -> dict[str, Any]:
    name = f"bench_w{workers}"
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name} TEMPLATE bench_template")
    dsn = server.dsn(name)
    spawn = multiprocessing.get_context("spawn")
    names = [f"d{i:03d}" for i in range(args.dirs)]
    scratch = Path(tempfile.mkdtemp(prefix="memdir-bench-"))
    pool = [
        spawn.Process(target=work, args=(dsn, f"w{i}", args.latency_ms / 1000, args.concurrency))
        for i in range(workers)
    ]
    feeders = [
        spawn.Process(
            target=produce,
            args=(
                dsn,
                names[i :: args.producers],
                args.sessions,
                args.turns,
                args.interval_ms / 1000,
                str(scratch / f"p{i}.jsonl"),
            ),
        )
        for i in range(args.producers)
    ]
    for process in pool:
        process.start()
    wait_registered(dsn, workers)
    for process in feeders:
        process.start()
    for process in feeders:
        process.join()
    wait_drained(dsn, 600.0)
    # Pickup with the workers idle: one turn at a time on a fresh directory, so nothing
    # but the defer's NOTIFY stands between the turn and the job's start.
    idle_host = QueueExtractor(dsn, "idle")
    for i in range(args.idle_turns):
        conv = conversation(f"idle.s{i}", 1)
        idle_host.on_turn_end(TurnContext(messages=conv, session_id=f"idle.s{i}"))
        wait_drained(dsn, 60.0)
    idle_host.close()
    for process in pool:
        if process.pid is not None:
            os.kill(process.pid, signal.SIGTERM)
    for process in pool:
        process.join(60)
    turns = [
        json.loads(line)
        for path in scratch.glob("p*.jsonl")
        for line in path.read_text().splitlines()
    ]
    shutil.rmtree(scratch, ignore_errors=True)
    with psycopg.connect(dsn) as conn:
        runs = conn.execute(
            "SELECT dir_id, session, generation, to_seq, extract(epoch FROM committed_at) "
            "FROM memdir_runs"
        ).fetchall()
        events = conn.execute(
            "SELECT j.id, j.lock, e.type::text, extract(epoch FROM e.at) "
            "FROM procrastinate_events e JOIN procrastinate_jobs j ON j.id = e.job_id "
            "WHERE j.task_name = 'memdir.extract'"
        ).fetchall()
    idle = [
        j["started"] - j["deferred"]
        for j in _jobs(events).values()
        if j["lock"] == "idle" and "started" in j and "deferred" in j
    ]
    covered: dict[str, list[tuple[int, float]]] = {}
    for _, session, _, to_seq, at in runs:
        covered.setdefault(session, []).append((int(to_seq), float(at)))
    lags = []
    for _, session, k, recorded_at, _ in turns:  # the idle turns were not logged
        done = min(at for to_seq, at in covered[session] if to_seq >= 2 * k)
        lags.append(done - recorded_at)
    jobs = _jobs(events)
    pickups = []
    by_lock: dict[str, list[dict[str, Any]]] = {}
    for job in jobs.values():
        if "started" in job and job["lock"] != "idle":
            by_lock.setdefault(job["lock"], []).append(job)
    for chain in by_lock.values():
        chain.sort(key=lambda j: j["started"])
        previous_end = 0.0
        for job in chain:
            ready = max(job.get("deferred", job["started"]), previous_end)
            pickups.append(max(0.0, job["started"] - ready))
            previous_end = job.get("succeeded", job.get("failed", job["started"]))
    first = min(t[3] for t in turns)
    last = max(float(r[4]) for r in runs if r[0] != "idle")
    wall = last - first
    dir_runs = len({(r[0], r[2]) for r in runs if r[0] != "idle"})
    costs = [t[4] for t in turns]
    return {
        "workers": workers,
        "wall_s": round(wall, 2),
        "runs": dir_runs,
        "runs_per_s": round(dir_runs / wall, 1),
        "turns_per_s": round(len(turns) / wall, 1),
        "turns_per_run": round(len(turns) / dir_runs, 2),
        "wait_ms_p50": round(percentile(pickups, 0.5) * 1000, 1),
        "wait_ms_p95": round(percentile(pickups, 0.95) * 1000, 1),
        "idle_pickup_ms_p50": round(percentile(idle, 0.5) * 1000, 1),
        "idle_pickup_ms_max": round(max(idle) * 1000, 1),
        "freshness_s_p50": round(percentile(lags, 0.5), 2),
        "freshness_s_p95": round(percentile(lags, 0.95), 2),
        "host_ms_p50": round(percentile(costs, 0.5) * 1000, 2),
        "host_ms_p95": round(percentile(costs, 0.95) * 1000, 2),
    }


def _jobs(events: list[tuple[Any, ...]]) -> dict[int, dict[str, Any]]:
    """Each extract job's lock and the time of each of its events, by type."""
    jobs: dict[int, dict[str, Any]] = {}
    for job_id, lock, kind, at in events:
        jobs.setdefault(job_id, {"lock": lock})[kind] = float(at)
    return jobs


def host_cost_by_length(
    server: TemporaryPostgres, lengths: list[int], repeats: int
) -> dict[int, float]:
    """Median ``on_turn_end`` time for a turn that adds 2 messages to a conversation of
    each length: the host ships the new messages only, whatever came before."""
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS bench_host")
        conn.execute("CREATE DATABASE bench_host TEMPLATE bench_template")
    dsn = server.dsn("bench_host")
    out: dict[int, float] = {}
    for length in lengths:
        samples = []
        for r in range(repeats):
            session = f"len{length}-{r}"
            conv = conversation(session, length // 2 + 1)
            host = QueueExtractor(dsn, f"host-{length}")
            host.on_turn_end(TurnContext(messages=conv[:length], session_id=session))
            t0 = time.perf_counter()
            host.on_turn_end(TurnContext(messages=conv[: length + 2], session_id=session))
            samples.append(time.perf_counter() - t0)
            host.close()
        out[length] = round(statistics.median(samples) * 1000, 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--dirs", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=2)
    parser.add_argument("--turns", type=int, default=25)
    parser.add_argument("--interval-ms", type=float, default=400.0)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--idle-turns", type=int, default=10)
    args = parser.parse_args()
    with TemporaryPostgres() as server:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench_template")
        apply_schema(server.dsn("bench_template"))
        rows = [measure(server, n, args) for n in args.workers]
        lengths = host_cost_by_length(server, [2, 200, 2000], repeats=20)
    print(
        json.dumps(
            {
                "setup": vars(args),
                "cpus": os.cpu_count(),
                "results": rows,
                "host_ms_by_length": lengths,
            },
            indent=2,
        )
    )
    base = rows[0]["runs_per_s"] or 1.0
    for row in rows:
        print(
            f"{row['workers']} worker(s): {row['runs_per_s']} runs/s "
            f"({row['runs_per_s'] / base:.2f}x), {row['turns_per_run']} turns/run, wait p50 "
            f"{row['wait_ms_p50']} ms, idle pickup p50 {row['idle_pickup_ms_p50']} ms, "
            "freshness p50 "
            f"{row['freshness_s_p50']} s p95 {row['freshness_s_p95']} s, host p50 "
            f"{row['host_ms_p50']} ms"
        )


if __name__ == "__main__":
    main()
