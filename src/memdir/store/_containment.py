"""Path containment that holds up against ``..``, ``~``, relative paths and symlinks.

A path is inside a directory when the file the operating system would open for it lies
inside that directory. Lexical checks are not enough: ``memory/link/../x`` goes wherever
the symlink ``link`` points. So a candidate is resolved the way the kernel would: the
deepest part of it that exists is passed through ``realpath`` (every symlink followed,
``..`` applied after them), and only the part that does not exist yet — which can hold no
symlink — is joined on lexically. Anything that cannot be resolved is outside.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["is_within", "resolve_candidate"]


def _deepest_existing(path: str) -> tuple[str, list[str]]:
    """Split an absolute path into its longest existing prefix and the missing rest."""
    rest: list[str] = []
    current = path
    while not os.path.lexists(current):
        parent, name = os.path.split(current)
        if parent == current:  # reached the filesystem root without finding anything
            break
        rest.append(name)
        current = parent
    rest.reverse()
    return current, rest


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
        existing, rest = _deepest_existing(absolute)
        # strict=True raises on a symlink loop or a component that vanished meanwhile.
        real = os.path.realpath(existing, strict=True)
        joined = os.path.normpath(os.path.join(real, *rest)) if rest else real
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
