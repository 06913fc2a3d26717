"""Where turns go: the protocol every extraction backend takes, and the in-process one.

A host reports each finished turn to a :class:`MemoryBackend` and drains it before it
exits; which backend that is — :class:`InProcessBackend` here (a background task per
conversation, in this process) or :class:`memdir.queue.QueueExtractor` (a row in
PostgreSQL, a worker elsewhere) — is the host's choice and nothing else changes.

:class:`InProcessBackend` keeps one :class:`MemoryExtractor` per conversation (told
apart by ``TurnContext.session_id``) and each conversation's position in memdir's state
file beside the memory, so a new process over the same conversation resumes where the
last one stopped, and a conversation idle long enough to be let go is reloaded later.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from memdir.errors import error_fields
from memdir.extract._coordinator import admitted
from memdir.extract._extractor import MemoryExtractor
from memdir.extract._loop import BackgroundLoop
from memdir.extract._types import ExtractConfig, Notify, Position, TurnContext
from memdir.models import Model
from memdir.state import SessionState, StateFile
from memdir.store import MemoryDir
from memdir.telemetry import Sink, emit
from memdir.tools import Tool

__all__ = ["DEFAULT_CONVERSATION", "InProcessBackend", "MemoryBackend"]

DEFAULT_CONVERSATION = "default"
"""The conversation of turns whose host gave no ``session_id`` (the queue's name too)."""


@runtime_checkable
class MemoryBackend(Protocol):
    """What a host needs of an extraction backend: report turns, wait, let go.

    Conversations are told apart by ``turn.session_id`` (None: one default
    conversation). :class:`MemoryExtractor` (one conversation),
    :class:`InProcessBackend` and :class:`memdir.queue.QueueExtractor` implement it.
    """

    def on_turn_end(self, turn: TurnContext, notify: Notify | None = None) -> object:
        """Report a finished turn; returns at once and never raises for memory's sake
        (only for messages that are no messages, the host's own mistake)."""
        ...

    async def drain(self, timeout: float = 60.0) -> None:  # noqa: ASYNC109 (the contract)
        """Wait for what is in flight, at most ``timeout`` seconds; never raises."""
        ...

    def drain_sync(self, timeout: float = 60.0) -> None:
        """:meth:`drain` for synchronous hosts."""
        ...

    def close(self) -> None:
        """Release threads and connections (after a drain, if runs should finish)."""
        ...


class _StateEntry:
    """One conversation's position in the memory's state file."""

    def __init__(self, state: Callable[[], StateFile], key: str) -> None:
        self._state = state
        self._key = key

    def load(self) -> Position:
        saved = self._state().get(self._key)
        return Position(
            cursor=saved.cursor, turns_since_run=saved.turns_since_run, covered_at=saved.covered_at
        )

    def save(self, position: Position) -> None:
        self._state().put(
            self._key,
            SessionState(
                cursor=position.cursor,
                turns_since_run=position.turns_since_run,
                covered_at=position.covered_at,
            ),
        )


@dataclass
class _Conversation:
    extractor: MemoryExtractor
    reporting: int = 0
    """Calls handing it a turn right now: it is not let go under them."""


class InProcessBackend:
    """Extraction in this process, for any number of conversations.

    ``model`` is the memory agent's model (for runs without the host's request), or a
    function that picks it from a conversation's turn, asked once, when that
    conversation's extractor is made. Each conversation's position is saved in the
    memory's state file (``.memdir/state.json``, under its lock, off the event loop)
    whenever it moves, and loaded when its extractor is made: in a new process, or
    after it was let go. Beyond ``max_conversations`` the least recently reported
    conversation with nothing in flight is let go.
    """

    def __init__(
        self,
        memory_dir: MemoryDir | str | os.PathLike[str],
        model: Model | Callable[[TurnContext], Model],
        config: ExtractConfig | None = None,
        sink: Sink | None = None,
        *,
        tools: Sequence[Tool] = (),
        clock: Callable[[], float] | None = None,
        max_conversations: int = 256,
    ) -> None:
        self.memory_dir = memory_dir if isinstance(memory_dir, MemoryDir) else MemoryDir(memory_dir)
        self.model = model
        self.config = config or ExtractConfig()
        self.sink = sink
        self.max_conversations = max(1, max_conversations)
        self._tools = tuple(tools)
        self._clock = clock
        self._lock = threading.Lock()
        self._conversations: OrderedDict[str, _Conversation] = OrderedDict()
        """Least recently reported first."""
        self._state: StateFile | None = None
        self._background = BackgroundLoop()
        """One thread for every conversation's runs when the host calls from sync code."""

    def _state_file(self) -> StateFile:
        # Made on first use, from a worker thread: opening it may move old files.
        with self._lock:
            if self._state is None:
                self._state = StateFile(self.memory_dir)
            return self._state

    def extractor(self, session_id: str | None) -> MemoryExtractor | None:
        """The conversation's extractor, while it is held (None: never seen, or let go)."""
        with self._lock:
            held = self._conversations.get(session_id or DEFAULT_CONVERSATION)
            return held.extractor if held is not None else None

    @property
    def held_conversations(self) -> int:
        """How many conversations' extractors are held now (at most
        ``max_conversations``, beyond it only while they have runs in flight)."""
        with self._lock:
            return len(self._conversations)

    def on_turn_end(self, turn: TurnContext, notify: Notify | None = None) -> None:
        """Report a finished turn of the conversation ``turn.session_id``; see
        :meth:`MemoryExtractor.on_turn_end` (the same promises)."""
        if not admitted(turn, self.config):
            return
        key = turn.session_id or DEFAULT_CONVERSATION
        try:
            held = self._hold(key, turn)
        except Exception as exc:  # the host's turn must never fail because of memory
            emit(
                self.sink,
                "extract.error",
                duration_ms=0,
                error_type=type(exc).__name__,
                **error_fields(exc),
            )
            return
        try:
            # Raises only MessageTypeError: the host's own mistake, for it to fix.
            held.extractor.on_turn_end(turn, notify)
        finally:
            with self._lock:
                held.reporting -= 1
        try:
            self._let_go_idle()
        except Exception as exc:
            emit(
                self.sink,
                "extract.error",
                duration_ms=0,
                error_type=type(exc).__name__,
                **error_fields(exc),
            )

    def _hold(self, key: str, turn: TurnContext) -> _Conversation:
        with self._lock:
            held = self._conversations.get(key)
            if held is not None:
                self._conversations.move_to_end(key)
                held.reporting += 1
                return held
        model = self.model if isinstance(self.model, Model) else self.model(turn)
        extractor = MemoryExtractor(
            self.memory_dir,
            model,
            self.config,
            self.sink,
            tools=self._tools,
            clock=self._clock,
            position_store=_StateEntry(self._state_file, key),
        )
        extractor._share_background(self._background)
        with self._lock:
            # Another thread may have made it meanwhile: the first one made is kept.
            held = self._conversations.setdefault(key, _Conversation(extractor))
            self._conversations.move_to_end(key)
            held.reporting += 1
            return held

    def _let_go_idle(self) -> None:
        """Drop the least recently reported idle conversations beyond the bound; their
        positions are saved already (a save is part of the run that moved them)."""
        dropped: list[MemoryExtractor] = []
        with self._lock:
            excess = len(self._conversations) - self.max_conversations
            if excess <= 0:
                return
            for key, held in list(self._conversations.items()):
                if excess <= 0:
                    break
                if held.reporting or held.extractor.in_flight:
                    continue
                del self._conversations[key]
                dropped.append(held.extractor)
                excess -= 1
            in_use = {id(h.extractor.model) for h in self._conversations.values()}
        in_use.add(id(self.model))
        for extractor in dropped:
            # A model made for this conversation alone: its connections go with it.
            if id(extractor.model) not in in_use:
                in_use.add(id(extractor.model))
                self._background.release(extractor.model)

    def _held(self) -> list[MemoryExtractor]:
        with self._lock:
            return [held.extractor for held in self._conversations.values()]

    async def drain(self, timeout: float = 60.0) -> None:  # noqa: ASYNC109 (the contract)
        """Wait for every conversation's runs, or ``timeout`` seconds in all."""
        deadline = time.monotonic() + timeout
        for extractor in self._held():
            await extractor.drain(max(0.0, deadline - time.monotonic()))

    def drain_sync(self, timeout: float = 60.0) -> None:
        """:meth:`drain` for synchronous hosts."""
        deadline = time.monotonic() + timeout
        for extractor in self._held():
            extractor.drain_sync(max(0.0, deadline - time.monotonic()))

    def close(self, timeout: float = 5.0) -> None:
        """Stop the thread where sync hosts' runs go (see :meth:`MemoryExtractor.close`:
        runs still there are abandoned, the models' connections on it closed); a later
        turn starts it again."""
        held = self._held()
        for extractor in held:
            with contextlib.suppress(Exception):
                extractor.close()
        models = [extractor.model for extractor in held]
        if isinstance(self.model, Model):
            models.append(self.model)
        self._background.stop(models, timeout)
