"""Cursors that outlive the process: where extraction stopped in each session.

A live agent keeps its extractor's cursor in memory. The command line, the watcher and
the Claude Code hook run as separate processes, so they keep it in a state file inside
the memory directory, one entry per session. The file is rewritten atomically under a
lock, so a crash leaves the old state or the new one, and two processes updating
different sessions — or the same one — never lose each other's change.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memdir.store import MemoryDir, update_file

__all__ = ["STATE_FILE_NAME", "SessionState", "StateFile"]

STATE_FILE_NAME = ".memdir-state.json"
_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class SessionState:
    """Where extraction of one session stands."""

    cursor: str | None = None
    """The uuid of the last message covered (by a run or by the agent's own write)."""
    turns_since_run: int = 0
    """Turns throttled since the last run, so ``--every N`` counts across processes."""
    updated: str | None = None
    """When this entry was last written (ISO-8601, UTC)."""


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
    return SessionState(
        cursor=cursor if isinstance(cursor, str) else None,
        turns_since_run=turns if isinstance(turns, int) and turns >= 0 else 0,
        updated=updated if isinstance(updated, str) else None,
    )


class StateFile:
    """The state file of one memory directory (``.memdir-state.json`` inside it)."""

    def __init__(self, memory_dir: MemoryDir | str | os.PathLike[str]) -> None:
        md = memory_dir if isinstance(memory_dir, MemoryDir) else MemoryDir(memory_dir)
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
            cursor=state.cursor, turns_since_run=state.turns_since_run, updated=stamp
        )

        def change(text: str | None) -> str:
            data = _decode(text)
            data["version"] = _VERSION
            data["sessions"][session_id] = {
                "cursor": saved.cursor,
                "turns_since_run": saved.turns_since_run,
                "updated": saved.updated,
            }
            return json.dumps(data, indent=2, sort_keys=True) + "\n"

        update_file(self.path, change, timeout=60.0)
        return saved
