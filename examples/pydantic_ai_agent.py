"""A pydantic-ai chat agent with memdir's automatic memory.

After each answer memdir's memory agent runs in the background, inside this agent's own
prompt cache, and a line says what it saved. On exit the last extraction is waited for.

    pip install -e '.[pydantic-ai]' 'pydantic-ai-slim[anthropic]'   # in memdir's source tree
    export ANTHROPIC_API_KEY=...
    python examples/pydantic_ai_agent.py --model claude-sonnet-5-5

The memory lives where Claude Code keeps this project's memory, unless ``--memory-dir``
says otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model

from memdir.integrations.pydantic_ai import MemdirCapability


async def chat(
    model: Model,
    memory_dir: Path | None,
    inputs: Iterable[str],
    *,
    say: Callable[[str], object] = print,
) -> list[ModelMessage]:
    """Answer each input in one conversation; return its history."""
    # The memory tool lets the agent look up and save memories itself, and lets memdir's
    # memory agent run as a fork inside this agent's prompt cache.
    memory = MemdirCapability(memory_dir, memory_tool=True, notify=lambda s: say(f"● {s}"))
    agent = Agent(model, instructions="You are a helpful, brief assistant.", capabilities=[memory])
    history: list[ModelMessage] = []
    for text in inputs:
        result = await agent.run(text, message_history=history)
        history = result.all_messages()
        say(result.output)
    await memory.drain()  # the last turn's memories, before the process exits
    return history


def main(argv: list[str] | None = None) -> None:
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="claude-sonnet-5-5")
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--memory-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    model = AnthropicModel(args.model, provider=AnthropicProvider(base_url=args.base_url))
    lines = (line.strip() for line in sys.stdin)
    asyncio.run(chat(model, args.memory_dir, (line for line in lines if line)))


if __name__ == "__main__":
    main()
