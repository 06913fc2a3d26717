"""Where a host's turns go: the one place the host core makes its default backend."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from memdir.extract import ExtractConfig, MemoryExtractor, Notify, TurnContext
from memdir.models import Model
from memdir.store import MemoryDir
from memdir.telemetry import Sink

__all__ = ["Backend", "LocalBackend", "default_backend"]


@runtime_checkable
class Backend(Protocol):
    """What the host core needs of a backend (``memdir.extract.MemoryBackend``):
    conversations are told apart by ``turn.session_id``."""

    def on_turn_end(self, turn: TurnContext, notify: Notify | None = None) -> None: ...

    async def drain(self, timeout: float = 60.0) -> None: ...  # noqa: ASYNC109

    def drain_sync(self, timeout: float = 60.0) -> None: ...

    def close(self) -> None: ...


_RESUME_KEPT = 10_000
"""Cursors of idle conversations kept after their extractor was let go: one past this
many starts over (its memories are updated, not saved twice, by the run that reads it)."""


class LocalBackend:
    """An extractor per conversation in this process, the least recently used idle ones
    let go past ``max_conversations`` (their cursor kept, a bounded number of them)."""

    def __init__(
        self,
        memory_dir: MemoryDir,
        model: Model | Callable[[TurnContext], Model],
        config: ExtractConfig | None = None,
        sink: Sink | None = None,
        *,
        max_conversations: int = 256,
    ) -> None:
        self.memory_dir = memory_dir
        self.model = model
        self.config = config or ExtractConfig()
        self.sink = sink
        self.max_conversations = max(1, max_conversations)
        self._extractors: OrderedDict[str | None, MemoryExtractor] = OrderedDict()
        self._resume: OrderedDict[str | None, tuple[str | None, int]] = OrderedDict()

    def extractor(self, session_id: str | None) -> MemoryExtractor | None:
        """The extractor of a conversation, while it is kept."""
        return self._extractors.get(session_id)

    def on_turn_end(self, turn: TurnContext, notify: Notify | None = None) -> None:
        key = turn.session_id
        extractor = self._extractors.get(key)
        if extractor is None:
            model = self.model(turn) if callable(self.model) else self.model
            extractor = MemoryExtractor(self.memory_dir, model, self.config, self.sink)
            resume = self._resume.pop(key, None)
            if resume is not None:
                extractor.restore(*resume)
            self._extractors[key] = extractor
        self._extractors.move_to_end(key)
        self._let_go(keep=key)
        extractor.on_turn_end(turn, notify=notify)

    def _let_go(self, keep: str | None) -> None:
        while len(self._extractors) > self.max_conversations:
            idle = next(
                (k for k, e in self._extractors.items() if k != keep and not e.in_flight), None
            )
            if idle is None:
                return
            gone = self._extractors.pop(idle)
            self._resume[idle] = (gone.cursor, gone.turns_since_run)
            while len(self._resume) > _RESUME_KEPT:
                self._resume.popitem(last=False)

    async def drain(self, timeout: float = 60.0) -> None:  # noqa: ASYNC109 (the contract)
        deadline = time.monotonic() + timeout
        for extractor in list(self._extractors.values()):
            await extractor.drain(max(0.0, deadline - time.monotonic()))

    def drain_sync(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        for extractor in list(self._extractors.values()):
            extractor.drain_sync(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        for extractor in list(self._extractors.values()):
            extractor.close()


def default_backend(
    memory_dir: MemoryDir,
    model: Callable[[TurnContext], Model],
    config: ExtractConfig,
    sink: Sink | None,
    *,
    max_conversations: int,
) -> Backend:
    """The backend a host gets when it names none: extraction in this process."""
    return LocalBackend(memory_dir, model, config, sink, max_conversations=max_conversations)
