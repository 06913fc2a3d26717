"""How long ``MemoryExtractor.on_turn_end`` takes, for short and very long conversations.

The call is on the host agent's path after every turn, so it must not grow with the
conversation. Each size is measured in the same run (median and p99 in microseconds over
many calls), and the ratio largest / smallest is printed: it should stay near 1.

    python bench/hook_overhead.py [--calls 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.fork import CacheSafeParams
from memdir.messages import Message
from memdir.models import ModelRequest
from memdir.testing import FunctionModel

SIZES = (100, 10_000, 100_000)


def conversation(size: int) -> tuple[Message, ...]:
    return tuple(
        Message.user(f"question {i}") if i % 2 == 0 else Message.assistant(f"answer {i}")
        for i in range(size)
    )


async def measure(size: int, calls: int, memory_dir: str) -> dict[str, float]:
    async def answer(request: ModelRequest) -> str:
        return "Nothing to save."

    model = FunctionModel(answer)
    extractor = MemoryExtractor(memory_dir, model, ExtractConfig())
    params = CacheSafeParams(model=model, system="host")
    turn = TurnContext(messages=conversation(size), params=params)
    samples = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        extractor.on_turn_end(turn)
        samples.append((time.perf_counter_ns() - start) / 1000)
    await extractor.drain(timeout=120)
    samples.sort()
    return {
        "median_us": round(statistics.median(samples), 2),
        "p99_us": round(samples[int(len(samples) * 0.99) - 1], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in SIZES:
            results[str(size)] = asyncio.run(measure(size, args.calls, f"{tmp}/m{size}"))
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
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
