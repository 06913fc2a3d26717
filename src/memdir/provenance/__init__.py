"""Why: where each memory came from, and what each session was shown.

- :func:`history` — the story of one memory: the session and messages it was first drawn
  from, each later run that changed it, when it was forgotten or restored, and a change
  made outside memdir's record (its file no longer matches the last digest recorded).
- :func:`why` — one session, turn by turn: the index it loaded (and whether it was cut),
  the memories surfaced to it, and the memories saved from it, each with its history.
  For a Claude Code session the loads and recalls are read from the attachments its
  transcript records (``instructions`` entries of type ``AutoMem``, ``relevant_memories``);
  for hosts memdir loads memory into, from what memdir recorded as it happened
  (:func:`record_shown`).

The records live in the memory directory's ``.memdir/provenance/`` (see
:mod:`memdir.store._provenance`).
"""

from __future__ import annotations

from memdir.provenance._why import (
    MemoryHistory,
    SessionTurn,
    SessionView,
    ShownMemory,
    history,
    why,
)
from memdir.store._provenance import Change, Shown, read_changes, record_changes, record_shown

__all__ = [
    "Change",
    "MemoryHistory",
    "SessionTurn",
    "SessionView",
    "Shown",
    "ShownMemory",
    "history",
    "read_changes",
    "record_changes",
    "record_shown",
    "why",
]
