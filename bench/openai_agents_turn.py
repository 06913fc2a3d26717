"""What memdir's OpenAI Agents hooks cost the host's run, for short and long conversations.

The host is a real ``agents`` ``Agent`` on ``OpenAIChatCompletionsModel``, talking to
memdir's ``FakeOpenAIServer`` in a child process (so that the server's own work never
competes with the host for this one); each turn sends a conversation of N input items (user and
assistant messages of about 240 characters) plus one new question. Side by side, in one
run, for each N:

- ``Runner.run`` without hooks and with ``MemdirRunHooks`` (median wall time of a turn;
  the memory run is drained between turns, outside the timing);
- the time spent inside memdir's hooks on the host's loop in that turn: ``on_llm_start``,
  ``on_llm_end``, ``on_agent_end`` and the response hook on the client's HTTP pool (the
  request body kept), as medians. This is the figure that must not grow with N: the
  turn end reads the last request as it was sent (one JSON parse, the final answer
  converted, new messages read) instead of rebuilding it.

    python bench/openai_agents_turn.py [--sizes 100,1000,4000] [--turns 7]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import agents
from agents import Agent, OpenAIChatCompletionsModel, Runner, TResponseInputItem
from openai import AsyncOpenAI

from _child_server import openai_server_in_child
from memdir.extract import ExtractConfig
from memdir.integrations import openai_agents
from memdir.integrations.openai_agents import MemdirRunHooks

MODEL = "gpt-4.1-mini"
INSTRUCTIONS = "You are the support agent of a data platform. Answer briefly. " * 40


def history(size: int) -> list[TResponseInputItem]:
    filler = "The nightly job moved to the new cluster; the dashboards follow next week. " * 3
    return [
        {"role": "user", "content": f"Question {i}: {filler}"}
        if i % 2 == 0
        else {"role": "assistant", "content": f"Answer {i}: {filler}"}
        for i in range(size)
    ]


class Stopwatch:
    """Seconds spent in memdir's code on the host's loop, per turn."""

    def __init__(self) -> None:
        self.spent = 0.0

    def timed(self, call: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def run(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await call(*args, **kwargs)
            finally:
                self.spent += time.perf_counter() - started

        return run


def timed_hooks(memory: Path, watch: Stopwatch) -> MemdirRunHooks:
    hooks = MemdirRunHooks(memory, config=ExtractConfig(mode="fork"))
    for name in ("on_llm_start", "on_llm_end", "on_agent_end"):
        setattr(hooks, name, watch.timed(getattr(hooks, name)))
    return hooks


async def measure(base_url: str, size: int, turns: int) -> dict[str, float]:
    watch = Stopwatch()
    record = openai_agents._Wire.record

    async def timed_record(self: openai_agents._Wire, response: Any) -> None:
        started = time.perf_counter()
        try:
            await record(self, response)
        finally:
            watch.spent += time.perf_counter() - started

    openai_agents._Wire.record = timed_record  # type: ignore[method-assign]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            async with AsyncOpenAI(base_url=base_url, api_key="bench") as client:
                agent: Agent[Any] = Agent(
                    name="support",
                    instructions=INSTRUCTIONS,
                    model=OpenAIChatCompletionsModel(MODEL, client),
                )
                hooks = timed_hooks(Path(tmp) / "memory", watch)
                conversation = history(size)
                plain: list[float] = []
                hooked: list[float] = []
                inside: list[float] = []
                for turn in range(turns + 1):  # the first of each is a warm-up
                    question: TResponseInputItem = {"role": "user", "content": f"Turn {turn}?"}
                    turn_input = [*conversation, question]
                    # Each first in turn, so that neither always follows the memory run.
                    for with_hooks in (False, True) if turn % 2 else (True, False):
                        watch.spent = 0.0
                        started = time.perf_counter()
                        result = await Runner.run(
                            agent, turn_input, hooks=hooks if with_hooks else None
                        )
                        (hooked if with_hooks else plain).append(time.perf_counter() - started)
                        if with_hooks:
                            inside.append(watch.spent)
                            conversation = result.to_input_list()
                            await hooks.drain()
    finally:
        openai_agents._Wire.record = record  # type: ignore[method-assign]
    return {
        "plain": statistics.median(plain[1:]),
        "hooked": statistics.median(hooked[1:]),
        "inside": statistics.median(inside[1:]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,4000", help="conversation lengths, in items")
    parser.add_argument("--turns", type=int, default=7, help="timed turns per size")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    agents.set_tracing_disabled(True)
    print(f"memdir's OpenAI Agents hooks on the host's run ({args.turns} turns per size)")
    print(f"{'items':>6} {'run, no hooks':>14} {'run, hooks':>11} {'ratio':>6} {'in hooks':>9}")
    with openai_server_in_child(MODEL) as base_url:
        results = {size: asyncio.run(measure(base_url, size, args.turns)) for size in sizes}
    for size, r in results.items():
        print(
            f"{size:>6} {r['plain'] * 1000:>11.1f} ms {r['hooked'] * 1000:>8.1f} ms "
            f"{r['hooked'] / r['plain']:>5.2f}x {r['inside'] * 1000:>6.2f} ms"
        )
    first, last = results[sizes[0]], results[sizes[-1]]
    print(
        f"time in hooks, {sizes[-1]} items / {sizes[0]} items: "
        f"{last['inside'] / first['inside']:.1f}x for {sizes[-1] / sizes[0]:.0f}x the items"
    )


if __name__ == "__main__":
    main()
