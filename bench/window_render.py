"""The longest single call spent rendering a first standalone window over a long
conversation, in one call as before and in slices as now, side by side.

A conversation of 100k short messages (the first run of a long session read from disk, or
a host told of memdir late) is aligned with :class:`RenderedConversation` and its first
window rendered: the cursor at 0, so every message up to the run's token budget is new.
The old rendering was one call in a worker thread; while it ran, the GIL was the thread's,
and the host's loop waited for it. The sliced one renders at most ``RENDER_SLICE``
messages per call. The figures are the longest single call and the total, best of
``--repeat`` runs, each on a fresh conversation.

    python bench/window_render.py [--messages 100000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
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


def one_call(messages: list[Message]) -> tuple[float, float, int]:
    """The old way: the whole window in one call. Returns (longest, total, messages)."""
    config = ExtractConfig()
    rendered = asyncio.run(aligned(messages))
    started = time.perf_counter()
    window = rendered.window(
        0,
        len(messages),
        window_tokens=config.window_tokens,
        chunk_tokens=config.context_budget_tokens,
    )
    took = time.perf_counter() - started
    return took, took, len(window.messages)


def sliced(messages: list[Message]) -> tuple[float, float, int]:
    """The new way: slices in worker threads. Returns (longest slice, total, messages)."""
    config = ExtractConfig()
    rendered = asyncio.run(aligned(messages))
    slices: list[float] = []
    inner = rendered._render_slice

    def timed(*args: object) -> tuple[list[Message], int]:
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
    return max(slices), total, count


def best(run: Callable[[list[Message]], tuple[float, float, int]], count: int, repeat: int) -> str:
    results = [run(conversation(count)) for _ in range(repeat)]
    longest = min(r[0] for r in results) * 1000
    total = min(r[1] for r in results) * 1000
    return f"longest call {longest:7.1f} ms · total {total:7.1f} ms · {results[0][2]:,} rendered"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"first window over {args.messages:,} messages (best of {args.repeat})")
    print(f"  one call (before)          {best(one_call, args.messages, args.repeat)}")
    label = f"slices of {RENDER_SLICE:,} (now)"
    print(f"  {label:<26} {best(sliced, args.messages, args.repeat)}")


if __name__ == "__main__":
    main()
