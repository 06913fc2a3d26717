"""A Claude Agent SDK session with memdir's memory, in the same process.

The SDK runs Claude Code, which loads the project's ``MEMORY.md`` at the start of each
session. memdir's Stop hook saves what is worth keeping after each answer, into that same
folder, while the session goes on; the script waits for the last extraction before it
exits.

    pip install -e '.[claude-agent-sdk]'   # in memdir's source tree
    export ANTHROPIC_API_KEY=...
    python examples/claude_agent_sdk_agent.py "I'm Ana; always use polars, never pandas."

Run it again with a question ("Which data frame library do we use?") to see the memory
loaded. ``memdir ls`` lists what was saved; ``.memdir/hook.log`` in the memory folder says
what each extraction did.
"""

from __future__ import annotations

import argparse
import asyncio

from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, TextBlock, query

from memdir.integrations.claude_agent_sdk import MemdirStopHook


async def main(prompt: str, model: str | None) -> None:
    memory = MemdirStopHook(model=model)
    options = ClaudeAgentOptions(hooks={"Stop": [memory.matcher()]})
    async for message in query(prompt=prompt, options=options):
        if isinstance(message, AssistantMessage):
            for block in message.content:
                if isinstance(block, TextBlock):
                    print(block.text)
    await memory.drain()
    for status in memory.results:
        if status:
            print("memdir: an extraction failed; see .memdir/hook.log in the memory folder")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompt")
    parser.add_argument(
        "--memory-model",
        help="memdir's model (anthropic:MODEL, openai:MODEL, offline); default from the env",
    )
    args = parser.parse_args()
    asyncio.run(main(args.prompt, args.memory_model))
