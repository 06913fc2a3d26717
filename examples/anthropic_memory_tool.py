"""Claude saves memories into Claude Code's memory folder, through the SDK's tool runner."""

from pathlib import Path

from anthropic import Anthropic

from memdir import default_memory_dir
from memdir.integrations.anthropic_memory import MemdirMemoryTool

runner = Anthropic().beta.messages.tool_runner(
    model="claude-sonnet-5-5",
    max_tokens=1024,
    betas=["context-management-2025-06-27"],
    tools=[MemdirMemoryTool(default_memory_dir(Path.cwd()))],
    messages=[{"role": "user", "content": "Remember: we deploy on Fridays, never on Mondays."}],
)
for message in runner:
    print(*(block.text for block in message.content if block.type == "text"))
