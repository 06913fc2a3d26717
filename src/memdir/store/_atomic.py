"""Crash-safe writes and the cross-process lock for read-modify-write.

A memory file is either the old version or the new one, never a torn mix: the new bytes go
to a temporary file in the same directory, which is flushed to disk and then renamed over
the target in one step. Several processes (two agents, the command line, a hook) may share
one memory directory, so anything that reads a file, changes it and writes it back does
so while holding a lock file. Lock files live in a hidden ``.memdir/`` folder of the
file's directory, with memdir's other bookkeeping, so a memory folder that Claude Code
shares shows memories and its index, not locks.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import filelock

from memdir._private import PRIVATE_FILE_MODE, make_private_dirs
from memdir.errors import StoreError

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "STATE_DIR_NAME",
    "TEMP_FILE",
    "atomic_write",
    "file_lock",
    "lock_path",
    "temp_prefix",
    "update_file",
]

STATE_DIR_NAME = ".memdir"
"""The hidden folder of a memory directory that holds memdir's locks, cursors and logs."""

DEFAULT_LOCK_TIMEOUT = 10.0
# Private by default (memdir._private): what memdir creates, only its owner reads.
_NEW_FILE_MODE = PRIVATE_FILE_MODE
# A temporary file this old belongs to a writer that died before its rename: a write takes
# milliseconds, so an hour leaves any write still in progress elsewhere alone.
_STALE_TEMP_SECONDS = 3600.0


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not every platform lets a directory be opened.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def temp_prefix(target: Path) -> str:
    """How a temporary file for ``target`` starts: ``.<name>.<pid>-``, then 8 random
    characters and ``.tmp``. The process id lets a repair tell a file whose writer died
    from one still being written, whatever its age."""
    return f".{target.name}.{os.getpid()}-"


TEMP_FILE = re.compile(r"\.(?P<name>.+)\.(?:(?P<pid>\d+)-)?[A-Za-z0-9_]{8}\.tmp")
"""A temporary file of :func:`atomic_write` (older ones have no process id)."""


def _sweep_stale_temps(target: Path) -> None:
    """Remove ``target``'s temporary files left behind by writers killed mid-write."""
    own = re.compile(rf"\.{re.escape(target.name)}\.(?:\d+-)?[A-Za-z0-9_]{{8}}\.tmp")
    cutoff = time.time() - _STALE_TEMP_SECONDS
    stale = []
    try:
        with os.scandir(target.parent) as entries:
            for entry in entries:
                if not own.fullmatch(entry.name):
                    continue
                with contextlib.suppress(OSError):  # gone meanwhile: nothing to do
                    if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                        stale.append(entry.path)
    except OSError:
        return
    for name in stale:
        with contextlib.suppress(OSError):
            os.unlink(name)


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old file or the new one.

    Text is written as UTF-8. Missing parent directories are created ``0700``, a new
    file ``0600``, whatever the umask; an existing file keeps its permission bits (a mode
    its owner chose stays); a symlink at ``path`` is replaced by a regular file rather
    than written through. Raises :class:`~memdir.errors.StoreError` on failure, with the
    target untouched and no temporary file left behind. A process killed mid-write can
    still leave one (named for its process, see :func:`temp_prefix`); the repair step
    (:func:`~memdir.store.repair_memory_dir`) removes it once that process is gone, and
    the next write of the same file once it is an hour old.
    """
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        make_private_dirs(target.parent)
        try:
            st = os.lstat(target)
            mode = st.st_mode & 0o7777 if not os.path.islink(target) else _NEW_FILE_MODE
        except FileNotFoundError:
            mode = _NEW_FILE_MODE
        fd, tmp_name = tempfile.mkstemp(
            dir=target.parent, prefix=temp_prefix(target), suffix=".tmp"
        )
    except OSError as exc:
        raise StoreError(f"cannot write {target}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, target)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        if isinstance(exc, OSError):
            raise StoreError(f"cannot write {target}: {exc.strerror or exc}") from exc
        raise
    _fsync_dir(target.parent)
    _sweep_stale_temps(target)


def lock_path(path: str | os.PathLike[str]) -> Path:
    """The lock file that guards ``path``: ``.memdir/<name>.lock`` in its directory, or
    ``<name>.lock`` beside it for a file that is itself in a ``.memdir/`` folder."""
    target = Path(path)
    if target.parent.name == STATE_DIR_NAME:
        return target.with_name(f"{target.name}.lock")
    return target.parent / STATE_DIR_NAME / f"{target.name}.lock"


@contextlib.contextmanager
def file_lock(
    path: str | os.PathLike[str], *, timeout: float = DEFAULT_LOCK_TIMEOUT
) -> Iterator[None]:
    """Hold the cross-process lock for ``path`` while the block runs.

    Waits up to ``timeout`` seconds (``0`` tries once) and raises
    :class:`~memdir.errors.StoreError` if another process still holds it.
    """
    guard = lock_path(path)
    try:
        make_private_dirs(guard.parent)
        lock = filelock.FileLock(guard, timeout=timeout, mode=PRIVATE_FILE_MODE)
        lock.acquire()
    except filelock.Timeout as exc:
        raise StoreError(f"{path} is locked by another process (waited {timeout:g}s)") from exc
    except OSError as exc:
        raise StoreError(f"cannot lock {path}: {exc.strerror or exc}") from exc
    try:
        yield
    finally:
        lock.release()


def update_file(
    path: str | os.PathLike[str],
    transform: Callable[[str | None], str],
    *,
    timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> str:
    """Read ``path``, apply ``transform`` and write the result, all under the file's lock.

    ``transform`` receives the current text (``None`` when the file does not exist) and
    returns the new text, which is written atomically only when it differs. Returns the
    new text. Two processes updating one file never lose each other's change.
    """
    target = Path(path)
    with file_lock(target, timeout=timeout):
        try:
            current: str | None = target.read_text(encoding="utf-8")
        except FileNotFoundError:
            current = None
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f"cannot read {target}: {exc}") from exc
        updated = transform(current)
        if updated != current:
            atomic_write(target, updated)
        return updated
