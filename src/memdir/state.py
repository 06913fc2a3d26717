"""Cursors that outlive the process: where extraction stopped in each session.

A live agent keeps its extractor's cursor in memory. The command line, the watcher and
the Claude Code hook run as separate processes, so they keep it in a state file,
``.memdir/state.json`` in the memory directory, one entry per session. The file is
rewritten atomically under a lock, so a crash leaves the old state or the new one, and
two processes updating different sessions — or the same one — never lose each other's
change.

Earlier versions kept the state file, its lock, the extraction lock, the index's lock and
the hook's log beside the memories; :func:`migrate_legacy_files` moves the state file and
the log into ``.memdir/`` and removes the old locks that nobody holds.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import filelock

from memdir._private import make_private_dirs
from memdir.store import MemoryDir, update_file
from memdir.store._atomic import STATE_DIR_NAME

__all__ = [
    "HOOK_LOG_NAME",
    "STATE_DIR_NAME",
    "STATE_FILE_NAME",
    "SessionState",
    "StateFile",
    "migrate_legacy_files",
]

STATE_FILE_NAME = f"{STATE_DIR_NAME}/state.json"
"""The state file, relative to the memory directory."""
HOOK_LOG_NAME = f"{STATE_DIR_NAME}/hook.log"
"""The Claude Code hook's log, relative to the memory directory."""
_VERSION = 1

# What earlier versions left beside the memories: files to move, then locks to remove.
_LEGACY_MOVES = ((".memdir-state.json", STATE_FILE_NAME), (".memdir-hook.log", HOOK_LOG_NAME))
_LEGACY_LOCKS = ("..memdir-state.json.lock", ".extraction.lock", ".MEMORY.md.lock")


def migrate_legacy_files(root: str | os.PathLike[str]) -> None:
    """Move an earlier version's state file and hook log into ``.memdir/``, and remove
    its lock files beside the memories.

    A state file already in ``.memdir/`` wins over an old one, which is then dropped. A
    lock is removed only while this process can take it, so a process of the earlier
    version that holds one keeps its exclusion. Never raises: what cannot be moved now is
    tried again next time.
    """
    base = Path(root)
    for old_name, new_name in _LEGACY_MOVES:
        old = base / old_name
        if not os.path.lexists(old) or old.is_symlink():
            continue
        new = base / new_name
        with contextlib.suppress(OSError):
            make_private_dirs(new.parent)
            if os.path.lexists(new):
                old.unlink()
            else:
                os.replace(old, new)
    for name in _LEGACY_LOCKS:
        old = base / name
        if not os.path.lexists(old) or old.is_symlink():
            continue
        lock = filelock.FileLock(old, timeout=0)
        with contextlib.suppress(OSError, filelock.Timeout), lock:
            old.unlink()


@dataclass(frozen=True, kw_only=True)
class SessionState:
    """Where extraction of one session stands."""

    cursor: str | None = None
    """The uuid of the last message covered (by a run or by the agent's own write)."""
    turns_since_run: int = 0
    """Turns throttled since the last run, so ``--every N`` counts across processes."""
    updated: str | None = None
    """When this entry was last written (ISO-8601, UTC)."""
    covered_at: float | None = None
    """When the cursor last moved (seconds since the epoch): memory files changed after
    it, stamped with this session, were not written by memdir's runs of it. None: not
    recorded (an entry the command line wrote; its ``updated`` stands for it)."""


def _decode(text: str | None) -> dict[str, Any]:
    """The state document, or an empty one when the file is missing or unreadable.

    A damaged state file only costs re-extraction (the extractor updates memories rather
    than duplicating them), so it is replaced rather than refused.
    """
    if not text:
        return {"version": _VERSION, "sessions": {}}
    try:
        data = json.loads(text)
    except ValueError:
        return {"version": _VERSION, "sessions": {}}
    if not isinstance(data, dict) or not isinstance(data.get("sessions"), dict):
        return {"version": _VERSION, "sessions": {}}
    return data


def _entry(raw: object) -> SessionState:
    if not isinstance(raw, Mapping):
        return SessionState()
    cursor = raw.get("cursor")
    turns = raw.get("turns_since_run")
    updated = raw.get("updated")
    covered = raw.get("covered_at")
    return SessionState(
        cursor=cursor if isinstance(cursor, str) else None,
        turns_since_run=turns if isinstance(turns, int) and turns >= 0 else 0,
        updated=updated if isinstance(updated, str) else None,
        covered_at=(
            float(covered)
            if isinstance(covered, int | float) and not isinstance(covered, bool)
            else None
        ),
    )


class StateFile:
    """The state file of one memory directory (``.memdir/state.json`` inside it).

    Opening it moves an earlier version's files first (:func:`migrate_legacy_files`).
    """

    def __init__(self, memory_dir: MemoryDir | str | os.PathLike[str]) -> None:
        md = memory_dir if isinstance(memory_dir, MemoryDir) else MemoryDir(memory_dir)
        migrate_legacy_files(md.root)
        self.path: Path = md.root / STATE_FILE_NAME

    def load(self) -> dict[str, SessionState]:
        """Every session's state (empty when there is no file yet)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = None
        sessions = _decode(text)["sessions"]
        return {str(k): _entry(v) for k, v in sessions.items()}

    def get(self, session_id: str) -> SessionState:
        """One session's state (a fresh one when it has none)."""
        return self.load().get(session_id, SessionState())

    def put(self, session_id: str, state: SessionState) -> SessionState:
        """Record ``state`` for ``session_id``, keeping every other session's entry."""
        stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
        saved = SessionState(
            cursor=state.cursor,
            turns_since_run=state.turns_since_run,
            updated=stamp,
            covered_at=state.covered_at,
        )

        def change(text: str | None) -> str:
            data = _decode(text)
            data["version"] = _VERSION
            entry: dict[str, Any] = {
                "cursor": saved.cursor,
                "turns_since_run": saved.turns_since_run,
                "updated": saved.updated,
            }
            if saved.covered_at is not None:
                entry["covered_at"] = saved.covered_at
            data["sessions"][session_id] = entry
            return json.dumps(data, indent=2, sort_keys=True) + "\n"

        update_file(self.path, change, timeout=60.0)
        return saved
