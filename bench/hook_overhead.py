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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = asyncio.run(measure(args.calls, tmp))
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
