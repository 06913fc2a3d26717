"""An agent on the OpenAI Agents SDK, with memdir's automatic memory in three lines.

After each final answer the run hooks hand the turn to a memory agent, which runs in the
background as a fork of the agent's last request — inside its prompt cache — and prints
a notice when it saved something. On exit the script waits for that work to finish.

    pip install 'memdir[openai-agents]'
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

from agents import Agent, OpenAIChatCompletionsModel, Runner, TResponseInputItem
from openai import AsyncOpenAI

from memdir.integrations.openai_agents import MemdirRunHooks, messages_to_items
from memdir.recall import memory_prompt, memory_reminder_message
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
) -> list[TResponseInputItem]:
    """Chat until the inputs run out; return the conversation as input items."""
    memory = MemdirRunHooks(memory_dir, notify=lambda saved: say(f"● {saved}"))
    agent = Agent(
        name="assistant",
        # Stable text (no dates, no index): the system prompt stays cacheable.
        instructions=INSTRUCTIONS + "\n\n" + memory_prompt(memory_dir),
        tools=memory.tools(),  # lets the agent, and so its memory agent, save a memory
        model=OpenAIChatCompletionsModel(model_name, client),
    )
    # What is remembered so far opens the conversation, as memdir's reminder message.
    conversation = messages_to_items([memory_reminder_message(memory_dir)])
    for text in user_inputs:
        result = await Runner.run(
            agent, [*conversation, {"role": "user", "content": text}], hooks=memory
        )
        say(str(result.final_output))
        conversation = result.to_input_list()
    await memory.drain()
    return conversation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("turns", nargs="*", help="user messages, one per turn")
    parser.add_argument("--model", default="gpt-4.1-mini", help="OpenAI model name")
    parser.add_argument("--memory-dir", type=Path, help="default: Claude Code's for this folder")
    args = parser.parse_args()
    memory_dir = args.memory_dir or default_memory_dir(os.getcwd())
    turns = args.turns or (line.strip() for line in sys.stdin if line.strip())
    asyncio.run(run_agent(AsyncOpenAI(), args.model, memory_dir, turns))


if __name__ == "__main__":
    main()
