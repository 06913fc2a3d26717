"""memdir: automatic long-term memory for any LLM agent.

After each turn of an agent, memdir saves what is worth keeping — who the user is, how
they want the work done, what the project is up to, where things live — as Markdown files
in a memory directory indexed by ``MEMORY.md``, compatible with Claude Code's own.
"""

from memdir.errors import MemdirError, ModelError, StoreError, TranscriptError, UsageError
from memdir.extract import ExtractConfig, MemoryExtractor, MemorySaved, TurnContext
from memdir.fork import CacheSafeParams, ForkResult, run_forked_agent
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
from memdir.models import Model, ModelRequest, ModelResponse, Usage, resolve_model
from memdir.permissions import CanUseTool, PermissionDecision, auto_mem_can_use_tool
from memdir.store import MemoryDir, default_memory_dir
from memdir.telemetry import Event
from memdir.transcripts import SkippedLine, Transcript, load_transcript

__version__ = "0.1.0"

__all__ = [
    "CacheSafeParams",
    "CanUseTool",
    "ContentBlock",
    "Event",
    "ExtractConfig",
    "ForkResult",
    "ImageBlock",
    "MemdirError",
    "MemoryDir",
    "MemoryExtractor",
    "MemorySaved",
    "Message",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "OtherBlock",
    "PermissionDecision",
    "SkippedLine",
    "StoreError",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "Transcript",
    "TranscriptError",
    "TurnContext",
    "Usage",
    "UsageError",
    "__version__",
    "auto_mem_can_use_tool",
    "default_memory_dir",
    "load_transcript",
    "model_visible",
    "resolve_model",
    "run_forked_agent",
]
