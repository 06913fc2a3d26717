"""Quickstart: automatic memory for an agent loop on the Anthropic API.

    pip install -e '.[anthropic]'   # in memdir's source tree
    export ANTHROPIC_API_KEY=...
    python examples/quickstart.py [MEMORY_DIR]

Type one message per line; Ctrl-D ends the conversation. After each answer memdir saves
what is worth remembering, in the background, in MEMORY_DIR (default: ``$MEMDIR_DIR``,
else Claude Code's memory folder for this project); at the end the script waits for that
work and lists the memories. The anthropic SDK reads ``ANTHROPIC_API_KEY`` and
``ANTHROPIC_BASE_URL``, for the agent's requests and for memdir's alike.
"""

import asyncio
import sys
from datetime import UTC, datetime

from anthropic import AsyncAnthropic
from anthropic.types import MessageParam, ToolParam, ToolResultBlockParam

from memdir import (
    CacheSafeParams,
    MemoryDir,
    MemoryExtractor,
    TurnContext,
    default_memory_dir,
    resolve_model,
)

MODEL = "claude-sonnet-5-5"
SYSTEM_PROMPT = "You are a helpful assistant. Answer briefly."
TOOLS: list[ToolParam] = [
    {
        "name": "current_time",
        "description": "The current date and time, in UTC.",
        "input_schema": {"type": "object", "properties": {}},
    }
]


def run_tool(name: str) -> str:
    """What the agent's one tool answers."""
    if name == "current_time":
        return datetime.now(UTC).isoformat(timespec="seconds")
    return f"there is no tool named {name}"


async def main(memory_dir: str) -> None:
    model = resolve_model(f"anthropic:{MODEL}")
    extractor = MemoryExtractor(memory_dir, model)
    # The agent's request: memdir weighs sharing its prompt cache against a request of its own.
    params = CacheSafeParams(
        model=model, system=SYSTEM_PROMPT, tools=TOOLS, params={"max_tokens": 1024}
    )
    messages: list[MessageParam] = []
    async with AsyncAnthropic() as client:
        # Input is read in a thread, so that the memory runs go on while the user types.
        while line := await asyncio.to_thread(sys.stdin.readline):
            if not line.strip():
                continue
            messages.append({"role": "user", "content": line.strip()})
            while True:
                response = await client.messages.create(
                    model=MODEL,
                    max_tokens=1024,
                    system=SYSTEM_PROMPT,
                    tools=TOOLS,
                    messages=messages,
                )
                messages.append({"role": "assistant", "content": response.content})
                calls = [block for block in response.content if block.type == "tool_use"]
                if not calls:
                    break
                results: list[ToolResultBlockParam] = [
                    {"type": "tool_result", "tool_use_id": call.id, "content": run_tool(call.name)}
                    for call in calls
                ]
                messages.append({"role": "user", "content": results})
            print("".join(block.text for block in response.content if block.type == "text"))
            # A final answer, no tool call pending: hand memdir the turn, as the loop holds it.
            extractor.on_turn_end(TurnContext(messages=messages, params=params), notify=print)
    # Before the process exits: wait for the memory runs still going.
    await extractor.drain()
    for memory in MemoryDir(memory_dir).scan():
        print(f"remembered: {memory.filename} — {memory.description}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else str(default_memory_dir("."))))
