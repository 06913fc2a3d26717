"""Each message converted to a provider's wire shape once, and without stalling the loop.

Messages are immutable, so the wire form of one never changes: a model keeps it for as
long as the message lives and a conversation that grows by two messages a turn costs two
conversions a turn, not the whole conversation again. Converting what is not cached yet
(the first request of a long conversation) happens in short slices with the event loop
let through in between, so a host sharing its loop with memory runs never waits long.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from memdir.messages import Message

__all__ = ["SLICE_SECONDS", "WireCache"]

W = TypeVar("W")

SLICE_SECONDS = 0.001
"""How long one slice of conversion may hold the event loop before it lets others run."""
_CHECK_EVERY = 32  # messages between two looks at the clock


class WireCache(Generic[W]):
    """The wire form of each live message, made by ``convert(message, index)`` on first use.

    Entries are keyed by the message object itself (its identity, not its value) and go
    away with it. ``convert`` must not depend on anything but the message; its result is
    shared between requests, so callers copy what they change. Safe to use from several
    threads: a message converted twice at once gives two equal results, one of them kept.
    """

    def __init__(self, convert: Callable[[Message, int], W]) -> None:
        self._convert = convert
        self._entries: dict[int, tuple[weakref.ref[Message], W]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, message: Message, index: int) -> W:
        """The wire form of ``message`` (``index`` names it in a conversion error)."""
        key = id(message)
        entry = self._entries.get(key)
        if entry is not None and entry[0]() is message:
            return entry[1]
        wire = self._convert(message, index)

        def forget(dead: weakref.ref[Message]) -> None:
            self._forget(key, dead)

        ref = weakref.ref(message, forget)
        with self._lock:
            self._entries[key] = (ref, wire)
        return wire

    def _forget(self, key: int, dead: weakref.ref[Message]) -> None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] is dead:
                del self._entries[key]

    def convert(self, messages: Sequence[Message]) -> list[W]:
        """The wire form of every message, in order, at once."""
        return [self.get(m, i) for i, m in enumerate(messages)]

    async def convert_in_slices(self, messages: Sequence[Message]) -> list[W]:
        """:meth:`convert`, letting the event loop run every :data:`SLICE_SECONDS`."""
        out: list[W] = []
        started = time.perf_counter()
        for index, message in enumerate(messages):
            out.append(self.get(message, index))
            if index % _CHECK_EVERY == 0 and time.perf_counter() - started > SLICE_SECONDS:
                await asyncio.sleep(0)
                started = time.perf_counter()
        return out
