"""Path containment that holds up against ``..``, ``~``, relative paths and symlinks.

A path is inside a directory when the file the operating system would open for it lies
inside that directory. Lexical checks are not enough: ``memory/link/../x`` goes wherever
the symlink ``link`` points, and so does ``memory/new/../link/x`` once ``new`` is created.
So a candidate is resolved one component at a time, the way creating its folders and then
the file would: existing components through ``realpath`` (every symlink followed), missing
ones as the folders to be made, ``..`` applied to what was reached so far. Anything that
cannot be resolved is outside.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["is_within", "resolve_candidate"]


def _walk(path: str) -> str:
    """Resolve an absolute path one component at a time, as making its folders would.

    A component that is a symlink is followed through ``realpath`` (a loop or a dangling
    link raising), any other — existing, or missing and so a folder that would be made —
    is taken as it is, and ``..`` applies to what was reached so far: a symlink that a
    ``..`` leads back to is followed like any other.
    """
    current = os.sep
    for part in path.split(os.sep):
        if part in ("", "."):
            continue
        if part == "..":
            current = os.path.dirname(current)
            continue
        step = os.path.join(current, part)
        # ``current`` is already resolved, so only a symlink at ``step`` itself can move it.
        current = os.path.realpath(step, strict=True) if os.path.islink(step) else step
    return current


def resolve_candidate(path: object, *, cwd: str | os.PathLike[str] | None = None) -> Path | None:
    """Where ``path`` really points, or ``None`` when that cannot be told safely.

    ``~`` is expanded, a relative path is taken against ``cwd`` (default: the process's
    working directory), symlinks are followed through every existing component, and the
    rest is normalised lexically. Non-string input, NUL bytes, symlink loops and any other
    resolution error give ``None`` — callers treat that as *outside* (fail closed).
    """
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path or "\0" in path:
        return None
    try:
        expanded = os.path.expanduser(path)
        base = os.fspath(cwd) if cwd is not None else os.getcwd()
        if "\0" in base:
            return None
        absolute = os.path.join(base, expanded)
        if not os.path.isabs(absolute):
            return None
        # strict=True raises on a symlink loop or a component that vanished meanwhile.
        joined = _walk(absolute)
    except (OSError, ValueError, RuntimeError):
        return None
    return Path(joined)


def is_within(candidate: Path | None, root: Path | None) -> bool:
    """Whether the resolved ``candidate`` lies strictly below the resolved ``root``.

    The root itself is not inside: a file written at the directory's own path would
    replace the directory.
    """
    if candidate is None or root is None:
        return False
    return candidate != root and candidate.is_relative_to(root)
