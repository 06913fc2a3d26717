"""Many concurrent sessions on one event loop: throughput and memory per session.

Each session is a host conversation with its own ``MemoryExtractor`` and its own memory
directory (all under one temporary directory), and its own ``FunctionModel`` that sleeps
a fixed 50 ms per request. A run makes two requests: the first answers with a ``Write``
of a new memory file (so files are really written, through the permission gate and the
write guard), the second with a final text. Every session gets 3 turns, fired round by
round over all sessions with one ``asyncio.sleep(0)`` between rounds and no drain until
the end: the first turn of a session starts a run, the next ones arrive while it is in
progress and coalesce, and the latest runs as the trailing run — 2 runs per session.

Measured per size, in the same run (a small size, 100 by default, then ``--sessions``):

- a timed pass: wall time from the first turn to all drained, runs and turns per second,
  and the process's max RSS growth over the pass (``resource.getrusage`` high-water mark:
  it only shows growth above every earlier peak of the process, so the small size runs
  first and the large one's figure is growth beyond the small one's peak);
- a traced pass, the same work under ``tracemalloc``: peak Python heap during the pass
  minus the heap before it, divided by sessions. That is everything the sessions hold at
  their peak — extractor, model and its recorded requests, conversations, runs in flight
  and their forks' messages — and not the interpreter's own overhead. Once the pass has
  returned, its loop closed and garbage collected, the heap should be back where it
  was: what is left is reported as kept. One-time caches show in the small size, which
  runs first; the interpreter's own tables that grew stay too (each session's distinct
  path names are interned, the loop's weak set of tasks keeps its size), about 1 KiB a
  session; memdir objects left behind would be a leak. Tracing slows the pass, so its
  timing is not reported.

The extractor's disk I/O (scan, directory setup, the ``Write`` tool) goes through
``asyncio.to_thread``, i.e. the loop's default thread pool. The timed pass installs a
pool of the standard default size (``min(32, cpus + 4)`` unless ``--threads``) that also
records how long each job waited for a free thread and how long threads were busy
(running or waiting for the GIL). The pass also reports the process's CPU time and the
loop thread's own, per run, and ``cores_used`` (CPU seconds per wall second): the loop
and the pool share one GIL, so near 1 the process is CPU-bound and a long queue for the
pool only mirrors that; well below 1 on an idle machine, something else waits. To tell
the two apart, the large size is timed once more with a pool of ``--alt-threads``
(default 32, the standard maximum; 0 skips it) and the wall times are compared. The
machine's other load shows in these figures; CPU per run is the steadiest of them.

    python bench/sessions.py [--sessions 1000] [--small 100] [--turns 3] [--latency-ms 50]
                             [--threads N] [--alt-threads 32]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.fork import CacheSafeParams
from memdir.messages import Message, ToolUseBlock
from memdir.models import ModelRequest
from memdir.telemetry import CollectingSink
from memdir.testing import FunctionModel

P = ParamSpec("P")
T = TypeVar("T")

MEMORY_FILE = "---\nname: {name}\ndescription: noted in turn {turn}\ntype: user\n---\n\n{body}\n"


class TimedPool(ThreadPoolExecutor):
    """A thread pool that records each job's wait for a thread and its run time."""

    def __init__(self, max_workers: int) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix="bench-io")
        self.waits: list[float] = []
        self.busy = 0.0
        self._record = threading.Lock()

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        queued = time.perf_counter()

        def timed() -> T:
            begun = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                ended = time.perf_counter()
                with self._record:
                    self.waits.append(begun - queued)
                    self.busy += ended - begun

        return super().submit(timed)


class Session:
    """One host conversation with its extractor and its model."""

    def __init__(self, root: Path, latency: float, sink: CollectingSink) -> None:
        self.memory = root / "memory"
        self.messages: list[Message] = []
        self.model = FunctionModel(self.answer)
        self.params = CacheSafeParams(model=self.model, system="You are the host agent.")
        self.extractor = MemoryExtractor(self.memory, self.model, ExtractConfig(), sink=sink)
        self.latency = latency

    async def answer(self, request: ModelRequest) -> Message | str:
        await asyncio.sleep(self.latency)
        if request.messages[-1].is_tool_result:
            return "Saved."
        turn = len(request.messages) // 2  # the snapshot, then the prompt
        name = f"turn_{turn}"
        use = ToolUseBlock(
            id=f"w{turn}",
            name="Write",
            input={
                "file_path": str(self.memory / f"{name}.md"),
                "content": MEMORY_FILE.format(name=name, turn=turn, body=request.messages[-2].text),
            },
        )
        return Message(role="assistant", content=(use,))

    def turn(self, n: int) -> None:
        self.messages += [Message.user(f"question {n}"), Message.assistant(f"answer {n}")]
        self.extractor.on_turn_end(TurnContext(messages=self.messages, params=self.params))


async def drive(root: Path, sessions: int, turns: int, latency: float) -> dict[str, Any]:
    """Build the sessions, fire every round of turns, drain; the figures that do not time."""
    sink = CollectingSink()
    hosts = [Session(root / f"s{i:05d}", latency, sink) for i in range(sessions)]
    for n in range(turns):
        for host in hosts:
            host.turn(n)
        await asyncio.sleep(0)
    await asyncio.gather(*(host.extractor.drain(timeout=600) for host in hosts))
    runs = sink.named("extract.run")
    return {
        "runs_completed": len(runs),
        "extract_error_events": len(sink.named("extract.error")),
        "coalesced": len(sink.named("extract.coalesced")),
        "permission_denied": len(sink.named("permission.denied")),
        "model_requests": sum(len(host.model.requests) for host in hosts),
        "memories_saved": sum(e.fields["memories_saved"] for e in runs),
        "still_in_flight": sum(host.extractor.in_flight for host in hosts),
        "run_duration_ms_median": statistics.median(e.fields["duration_ms"] for e in runs)
        if runs
        else None,
    }


async def timed_pass(
    root: Path, sessions: int, turns: int, latency: float, threads: int
) -> dict[str, Any]:
    pool = TimedPool(threads)
    asyncio.get_running_loop().set_default_executor(pool)
    before = resource.getrusage(resource.RUSAGE_SELF)
    loop_cpu = time.thread_time()
    started = time.perf_counter()
    figures = await drive(root, sessions, turns, latency)
    wall = time.perf_counter() - started
    loop_cpu = time.thread_time() - loop_cpu
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    rss = after.ru_maxrss - before.ru_maxrss
    runs = max(1, figures["runs_completed"])
    waits = sorted(pool.waits)
    # The shortest possible wall time: each session's runs follow one another, each run
    # waits for its model requests; everything else (CPU, disk, the pool) adds to it.
    ideal = figures["model_requests"] / sessions * latency
    return {
        **figures,
        "wall_s": round(wall, 3),
        "runs_per_s": round(figures["runs_completed"] / wall, 1),
        "turns_per_s": round(sessions * turns / wall, 1),
        "model_wait_floor_s": round(ideal, 3),
        "wall_over_floor": round(wall / ideal, 2),
        "cpu_s": round(cpu, 2),
        "loop_thread_cpu_s": round(loop_cpu, 2),
        "cpu_per_run_ms": round(cpu / runs * 1000, 2),
        "loop_thread_cpu_per_run_ms": round(loop_cpu / runs * 1000, 2),
        "cores_used": round(cpu / wall, 2),
        "max_rss_growth_kib": rss,
        "max_rss_growth_per_session_kib": round(rss / sessions, 2),
        "thread_pool": {
            "max_workers": threads,
            "jobs": len(waits),
            "queue_wait_median_ms": round(statistics.median(waits) * 1000, 2) if waits else 0,
            "queue_wait_p99_ms": round(waits[max(0, int(len(waits) * 0.99) - 1)] * 1000, 2)
            if waits
            else 0,
            "queue_wait_max_ms": round(waits[-1] * 1000, 2) if waits else 0,
            "utilisation": round(pool.busy / (threads * wall), 3),
        },
    }


def traced_pass(root: Path, sessions: int, turns: int, latency: float) -> dict[str, Any]:
    tracemalloc.start()
    baseline, _ = tracemalloc.get_traced_memory()
    figures = asyncio.run(drive(root, sessions, turns, latency))
    # Leftovers are looked for once the loop is closed (it holds the last tasks) and the
    # cycles between sessions and their models are collected.
    gc.collect()
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "runs_completed": figures["runs_completed"],
        "extract_error_events": figures["extract_error_events"],
        "heap_peak_growth_kib": round((peak - baseline) / 1024, 1),
        "heap_peak_per_session_kib": round((peak - baseline) / 1024 / sessions, 2),
        "heap_kept_after_pass_kib": round((current - baseline) / 1024, 1),
    }


def count_memories(root: Path) -> int:
    return sum(1 for p in root.rglob("*.md") if p.name != "MEMORY.md")


def measure(root: Path, sessions: int, turns: int, latency: float, threads: int) -> dict[str, Any]:
    timed = asyncio.run(timed_pass(root / "timed", sessions, turns, latency, threads))
    timed["memory_files_on_disk"] = count_memories(root / "timed")
    traced = traced_pass(root / "traced", sessions, turns, latency)
    return {"sessions": sessions, "turns": sessions * turns, "timed": timed, "traced": traced}


def pool_check(
    root: Path, sessions: int, turns: int, latency: float, threads: int, default: dict[str, Any]
) -> dict[str, Any]:
    """The large size timed again with another pool size, against the default pool's pass."""
    other = asyncio.run(timed_pass(root, sessions, turns, latency, threads))
    return {
        "max_workers": threads,
        "wall_s": other["wall_s"],
        "runs_per_s": other["runs_per_s"],
        "runs_completed": other["runs_completed"],
        "queue_wait_median_ms": other["thread_pool"]["queue_wait_median_ms"],
        "wall_ratio_to_default_pool": round(other["wall_s"] / default["wall_s"], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--small", type=int, default=100, help="the size to compare with")
    parser.add_argument("--turns", type=int, default=3, help="turns per session")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--threads", type=int, default=min(32, (os.cpu_count() or 1) + 4))
    parser.add_argument("--alt-threads", type=int, default=32, help="0: no second pool")
    args = parser.parse_args()
    latency = args.latency_ms / 1000
    with tempfile.TemporaryDirectory() as tmp:
        small = measure(Path(tmp) / "small", args.small, args.turns, latency, args.threads)
        large = measure(Path(tmp) / "large", args.sessions, args.turns, latency, args.threads)
        check = (
            pool_check(
                Path(tmp) / "pool",
                args.sessions,
                args.turns,
                latency,
                args.alt_threads,
                large["timed"],
            )
            if args.alt_threads > 0
            else None
        )

    def ratio(part: str, key: str) -> float:
        return round(float(large[part][key]) / float(small[part][key]), 2)

    print(
        json.dumps(
            {
                "bench": "sessions",
                "model_latency_ms": args.latency_ms,
                "turns_per_session": args.turns,
                "cpus": os.cpu_count(),
                "small": small,
                "large": large,
                "large_with_other_pool": check,
                "ratios_large_to_small": {
                    "sessions": round(args.sessions / args.small, 2),
                    "wall": ratio("timed", "wall_s"),
                    "runs_per_s": ratio("timed", "runs_per_s"),
                    "heap_peak_per_session": ratio("traced", "heap_peak_per_session_kib"),
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
