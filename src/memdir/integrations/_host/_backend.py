"""Where a host's turns go: the one place the host core makes its default backend."""

from __future__ import annotations

from collections.abc import Callable

from memdir.extract import ExtractConfig, InProcessBackend, MemoryBackend, TurnContext
from memdir.models import Model
from memdir.store import MemoryDir
from memdir.telemetry import Sink

__all__ = ["default_backend"]


def default_backend(
    memory_dir: MemoryDir,
    model: Callable[[TurnContext], Model],
    config: ExtractConfig,
    sink: Sink | None,
    *,
    max_conversations: int,
) -> MemoryBackend:
    """The backend a host gets when it names none: extraction in this process, each
    conversation's position kept beside the memory."""
    return InProcessBackend(memory_dir, model, config, sink, max_conversations=max_conversations)
