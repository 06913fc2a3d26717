"""``MemoryDir``: one memory directory, its index, its team folder and its boundary."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from memdir._private import make_private_dirs
from memdir.errors import UsageError
from memdir.store._atomic import DEFAULT_LOCK_TIMEOUT, atomic_write, file_lock
from memdir.store._containment import is_within, resolve_candidate
from memdir.store._entrypoint import ENTRYPOINT_NAME
from memdir.store._scan import MemoryHeader, scan_memory_files

__all__ = ["TEAM_DIR_NAME", "MemoryDir"]

TEAM_DIR_NAME = "team"


class MemoryDir:
    """A memory directory: topic files with frontmatter, indexed by ``MEMORY.md``.

    Team memory, shared with collaborators, lives in the ``team/`` folder inside it with
    its own ``MEMORY.md``. The directory need not exist yet; nothing is created until
    something is written.

    The containment checks answer "would writing to this path land inside the
    directory?" the way the operating system would resolve it, so ``..``, ``~``,
    relative paths and symlinks cannot smuggle a write out. They fail closed.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        raw = os.fspath(path)
        if not raw or "\0" in raw:
            raise UsageError(f"not a usable memory directory path: {raw!r}")
        self.root = Path(os.path.abspath(os.path.expanduser(raw)))
        """The directory, absolute (symlinks are not resolved here)."""

    def __repr__(self) -> str:
        return f"MemoryDir({str(self.root)!r})"

    def __fspath__(self) -> str:
        return str(self.root)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemoryDir) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    @property
    def entrypoint(self) -> Path:
        """The index file, ``MEMORY.md``."""
        return self.root / ENTRYPOINT_NAME

    @property
    def team_dir(self) -> Path:
        """The shared team-memory folder, ``team/``."""
        return self.root / TEAM_DIR_NAME

    @property
    def team_entrypoint(self) -> Path:
        """The team index, ``team/MEMORY.md``."""
        return self.team_dir / ENTRYPOINT_NAME

    def is_memory_path(self, path: object, *, cwd: str | os.PathLike[str] | None = None) -> bool:
        """Whether ``path`` resolves to a location strictly inside this directory.

        A relative ``path`` is taken against ``cwd`` (default: the process's working
        directory). Anything that is not a string or path, holds a NUL byte, or cannot be
        resolved is outside.
        """
        return is_within(resolve_candidate(path, cwd=cwd), resolve_candidate(self.root))

    def is_team_path(self, path: object, *, cwd: str | os.PathLike[str] | None = None) -> bool:
        """Whether ``path`` resolves to a location strictly inside ``team/``."""
        return is_within(resolve_candidate(path, cwd=cwd), resolve_candidate(self.team_dir))

    def ensure(self) -> Path:
        """Create the directory (and its missing parents, ``0700``) if missing; return it."""
        make_private_dirs(self.root)
        return self.root

    def scan(self, limit: int = 200) -> list[MemoryHeader]:
        """The newest ``limit`` memory files and their frontmatter, newest first.

        See :func:`~memdir.store.scan_memory_files`.
        """
        return scan_memory_files(self.root, limit=limit)

    def write(self, path: str | os.PathLike[str], content: str) -> Path:
        """Atomically write ``content`` to ``path`` (relative to this directory, or absolute).

        Raises :class:`~memdir.errors.UsageError`, writing nothing, when the path does not
        resolve to a location inside the directory.
        """
        target = Path(path) if os.path.isabs(os.fspath(path)) else self.root / path
        if not self.is_memory_path(target):
            raise UsageError(f"{os.fspath(path)!r} is outside the memory directory {self.root}")
        atomic_write(target, content)
        return target

    @contextlib.contextmanager
    def lock(
        self, name: str = ENTRYPOINT_NAME, *, timeout: float = DEFAULT_LOCK_TIMEOUT
    ) -> Iterator[None]:
        """Hold the cross-process lock for the file ``name`` in this directory."""
        with file_lock(self.root / name, timeout=timeout):
            yield
