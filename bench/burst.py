"""A burst of turns against one extractor whose model takes 50 ms per request.

A host fires 1,000 turns at one ``MemoryExtractor`` on one event loop, the conversation
growing by one user and one assistant message each time, while the memory agent's model
(a ``FunctionModel`` that sleeps 50 ms, then answers; every fifth run also writes a
memory, which costs it a second request) is far slower than the turns. Runs must
coalesce: while one is in progress a new turn is stashed, the latest stash runs right
after as the trailing run, and every message must still be seen by exactly one run.

Pacing. Between two turns the host awaits ``asyncio.sleep(interval)``: a fast host that
gives the loop one chance to run between turns. Two intervals are measured in the same
run: 0 (``sleep(0)``, one pass of the loop: the whole burst lands during the first runs)
and 1 ms (a few tens of turns per run: a chain of trailing runs).

Coverage, exactly. A run's new-message window is the part of its snapshot after the
cursor. The fork sends the snapshot followed by one prompt message, so the model's first
request of each run (the one not ending in tool results) holds the snapshot as
``messages[:-1]``. At that moment ``extractor.cursor`` is the cursor the run started
from: only one run is in progress at a time, the cursor moves only when a run ends (or on
a direct write, which cannot happen while a run is in progress), so the model reads it
between the two. The window is the snapshot after the cursor's message (all of it when
there is no cursor), found the same way the extractor finds it. Every message of the
final conversation must fall inside exactly one window; the windows' sizes are also
checked against the ``message_count`` of each ``extract.run`` event, and the final cursor
against the last message.

    python bench/burst.py [--turns 1000] [--latency-ms 50] [--interval-ms 0 1] [--write-every 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.fork import CacheSafeParams
from memdir.messages import Message, ToolUseBlock
from memdir.models import ModelRequest
from memdir.telemetry import CollectingSink
from memdir.testing import FunctionModel

MEMORY_FILE = (
    "---\nname: {name}\ndescription: noted during run {run}\ntype: project\n---\n\n{body}\n"
)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, int(len(ordered) * fraction) - 1)]


async def burst(
    memory: Path, turns: int, latency: float, interval: float, write_every: int
) -> dict[str, Any]:
    windows: list[list[str]] = []
    extractor: MemoryExtractor | None = None

    async def answer(request: ModelRequest) -> Message | str:
        assert extractor is not None
        if request.messages[-1].is_tool_result:
            await asyncio.sleep(latency)
            return "Saved."
        # The first request of a run: the cursor cannot move until this run ends.
        snapshot = request.messages[:-1]
        cursor = extractor.cursor
        start = 0
        for index in range(len(snapshot) - 1, -1, -1):
            if snapshot[index].uuid == cursor:
                start = index + 1
                break
        windows.append([m.uuid for m in snapshot[start:]])
        run = len(windows)
        await asyncio.sleep(latency)
        if (run - 1) % write_every:
            return "Nothing worth keeping."
        name = f"burst_{run}"
        use = ToolUseBlock(
            id=f"w{run}",
            name="Write",
            input={
                "file_path": str(memory / f"{name}.md"),
                "content": MEMORY_FILE.format(name=name, run=run, body=snapshot[-1].text),
            },
        )
        return Message(role="assistant", content=(use,))

    model = FunctionModel(answer)
    sink = CollectingSink()
    extractor = MemoryExtractor(memory, model, ExtractConfig(), sink=sink)
    params = CacheSafeParams(model=model, system="You are the host agent.")
    # One list, only ever appended to: each turn's run sees the length it was reported with.
    conversation: list[Message] = []
    hook_us: list[float] = []
    started = time.perf_counter()
    for n in range(turns):
        conversation += [Message.user(f"question {n}"), Message.assistant(f"answer {n}")]
        turn = TurnContext(messages=conversation, params=params)
        before = time.perf_counter_ns()
        extractor.on_turn_end(turn)
        hook_us.append((time.perf_counter_ns() - before) / 1000)
        await asyncio.sleep(interval)
    last_turn = time.perf_counter()
    await extractor.drain(timeout=600)
    drained = time.perf_counter()

    runs = sink.named("extract.run")
    errors = sink.named("extract.error")
    coalesced = len(sink.named("extract.coalesced"))
    started_runs = len(runs) + len(errors)
    seen = Counter(uuid for window in windows for uuid in window)
    uuids = [m.uuid for m in conversation]
    missed = sum(1 for u in uuids if seen[u] == 0)
    doubled = sum(1 for u in uuids if seen[u] > 1)
    foreign = len(set(seen) - set(uuids))
    count_mismatches = sum(
        1 for w, e in zip(windows, runs, strict=False) if len(w) != e.fields["message_count"]
    )
    exact = missed == 0 and doubled == 0 and foreign == 0
    return {
        "interval_ms": interval * 1000,
        "turns_fired": turns,
        "messages": len(conversation),
        "runs_started": started_runs,
        "runs_ok": len(runs),
        "extract_error_events": len(errors),
        "coalesced": coalesced,
        # Each turn either starts a run or is coalesced; a run beyond those is a trailing one.
        "trailing_runs": started_runs - (turns - coalesced),
        "stashes_superseded": coalesced - (started_runs - (turns - coalesced)),
        "model_requests": len(model.requests),
        "memories_written": sum(e.fields["memories_saved"] for e in runs),
        "on_turn_end_median_us": round(statistics.median(hook_us), 2),
        "on_turn_end_p99_us": round(percentile(hook_us, 0.99), 2),
        "on_turn_end_max_us": round(max(hook_us), 2),
        "firing_s": round(last_turn - started, 3),
        "last_turn_to_drained_ms": round((drained - last_turn) * 1000, 1),
        "covered_exactly_once": exact,
        "messages_missed": missed,
        "messages_double_covered": doubled,
        "window_uuids_not_in_conversation": foreign,
        "windows_recorded": len(windows),
        "window_vs_event_message_count_mismatches": count_mismatches
        + abs(len(windows) - started_runs),
        "final_cursor_is_last_message": extractor.cursor == uuids[-1],
        "turns_per_run": round(turns / max(1, started_runs), 1),
        "drain_in_model_latencies": round((drained - last_turn) / latency, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--interval-ms", type=float, nargs="+", default=[0.0, 1.0])
    parser.add_argument("--write-every", type=int, default=5, help="every Nth run writes")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, interval in enumerate(args.interval_ms):
            memory = Path(tmp) / f"run{i}" / "memory"
            results.append(
                asyncio.run(
                    burst(
                        memory,
                        args.turns,
                        args.latency_ms / 1000,
                        interval / 1000,
                        args.write_every,
                    )
                )
            )
    print(
        json.dumps(
            {
                "bench": "burst",
                "turns": args.turns,
                "model_latency_ms": args.latency_ms,
                "write_every_nth_run": args.write_every,
                "pacings": results,
                "all_covered_exactly_once": all(r["covered_exactly_once"] for r in results),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
