"""An agent on the OpenAI Agents SDK, with memdir's automatic memory in three lines.

After each final answer the run hooks hand the turn to a memory agent, which runs in the
background as a fork of the agent's last request — inside its prompt cache — and prints
a notice when it saved something. Each conversation starts with what was saved before.
On exit the script waits for that work to finish.

    pip install -e '.[openai-agents]'   # in memdir's source tree
    export OPENAI_API_KEY=...
    python examples/openai_agents_agent.py "I'm Ana; we use polars, never pandas."

Each argument is one user turn (none: read lines from stdin). The agent speaks Chat
Completions, which memdir's fork can send byte for byte; ``OPENAI_BASE_URL`` points it
at any compatible server (the tests use memdir's fake one).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from agents import Agent, OpenAIChatCompletionsModel, Runner, SQLiteSession, TResponseInputItem
from openai import AsyncOpenAI

from memdir.integrations.openai_agents import MemdirRunHooks
from memdir.store import default_memory_dir

INSTRUCTIONS = """\
You are a helpful assistant for a developer. Answer briefly; when the user tells you
something worth keeping across conversations, it will be remembered for you."""


async def run_agent(
    client: AsyncOpenAI,
    model_name: str,
    memory_dir: Path,
    user_inputs: Iterable[str],
    *,
    say: Callable[[str], object] = print,
    session: SQLiteSession | None = None,
) -> list[TResponseInputItem]:
    """Chat until the inputs run out; return the conversation as input items."""
    session = session or SQLiteSession("assistant")  # give it a file to resume later
    # The session names the conversation: a later process over it reads only new turns.
    memory = MemdirRunHooks(memory_dir, session=session, notify=lambda s: say(f"● {s}"))
    agent = Agent(
        name="assistant",
        instructions=INSTRUCTIONS,  # memdir adds its instructions and the saved index
        tools=memory.tools(),  # lets the agent, and so its memory agent, save a memory
        model=OpenAIChatCompletionsModel(model_name, client),
    )
    for text in user_inputs:
        result = await Runner.run(agent, text, session=session, hooks=memory)
        say(str(result.final_output))
    await memory.drain()
    return await session.get_items()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("turns", nargs="*", help="user messages, one per turn")
    parser.add_argument("--model", default="gpt-4.1-mini", help="OpenAI model name")
    parser.add_argument("--memory-dir", type=Path, help="default: Claude Code's for this folder")
    parser.add_argument("--session", default=":memory:", help="a SQLite file to resume from")
    args = parser.parse_args()
    memory_dir = args.memory_dir or default_memory_dir(os.getcwd())
    turns = args.turns or (line.strip() for line in sys.stdin if line.strip())
    session = SQLiteSession("assistant", args.session)
    asyncio.run(run_agent(AsyncOpenAI(), args.model, memory_dir, turns, session=session))


if __name__ == "__main__":
    main()
