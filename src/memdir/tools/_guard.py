"""The last check before a tool writes: inside the memory directory, no credential.

It lives beside the tools it guards (Write, Edit and the ``memory`` tool call it through
their :class:`~memdir.tools.ToolContext`, or on their own), below the permission gate,
which asks the same questions of a call before it runs and imports them from here.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from memdir.store import ENTRYPOINT_NAME, MemoryDir, scan_secrets
from memdir.store._atomic import STATE_DIR_NAME
from memdir.store._containment import is_within, resolve_candidate
from memdir.tools._base import WriteGuard

__all__ = [
    "folded_index_refusal",
    "is_bookkeeping",
    "memory_write_guard",
    "reach_refusal",
    "secret_refusal",
]


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
    """Whether ``path`` leads into a ``.memdir/`` folder of the memory directory, at any
    depth (``team/.memdir/`` too), where cursors, locks and the trash live: a memory
    agent that rewrote them could make extraction skip a session or take a lock another
    process holds."""
    refusal = reach_refusal(md, path)
    return refusal is not None and refusal[0] == "bookkeeping"


def _in_state(root: Path, current: str) -> bool:
    """Whether the resolved ``current`` is, or lies in, a ``.memdir`` folder below ``root``."""
    here = Path(current)
    return (
        here != root
        and here.is_relative_to(root)
        and any(_is_state_name(part) for part in here.relative_to(root).parts)
    )


def _is_state_name(part: str) -> bool:
    # Case folded: on a case-insensitive filesystem ``.MEMDIR`` opens the same folder.
    return part.casefold() == STATE_DIR_NAME


def reach_refusal(
    md: MemoryDir, path: object, *, cwd: str | os.PathLike[str] | None = None
) -> tuple[str, str] | None:
    """Why a tool may not read or change ``path``, as ``(reason, message)``; ``None`` when
    nothing here forbids it (whether it lies inside the memory directory at all is the
    caller's own check).

    The path is followed one component at a time, as the operating system would open it,
    and refused when any step is memdir's state or a link planted in the memory directory
    leads where no memory is:

    - ``bookkeeping``: a component named ``.memdir``, as written or as resolved, below the
      memory directory, at any depth — ``team/.memdir/x``, or ``x/state.json`` where ``x``
      is a symlink to ``.memdir``;
    - ``link``: a symlink inside the memory directory whose target leaves it (or cannot be
      resolved): a checkout or a sync can plant one, and the tools would follow it out;
    - ``shared_file``: a regular file inside the memory directory that has more than one
      name (``st_nlink > 1``), a hard link whose other name may be anywhere on the disk.
      memdir's own writes replace files by renaming a fresh one, which never leaves two
      names; folders always have several, and are not judged by it.
    """
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    root = resolve_candidate(md.root)
    if not isinstance(path, str) or not path or "\0" in path or root is None:
        return None
    shown = path
    try:
        base = os.fspath(cwd) if cwd is not None else os.getcwd()
        absolute = os.path.join(base, os.path.expanduser(path))
        current = os.sep
        for part in absolute.split(os.sep):
            if part in ("", "."):
                continue
            if part == "..":
                current = os.path.dirname(current)
                continue
            step = os.path.join(current, part)
            inside = Path(current) == root or is_within(Path(current), root)
            if inside and _is_state_name(part):
                return "bookkeeping", _state_message(shown)
            if os.path.islink(step):
                try:
                    target = os.path.realpath(step, strict=True)
                except (OSError, RuntimeError):
                    if inside:
                        return "link", _link_message(shown, step, md)
                    return None  # outside: the containment check answers for it
                if inside and not (Path(target) == root or is_within(Path(target), root)):
                    return "link", _link_message(shown, step, md)
                current = target
            else:
                current = step
            if _in_state(root, current):
                return "bookkeeping", _state_message(shown)
        final = Path(current)
        if is_within(final, root):
            st = os.stat(final)
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                return "shared_file", (
                    f"{shown} is a file with {st.st_nlink} names (a hard link): its other "
                    "names may lie outside the memory directory, so it is neither read nor "
                    "changed here. Save memories as ordinary files."
                )
    except FileNotFoundError:
        return None  # a file still to be made: its folders were judged on the way
    except (OSError, ValueError):
        return None  # the containment check, which fails closed, answers for it
    return None


def _state_message(shown: str) -> str:
    return (
        f"{shown} is in, or leads into, a {STATE_DIR_NAME}/ folder: memdir's own "
        "bookkeeping (cursors, locks, the trash), not memory, which tools neither read nor "
        "change."
    )


def _link_message(shown: str, link: str, md: MemoryDir) -> str:
    return (
        f"{shown} goes through the symlink {link}, which leads outside the memory "
        f"directory {md.root}; links in the memory directory are not followed out of it."
    )


def memory_write_guard(
    memory_dir: MemoryDir | str | os.PathLike[str],
    *,
    allow_private_secrets: bool = False,
    user_dir: MemoryDir | None = None,
) -> WriteGuard:
    """The last check before Write or Edit touch the disk, for tools' :class:`ToolContext`.

    The gate judges each call from its input; this judges the write itself — the real
    target and the file's complete new text, while no other write runs — so neither a
    path that only the filesystem resolves out of the directory nor a credential that two
    edits of one message assemble between them can get through. ``user_dir``, the user
    layer, may be written too, and never with a credential: every project reads it.
    """
    md = memory_dir if isinstance(memory_dir, MemoryDir) else MemoryDir(memory_dir)

    def guard(target: Path, text: str) -> str | None:
        if user_dir is not None and user_dir.is_memory_path(target):
            reached = reach_refusal(user_dir, target)
            if reached is not None:
                return f"refused: {reached[1]}"
            return folded_index_refusal(target, text) or secret_refusal(
                user_dir, target, text, allow_private=False
            )
        if not md.is_memory_path(target):
            return f"refused: {target} is outside the memory directory {md.root}"
        reached = reach_refusal(md, target)
        if reached is not None:
            return f"refused: {reached[1]}"
        return folded_index_refusal(target, text) or secret_refusal(
            md, target, text, allow_private_secrets
        )

    return guard
