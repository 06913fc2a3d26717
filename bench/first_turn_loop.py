"""The worst stall of the host's event loop on the first turn of a new conversation, with and
without memdir, per framework, side by side in one run.

Each case runs in a fresh process (a first turn is a cold one: the SDK client, its SSL
context, the framework's lazy setup), against memdir's ``FakeOpenAIServer`` in another
process so that the server's work never competes with the host. The agent, its client and
memdir are made first, as a user makes them; then a ticker task measures the longest time
the loop went without running it, from the turn's start until its memory run is drained.
The figure to watch is the difference between the two columns: memdir builds its own
client in a worker thread on an SSL context made ahead of time, reads ``MEMORY.md`` there,
and never imports a provider's package the agent does not use, so it adds nothing heavy
to the host's loop.

    python bench/first_turn_loop.py [--repeat 5] [--frameworks openai-agents,langchain]

On a 2-core machine (``--repeat 5``), worst stall without / with memdir: OpenAI Agents
18.3 / 17.6 ms, pydantic-ai 7.2 / 7.1 ms, LangChain 11.1 / 10.6 ms. The same run on the
code before the host core: +0.4 ms for OpenAI Agents (its fork shared the host's pool),
+788 ms for pydantic-ai and +901 ms for LangChain (an ``anthropic`` import, 1.4 s cold, on
the loop to learn that the model was not Anthropic's). A client of memdir's own built in
a thread with an SSL context of its own still stalled the loop 5-13 ms (loading the CA
bundle holds the GIL): the context is made once per process, ahead of the first turn.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from _child_server import openai_server_in_child

MODEL = "gpt-4.1-mini"
INSTRUCTIONS = "You are the support agent of a data platform. Answer briefly. " * 40
QUESTION = "I'm Ana; we always use polars here. What's new?"
FRAMEWORKS = ("openai-agents", "pydantic-ai", "langchain")


_TICK = 0.0005


class Ticker:
    """The longest stretch the loop ran without letting this task in."""

    def __init__(self) -> None:
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(_TICK)
            now = time.perf_counter()
            self.worst = max(self.worst, now - last - _TICK)
            last = now

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._tick())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


Turn = Callable[[], Awaitable[None]]


async def _openai_agents(base_url: str, memory: Path | None, stack: AsyncExitStack) -> Turn:
    import agents
    from agents import Agent, OpenAIChatCompletionsModel, Runner
    from openai import AsyncOpenAI

    from memdir.integrations.openai_agents import MemdirRunHooks

    agents.set_tracing_disabled(True)
    hooks = MemdirRunHooks(memory, session_id="bench") if memory is not None else None
    client = await stack.enter_async_context(AsyncOpenAI(base_url=base_url, api_key="bench"))
    agent: Agent[Any] = Agent(
        name="support",
        instructions=INSTRUCTIONS,
        model=OpenAIChatCompletionsModel(MODEL, client),
        tools=hooks.tools() if hooks is not None else [],
    )

    async def turn() -> None:
        await Runner.run(agent, QUESTION, hooks=hooks)
        if hooks is not None:
            await hooks.drain()

    return turn


async def _pydantic_ai(base_url: str, memory: Path | None, stack: AsyncExitStack) -> Turn:
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from memdir.integrations.pydantic_ai import MemdirCapability

    capability = MemdirCapability(memory, memory_tool=True) if memory is not None else None
    client = await stack.enter_async_context(AsyncOpenAI(base_url=base_url, api_key="bench"))
    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client))
    agent: Agent[None, str] = Agent(
        model, instructions=INSTRUCTIONS, capabilities=[capability] if capability else []
    )

    async def turn() -> None:
        await agent.run(QUESTION)
        if capability is not None:
            await capability.drain()

    return turn


async def _langchain(base_url: str, memory: Path | None, stack: AsyncExitStack) -> Turn:
    from langchain.agents import create_agent
    from langchain_openai import ChatOpenAI
    from langgraph.checkpoint.memory import InMemorySaver

    from memdir.integrations.langchain import MemdirMiddleware

    hooks = MemdirMiddleware(memory, memory_tool=True) if memory is not None else None
    chat = ChatOpenAI(model=MODEL, base_url=base_url, api_key="bench")  # type: ignore[arg-type]
    stack.push_async_callback(chat.root_async_client.close)
    agent = create_agent(
        chat,
        [],
        system_prompt=INSTRUCTIONS,
        middleware=[hooks] if hooks is not None else [],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "bench"}}

    async def turn() -> None:
        await agent.ainvoke({"messages": [{"role": "user", "content": QUESTION}]}, config)
        if hooks is not None:
            await hooks.drain()

    return turn


_CASES = {"openai-agents": _openai_agents, "pydantic-ai": _pydantic_ai, "langchain": _langchain}


async def _case(framework: str, with_memdir: bool, base_url: str) -> float:
    """The agent (and memdir, or not) made as a user makes them, then the first turn and
    its memory run timed: the worst stall in that stretch."""
    with tempfile.TemporaryDirectory() as tmp:
        memory = Path(tmp) / "memory" if with_memdir else None
        async with AsyncExitStack() as stack:
            turn = await _CASES[framework](base_url, memory, stack)
            ticker = Ticker()
            ticker.start()
            await turn()
            await ticker.stop()
    return ticker.worst


def _run_case(framework: str, with_memdir: bool, base_url: str) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--case", framework, "--memdir", str(with_memdir), base_url],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1])["worst"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="fresh processes per case")
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--memdir", help=argparse.SUPPRESS)
    parser.add_argument("base_url", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        worst = asyncio.run(_case(args.case, args.memdir == "True", args.base_url))
        print(json.dumps({"worst": worst}))
        return
    with openai_server_in_child(MODEL) as base_url:
        print(
            f"worst loop stall on a new conversation's first turn "
            f"(median of {args.repeat} fresh processes)"
        )
        print(f"{'framework':>14} {'without memdir':>15} {'with memdir':>12} {'difference':>11}")
        for framework in args.frameworks.split(","):
            without: list[float] = []
            with_: list[float] = []
            for _ in range(args.repeat):  # alternated, so that neither always runs first
                without.append(_run_case(framework, False, base_url))
                with_.append(_run_case(framework, True, base_url))
            a, b = statistics.median(without) * 1000, statistics.median(with_) * 1000
            print(f"{framework:>14} {a:>12.1f} ms {b:>9.1f} ms {b - a:>8.1f} ms")


if __name__ == "__main__":
    main()
