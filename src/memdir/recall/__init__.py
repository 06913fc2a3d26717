"""What the main agent is given so that memory comes back in the next conversation.

- :func:`memory_prompt`: the memory section of the system prompt — instructions only,
  the same text for the same arguments, so it can be cached.
- :func:`memory_reminder` / :func:`memory_reminder_message`: the ``MEMORY.md`` index in
  a ``<system-reminder>``, for a user message at the start of a conversation.
- :func:`select_relevant_memories`: the few memory files that help with a query, chosen
  by a model (the memory list first, as a cached prefix; a JSON-schema answer) or by a
  lexical ranking, read up to a cap and framed as possibly relevant, with their path and
  age; :class:`SurfaceBudget` caps how much one session surfaces and holds the
  selector's conversation. With ``search_fallback``, when no memory is chosen, the
  passages of past sessions that match (:mod:`memdir.search`) are surfaced instead,
  named ``PASSAGE_PREFIX + "<session>#<uuid>"``.
- :func:`memory_stamp` / :func:`memory_change_notice`: a stamp of the memory folder taken
  when a conversation loads memory, and the note telling the model, at a later request,
  that memory changed since and its loaded copy of ``MEMORY.md`` is stale.
"""

from memdir.recall._changes import MemoryStamp, memory_change_notice, memory_stamp
from memdir.recall._fallback import PASSAGE_PREFIX
from memdir.recall._prompt import (
    MemoryDirLike,
    memory_prompt,
    memory_reminder,
    memory_reminder_message,
)
from memdir.recall._select import (
    DEFAULT_SELECTOR_MODEL,
    MAX_SURFACED,
    SELECTION_SCHEMA,
    SELECTOR_MAX_TOKENS,
    SESSION_SURFACE_BUDGET,
    SURFACE_MAX_BYTES,
    SURFACE_MAX_LINES,
    SurfaceBudget,
    SurfacedMemory,
    select_relevant_memories,
)

__all__ = [
    "DEFAULT_SELECTOR_MODEL",
    "MAX_SURFACED",
    "PASSAGE_PREFIX",
    "SELECTION_SCHEMA",
    "SELECTOR_MAX_TOKENS",
    "SESSION_SURFACE_BUDGET",
    "SURFACE_MAX_BYTES",
    "SURFACE_MAX_LINES",
    "MemoryDirLike",
    "MemoryStamp",
    "SurfaceBudget",
    "SurfacedMemory",
    "memory_change_notice",
    "memory_prompt",
    "memory_reminder",
    "memory_reminder_message",
    "memory_stamp",
    "select_relevant_memories",
]
