"""What memory costs the host's event loop, for short and very long conversations.

Two measurements, each size in the same run:

- ``on_turn_end``: the call is on the host agent's path after every turn, so it must not
  grow with the conversation (median and p99 in microseconds over many calls; the ratio
  largest / smallest should stay near 1);
- the longest stall of the host's loop while a run goes on: a task that sleeps 1 ms at a
  time records how late it wakes, while the extractor runs on the same loop through
  ``AnthropicModel`` and the official SDK, against a ``FakeAnthropicServer`` in a child
  process (so the server's own work never competes for this process). The first run of
  a conversation converts all of it; the later runs, each after one more turn, only what
  is new. The idle loop, with no run, is measured beside it. Each stall is reported as
  wall-clock lateness (with and without the garbage collector's pauses) and as the CPU
  time the loop's thread spent in one go, which other processes' scheduling leaves out.

    python bench/hook_overhead.py [--calls 2000] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.fork import CacheSafeParams
from memdir.messages import Message
from memdir.models import AnthropicModel, Model, ModelRequest, RetryPolicy
from memdir.telemetry import CollectingSink
from memdir.testing import FunctionModel
from memdir.tools import builtin_tools

SIZES = (100, 10_000, 100_000)
MODEL = "claude-sonnet-5-5"
SPEC = f"anthropic:{MODEL}"


def conversation(size: int) -> tuple[Message, ...]:
    return tuple(
        Message.user(f"question {i}") if i % 2 == 0 else Message.assistant(f"answer {i}")
        for i in range(size)
    )


async def measure(calls: int, memory_dir: str) -> dict[str, dict[str, float]]:
    """Time ``on_turn_end`` for every size, the sizes taking turns call by call.

    Interleaving puts each size under the same machine load, so the ratio between them
    compares the conversations and not moments of the run.
    """

    async def answer(request: ModelRequest) -> str:
        return "Nothing to save."

    model = FunctionModel(answer)
    params = CacheSafeParams(model=model, system="host")
    extractors = {
        size: MemoryExtractor(f"{memory_dir}/m{size}", model, ExtractConfig()) for size in SIZES
    }
    turns = {size: TurnContext(messages=conversation(size), params=params) for size in SIZES}
    samples: dict[int, list[float]] = {size: [] for size in SIZES}
    for call in range(calls):
        shift = call % len(SIZES)  # each size goes first as often as the others
        for size in SIZES[shift:] + SIZES[:shift]:
            extractor, turn = extractors[size], turns[size]
            start = time.perf_counter_ns()
            extractor.on_turn_end(turn)
            samples[size].append((time.perf_counter_ns() - start) / 1000)
        await asyncio.sleep(0)  # let the runs take their turns, as between a host's turns
    for extractor in extractors.values():
        await extractor.drain(timeout=120)
    results = {}
    for size in SIZES:
        ordered = sorted(samples[size])
        results[str(size)] = {
            "median_us": round(statistics.median(ordered), 2),
            "p99_us": round(ordered[int(len(ordered) * 0.99) - 1], 2),
        }
    return results


_SERVER = """
import sys
from memdir.testing import FakeAnthropicServer
server = FakeAnthropicServer(handler=lambda body: "Nothing to save.").start()
print(server.base_url, flush=True)
sys.stdin.read()
server.stop()
"""


class Collector:
    """Time spent in the garbage collector, from ``gc.callbacks``.

    A pause of the collector lands on whatever code happens to allocate; with a 100,000-
    message conversation in the heap a full collection takes a tenth of a second, whoever
    triggers it. Subtracting it shows the stall memdir's own code causes.
    """

    def __init__(self) -> None:
        self.total = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._started


COLLECTOR = Collector()


class Ticker:
    """Wakes every millisecond and keeps the worst lateness, three ways.

    ``worst`` is the wall-clock lateness, whatever made the loop late. ``worst_outside_gc``
    subtracts collector pauses. ``worst_cpu`` is the CPU time the loop's own thread spent
    between two wake-ups, less collector pauses: the work done on the loop in one go,
    which the operating system's scheduling of other processes does not inflate (on a
    shared two-core machine that alone makes an idle loop wake several milliseconds late
    now and then).
    """

    def __init__(self) -> None:
        self.worst = 0.0
        self.worst_outside_gc = 0.0
        self.worst_cpu = 0.0
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while not self._stop.is_set():
            before, cpu, collected = time.perf_counter(), time.thread_time(), COLLECTOR.total
            await asyncio.sleep(0.001)
            late = time.perf_counter() - before - 0.001
            gc_pause = COLLECTOR.total - collected
            self.worst = max(self.worst, late)
            self.worst_outside_gc = max(self.worst_outside_gc, late - gc_pause)
            self.worst_cpu = max(self.worst_cpu, time.thread_time() - cpu - gc_pause)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task


def start_server() -> subprocess.Popen[str]:
    """A FakeAnthropicServer in a child process; its URL is the child's first line."""
    return subprocess.Popen(
        [sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


async def stall_at(size: int, runs: int, root: Path, model: Model) -> dict[str, float | str | int]:
    """Runs after one more turn each, on a conversation of ``size`` messages."""
    params = CacheSafeParams(
        model=model, system="host", tools=[t.definition() for t in builtin_tools(root)]
    )
    sink = CollectingSink()
    extractor = MemoryExtractor(root / f"stall-{size}-{id(model)}", model, sink=sink)
    messages = list(conversation(size))
    # A long conversation whose earlier turns were handled before: each run looks at the
    # last turn, with the window before it.
    extractor.restore(messages[-3].uuid)
    worst: list[float] = []
    outside: list[float] = []
    cpu: list[float] = []
    for run in range(runs):
        if run:
            messages += [Message.user(f"more {run}"), Message.assistant(f"ok {run}")]
        ticker = Ticker()
        ticker.start()
        await asyncio.sleep(0)
        extractor.on_turn_end(TurnContext(messages=tuple(messages), params=params))
        await extractor.drain(timeout=600)
        await ticker.stop()
        worst.append(ticker.worst * 1000)
        outside.append(ticker.worst_outside_gc * 1000)
        cpu.append(ticker.worst_cpu * 1000)
    later = max(worst[1:]) if runs > 1 else 0.0
    later_outside = max(outside[1:]) if runs > 1 else 0.0
    later_cpu = max(cpu[1:]) if runs > 1 else 0.0
    return {
        "first_run_max_stall_ms": round(worst[0], 2),
        "later_runs_max_stall_ms": round(later, 2),
        "first_run_outside_gc_ms": round(outside[0], 2),
        "later_runs_outside_gc_ms": round(later_outside, 2),
        "first_run_loop_cpu_ms": round(cpu[0], 2),
        "later_runs_loop_cpu_ms": round(later_cpu, 2),
        "modes": ",".join(sorted({str(e.fields["mode"]) for e in sink.named("extract.run")})),
        "errors": len(sink.named("extract.error")),
    }


async def stall(runs: int, root: Path, child: subprocess.Popen[str]) -> dict[str, Any]:
    """The longest loop stall during runs, per size: memdir's own work (a model that
    answers at once, in process) and the whole path through the official SDK."""
    gc.callbacks.append(COLLECTOR)
    try:
        assert child.stdout is not None
        base_url = child.stdout.readline().strip()
        idle = Ticker()
        idle.start()
        await asyncio.sleep(2.0)
        await idle.stop()
        results: dict[str, Any] = {
            "idle_max_stall_ms": round(idle.worst * 1000, 2),
            "idle_loop_cpu_ms": round(idle.worst_cpu * 1000, 2),
        }
        for size in SIZES:
            # Named as a priced model, so the planner decides as it would for Claude.
            own = FunctionModel(lambda request: "Nothing to save.", name=SPEC)
            sdk = AnthropicModel(MODEL, api_key="k", base_url=base_url, retry=RetryPolicy())
            # The host's own first request: the SDK's lazy imports and first-use setup are
            # behind it, as they are in any host by the end of its first turn.
            await sdk.request(ModelRequest(system="host", messages=(Message.user("hi"),)))
            results[str(size)] = {
                "memdir_only": await stall_at(size, runs, root, own),
                "through_sdk": await stall_at(size, runs, root, sdk),
            }
            await sdk.aclose()
        return results
    finally:
        gc.callbacks.remove(COLLECTOR)
        if child.stdin is not None:
            child.stdin.close()
        child.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = asyncio.run(measure(args.calls, tmp))
        stalls = asyncio.run(stall(args.runs, Path(tmp), start_server()))
    small, large = results[str(SIZES[0])], results[str(SIZES[-1])]
    print(
        json.dumps(
            {
                "bench": "hook_overhead",
                "calls_per_size": args.calls,
                "sizes": results,
                "median_ratio_largest_to_smallest": round(
                    large["median_us"] / small["median_us"], 2
                ),
                "p99_ratio_largest_to_smallest": round(large["p99_us"] / small["p99_us"], 2),
                "loop_stall_during_runs": stalls,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
