"""memdir: automatic long-term memory for any LLM agent.

After each turn of an agent, memdir saves what is worth keeping — who the user is, how
they want the work done, what the project is up to, where things live — as Markdown files
in a memory directory indexed by ``MEMORY.md``, compatible with Claude Code's own.
"""

from memdir.errors import MemdirError, ModelError, StoreError, TranscriptError, UsageError
from memdir.messages import (
    ContentBlock,
    ImageBlock,
    Message,
    OtherBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    model_visible,
)
from memdir.store import MemoryDir, default_memory_dir
from memdir.transcripts import SkippedLine, Transcript, load_transcript

__version__ = "0.1.0"

__all__ = [
    "ContentBlock",
    "ImageBlock",
    "MemdirError",
    "MemoryDir",
    "Message",
    "ModelError",
    "OtherBlock",
    "SkippedLine",
    "StoreError",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "Transcript",
    "TranscriptError",
    "UsageError",
    "__version__",
    "default_memory_dir",
    "load_transcript",
    "model_visible",
]
