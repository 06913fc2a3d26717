"""The longest single call spent rendering a first standalone window over a long
conversation, in one call as before and in slices as now, side by side.

A conversation of 100k short messages (the first run of a long session read from disk, or
a host told of memdir late) is aligned with :class:`RenderedConversation` and its first
window rendered: the cursor at 0, so every message up to the run's token budget is new.
The old rendering was one call in a worker thread; while it ran, the GIL was the thread's,
and the host's loop waited for it. The sliced one renders at most ``RENDER_SLICE``
messages per call. The figures are the longest single call and the total, best of
``--repeat`` runs, each on a fresh conversation.

    python bench/window_render.py [--messages 100000] [--repeat 5] [--budget 100000]

``--budget 10000000`` takes the whole conversation into the window (every message rendered).
A slice bounds memdir's own work, not the garbage collector's: rendering 100k messages
makes some 400k objects, enough to start two or three full collections of the whole heap,
and each lands in whichever call is running then (the default budget renders about 11k).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

from memdir.extract import ExtractConfig
from memdir.extract._standalone import RENDER_SLICE, RenderedConversation
from memdir.messages import Message


def conversation(count: int) -> list[Message]:
    """``count`` short messages, alternating user and assistant, as a chat session has."""
    return [
        Message.user(f"question {i}: what about item {i}?")
        if i % 2 == 0
        else Message.assistant(f"answer {i}: item {i} is fine.")
        for i in range(count)
    ]


async def aligned(messages: list[Message]) -> RenderedConversation:
    rendered = RenderedConversation(ExtractConfig().tool_result_chars)
    await rendered.update(messages)
    return rendered


def one_call(messages: list[Message], config: ExtractConfig) -> tuple[float, float, float, int]:
    """The old way: the whole window in one call. Returns (longest, total, messages)."""
    rendered = asyncio.run(aligned(messages))
    started = time.perf_counter()
    window = rendered.window(
        0,
        len(messages),
        window_tokens=config.window_tokens,
        chunk_tokens=config.context_budget_tokens,
    )
    took = time.perf_counter() - started
    return took, took, took, len(window.messages)


def sliced(messages: list[Message], config: ExtractConfig) -> tuple[float, float, float, int]:
    """The new way: slices in worker threads. Returns (longest slice, total, messages)."""
    rendered = asyncio.run(aligned(messages))
    slices: list[float] = []
    inner = rendered._render_slice

    def timed(*args: object) -> list[Message]:
        started = time.perf_counter()
        try:
            return inner(*args)  # type: ignore[arg-type]
        finally:
            slices.append(time.perf_counter() - started)

    rendered._render_slice = timed  # type: ignore[method-assign,assignment]

    async def main() -> tuple[float, int]:
        started = time.perf_counter()
        window = await rendered.render_window(
            0,
            len(messages),
            window_tokens=config.window_tokens,
            chunk_tokens=config.context_budget_tokens,
        )
        return time.perf_counter() - started, len(window.messages)

    total, count = asyncio.run(main())
    return max(slices), statistics.median(slices), total, count


Render = Callable[[list[Message], ExtractConfig], tuple[float, float, float, int]]


def best(run: Render, count: int, repeat: int, config: ExtractConfig) -> str:
    results = [run(conversation(count), config) for _ in range(repeat)]
    longest = min(r[0] for r in results) * 1000
    median = min(r[1] for r in results) * 1000
    total = min(r[2] for r in results) * 1000
    return (
        f"longest call {longest:6.1f} ms · median call {median:6.1f} ms"
        f" · total {total:6.1f} ms · {results[0][3]:,} rendered"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--budget",
        type=int,
        default=ExtractConfig().context_budget_tokens,
        help="context_budget_tokens: how much of the conversation the first run takes",
    )
    args = parser.parse_args()
    config = ExtractConfig(context_budget_tokens=args.budget)
    print(
        f"first window over {args.messages:,} messages, budget {args.budget:,} tokens"
        f" (best of {args.repeat})"
    )
    print(f"  one call (before)          {best(one_call, args.messages, args.repeat, config)}")
    label = f"slices of {RENDER_SLICE:,} (now)"
    print(f"  {label:<26} {best(sliced, args.messages, args.repeat, config)}")


if __name__ == "__main__":
    main()
