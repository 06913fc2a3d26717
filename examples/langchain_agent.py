"""A LangChain agent (``create_agent``) with memdir's automatic memory.

After every answer, memdir's middleware runs a memory agent in the background — inside
this agent's own prompt cache — that saves what is worth keeping as Markdown files, and
prints a notice when it saved something. The agent gets Anthropic's ``memory`` tool to
look memories up (and to save one itself when asked to); before exiting, the script waits
for the last extraction.

    pip install -e '.[langchain]' langchain-anthropic   # in memdir's source tree
    export ANTHROPIC_API_KEY=...
    python examples/langchain_agent.py "I'm Ana; always use polars, never pandas."

Run it again with a question ("Which data frame library do we use?"): the agent finds
the answer in its memory. ``memdir ls`` lists what was saved.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Callable, Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from memdir.integrations.langchain import MemdirMiddleware

SYSTEM_PROMPT = """\
You are a helpful assistant for a developer. Before you answer, view /memories/MEMORY.md
in your memory tool: it lists what you know about the user and their project."""


@tool
def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return f"sunny in {city}"


async def main(
    prompts: Sequence[str],
    *,
    model: str = "claude-sonnet-5-5",
    memory_dir: str | os.PathLike[str] | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    say: Callable[[str], object] = print,
) -> None:
    """Answer each prompt in one conversation, saving memories after every answer."""
    settings: dict[str, Any] = {"model": model, "base_url": base_url}
    if api_key is not None:
        settings["api_key"] = api_key  # else $ANTHROPIC_API_KEY
    chat = ChatAnthropic(**settings)
    memory = MemdirMiddleware(memory_dir, memory_tool=True, notify=lambda n: say(str(n)))
    agent = create_agent(
        chat,
        [get_weather],
        system_prompt=SYSTEM_PROMPT,
        # Caching first, memdir last: memdir sees the request as it is sent.
        middleware=[AnthropicPromptCachingMiddleware(), memory],
        checkpointer=InMemorySaver(),
    )
    config: RunnableConfig = {"configurable": {"thread_id": "example"}}
    try:
        for prompt in prompts:
            state = await agent.ainvoke({"messages": [{"role": "user", "content": prompt}]}, config)
            say(state["messages"][-1].text)
    finally:
        await memory.drain()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompt", nargs="+")
    parser.add_argument("--model", default="claude-sonnet-5-5")
    parser.add_argument("--memory-dir", help="default: where Claude Code keeps this project's")
    args = parser.parse_args()
    asyncio.run(main(args.prompt, model=args.model, memory_dir=args.memory_dir))
