"""The trash: what ``memdir forget`` removes, kept a week so it can be put back.

Each forgotten memory gets a folder ``.memdir/trash/<UTC timestamp>/`` in the memory
directory (``20260305T140322.123456Z``, with ``-2``, ``-3`` … when two share a moment)
holding two files:

- ``memory.gz`` — the memory file's bytes, compressed. Not a ``.md`` file, so no scan of
  the memory directory lists it, and binary, so a memory agent searching its memory with
  Grep never reads a forgotten memory back into a new one.
- ``entry.json`` — where the file was (relative to the memory directory), its permission
  bits and modification time, and the lines of its ``MEMORY.md`` index that pointed at
  it, each with its line number, exactly as they were: compressed and base64-encoded
  inside the JSON, so that no search of the folder finds a forgotten line either.

Nothing is lost on a crash. Forgetting writes the copy first and its record second (an
entry without a record is incomplete and ignored), then removes the index lines, then
the file; restoring puts the index lines back first, then the file (never over a file of
the same name), then removes the entry. A step interrupted leaves both copies, and
restoring again finishes the job: a memory file identical to the stored one is taken as
already restored, and index lines already present are not added twice; the repair step
(:mod:`memdir.store._repair`) settles what a killed forget or undo left. Both hold the
index's lock throughout (and the main index's, for a memory indexed in another folder),
the lock every writer of ``MEMORY.md`` takes, the memory agent's Write and Edit included.
The model's permission gate keeps it from writing in ``.memdir/``, so it cannot empty the
trash or forge an entry.

:func:`empty_trash` drops entries older than :data:`TRASH_KEEP_SECONDS`; each
consolidation pass (``memdir dream``) calls it.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import gzip
import json
import os
import re
import shutil
import tempfile
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memdir._private import PRIVATE_DIR_MODE, make_private_dirs
from memdir.errors import StoreError
from memdir.store._atomic import STATE_DIR_NAME, atomic_write, file_lock, temp_prefix
from memdir.store._entrypoint import ENTRYPOINT_NAME
from memdir.store._memory_dir import MemoryDir
from memdir.store._provenance import record_changes

__all__ = [
    "TRASH_DIR_NAME",
    "TRASH_KEEP_SECONDS",
    "TrashEntry",
    "empty_trash",
    "forget_memory",
    "last_trashed",
    "restore_memory",
    "trash_entries",
]

TRASH_DIR_NAME = f"{STATE_DIR_NAME}/trash"
"""The trash folder, relative to the memory directory."""
TRASH_KEEP_SECONDS = 7 * 86400.0
"""How long a forgotten memory stays restorable: a week."""

_RECORD_NAME = "entry.json"
_COPY_NAME = "memory.gz"
_VERSION = 2
_STAMP_FORMAT = "%Y%m%dT%H%M%S.%fZ"
_FOLDER = re.compile(r"(\d{8}T\d{6}\.\d{6}Z)(?:-(\d+))?")
POINTER = re.compile(r"\]\(([^)]+)\)")
"""A link in an index line; the repair step (``_repair``) reads links with it too."""
_LINES = re.compile(rb"[^\n]*\n|[^\n]+\Z")


@dataclass(frozen=True, kw_only=True)
class TrashEntry:
    """One forgotten memory in the trash."""

    path: Path
    """The entry's folder, ``.memdir/trash/<UTC timestamp>/``."""
    filename: str
    """Where the memory was, relative to the memory directory (``team/x.md``)."""
    index: str
    """Its index, relative to the memory directory (``MEMORY.md``, ``team/MEMORY.md``)."""
    index_lines: tuple[tuple[int, str], ...]
    """The index lines removed with it: ``(line number from 0, the line as written)``."""
    forgotten_at: float
    """When it was forgotten, in seconds since the epoch."""


def _stamp(moment: float) -> str:
    return datetime.datetime.fromtimestamp(moment, datetime.UTC).strftime(_STAMP_FORMAT)


def folder_key(name: str) -> tuple[float, int] | None:
    """``(when, sequence)`` for an entry folder's name; ``None`` for anything else."""
    match = _FOLDER.fullmatch(name)
    if match is None:
        return None
    try:
        moment = datetime.datetime.strptime(match.group(1), _STAMP_FORMAT)
    except ValueError:
        return None
    return moment.replace(tzinfo=datetime.UTC).timestamp(), int(match.group(2) or 1)


def split_lines(data: bytes) -> list[bytes]:
    """``data`` as lines that keep their ``\\n``; joined, they give ``data`` back."""
    return _LINES.findall(data)


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from exc


def points_at(line: bytes, index_dir: Path, target: Path) -> bool:
    """Whether an index line links to ``target`` (links are relative to the index)."""
    for link in POINTER.findall(line.decode("utf-8", errors="replace")):
        link = link.strip().strip("<>").split("#", 1)[0]
        if not link:
            continue
        resolved = link if os.path.isabs(link) else os.path.join(index_dir, link)
        if os.path.normpath(resolved) == os.path.normpath(target):
            return True
    return False


def _inside(memory: MemoryDir, path: Path) -> bool:
    """Whether ``path`` is in the memory directory and not in its ``.memdir/`` folder."""
    state = memory.root / STATE_DIR_NAME
    return memory.is_memory_path(path) and not (
        path == state or MemoryDir(state).is_memory_path(path)
    )


def _new_folder(memory: MemoryDir, moment: float) -> Path:
    trash = memory.root / TRASH_DIR_NAME
    make_private_dirs(trash)
    stamp = _stamp(moment)
    sequence = 1
    while True:
        folder = trash / (stamp if sequence == 1 else f"{stamp}-{sequence}")
        try:
            folder.mkdir(mode=PRIVATE_DIR_MODE)
            os.chmod(folder, PRIVATE_DIR_MODE)
        except FileExistsError:
            sequence += 1
            continue
        return folder


def _index_for(memory: MemoryDir, target: Path) -> Path:
    """The index that lists ``target``: the ``MEMORY.md`` beside it, else the memory
    directory's own when that is where its line is; beside it when neither lists it."""
    beside = target.parent / ENTRYPOINT_NAME
    candidates = [beside]
    if target.parent != memory.root:
        candidates.append(memory.root / ENTRYPOINT_NAME)
    for index in candidates:
        text = _read_bytes(index)
        if text and any(points_at(line, index.parent, target) for line in split_lines(text)):
            return index
    return beside


@contextlib.contextmanager
def _index_locks(memory: MemoryDir, index: Path) -> Iterator[None]:
    """Hold ``index``'s lock, and the main index's first when it is another one.

    The repair step settles the trash while it holds the main index's lock; taking it
    here too means no forget or undo of any folder is halfway through meanwhile. Both
    take the main index's lock first, so neither waits for the other in a circle.
    """
    with contextlib.ExitStack() as stack:
        if index != memory.entrypoint:
            stack.enter_context(file_lock(memory.entrypoint))
        stack.enter_context(file_lock(index))
        yield


def forget_memory(
    memory: MemoryDir, path: str | os.PathLike[str], *, now: float | None = None
) -> TrashEntry:
    """Move the memory file ``path`` and its index lines into the trash.

    ``path`` is absolute or relative to the memory directory; its index is the
    ``MEMORY.md`` beside it, or the directory's own when only that one points at it (a
    team or folder memory listed in the main index). ``now`` (seconds since the epoch,
    default: the clock) dates the entry. Raises :class:`~memdir.errors.StoreError`, with
    nothing removed, when the file is not a memory in this directory or cannot be read or
    moved.
    """
    target = Path(path) if os.path.isabs(os.fspath(path)) else memory.root / path
    target = Path(os.path.normpath(target))
    if (
        not _inside(memory, target)
        or target.suffix != ".md"
        or target.name == ENTRYPOINT_NAME
        or target.is_symlink()
        or not target.is_file()
    ):
        raise StoreError(f"{target} is not a memory file in {memory.root}")
    try:
        filename = target.relative_to(memory.root).as_posix()
    except ValueError:  # the same folder reached another way (a symlink in its path)
        raise StoreError(f"{target} is not a memory file in {memory.root}") from None
    index = _index_for(memory, target)
    moment = time.time() if now is None else now
    with _index_locks(memory, index):
        try:
            data = target.read_bytes()
            status = os.lstat(target)
        except OSError as exc:
            raise StoreError(f"cannot read {target}: {exc.strerror or exc}") from exc
        original = _read_bytes(index)
        lines = split_lines(original or b"")
        removed = [
            (n, line) for n, line in enumerate(lines) if points_at(line, index.parent, target)
        ]
        record: dict[str, Any] = {
            "version": _VERSION,
            "file": filename,
            "index": index.relative_to(memory.root).as_posix(),
            "index_lines": [
                {"line": n, "text": line.decode("utf-8", errors="surrogateescape")}
                for n, line in removed
            ],
            "mode": status.st_mode & 0o7777,
            "mtime_ns": status.st_mtime_ns,
            "forgotten": datetime.datetime.fromtimestamp(moment, datetime.UTC).isoformat(),
        }
        try:
            folder = _new_folder(memory, moment)
        except OSError as exc:
            raise StoreError(f"cannot make a trash entry: {exc.strerror or exc}") from exc
        gone = {n for n, _ in removed}
        try:
            # The copy, then its record (only a complete entry counts), then the index
            # lines, then the file: wherever this stops, a copy of everything is left.
            atomic_write(folder / _COPY_NAME, gzip.compress(data, mtime=0))
            atomic_write(folder / _RECORD_NAME, _sealed(record))
            if original is not None:
                # Rewritten even when no line pointed at the memory: a memory agent that
                # read the index before this and is about to add the memory's line then
                # finds the index changed, reads it again and sees the memory gone.
                atomic_write(index, b"".join(line for n, line in enumerate(lines) if n not in gone))
            target.unlink(missing_ok=True)
        except OSError as exc:  # StoreError included
            if original is not None:
                with contextlib.suppress(StoreError):
                    atomic_write(index, original)
            remove_entry_folder(folder)
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"cannot remove {target}: {exc.strerror or exc}") from exc
    record_changes(memory, [target], by="forget", what="forgotten")
    return TrashEntry(
        path=folder,
        filename=filename,
        index=record["index"],
        index_lines=tuple((item["line"], item["text"]) for item in record["index_lines"]),
        forgotten_at=moment,
    )


def _sealed(record: dict[str, Any]) -> str:
    """The text of an entry's record, with the record itself compressed and encoded.

    The record holds the forgotten memory's index lines and its name: stored as plain
    JSON, a ``grep -r`` of the memory directory (which a read-only shell command may do)
    would find a forgotten line word for word. Only the version stays readable.
    """
    packed = gzip.compress(json.dumps(record).encode("utf-8"), mtime=0)
    outer = {"version": _VERSION, "record": base64.b64encode(packed).decode("ascii")}
    return json.dumps(outer, indent=2) + "\n"


def _unsealed(outer: Any) -> Any:
    """The record stored by :func:`_sealed`; an earlier version's plain record as it is."""
    if isinstance(outer, dict) and "record" in outer:
        packed = base64.b64decode(str(outer["record"]), validate=True)
        return json.loads(gzip.decompress(packed).decode("utf-8"))
    return outer


def load_entry(folder: Path) -> TrashEntry | None:
    """The entry in ``folder``, or ``None`` when it is incomplete or not one."""
    key = folder_key(folder.name)
    if key is None or not (folder / _COPY_NAME).is_file():
        return None
    try:
        record = _unsealed(json.loads((folder / _RECORD_NAME).read_text(encoding="utf-8")))
        lines = tuple((int(item["line"]), str(item["text"])) for item in record["index_lines"])
        return TrashEntry(
            path=folder,
            filename=str(record["file"]),
            index=str(record["index"]),
            index_lines=lines,
            forgotten_at=key[0],
        )
    except (OSError, ValueError, TypeError, KeyError, EOFError, zlib.error):
        return None


def trash_entries(memory: MemoryDir) -> list[TrashEntry]:
    """The complete entries in the trash, most recently forgotten first."""
    trash = memory.root / TRASH_DIR_NAME
    try:
        names = os.listdir(trash)
    except OSError:
        return []
    keyed = sorted(
        ((key, name) for name in names if (key := folder_key(name)) is not None), reverse=True
    )
    found = (load_entry(trash / name) for _, name in keyed)
    return [entry for entry in found if entry is not None]


def last_trashed(memory: MemoryDir) -> TrashEntry | None:
    """The most recently forgotten memory still in the trash, or ``None``."""
    entries = trash_entries(memory)
    return entries[0] if entries else None


def _insert_lines(original: bytes | None, wanted: tuple[tuple[int, str], ...]) -> bytes:
    """The index with ``wanted`` back at their line numbers (those present are skipped)."""
    lines = split_lines(original or b"")
    present = {line.rstrip(b"\r\n") for line in lines}
    for number, text in sorted(wanted):
        line = text.encode("utf-8", errors="surrogateescape")
        if line.rstrip(b"\r\n") in present:
            continue
        at = min(number, len(lines))
        if at < len(lines) and not line.endswith(b"\n"):
            line += b"\n"
        if at == len(lines) and lines and not lines[-1].endswith(b"\n"):
            lines[-1] += b"\n"
        lines.insert(at, line)
        present.add(line.rstrip(b"\r\n"))
    return b"".join(lines)


def _place(data: bytes, target: Path, mode: int, mtime_ns: int) -> None:
    """Create ``target`` holding ``data``; raises FileExistsError rather than replace one."""
    make_private_dirs(target.parent)
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=temp_prefix(target), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.utime(temp, ns=(mtime_ns, mtime_ns))
        try:
            os.link(temp, target)  # fails, atomically, when the name is taken
        except FileExistsError:
            raise
        except OSError:  # no hard links here: check, then rename
            if os.path.lexists(target):
                raise FileExistsError(target) from None
            os.replace(temp, target)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def restore_memory(memory: MemoryDir, entry: TrashEntry | None = None) -> TrashEntry:
    """Put ``entry`` (default: the last forgotten memory) back, file and index lines.

    The file gets its bytes, permission bits and modification time back; each index
    line goes back to its line number unless the index already has it. Raises
    :class:`~memdir.errors.StoreError`, changing nothing, when the trash is empty, when
    a different file now has the memory's name (it is never overwritten), or when the
    entry cannot be read.
    """
    if entry is None:
        entry = last_trashed(memory)
        if entry is None:
            raise StoreError(f"the trash of {memory.root} is empty: nothing to restore")
    target = Path(os.path.normpath(memory.root / entry.filename))
    index = Path(os.path.normpath(memory.root / entry.index))
    if not _inside(memory, target) or not _inside(memory, index):
        raise StoreError(f"trash entry {entry.path.name} points outside {memory.root}")
    with _index_locks(memory, index):
        if not (entry.path / _RECORD_NAME).is_file():
            raise StoreError(f"{entry.filename} was restored meanwhile")
        try:
            record = _unsealed(json.loads((entry.path / _RECORD_NAME).read_text(encoding="utf-8")))
            data = gzip.decompress((entry.path / _COPY_NAME).read_bytes())
            mode, mtime_ns = int(record["mode"]), int(record["mtime_ns"])
        except (OSError, ValueError, TypeError, KeyError, EOFError, zlib.error) as exc:
            raise StoreError(f"cannot read trash entry {entry.path.name}: {exc}") from exc
        existing = None if not os.path.lexists(target) else _read_bytes(target)
        if os.path.lexists(target) and (target.is_symlink() or existing != data):
            raise StoreError(_taken(entry))
        original = _read_bytes(index)
        restored = _insert_lines(original, entry.index_lines)
        if restored != (original or b""):
            atomic_write(index, restored)
        if existing is None:
            try:
                _place(data, target, mode, mtime_ns)
            except OSError as exc:
                if restored != (original or b""):
                    if original is None:
                        index.unlink(missing_ok=True)
                    else:
                        atomic_write(index, original)
                if isinstance(exc, FileExistsError):
                    raise StoreError(_taken(entry)) from exc
                raise StoreError(f"cannot restore {target}: {exc.strerror or exc}") from exc
        remove_entry_folder(entry.path)
    record_changes(memory, [target], by="forget", what="restored")
    return entry


def _taken(entry: TrashEntry) -> str:
    return (
        f"{entry.filename} is taken by a newer memory; rename or forget that one first "
        "(the forgotten one stays in the trash)"
    )


def remove_entry_folder(folder: Path) -> None:
    """Remove an entry, its record first so that a half-removed one is incomplete."""
    with contextlib.suppress(OSError):
        (folder / _RECORD_NAME).unlink(missing_ok=True)
    shutil.rmtree(folder, ignore_errors=True)


def empty_trash(
    memory: MemoryDir, *, older_than: float = TRASH_KEEP_SECONDS, now: float | None = None
) -> list[Path]:
    """Remove the trash entries forgotten more than ``older_than`` seconds before ``now``.

    Incomplete entries go by the same rule; folders that are not entries are left
    alone. Returns the folders removed. Never raises: what cannot be removed now is
    tried again next time.
    """
    trash = memory.root / TRASH_DIR_NAME
    cutoff = (time.time() if now is None else now) - older_than
    try:
        names = os.listdir(trash)
    except OSError:
        return []
    removed: list[Path] = []
    for name in sorted(names):
        key = folder_key(name)
        folder = trash / name
        if key is None or key[0] >= cutoff or folder.is_symlink() or not folder.is_dir():
            continue
        remove_entry_folder(folder)
        if not os.path.lexists(folder):
            removed.append(folder)
    return removed
