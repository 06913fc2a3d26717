"""Private by default: what memdir creates for a person's memory, only that person reads.

Memories say who a person is and how they work, so every file memdir creates is ``0600``
and every folder ``0700``, whatever the process's umask (under umask ``022`` plain
``open``/``mkdir`` would give other local users read access, under umask ``0`` write
access too). The modes are set explicitly after creation, since the umask can only take
bits away. Folders that already exist are left as their owner made them: a person's
``~/.claude/projects`` is theirs to arrange.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["PRIVATE_DIR_MODE", "PRIVATE_FILE_MODE", "make_private_dirs", "open_private"]

PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700


def make_private_dirs(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` and its missing parents, each created one ``0700``; returns it.

    Raises :class:`OSError` as :meth:`pathlib.Path.mkdir` does (a file in the way, no
    permission)."""
    target = Path(path)
    missing: list[Path] = []
    current = target
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            if not folder.is_dir():
                raise
            continue  # made meanwhile by another process: its mode is that one's
        os.chmod(folder, PRIVATE_DIR_MODE)
    return target


def open_private(path: str | os.PathLike[str], flags: int) -> int:
    """``os.open`` of ``path`` with ``flags``; a file it creates is ``0600``."""
    existed = os.path.lexists(path)
    fd = os.open(path, flags, PRIVATE_FILE_MODE)
    if not existed:
        try:
            os.fchmod(fd, PRIVATE_FILE_MODE)
        except OSError:
            os.close(fd)
            raise
    return fd
