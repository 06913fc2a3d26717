"""The consolidation lock: one dreamer at a time, and when the last one ran.

The lock is a file, ``.consolidate-lock`` in the memory directory, as in Claude Code. Its
body is the holder's process id; its modification time doubles as the time of the last
consolidation, so no other state is needed. A holder that has not touched it for an hour,
or whose process is gone, no longer holds it. Taking it is write-then-verify: two
processes that race both write, and only the one whose id is read back goes ahead.
"""

from __future__ import annotations

import contextlib
import os
import time

from memdir.errors import StoreError
from memdir.store import MemoryDir, atomic_write

__all__ = [
    "HOLDER_STALE_SECONDS",
    "LOCK_NAME",
    "last_consolidated_at",
    "record_consolidation",
    "release_failed",
    "try_acquire",
]

LOCK_NAME = ".consolidate-lock"
# One hour: Claude Code's HOLDER_STALE_MS; a dream that runs longer is presumed dead.
HOLDER_STALE_SECONDS = 3600.0


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, it just is not ours
    return True


def last_consolidated_at(memory: MemoryDir) -> float:
    """When the memory was last consolidated (seconds since the epoch; 0 for never)."""
    try:
        return os.stat(memory.root / LOCK_NAME).st_mtime
    except OSError:
        return 0.0


def _holder(memory: MemoryDir) -> int | None:
    try:
        text = (memory.root / LOCK_NAME).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def try_acquire(memory: MemoryDir, *, now: float | None = None) -> float | None:
    """Take the lock; returns the previous consolidation time (0 for never), or ``None``.

    ``None`` means another live process took it less than an hour ago, or won a race
    for it just now. Raises :class:`~memdir.errors.StoreError` when the lock file cannot
    be written (a read-only folder): that is not somebody else's pass.
    """
    now = time.time() if now is None else now
    path = memory.root / LOCK_NAME
    prior = last_consolidated_at(memory)
    holder = _holder(memory)
    if (
        holder is not None
        and holder != os.getpid()
        and now - prior < HOLDER_STALE_SECONDS
        and _pid_alive(holder)
    ):
        return None
    try:
        memory.ensure()
        atomic_write(path, str(os.getpid()))
    except OSError as exc:
        raise StoreError(
            f"cannot take the consolidation lock {path}: {exc.strerror or exc}"
        ) from exc
    if _holder(memory) != os.getpid():
        return None  # another process wrote after us: it goes ahead
    return prior


def release_failed(memory: MemoryDir, prior: float) -> None:
    """Undo :func:`try_acquire` after a failed run: the old consolidation time returns.

    With no earlier consolidation the lock file goes; otherwise its body is emptied (no
    holder) and its modification time set back.
    """
    path = memory.root / LOCK_NAME
    with contextlib.suppress(OSError):
        if prior <= 0:
            path.unlink()
            return
        atomic_write(path, "")
        os.utime(path, (prior, prior))


def record_consolidation(memory: MemoryDir) -> None:
    """Stamp the lock with now, as after a consolidation run by hand."""
    memory.ensure()
    path = memory.root / LOCK_NAME
    atomic_write(path, str(os.getpid()))
    now = time.time()
    os.utime(path, (now, now))
