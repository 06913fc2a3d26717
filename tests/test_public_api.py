"""The public surface: what ``import memdir`` offers, pinned so it changes only on purpose."""

from __future__ import annotations

import importlib

import pytest

import memdir

EXPECTED = {
    "CacheSafeParams",
    "CanUseTool",
    "ContentBlock",
    "Event",
    "ExtractConfig",
    "ForkResult",
    "ImageBlock",
    "InProcessBackend",
    "MemdirError",
    "MissingExtraError",
    "MemoryBackend",
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
}


def test_all_is_pinned() -> None:
    assert set(memdir.__all__) == EXPECTED
    assert len(memdir.__all__) == len(EXPECTED)


@pytest.mark.parametrize(
    "module",
    [
        "memdir",
        "memdir.messages",
        "memdir.store",
        "memdir.transcripts",
        "memdir.errors",
        "memdir.models",
        "memdir.tools",
        "memdir.testing",
        "memdir.permissions",
        "memdir.fork",
        "memdir.telemetry",
        "memdir.extract",
        "memdir.cost",
    ],
)
def test_every_exported_name_exists(module: str) -> None:
    mod = importlib.import_module(module)
    for name in mod.__all__:
        assert hasattr(mod, name), f"{module}.{name} is in __all__ but missing"


def test_top_level_public_names_are_all_exported() -> None:
    public = {
        name
        for name, value in vars(memdir).items()
        if not name.startswith("_") and not isinstance(value, type(importlib))
    }
    assert public <= set(memdir.__all__)


def test_exported_objects_belong_to_memdir() -> None:
    for name in memdir.__all__:
        if name == "__version__":
            continue
        value = getattr(memdir, name)
        owner = getattr(value, "__module__", None)
        if owner is not None and owner not in ("types", "typing", "collections.abc"):  # aliases
            assert owner.startswith("memdir"), f"{name} comes from {owner}"


def test_exception_hierarchy() -> None:
    for child in (memdir.UsageError, memdir.ModelError, memdir.TranscriptError, memdir.StoreError):
        assert issubclass(child, memdir.MemdirError)
    assert issubclass(memdir.UsageError, ValueError)
    err = memdir.TranscriptError("/x/s.jsonl", "not JSON", line=3)
    assert str(err) == "/x/s.jsonl:3: not JSON"
    assert err.line == 3
