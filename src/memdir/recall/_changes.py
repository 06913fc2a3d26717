"""Telling the main agent that memory changed under it during a conversation.

A conversation loads ``MEMORY.md`` once, at its start, and keeps that copy so that its
requests share one cached prefix. Memory is saved in the background meanwhile (after
each turn), so the copy goes out of date. Claude Code 2.1.332 then adds a note for the
model — which files changed, that the loaded copy is stale, to read it again — rather
than reloading the index in place, which would break the cached prefix. This module
gives a host the same: a :class:`MemoryStamp` taken when memory is loaded, compared with
a new one before a later request, and :func:`memory_change_notice` for the difference.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from memdir.recall._prompt import MemoryDirLike, as_memory_dir
from memdir.store import ENTRYPOINT_NAME

__all__ = ["MemoryStamp", "memory_change_notice", "memory_stamp"]

# How many changed files the notice names; a big consolidation names the rest by count.
_NAMED_FILES = 10


@dataclass(frozen=True)
class MemoryStamp:
    """What the memory folder held at one moment: every Markdown file with its
    modification time and size. Two stamps are equal when nothing was added, removed or
    rewritten in between (a rewrite within the clock's resolution that keeps the size
    aside)."""

    files: tuple[tuple[str, int, int], ...] = ()
    """``(filename, mtime in nanoseconds, size in bytes)``, by filename; filenames
    relative to the memory folder, with ``/`` separators (``team/MEMORY.md``)."""


def memory_stamp(memory_dir: MemoryDirLike) -> MemoryStamp:
    """The stamp of ``memory_dir`` now: its ``*.md`` files, indexes included, in every
    subfolder except hidden ones (memdir's own ``.memdir/`` bookkeeping); symlinks are
    not followed. A missing folder has the empty stamp. Blocking: it lists the folder."""
    root = as_memory_dir(memory_dir).root
    found: list[tuple[str, int, int]] = []
    pending = [(root, "")]
    while pending:
        folder, prefix = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue  # missing or unreadable: nothing there to have changed
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append((Path(entry.path), f"{prefix}{entry.name}/"))
                elif entry.name.endswith(".md") and entry.is_file(follow_symlinks=False):
                    info = entry.stat(follow_symlinks=False)
                    found.append((f"{prefix}{entry.name}", info.st_mtime_ns, info.st_size))
            except OSError:
                continue  # gone between the listing and the stat
    return MemoryStamp(files=tuple(sorted(found)))


def memory_change_notice(
    memory_dir: MemoryDirLike, before: MemoryStamp, after: MemoryStamp
) -> str | None:
    """A note for the model saying how memory changed between ``before`` (when the
    conversation loaded it) and ``after``, or None when it did not.

    It names the files added, rewritten and removed; when an index (``MEMORY.md``, the
    team's too) is among them it says the copy loaded at the start of the conversation is
    out of date and where to read it again, and otherwise that memories read earlier may
    be. The note is a ``<system-reminder>`` for a user message (``is_meta``): the host
    adds it once, before the next request, and keeps it in the conversation.
    """
    old = {name: (mtime, size) for name, mtime, size in before.files}
    new = {name: (mtime, size) for name, mtime, size in after.files}
    added = sorted(new.keys() - old.keys())
    removed = sorted(old.keys() - new.keys())
    changed = sorted(name for name in new.keys() & old.keys() if new[name] != old[name])
    if not (added or removed or changed):
        return None

    md = as_memory_dir(memory_dir)
    parts = []
    budget = _NAMED_FILES
    for verb, names in (("saved", added), ("updated", changed), ("deleted", removed)):
        if not names:
            continue
        shown, budget = names[: max(budget, 1)], max(budget - len(names), 0)
        more = len(names) - len(shown)
        listed = ", ".join(shown) + (f" and {more} more" if more else "")
        parts.append(f"{verb} {listed}")
    lines = [
        f"Memory in {md.root}{os.sep} changed since this conversation loaded it: "
        f"{'; '.join(parts)}."
    ]
    indexes = [
        name for name in (*added, *changed, *removed) if name.rsplit("/", 1)[-1] == ENTRYPOINT_NAME
    ]
    if indexes:
        paths = ", ".join(str(md.root / name) for name in indexes)
        lines.append(
            f"The copy of {ENTRYPOINT_NAME} loaded at the start of this conversation is out "
            f"of date. Read {paths} again if you need what it says now."
        )
    else:
        lines.append(
            "A memory you read earlier in this conversation may be out of date: read it "
            "again before relying on it."
        )
    lines.append(
        "This is background information: mention it to the user only if it bears on what "
        "they asked."
    )
    body = "\n".join(lines)
    return f"<system-reminder>\n{body}\n</system-reminder>"
