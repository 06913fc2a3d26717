"""``memdir sync`` both ways: a folder's edits reach the database, the database's the folder.

A folder synced from the database is a working copy like a worker's checkout, only a
long-lived one: the user forgets a memory there (``memdir forget``), undoes it, dreams,
or edits a file by hand. Mirroring the database over it would bring back what the user
asked to forget. So each sync keeps a *base*, what the folder held after the last sync
(each file's sha256, in the folder's ``.memdir/`` state, which never travels), and
three-way merges per file:

- changed on the folder's side only → written to the database;
- changed on the database's side only → written to the folder;
- changed on both to different contents → the database's is kept and reported
  (a worker's commit is never overwritten), except ``MEMORY.md``, whose lines are merged:
  the lines the folder removed go, the lines it added come, the database's own stay.

A removed file is a change like any other, both ways; an emptied one counts as removed.
The folder's changes are written under the directory's generation like a worker's
commit: compare-and-bump in one transaction, and when a worker committed meanwhile the
sync reads again and merges again, so neither side's commit is lost. A worker that
checked out before the sync finds the generation moved and its run is refused and run
again, with the folder's changes in its checkout. The first sync of a folder (no base)
counts every file on either side as an addition: nothing is removed, and the database's
content wins where both have a file.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from memdir._private import make_private_dirs
from memdir.queue._app import CONNECT_TIMEOUT
from memdir.queue._runs import merge_index
from memdir.queue._store import (
    SYNC_BASE_NAME,
    _index_lock,
    _inside,
    local_files,
    sha256,
    sync_base_path,
    write_sync_base,
)
from memdir.store import ENTRYPOINT_NAME, atomic_write

__all__ = ["SYNC_BASE_NAME", "SyncResult", "sync_dir"]

_ATTEMPTS = 20
"""How often a sync re-reads after losing the generation race before giving up."""


@dataclass(frozen=True, kw_only=True)
class SyncResult:
    """What one sync did."""

    dir_id: str
    generation: int
    """The generation the folder now mirrors."""
    pushed: list[str] = field(default_factory=list)
    """Files the folder changed (or removed) that reached the database."""
    pulled: list[str] = field(default_factory=list)
    """Files the database changed (or removed) that reached the folder."""
    conflicts: list[str] = field(default_factory=list)
    """Files both sides changed: the database's content was kept in both places."""
    retries: int = 0
    """Times a worker's commit landed between this sync's read and its write."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "dir_id": self.dir_id,
            "generation": self.generation,
            "pushed": self.pushed,
            "pulled": self.pulled,
            "conflicts": self.conflicts,
            "retries": self.retries,
        }


@dataclass(frozen=True)
class _Base:
    files: dict[str, str]
    """path → sha256 after the last sync."""
    index: bytes
    """``MEMORY.md`` as it was then (for the line merge)."""


def _read_base(target: Path, dir_id: str) -> _Base | None:
    try:
        data = json.loads(sync_base_path(target).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("dir_id") != dir_id:
        return None  # another directory's folder: no common history
    files = data.get("files")
    if not isinstance(files, dict):
        return None
    return _Base(
        files={str(k): str(v) for k, v in files.items()},
        index=str(data.get("index", "")).encode("utf-8"),
    )


def sync_dir(dsn: str, dir_id: str, target: Path) -> SyncResult:
    """Bring the folder ``target`` and the database's directory ``dir_id`` together
    (see the module's docstring); returns what moved which way."""
    make_private_dirs(target)
    base = _read_base(target, dir_id)
    # An emptied file is a removed one (what is left of a memory cleared by hand): it
    # leaves the database, and the folder, rather than reaching workers as an empty memory.
    scanned = dict(local_files(target))
    local = {path: content for path, content in scanned.items() if content.strip()}
    pushed: list[str] = []
    conflicts: list[str] = []
    retries = 0
    with psycopg.connect(dsn, connect_timeout=CONNECT_TIMEOUT) as conn:
        for attempt in range(_ATTEMPTS):
            pushed, conflicts = [], []
            with conn.transaction():
                row = conn.execute(
                    "SELECT generation FROM memdir_dirs WHERE dir_id = %s", (dir_id,)
                ).fetchone()
                generation = int(row[0]) if row else 0
                db: dict[str, tuple[bytes, float]] = {
                    path: (bytes(content), float(mtime))
                    for path, content, mtime in conn.execute(
                        "SELECT path, content, mtime FROM memdir_files WHERE dir_id = %s",
                        (dir_id,),
                    )
                }
                writes = _folder_changes(base, local, db, pushed, conflicts)
                if writes:
                    if row is None:
                        conn.execute(
                            "INSERT INTO memdir_dirs (dir_id) VALUES (%s) "
                            "ON CONFLICT (dir_id) DO NOTHING",
                            (dir_id,),
                        )
                    fenced = conn.execute(
                        "UPDATE memdir_dirs SET generation = generation + 1, updated_at = now() "
                        "WHERE dir_id = %s AND generation = %s RETURNING generation",
                        (dir_id, generation),
                    ).fetchone()
                    if fenced is None:
                        # A worker committed since the read: read again and merge again.
                        retries = attempt + 1
                        continue
                    generation = int(fenced[0])
                    for path, content in writes.items():
                        if content is None:
                            conn.execute(
                                "DELETE FROM memdir_files WHERE dir_id = %s AND path = %s",
                                (dir_id, path),
                            )
                            db.pop(path, None)
                            continue
                        mtime = _mtime(target, path)
                        conn.execute(
                            "INSERT INTO memdir_files (dir_id, path, content, sha256, mtime) "
                            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (dir_id, path) DO UPDATE "
                            "SET content = excluded.content, sha256 = excluded.sha256, "
                            "mtime = excluded.mtime",
                            (dir_id, path, content, sha256(content), mtime),
                        )
                        db[path] = (content, mtime)
            break
        else:
            raise RuntimeError(
                f"memdir sync: {dir_id} kept moving under {_ATTEMPTS} attempts; try again"
            )
    pulled = _write_folder(target, scanned, db)
    write_sync_base(target, dir_id, generation, {p: c for p, (c, _) in db.items()})
    return SyncResult(
        dir_id=dir_id,
        generation=generation,
        pushed=sorted(pushed),
        pulled=sorted(set(pulled) - set(pushed)),
        conflicts=sorted(conflicts),
        retries=retries,
    )


def _folder_changes(
    base: _Base | None,
    local: Mapping[str, bytes],
    db: Mapping[str, tuple[bytes, float]],
    pushed: list[str],
    conflicts: list[str],
) -> dict[str, bytes | None]:
    """What the folder's side writes to the database: path → content, None to delete.
    Fills ``pushed`` and ``conflicts``."""
    if base is None:
        # No common history (the folder's first sync): everything is an addition on
        # both sides, so the folder's own files reach the database and nothing is
        # removed from either side; a file both hold differently keeps the database's.
        base = _Base(files={}, index=b"")
    writes: dict[str, bytes | None] = {}
    for path in sorted(local.keys() | base.files.keys()):
        mine = local.get(path)
        mine_hash = sha256(mine) if mine is not None else None
        if mine_hash == base.files.get(path):
            continue  # the folder did not touch it
        theirs = db.get(path)
        theirs_hash = sha256(theirs[0]) if theirs is not None else None
        if theirs_hash == mine_hash:
            continue  # both sides made the same change
        if theirs_hash != base.files.get(path):
            if path == ENTRYPOINT_NAME and mine is not None and theirs is not None:
                merged = merge_index(base.index, mine, theirs[0])
                if merged != theirs[0]:
                    writes[path] = merged
                    pushed.append(path)
                continue
            conflicts.append(path)  # both changed it: the database's stays
            continue
        writes[path] = mine
        pushed.append(path)
    return writes


def _mtime(target: Path, path: str) -> float:
    with contextlib.suppress(OSError):
        return (target / path).stat().st_mtime
    return 0.0


def _write_folder(
    target: Path, local: Mapping[str, bytes], db: Mapping[str, tuple[bytes, float]]
) -> list[str]:
    """Make the folder hold the database's files; returns the paths written or removed."""
    changed: list[str] = []
    for path, (content, mtime) in sorted(db.items()):
        if local.get(path) != content:
            destination = _inside(target, path)
            with _index_lock(destination):
                atomic_write(destination, content)
                os.utime(destination, (mtime, mtime))
            changed.append(path)
    for path in sorted(local.keys() - db.keys()):
        with _index_lock(target / path), contextlib.suppress(FileNotFoundError):
            (target / path).unlink()
        changed.append(path)
    return changed
