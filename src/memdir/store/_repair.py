"""The repair step: put a memory directory back in order after a crash.

A process killed at the wrong moment leaves debris that nothing else removes: an
extraction killed between saving a memory and indexing it leaves a file no index line
points at; a consolidation pass killed before it deletes the memories it emptied leaves
empty files, still indexed; a killed ``memdir forget`` leaves a half-made trash entry, or a
complete one whose memory is still in place; any killed write leaves its temporary file.
:func:`repair_memory_dir` finds all of it in one walk of the directory and repairs it:

- a memory file with no index line gets one, made from its ``name`` and ``description``;
- an index line whose file is gone is removed;
- an empty memory file is removed, with its index line;
- a temporary file whose writer has died (or, for one that does not say who wrote it,
  older than a few minutes) is removed;
- a trash entry without its copy or record is removed; a complete one whose memory is
  still in place is finished (the file removed) when its index lines are gone, and dropped
  when they are still there (the forget never got that far, or an undo did).

Each index is repaired while its lock is held, the lock every writer of ``MEMORY.md``
takes, so a forget, an undo or a memory agent's write in another process is never
half-seen; an index another process holds the lock of is left for the next repair.
Each repair is returned as a :class:`Repair`, for the caller to report.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from memdir.errors import StoreError
from memdir.store._atomic import STATE_DIR_NAME, TEMP_FILE, atomic_write, file_lock
from memdir.store._entrypoint import ENTRYPOINT_NAME
from memdir.store._frontmatter import parse_memory_file
from memdir.store._memory_dir import TEAM_DIR_NAME, MemoryDir
from memdir.store._scan import FRONTMATTER_MAX_LINES
from memdir.store._trash import (
    POINTER,
    TRASH_DIR_NAME,
    TrashEntry,
    folder_key,
    load_entry,
    points_at,
    remove_entry_folder,
    split_lines,
)

__all__ = [
    "STALE_TEMP_SECONDS",
    "Repair",
    "RepairKind",
    "index_memory_file",
    "repair_memory_dir",
    "without_duplicate_lines",
]

STALE_TEMP_SECONDS = 300.0
"""How old a temporary file that does not name its writer must be to count as left
behind: a write takes milliseconds, so five minutes spares any write still going on."""

# The index lines a repair adds stay under Claude Code's ~150-character guideline.
_LINE_MAX = 149

RepairKind = Literal[
    "indexed",
    "unlinked_line",
    "empty_removed",
    "temp_removed",
    "trash_removed",
    "trash_completed",
]
"""What a repair did: added an index line for a memory (``indexed``), removed a line whose
file is gone (``unlinked_line``), removed an empty memory and its line
(``empty_removed``), a temporary file (``temp_removed``), an incomplete or superseded
trash entry (``trash_removed``), or finished a forget (``trash_completed``)."""


@dataclass(frozen=True, kw_only=True)
class Repair:
    """One repair :func:`repair_memory_dir` made."""

    kind: RepairKind
    """What was done."""
    path: str
    """What it was done to, relative to the memory directory, ``/`` separated: the memory
    file, the temporary file or the trash entry's folder."""

    def describe(self, *, done: bool = True) -> str:
        """One line for people: ``added the missing index line for notes.md``; with
        ``done=False``, what is to be done: ``add the missing index line for notes.md``."""
        verb, rest = {
            "indexed": (("added", "add"), "the missing index line for"),
            "unlinked_line": (("removed", "remove"), "the index line of the missing file"),
            "empty_removed": (("removed", "remove"), "the empty memory"),
            "temp_removed": (("removed", "remove"), "the leftover temporary file"),
            "trash_removed": (("removed", "remove"), "the incomplete trash entry"),
            "trash_completed": (("finished", "finish"), "forgetting"),
        }[self.kind]
        tail = " and its index line" if self.kind == "empty_removed" else ""
        return f"{verb[0] if done else verb[1]} {rest} {self.path}{tail}"


@dataclass(frozen=True)
class _Act:
    """Carries out a repair's changes, or, for a dry run, only lets them be counted."""

    dry_run: bool

    def unlink(self, path: Path) -> None:
        if not self.dry_run:
            path.unlink()

    def write(self, path: Path, data: bytes) -> None:
        if not self.dry_run:
            atomic_write(path, data)

    def remove_entry(self, folder: Path) -> None:
        if not self.dry_run:
            remove_entry_folder(folder)


@dataclass
class _Found:
    """What the walk found."""

    memories: list[Path]
    temps: list[Path]
    indexes: list[Path]


def _walk(root: Path) -> _Found:
    """Every memory file, index and temporary file below ``root`` (in ``.memdir/``
    folders, temporary files only), in one walk that follows no symlink."""
    found = _Found(memories=[], temps=[], indexes=[])
    pending: list[tuple[Path, bool]] = [(root, False)]
    while pending:
        directory, in_state = pending.pop()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    with contextlib.suppress(OSError):  # vanished meanwhile: skip it
                        _sort(entry, in_state, found, pending)
        except OSError:
            continue
    return found


def _sort(
    entry: os.DirEntry[str], in_state: bool, found: _Found, pending: list[tuple[Path, bool]]
) -> None:
    """File ``entry`` as a folder to walk, a temporary file, an index, a memory, or
    nothing."""
    if entry.is_symlink():
        return
    if entry.is_dir(follow_symlinks=False):
        pending.append((Path(entry.path), in_state or entry.name == STATE_DIR_NAME))
    elif TEMP_FILE.fullmatch(entry.name):
        found.temps.append(Path(entry.path))
    elif in_state or not entry.name.endswith(".md") or not entry.is_file(follow_symlinks=False):
        return
    elif entry.name == ENTRYPOINT_NAME:
        found.indexes.append(Path(entry.path))
    else:
        found.memories.append(Path(entry.path))


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def _stale_temp(path: Path, now: float, stale_after: float) -> bool:
    match = TEMP_FILE.fullmatch(path.name)
    if match is None:
        return False
    if match.group("pid") is not None and not _alive(int(match.group("pid"))):
        return True
    try:
        return os.lstat(path).st_mtime < now - stale_after
    except OSError:
        return False


def _head(path: Path) -> str | None:
    """The file's first lines, or ``None`` when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(handle.readline(4096) for _ in range(FRONTMATTER_MAX_LINES))
    except OSError:
        return None


def _is_empty(path: Path) -> bool:
    try:
        if os.lstat(path).st_size == 0:
            return True
        with open(path, "rb") as handle:
            return not handle.read(64 * 1024).strip() and not handle.read(1)
    except OSError:
        return False


def _pointer_line(path: Path, link: str, head: str | None = None) -> str:
    """An index line for the memory at ``path``: ``- [name](link) — description``, from
    its frontmatter (``head``: the file's text, when the caller has it already)."""
    parsed = parse_memory_file((_head(path) if head is None else head) or "")
    title = (parsed.name or path.stem).strip().replace("]", ")").replace("\n", " ")
    line = f"- [{title}]({link})"
    description = " ".join((parsed.description or "").split())
    if description:
        line += f" — {description}"
    return line if len(line) <= _LINE_MAX else line[: _LINE_MAX - 1].rstrip() + "…"


def _index_of(memory: MemoryDir, path: Path) -> Path:
    """The index that lists ``path``: ``team/MEMORY.md`` for a team memory, else the
    directory's own (Claude Code keeps one index per memory folder, team apart)."""
    team = memory.root / TEAM_DIR_NAME
    return team / ENTRYPOINT_NAME if team in path.parents else memory.entrypoint


def _relative(memory: MemoryDir, path: Path) -> str:
    try:
        return path.relative_to(memory.root).as_posix()
    except ValueError:
        return str(path)


def _repair_trash(memory: MemoryDir, act: _Act, repairs: list[Repair]) -> None:
    """Incomplete entries removed; complete ones whose memory is still in place finished
    or dropped. The main index's lock is held, which every forget and undo holds
    throughout, so none of them is halfway through."""
    trash = memory.root / TRASH_DIR_NAME
    try:
        names = sorted(os.listdir(trash))
    except OSError:
        return
    for name in names:
        folder = trash / name
        if folder_key(name) is None or folder.is_symlink() or not folder.is_dir():
            continue
        entry = load_entry(folder)
        if entry is None:
            # Made by a forget that died before its record was written: the memory and
            # its index lines were never touched, so the entry holds nothing needed.
            act.remove_entry(folder)
            repairs.append(Repair(kind="trash_removed", path=_relative(memory, folder)))
            continue
        index = Path(os.path.normpath(memory.root / entry.index))
        if memory.root in index.parents and STATE_DIR_NAME not in index.parts:
            _settle_entry(memory, entry, index, act, repairs)


def _settle_entry(
    memory: MemoryDir, entry: TrashEntry, index: Path, act: _Act, repairs: list[Repair]
) -> None:
    target = Path(os.path.normpath(memory.root / entry.filename))
    if memory.root not in target.parents or target.is_symlink() or not target.is_file():
        return  # forgotten for good: nothing to settle
    try:
        stored = gzip.decompress((entry.path / "memory.gz").read_bytes())
        current = target.read_bytes()
    except (OSError, EOFError):
        return
    if stored != current:
        return  # a newer memory took the name; the entry stays restorable
    try:
        text = index.read_bytes()
    except OSError:
        text = b""
    listed = any(points_at(line, index.parent, target) for line in split_lines(text))
    if listed or not entry.index_lines:
        # The forget stopped before the index (or an undo got past it): the memory is
        # in place and indexed, so the copy is a duplicate.
        act.remove_entry(entry.path)
        repairs.append(Repair(kind="trash_removed", path=_relative(memory, entry.path)))
        return
    with contextlib.suppress(OSError):
        act.unlink(target)
        repairs.append(Repair(kind="trash_completed", path=entry.filename))


def _indexes(memory: MemoryDir) -> list[Path]:
    team = memory.root / TEAM_DIR_NAME
    found = [memory.entrypoint]
    if team.is_dir() and not team.is_symlink():
        found.append(team / ENTRYPOINT_NAME)
    return found


def _repair_index(
    memory: MemoryDir,
    index: Path,
    memories: list[Path],
    elsewhere: set[Path],
    act: _Act,
    repairs: list[Repair],
) -> None:
    """Lines without a file or pointing at an empty one removed (the empty file too);
    memories without a line, here or in another index (``elsewhere``: a folder's own
    ``MEMORY.md``), given one. The index's lock is held."""
    try:
        original = index.read_bytes()
    except FileNotFoundError:
        original = b""
    except OSError:
        return
    lines = split_lines(original)
    kept: list[bytes] = []
    listed: set[Path] = set()
    for line in lines:
        targets = _targets(memory, index, line)
        if not targets:
            kept.append(line)
            continue
        path = targets[0]
        if not os.path.lexists(path):
            repairs.append(Repair(kind="unlinked_line", path=_relative(memory, path)))
            continue
        if path.is_file() and not path.is_symlink() and _is_empty(path):
            with contextlib.suppress(OSError):
                act.unlink(path)
            repairs.append(Repair(kind="empty_removed", path=_relative(memory, path)))
            listed.add(path)  # handled: a dry run still finds it on disk below
            continue
        listed.add(path)
        kept.append(line)
    added: list[bytes] = []
    for path in sorted(memories):
        if path in listed or path in elsewhere or not path.exists():
            continue
        if _is_empty(path):
            with contextlib.suppress(OSError):
                act.unlink(path)
            repairs.append(Repair(kind="empty_removed", path=_relative(memory, path)))
            continue
        link = os.path.relpath(path, index.parent).replace(os.sep, "/")
        added.append((_pointer_line(path, link) + "\n").encode("utf-8"))
        repairs.append(Repair(kind="indexed", path=_relative(memory, path)))
    if kept and added and not kept[-1].endswith(b"\n"):
        kept[-1] += b"\n"
    updated = b"".join(kept + added)
    if updated != original:
        act.write(index, updated)


def _listed(memory: MemoryDir, index: Path) -> set[Path]:
    """The memory files the lines of ``index`` point at."""
    try:
        text = index.read_bytes()
    except OSError:
        return set()
    return {path for line in split_lines(text) for path in _targets(memory, index, line)}


def _targets(memory: MemoryDir, index: Path, line: bytes) -> list[Path]:
    """The memory files in the directory an index line points at (web links aside)."""
    found: list[Path] = []
    for raw in POINTER.findall(line.decode("utf-8", errors="replace")):
        link = raw.strip().strip("<>").split("#", 1)[0]
        if not link.endswith(".md") or "://" in link or os.path.isabs(link):
            continue
        path = Path(os.path.normpath(index.parent / link))
        if memory.root in path.parents and STATE_DIR_NAME not in path.parts:
            found.append(path)
    return found


def repair_memory_dir(
    memory: MemoryDir,
    *,
    stale_after: float = STALE_TEMP_SECONDS,
    lock_timeout: float = 1.0,
    now: float | None = None,
    dry_run: bool = False,
) -> list[Repair]:
    """Repair what crashed processes left in ``memory`` (see the module's description).

    One walk of the directory, then each index under its lock, waiting up to
    ``lock_timeout`` seconds for it; an index still locked is left as it is (another
    process is changing it, and the next repair sees the result). ``stale_after``: the
    age at which a temporary file that does not name its writer counts as left behind.
    Returns the repairs made, in order; never raises for what it cannot repair. With
    ``dry_run`` nothing is changed or locked: the repairs it would make are returned
    (``memdir doctor`` reports them).
    """
    act = _Act(dry_run=dry_run)
    if not memory.root.is_dir():
        return []
    moment = time.time() if now is None else now
    found = _walk(memory.root)
    repairs: list[Repair] = []
    indexes = _indexes(memory)
    with contextlib.ExitStack() as stack:
        held: set[Path] = set()
        for index in indexes:  # always in this order, so two repairs never deadlock
            try:
                if not dry_run:
                    stack.enter_context(file_lock(index, timeout=lock_timeout))
            except StoreError:
                continue
            held.add(index)
        if memory.entrypoint in held:
            _repair_trash(memory, act, repairs)
        # What any other index lists (a folder's own MEMORY.md) needs no line here.
        listed = {i: _listed(memory, i) for i in found.indexes if i not in indexes}
        elsewhere = set().union(*listed.values()) if listed else set()
        for index in indexes:
            if index not in held:
                continue
            mine = [p for p in found.memories if _index_of(memory, p) == index]
            try:
                _repair_index(memory, index, mine, elsewhere, act, repairs)
            except StoreError:
                continue
        for temp in found.temps:
            # A temporary file of a locked index is left behind for sure: every writer
            # of the index holds the lock while its temporary file exists.
            match = TEMP_FILE.fullmatch(temp.name)
            ours = (
                match is not None
                and match.group("name") == ENTRYPOINT_NAME
                and temp.parent / ENTRYPOINT_NAME in held
            )
            if ours or _stale_temp(temp, moment, stale_after):
                try:
                    act.unlink(temp)
                except OSError:
                    continue  # gone meanwhile, or not ours to remove
                repairs.append(Repair(kind="temp_removed", path=_relative(memory, temp)))
    return repairs


def index_memory_file(
    memory: MemoryDir,
    path: Path,
    *,
    previous: str | None = None,
    lock_timeout: float = 1.0,
) -> bool:
    """Keep the index line of the memory file at ``path`` in step with the file, just
    after it was written: the line the repair step would add, added now.

    Under the lock of the index that lists it (``team/MEMORY.md`` for a team memory):

    - a file with text and no line gets one, ``- [name](file.md) — description`` from
      its frontmatter, as the repair step makes it and as Claude Code's own agent
      writes them;
    - a file left empty (or gone) loses its lines: that is how the memory agent forgets;
    - a file whose line is exactly the one made from its ``previous`` text (memdir made
      it, nobody reworded it) gets the line made from its new text, so a changed name or
      description shows; a line someone wrote by hand is left as it is.

    Returns whether the index changed. Raises :class:`~memdir.errors.StoreError` when
    the index's lock is not had within ``lock_timeout`` seconds; the next repair then
    puts the line in.
    """
    if path.name == ENTRYPOINT_NAME or path.suffix != ".md" or not memory.is_memory_path(path):
        return False
    # Taken below the root as given (a real path and a root reached through a symlink
    # name the same file differently), so that links come out relative to the index.
    inside = Path(os.path.relpath(os.path.realpath(path), os.path.realpath(memory.root)))
    if STATE_DIR_NAME in inside.parts:  # memdir's own bookkeeping, the trash with it
        return False
    path = memory.root / inside
    index = _index_of(memory, path)
    link = os.path.relpath(path, index.parent).replace(os.sep, "/")
    with file_lock(index, timeout=lock_timeout):
        try:
            original = index.read_bytes()
        except FileNotFoundError:
            original = b""
        except OSError:
            return False
        lines = split_lines(original)
        mine = [n for n, line in enumerate(lines) if points_at(line, index.parent, path)]
        try:
            text: str | None = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = None
        if text is None or not text.strip():
            kept = [line for n, line in enumerate(lines) if n not in mine]
        else:
            kept = list(lines)
            wanted = (_pointer_line(path, link, text) + "\n").encode("utf-8")
            if not mine:
                if kept and not kept[-1].endswith(b"\n"):
                    kept[-1] += b"\n"
                kept.append(wanted)
            elif previous is not None:
                before = _pointer_line(path, link, previous).encode("utf-8")
                for n in mine:
                    if lines[n].rstrip(b"\r\n") == before:
                        kept[n] = wanted if lines[n].endswith(b"\n") else wanted.rstrip(b"\n")
        updated = b"".join(kept)
        if updated == original:
            return False
        atomic_write(index, updated)
        return True


def without_duplicate_lines(memory: MemoryDir, index: Path, text: str) -> str:
    """``text``, a new text for the index at ``index``, without the lines memdir wrote
    (:func:`index_memory_file`) for memories that another of its lines points at too.

    An agent told by its host (Claude Code's memory section) to add each memory's line
    may still add one after memdir did: its own wording is kept, memdir's copy goes.
    A line memdir did not make, or the only line of a memory, is never dropped.
    """
    if index.name != ENTRYPOINT_NAME or not memory.is_memory_path(index):
        return text
    inside = Path(os.path.relpath(os.path.realpath(index), os.path.realpath(memory.root)))
    index = memory.root / inside
    lines = text.splitlines(keepends=True)
    targets = [_targets(memory, index, line.encode("utf-8")) for line in lines]
    counts: dict[Path, int] = {}
    for found in targets:
        if len(found) == 1:
            counts[found[0]] = counts.get(found[0], 0) + 1
    kept: list[str] = []
    for line, found in zip(lines, targets, strict=True):
        if len(found) == 1 and counts[found[0]] > 1 and found[0].is_file():
            link = os.path.relpath(found[0], index.parent).replace(os.sep, "/")
            if line.rstrip("\r\n") == _pointer_line(found[0], link):
                counts[found[0]] -= 1
                continue
        kept.append(line)
    return "".join(kept)
