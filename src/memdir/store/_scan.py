"""The manifest of existing memories: which files there are, newest first, and what they say.

The extraction prompt lists the memory files so the model updates one instead of writing
a duplicate. Claude Code reads the head of every file and then keeps the newest 200; we
list and ``stat`` first and read only the heads we keep, so a directory with thousands
of memories costs 200 small reads rather than thousands.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memdir.errors import UsageError
from memdir.store._entrypoint import ENTRYPOINT_NAME
from memdir.store._frontmatter import MemoryType, parse_memory_file

__all__ = ["FRONTMATTER_MAX_LINES", "MemoryHeader", "format_manifest", "scan_memory_files"]

# 30 lines: Claude Code's FRONTMATTER_MAX_LINES, enough for any sane frontmatter block.
FRONTMATTER_MAX_LINES = 30
# 200 files: Claude Code's MAX_MEMORY_FILES.
_DEFAULT_LIMIT = 200
# Thirty lines of frontmatter never come near this; a huge file with no line breaks
# would otherwise be read whole by the first readline().
_HEAD_MAX_CHARS = 64 * 1024


@dataclass(frozen=True, kw_only=True)
class MemoryHeader:
    """One memory file as the manifest shows it."""

    filename: str
    """The path relative to the memory directory, with ``/`` separators (``team/x.md``)."""

    path: Path
    """The absolute path (symlinks in the memory directory's own path are kept)."""

    mtime: float
    """Last modification, in seconds since the epoch."""

    name: str | None
    """The frontmatter ``name``, or ``None``."""

    description: str | None
    """The frontmatter ``description``, or ``None``."""

    type: MemoryType | None
    """The frontmatter ``type``, or ``None`` when absent or not a known type."""


def scan_memory_files(root: Path, *, limit: int = _DEFAULT_LIMIT) -> list[MemoryHeader]:
    """The newest ``limit`` memory files below ``root``, newest first.

    Every ``*.md`` file in ``root`` and its subdirectories counts except those named
    ``MEMORY.md`` (the indexes). Symlinks are skipped, files and directories alike: one
    could point outside the memory directory. Ties in modification time go by filename.
    Only the first :data:`FRONTMATTER_MAX_LINES` lines of each kept file are read.

    A missing ``root`` gives ``[]``; a file that disappears or cannot be read is left
    out. Raises :class:`~memdir.errors.UsageError` when ``limit`` is below 1.
    """
    if limit < 1:
        raise UsageError(f"limit must be at least 1, got {limit}")
    base = os.path.abspath(root)
    # Plain strings until a file is kept: most of a large directory is only listed and
    # stat-ed, and making a Path for each entry would cost more than the stat.
    stamped: list[tuple[float, str, str]] = []
    for filename, path in _list_memory_files(base):
        try:
            mtime = _stat_mtime(path)
        except OSError:
            continue  # deleted (or made unreachable) since it was listed
        stamped.append((mtime, filename, path))
    stamped.sort(key=lambda item: (-item[0], item[1]))

    headers: list[MemoryHeader] = []
    for mtime, filename, path in stamped[:limit]:
        try:
            head = _read_head(path)
        except OSError:
            continue
        parsed = parse_memory_file(head)
        headers.append(
            MemoryHeader(
                filename=filename,
                path=Path(path),
                mtime=mtime,
                name=parsed.name,
                description=parsed.description,
                type=parsed.type,
            )
        )
    return headers


def format_manifest(headers: Sequence[MemoryHeader], *, day_only: bool = False) -> str:
    """One line per header: ``- [type] filename (ISO-8601 mtime): description``.

    The ``[type] `` tag is left out when the type is unknown and ``: description`` when
    there is none. Times are UTC with milliseconds (``2026-03-05T14:03:22.000Z``), as
    Claude Code writes them; with ``day_only`` the day alone (``2026-03-05``): enough to
    tell an old memory from a fresh one, at a third of the tokens.
    """
    lines = []
    for header in headers:
        tag = f"[{header.type}] " if header.type is not None else ""
        when = _iso_utc(header.mtime)
        line = f"- {tag}{header.filename} ({when[:10] if day_only else when})"
        description = _one_line(header.description or "")
        if description:
            line += f": {description}"
        lines.append(line)
    return "\n".join(lines)


def _list_memory_files(base: str) -> list[tuple[str, str]]:
    """``(relative posix name, absolute path)`` of every memory file, walked without recursion."""
    found: list[tuple[str, str]] = []
    pending: list[tuple[str, str]] = [("", base)]
    while pending:
        prefix, directory = pending.pop()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    _sort_entry(entry, prefix, pending, found)
        except OSError:
            # Missing root, a directory deleted mid-walk, or one we may not list: the
            # manifest is a hint for the model, so it shows what can be seen.
            continue
    return found


def _sort_entry(
    entry: os.DirEntry[str],
    prefix: str,
    pending: list[tuple[str, str]],
    found: list[tuple[str, str]],
) -> None:
    """File ``entry`` as a directory to walk, a memory file, or nothing."""
    relative = f"{prefix}{entry.name}"
    try:
        # Where the file system gives no entry type these stat the entry, which can fail
        # if it vanished; that loses this entry only, not the rest of the directory.
        if entry.is_symlink():
            return
        if entry.is_dir(follow_symlinks=False):
            pending.append((f"{relative}/", entry.path))
        elif (
            entry.is_file(follow_symlinks=False)
            and entry.name.endswith(".md")
            and entry.name != ENTRYPOINT_NAME
        ):
            found.append((relative, entry.path))
    except OSError:
        return


def _stat_mtime(path: str) -> float:
    return os.lstat(path).st_mtime


def _read_head(path: str) -> str:
    """The first :data:`FRONTMATTER_MAX_LINES` lines of ``path``, and nothing more."""
    lines: list[str] = []
    budget = _HEAD_MAX_CHARS
    # newline="" keeps CRLF as written; the frontmatter parser copes with it.
    with open(path, encoding="utf-8", errors="replace", newline="") as handle:
        while len(lines) < FRONTMATTER_MAX_LINES and budget > 0:
            line = handle.readline(budget)
            if not line:
                break
            lines.append(line)
            budget -= len(line)
    return "".join(lines)


def _iso_utc(mtime: float) -> str:
    """``mtime`` like JavaScript's ``toISOString()``: UTC, whole milliseconds, ``Z``."""
    # Rounding to microseconds first absorbs float noise (…0.123 stored as …0.1229999),
    # then whole milliseconds are kept by truncation, as a JavaScript Date does.
    millis = round(mtime * 1_000_000) // 1000
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    try:
        moment = epoch + datetime.timedelta(milliseconds=millis)
    except OverflowError:
        # A timestamp past year 9999 (touch can set one) must not break the manifest.
        moment = datetime.datetime.max.replace(tzinfo=datetime.UTC)
        if millis < 0:
            moment = datetime.datetime.min.replace(tzinfo=datetime.UTC)
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:"
        f"{moment.minute:02d}:{moment.second:02d}.{moment.microsecond // 1000:03d}Z"
    )


def _one_line(text: str) -> str:
    """Join a multi-line description onto one line, so each header stays one line."""
    return " ".join(part.strip() for part in text.splitlines() if part.strip())
