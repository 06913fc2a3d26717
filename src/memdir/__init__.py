"""memdir: automatic long-term memory for any LLM agent.

After each turn of an agent, memdir saves what is worth keeping — who the user is, how
they want the work done, what the project is up to, where things live — as Markdown files
in a memory directory indexed by ``MEMORY.md``, compatible with Claude Code's own.
"""

import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING

from memdir.errors import (
    MemdirError,
    MissingExtraError,
    ModelError,
    StoreError,
    TranscriptError,
    UsageError,
)

if _TYPE_CHECKING:
    from memdir.extract import (
        ExtractConfig,
        InProcessBackend,
        MemoryBackend,
        MemoryExtractor,
        MemorySaved,
        TurnContext,
    )
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

# The public names and the module each comes from. They are imported on first use, so
# that ``import memdir`` (and the Claude Code hook, which must exit within a few hundred
# milliseconds) does not pay for the extractor, the models and YAML until they are used.
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        (
            "ExtractConfig",
            "InProcessBackend",
            "MemoryBackend",
            "MemoryExtractor",
            "MemorySaved",
            "TurnContext",
        ),
        "memdir.extract",
    ),
    **dict.fromkeys(("CacheSafeParams", "ForkResult", "run_forked_agent"), "memdir.fork"),
    **dict.fromkeys(
        (
            "ContentBlock",
            "ImageBlock",
            "Message",
            "OtherBlock",
            "TextBlock",
            "ThinkingBlock",
            "ToolResultBlock",
            "ToolUseBlock",
            "model_visible",
        ),
        "memdir.messages",
    ),
    **dict.fromkeys(
        ("Model", "ModelRequest", "ModelResponse", "Usage", "resolve_model"), "memdir.models"
    ),
    **dict.fromkeys(
        ("CanUseTool", "PermissionDecision", "auto_mem_can_use_tool"), "memdir.permissions"
    ),
    **dict.fromkeys(("MemoryDir", "default_memory_dir"), "memdir.store"),
    "Event": "memdir.telemetry",
    **dict.fromkeys(("SkippedLine", "Transcript", "load_transcript"), "memdir.transcripts"),
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memdir' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__version__ = "0.1.0"

__all__ = [
    "CacheSafeParams",
    "CanUseTool",
    "ContentBlock",
    "Event",
    "ExtractConfig",
    "ForkResult",
    "ImageBlock",
    "InProcessBackend",
    "MemdirError",
    "MemoryBackend",
    "MemoryDir",
    "MemoryExtractor",
    "MemorySaved",
    "Message",
    "MissingExtraError",
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
