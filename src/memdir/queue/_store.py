"""PostgreSQL as the system of record of a memory directory, fenced by a generation.

A run checks the directory out at generation *G* into a scratch folder, the memory
agent works there exactly as on one machine, and :func:`commit` writes back what
changed only if the directory is still at *G*, bumping it to *G + 1* in the same
transaction as the cursors and the consumed pending rows. A worker that was presumed
dead (its job failed by the sweeper, its directory run again by another worker) finds
the generation moved and its late commit is refused, so it cannot overwrite newer
memories nor double-count turns.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from memdir._private import make_private_dirs, open_private
from memdir.queue._app import CONNECT_TIMEOUT
from memdir.store import ENTRYPOINT_NAME, atomic_write, file_lock
from memdir.store._atomic import STATE_DIR_NAME

__all__ = [
    "SYNC_BASE_NAME",
    "Checkout",
    "export_dir",
    "local_files",
    "local_files_with_times",
    "sha256",
    "sync_base_path",
    "write_checkout",
    "write_sync_base",
]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, kw_only=True)
class Checkout:
    """A directory's files as of one generation."""

    dir_id: str
    generation: int
    files: Mapping[str, str] = field(default_factory=dict)
    """Relative posix path → sha256 of the content, to tell what a run changed."""


FILES_SQL = "SELECT path, content, sha256, mtime FROM memdir_files WHERE dir_id = %s"
"""A directory's files as :func:`write_checkout` takes them."""


def write_checkout(
    into: Path, dir_id: str, generation: int, rows: Sequence[Sequence[Any]]
) -> Checkout:
    """Write the rows of :data:`FILES_SQL` into ``into``, each with its stored time."""
    files: dict[str, str] = {}
    for path, content, digest, mtime in rows:
        target = _inside(into, path)
        make_private_dirs(target.parent)
        fd = open_private(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with open(fd, "wb") as handle:
            handle.write(bytes(content))
        os.utime(target, (mtime, mtime))
        files[path] = digest
    return Checkout(dir_id=dir_id, generation=generation, files=files)


def _inside(root: Path, relative: str) -> Path:
    """``root / relative``, refusing a stored path that would leave ``root``."""
    target = (root / relative).resolve()
    if not target.is_relative_to(root.resolve()):
        raise ValueError(f"stored path {relative!r} leaves the memory directory")
    return target


def local_files(root: Path) -> Iterator[tuple[str, bytes]]:
    """Every file of a working copy as (relative posix path, content); see
    :func:`local_files_with_times`."""
    for path, content, _ in local_files_with_times(root):
        yield path, content


def local_files_with_times(root: Path) -> Iterator[tuple[str, bytes, float]]:
    """Every file of a working copy as (relative posix path, content, mtime), memdir's own
    ``.memdir/`` bookkeeping left out: locks and state are per machine, the database
    keeps the cursors."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != STATE_DIR_NAME)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            content = path.read_bytes()
            yield path.relative_to(root).as_posix(), content, path.stat().st_mtime


def export_dir(dsn: str, dir_id: str, target: Path) -> int:
    """Mirror a directory's files into the plain folder ``target`` (``memdir sync``):
    files the database has are written (atomically, each), files it no longer has are
    removed; ``.memdir/`` is left alone. Returns the generation mirrored."""
    make_private_dirs(target)
    with psycopg.connect(dsn, connect_timeout=CONNECT_TIMEOUT) as conn, conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        row = conn.execute(
            "SELECT generation FROM memdir_dirs WHERE dir_id = %s", (dir_id,)
        ).fetchone()
        generation = int(row[0]) if row else 0
        wanted: dict[str, tuple[bytes, float]] = {
            path: (bytes(content), float(mtime))
            for path, content, mtime in conn.execute(
                "SELECT path, content, mtime FROM memdir_files WHERE dir_id = %s", (dir_id,)
            )
        }
    present = dict(local_files(target))
    for path, (content, mtime) in wanted.items():
        if present.get(path) != content:
            destination = _inside(target, path)
            with _index_lock(destination):
                atomic_write(destination, content)
                os.utime(destination, (mtime, mtime))
    for path in present.keys() - wanted.keys():
        with _index_lock(target / path):
            (target / path).unlink()
    # The folder now holds the database's files: a later two-way sync starts from here
    # (without it, a forget in the folder could not be told from a file it never had).
    write_sync_base(target, dir_id, generation, {p: c for p, (c, _) in wanted.items()})
    return generation


SYNC_BASE_NAME = "sync-base.json"
"""What a synced folder held at its last sync, in its ``.memdir/``."""


def sync_base_path(target: Path) -> Path:
    return target / STATE_DIR_NAME / SYNC_BASE_NAME


def write_sync_base(target: Path, dir_id: str, generation: int, files: Mapping[str, bytes]) -> None:
    """Record what ``target`` holds after a sync or an export: the generation, each
    file's hash and the index's text, the common history the next sync compares with."""
    path = sync_base_path(target)
    make_private_dirs(path.parent)
    data = {
        "dir_id": dir_id,
        "generation": generation,
        "files": {p: sha256(c) for p, c in sorted(files.items())},
        "index": files.get(ENTRYPOINT_NAME, b"").decode("utf-8", "replace"),
    }
    atomic_write(path, json.dumps(data, indent=1) + "\n")


def _index_lock(path: Path) -> contextlib.AbstractContextManager[object]:
    """The lock every writer of a ``MEMORY.md`` takes (the memory agent, forget, the
    repair step), so a mirrored index never lands between another writer's read and
    write; other files need none."""
    return file_lock(path) if path.name == ENTRYPOINT_NAME else contextlib.nullcontext()
