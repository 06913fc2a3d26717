"""A small chat agent on the official ``anthropic`` SDK, with memdir's automatic memory.

After every final answer the agent reports the turn to a ``MemoryExtractor``, which runs a
memory agent in the background — inside this agent's own prompt cache — and prints a
notice when it saved something. On exit it waits for that work to finish.

    pip install -e '.[anthropic]'   # in memdir's source tree
    export ANTHROPIC_API_KEY=...
    python examples/anthropic_agent.py --model claude-sonnet-5-5

The memory lives where Claude Code keeps this project's memory (``memdir dir`` prints it),
unless ``--memory-dir`` says otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path

from anthropic import AsyncAnthropic

from memdir import (
    CacheSafeParams,
    MemoryDir,
    Message,
    ModelRequest,
    auto_mem_can_use_tool,
    default_memory_dir,
)
from memdir.extract import ExtractConfig, MemoryExtractor, MemorySaved, TurnContext
from memdir.messages import ToolResultBlock
from memdir.models import AnthropicModel
from memdir.permissions import memory_write_guard
from memdir.recall import (
    SurfaceBudget,
    memory_prompt,
    memory_reminder_message,
    select_relevant_memories,
)
from memdir.tools import ToolContext, ToolError, builtin_tools

SYSTEM_PROMPT = """\
You are a helpful assistant for a developer, working in {cwd}.
Answer briefly and check files before you rely on what you remember about them."""


async def run_agent(
    client: AsyncAnthropic,
    model_name: str,
    memory_dir: Path,
    user_inputs: AsyncIterator[str] | Iterable[str],
    *,
    cwd: Path | None = None,
    say: Callable[[str], object] = print,
    max_tool_rounds: int = 8,
) -> list[Message]:
    """Chat until the inputs run out; return the conversation."""
    cwd = cwd or Path.cwd()
    memory = MemoryDir(memory_dir)
    memory.ensure()
    # memdir retries on its own, so the client makes one attempt per call.
    model = AnthropicModel(model_name, client=client.with_options(max_retries=0))
    tools = builtin_tools(cwd)
    # The memory instructions are stable text, so the system prompt stays cacheable.
    system = SYSTEM_PROMPT.format(cwd=cwd) + "\n\n" + memory_prompt(memory)
    params = CacheSafeParams(
        model=model,
        system=system,
        tools=[tool.definition() for tool in tools],
        params={"max_tokens": 4096},
    )
    # The agent itself may read anywhere but write only its memory, like the memory agent.
    gate = auto_mem_can_use_tool(memory, cwd=cwd)
    by_name = {tool.name: tool for tool in tools}
    # A last check at write time: real target path and complete new text.
    context = ToolContext(write_guard=memory_write_guard(memory))
    extractor = MemoryExtractor(memory, model, ExtractConfig())
    # The index of what is remembered opens the conversation; topic files relevant to
    # each question are added as it comes, within a per-session budget.
    messages: list[Message] = [memory_reminder_message(memory)]
    budget = SurfaceBudget()

    def notice(saved: MemorySaved) -> None:
        say(f"● {saved}")

    async def inputs() -> AsyncIterator[str]:
        if isinstance(user_inputs, AsyncIterator):
            async for line in user_inputs:
                yield line
        else:
            for line in user_inputs:
                yield line

    async for text in inputs():
        relevant = await select_relevant_memories(text, memory, budget=budget)
        messages.extend(m.message() for m in relevant)
        messages.append(Message.user(text))
        for _ in range(max_tool_rounds):
            request = ModelRequest(
                system=params.system,
                tools=params.tools,
                messages=tuple(messages),
                params=params.params,
            )
            response = await model.request(request)
            messages.append(response.message)
            if not response.message.tool_uses:
                break
            results = []
            for call in response.message.tool_uses:
                decision = await gate(call.name, call.input)
                tool = by_name.get(call.name)
                if not decision.allowed or tool is None:
                    reason = decision.message or f"no tool named {call.name}"
                    results.append(
                        ToolResultBlock(tool_use_id=call.id, content=reason, is_error=True)
                    )
                    continue
                try:
                    output = await tool.run(call.input, context)
                    results.append(
                        ToolResultBlock(
                            tool_use_id=call.id, content=output.content, is_error=output.is_error
                        )
                    )
                except ToolError as exc:
                    results.append(
                        ToolResultBlock(tool_use_id=call.id, content=str(exc), is_error=True)
                    )
            messages.append(Message(role="user", content=tuple(results)))
        say(messages[-1].text)
        # A turn is complete: hand it to the memory agent and carry on at once.
        extractor.on_turn_end(
            TurnContext(messages=tuple(messages), params=params, cwd=str(cwd)), notify=notice
        )
    await extractor.drain(timeout=60.0)
    return messages


async def _stdin_lines() -> AsyncIterator[str]:
    while True:
        line = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            return
        if line.strip():
            yield line.rstrip("\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="claude-sonnet-5-5", help="Anthropic model name")
    parser.add_argument(
        "--memory-dir", type=Path, help="where memories live (default: Claude Code's)"
    )
    args = parser.parse_args()
    memory_dir = args.memory_dir or default_memory_dir(os.getcwd())
    print(f"memory: {memory_dir}  (type your messages; Ctrl-D to quit)", file=sys.stderr)

    async def go() -> None:
        async with AsyncAnthropic() as client:
            await run_agent(client, args.model, memory_dir, _stdin_lines())

    asyncio.run(go())


if __name__ == "__main__":
    main()
