"""A framework's conversation read into memdir messages as it grows, each item once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from memdir.messages import Message

__all__ = ["GrowingReader"]

T = TypeVar("T")


class GrowingReader(Generic[T]):
    """Between turns a framework's history only grows (the same objects handed back) or
    is reloaded equal (from JSON): the longest unchanged prefix keeps its memdir
    messages, the same objects, and only what follows is read.

    ``read_one(item, previous_uuid)`` reads one framework item into zero or more
    messages, their uuids chained from ``previous_uuid`` (so the same conversation gives
    the same ids in any process).
    """

    def __init__(self, read_one: Callable[[T, str | None], Sequence[Message]]) -> None:
        self._read_one = read_one
        self._items: list[T] = []
        self._messages: list[Message] = []
        self._ends: list[int] = []
        """``_ends[i]``: how many messages the first ``i + 1`` items gave."""

    def read(self, items: Sequence[T]) -> tuple[tuple[Message, ...], list[int]]:
        """The messages of ``items``, and for each item how many messages the items up
        to it gave (where a request that stood for the first ``k`` items ends)."""
        kept = 0
        for new, old in zip(items, self._items, strict=False):
            if new is not old and new != old:
                break
            kept += 1
        del self._items[kept:], self._ends[kept:]
        del self._messages[self._ends[-1] if self._ends else 0 :]
        for item in items[kept:]:
            previous = self._messages[-1].uuid if self._messages else None
            self._messages += self._read_one(item, previous)
            self._items.append(item)
            self._ends.append(len(self._messages))
        return tuple(self._messages), list(self._ends)
