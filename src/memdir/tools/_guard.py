"""The last check before a tool writes: inside the memory directory, no credential.

It lives beside the tools it guards (Write, Edit and the ``memory`` tool call it through
their :class:`~memdir.tools.ToolContext`, or on their own), below the permission gate,
which asks the same questions of a call before it runs and imports them from here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from memdir.store import ENTRYPOINT_NAME, MemoryDir, scan_secrets
from memdir.store._atomic import STATE_DIR_NAME
from memdir.store._containment import is_within, resolve_candidate
from memdir.tools._base import WriteGuard

__all__ = ["folded_index_refusal", "is_bookkeeping", "memory_write_guard", "secret_refusal"]


def secret_refusal(md: MemoryDir, path: object, text: str, allow_private: bool) -> str | None:
    """Why ``text`` may not be written at ``path`` for holding a credential, or ``None``."""
    findings = scan_secrets(text)
    if not findings:
        return None
    team = md.is_team_path(path)
    if not team and allow_private:
        return None
    kinds = ", ".join(sorted({f.rule_id for f in findings}))
    scope = "team memory, which is shared with collaborators" if team else "memory"
    return (
        f"refused: the result would contain a credential ({kinds}). Secrets are never saved "
        f"to {scope}. Write the memory without the value (say where the secret is kept)."
    )


# The line that stands for the pointer lines left out of the index the memory agent is
# shown (``memdir.extract._prompts``): written back, it would replace them all.
_ELIDED_POINTERS = re.compile(r"\[… \d+ pointer lines? to memory files …\]")


def folded_index_refusal(path: Path, text: str) -> str | None:
    """Why ``text`` may not become the index at ``path``: it holds the line that stood
    for the pointer lines the memory agent was not shown, so writing it would lose them."""
    if path.name != ENTRYPOINT_NAME or not _ELIDED_POINTERS.search(text):
        return None
    return (
        f"refused: {path.name} was shown with its pointer lines folded into one line, and "
        "this text still holds that line, so writing it would lose them. Read the index, "
        "then Edit only the lines to change."
    )


def is_bookkeeping(md: MemoryDir, path: object) -> bool:
    """Whether ``path`` resolves into the memory directory's ``.memdir/`` folder, where
    cursors and locks live: a memory agent that rewrote them could make extraction skip
    a session."""
    folder = resolve_candidate(md.root / STATE_DIR_NAME)
    found = resolve_candidate(path)
    return found is not None and (found == folder or is_within(found, folder))


def memory_write_guard(
    memory_dir: MemoryDir | str | os.PathLike[str], *, allow_private_secrets: bool = False
) -> WriteGuard:
    """The last check before Write or Edit touch the disk, for tools' :class:`ToolContext`.

    The gate judges each call from its input; this judges the write itself — the real
    target and the file's complete new text, while no other write runs — so neither a
    path that only the filesystem resolves out of the directory nor a credential that two
    edits of one message assemble between them can get through.
    """
    md = memory_dir if isinstance(memory_dir, MemoryDir) else MemoryDir(memory_dir)

    def guard(target: Path, text: str) -> str | None:
        if not md.is_memory_path(target):
            return f"refused: {target} is outside the memory directory {md.root}"
        if is_bookkeeping(md, target):
            return f"refused: {target} is memdir's own bookkeeping, not a memory"
        return folded_index_refusal(target, text) or secret_refusal(
            md, target, text, allow_private_secrets
        )

    return guard
