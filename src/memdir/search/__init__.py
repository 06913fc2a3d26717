"""Search over what was said: the project's past sessions and its memories, by BM25.

The memory agent saves what it judges worth keeping; a fact it passed over is still in
the transcript. :func:`search` finds it: a SQLite FTS5 index (the standard library's
``sqlite3``) of every turn of the project's Claude Code sessions and of every memory
file, kept in memdir's state folder of the memory directory and brought up to date
before each search, reading only what each session added since the last pass.

- :func:`search` (index, then search) and :func:`index_sessions` (index only), for one
  memory directory; :class:`SearchIndex` for both on one open index.
- :class:`SearchHit`: a passage (a turn, or a few paragraphs of a long one; or part of a
  memory), its session, message uuid and time, or the memory file it is in.
- :class:`IndexStats`: what a pass read and added, so its cost can be checked.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from memdir.search._index import (
    SEARCH_DB_NAME,
    HitKind,
    IndexStats,
    MemoryDirLike,
    Progress,
    SearchHit,
    SearchIndex,
    fts5_available,
    session_files,
)
from memdir.search._passages import PASSAGE_MAX_CHARS

__all__ = [
    "PASSAGE_MAX_CHARS",
    "SEARCH_DB_NAME",
    "HitKind",
    "IndexStats",
    "SearchHit",
    "SearchIndex",
    "fts5_available",
    "index_sessions",
    "search",
    "session_files",
]


def index_sessions(
    memory_dir: MemoryDirLike,
    paths: Iterable[str | os.PathLike[str]] | None = None,
    *,
    progress: Progress | None = None,
) -> IndexStats:
    """Bring the index of ``memory_dir`` up to date with its sessions; see
    :meth:`SearchIndex.index_sessions` (``paths`` default: the sessions Claude Code keeps
    beside the memory directory)."""
    with SearchIndex(memory_dir) as index:
        return index.index_sessions(paths, progress=progress)


def search(
    memory_dir: MemoryDirLike,
    query: str,
    *,
    limit: int = 10,
    sessions: bool = True,
    memories: bool = True,
    paths: Iterable[str | os.PathLike[str]] | None = None,
    exclude_sessions: Iterable[str] = (),
    update: bool = True,
) -> list[SearchHit]:
    """The passages of the project's sessions and memories that best match ``query``.

    With ``update`` (the default) the index is brought up to date first: what the
    sessions added since the last pass (``paths``, default: the sessions Claude Code
    keeps beside ``memory_dir``) and the memory files that changed. ``sessions`` /
    ``memories`` choose what is searched; ``exclude_sessions`` leaves sessions out.
    Raises :class:`~memdir.errors.StoreError` when the index cannot be used (no FTS5 in
    this Python's sqlite3, an unwritable state folder) and
    :class:`~memdir.errors.UsageError` for a ``limit`` below 1.
    """
    kinds: list[HitKind] = []
    if sessions:
        kinds.append("turn")
    if memories:
        kinds.append("memory")
    with SearchIndex(memory_dir) as index:
        if update:
            if sessions:
                index.index_sessions(paths)
            if memories:
                index.index_memories()
        return index.search(query, limit=limit, kinds=kinds, exclude_sessions=exclude_sessions)
