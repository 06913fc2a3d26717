"""Comparing a memory file on disk with what the memory agent wrote."""

from __future__ import annotations

from memdir.store import memory_slug, parse_memory_file


def same_memory(stored: str, written: str) -> bool:
    """Whether ``stored`` is ``written`` as memdir stores it (Claude Code's layout: the
    name slugged, the fields under ``metadata``, stamped), the body unchanged."""
    a, b = parse_memory_file(stored), parse_memory_file(written)
    assert b.name is not None
    return (a.name, a.description, a.type, a.body) == (
        memory_slug(b.name),
        b.description,
        b.type,
        b.body,
    )
