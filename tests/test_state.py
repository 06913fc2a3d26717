"""The state file and what memdir keeps beside a memory folder."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from memdir.state import SessionState, StateFile, migrate_legacy_files
from memdir.store import MemoryDir, atomic_write, update_file


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_cursors_and_locks_live_in_one_hidden_folder(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    md = MemoryDir(memory)
    atomic_write(memory / "user_role.md", "---\nname: role\n---\n\nA data scientist.\n")
    update_file(md.entrypoint, lambda _: "- [Role](user_role.md) — a data scientist\n")
    with md.lock("extraction", timeout=0):
        pass
    StateFile(md).put("s1", SessionState(cursor="u1"))
    assert names(memory) == [".memdir", "MEMORY.md", "user_role.md"]
    assert json.loads((memory / ".memdir" / "state.json").read_text())["sessions"]["s1"]
    assert StateFile(md).get("s1").cursor == "u1"


def test_an_earlier_versions_files_are_moved_and_its_locks_removed(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    legacy = {"version": 1, "sessions": {"s1": {"cursor": "old-cursor", "turns_since_run": 2}}}
    (memory / ".memdir-state.json").write_text(json.dumps(legacy))
    (memory / ".memdir-hook.log").write_text("an earlier run\n")
    for lock in ("..memdir-state.json.lock", ".extraction.lock", ".MEMORY.md.lock"):
        (memory / lock).write_text("")
    (memory / ".consolidate-lock").write_text("")  # Claude Code's own: it stays
    (memory / "MEMORY.md").write_text("")

    state = StateFile(memory)

    assert state.get("s1") == SessionState(cursor="old-cursor", turns_since_run=2)
    assert names(memory) == [".consolidate-lock", ".memdir", "MEMORY.md"]
    assert (memory / ".memdir" / "hook.log").read_text() == "an earlier run\n"


def test_a_newer_state_file_wins_over_an_old_one(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    StateFile(memory).put("s1", SessionState(cursor="new"))
    (memory / ".memdir-state.json").write_text(
        json.dumps({"version": 1, "sessions": {"s1": {"cursor": "old"}}})
    )
    assert StateFile(memory).get("s1").cursor == "new"
    assert not (memory / ".memdir-state.json").exists()


def test_a_lock_an_earlier_process_holds_is_left_alone(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    held = memory / ".extraction.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import sys, filelock
                with filelock.FileLock(sys.argv[1]):
                    print("held", flush=True)
                    sys.stdin.read()
                """
            ),
            str(held),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        migrate_legacy_files(memory)
        assert held.exists()
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
        assert holder.stdout is not None
        holder.stdout.close()
    migrate_legacy_files(memory)
    assert not held.exists()


def test_when_a_session_was_last_covered_is_kept(tmp_path: Path) -> None:
    states = StateFile(tmp_path / "memory")
    states.put("s1", SessionState(cursor="u1", turns_since_run=1, covered_at=1_700_000_000.5))
    states.put("s2", SessionState(cursor="u2"))
    assert states.get("s1").covered_at == 1_700_000_000.5
    assert states.get("s1").turns_since_run == 1
    # An entry without it (the command line's, an earlier version's) reads as unknown.
    assert states.get("s2").covered_at is None
    raw = json.loads(states.path.read_text())["sessions"]
    assert "covered_at" not in raw["s2"]
