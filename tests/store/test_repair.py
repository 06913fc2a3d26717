"""The repair step: each kind of crash debris, found in one walk and repaired under the lock."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import memdir.store._trash as trash_module
from memdir.store import (
    ENTRYPOINT_NAME,
    TRASH_DIR_NAME,
    MemoryDir,
    Repair,
    forget_memory,
    format_memory_file,
    repair_memory_dir,
    restore_memory,
    trash_entries,
)


def memory(root: Path, name: str, description: str = "a fact", title: str | None = None) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        format_memory_file(
            name=title or Path(name).stem, description=description, type="user", body="Body."
        )
    )
    return path


def index(root: Path, text: str | None = None) -> str:
    path = root / ENTRYPOINT_NAME
    if text is not None:
        path.write_text(text)
    return path.read_text()


def kinds(repairs: list[Repair]) -> list[tuple[str, str]]:
    return [(r.kind, r.path) for r in repairs]


def test_a_memory_without_a_line_gets_one_from_its_name_and_description(tmp_path: Path) -> None:
    memory(tmp_path, "kept.md")
    memory(tmp_path, "saved.md", "deploys go out on Tuesdays", title="Deploy day")
    index(tmp_path, "# Memory\n- [Kept](kept.md) — a fact")  # no final newline
    repairs = repair_memory_dir(MemoryDir(tmp_path))
    assert kinds(repairs) == [("indexed", "saved.md")]
    assert index(tmp_path) == (
        "# Memory\n- [Kept](kept.md) — a fact\n"
        "- [deploy-day](saved.md) — deploys go out on Tuesdays\n"  # the name as the file holds it
    )
    assert repairs[0].describe() == "added the missing index line for saved.md"


def test_a_line_without_its_file_goes_and_other_lines_stay(tmp_path: Path) -> None:
    memory(tmp_path, "kept.md")
    index(
        tmp_path,
        "- [Kept](kept.md) — a fact\n- [Gone](gone.md) — deleted\n- [Docs](https://x.org/a.md)\n",
    )
    assert kinds(repair_memory_dir(MemoryDir(tmp_path))) == [("unlinked_line", "gone.md")]
    assert index(tmp_path) == "- [Kept](kept.md) — a fact\n- [Docs](https://x.org/a.md)\n"


def test_an_empty_retired_memory_goes_with_its_line(tmp_path: Path) -> None:
    memory(tmp_path, "kept.md")
    (tmp_path / "retired.md").write_text("")
    (tmp_path / "blank.md").write_text("\n  \n")  # unindexed and blank: retired too
    index(tmp_path, "- [Kept](kept.md) — a fact\n- [Retired](retired.md) — merged\n")
    repairs = repair_memory_dir(MemoryDir(tmp_path))
    assert kinds(repairs) == [("empty_removed", "retired.md"), ("empty_removed", "blank.md")]
    assert not (tmp_path / "retired.md").exists()
    assert not (tmp_path / "blank.md").exists()
    assert index(tmp_path) == "- [Kept](kept.md) — a fact\n"


def test_team_memories_are_indexed_in_the_team_index(tmp_path: Path) -> None:
    memory(tmp_path, "team/shared.md", "the team's rule")
    (tmp_path / "team" / ENTRYPOINT_NAME).write_text("")
    assert kinds(repair_memory_dir(MemoryDir(tmp_path))) == [("indexed", "team/shared.md")]
    assert (tmp_path / "team" / ENTRYPOINT_NAME).read_text() == (
        "- [shared](shared.md) — the team's rule\n"
    )
    assert not (tmp_path / ENTRYPOINT_NAME).exists()


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_temp_files_go_when_their_writer_died_or_they_are_old(tmp_path: Path) -> None:
    memory(tmp_path, "a.md")
    index(tmp_path, "- [a](a.md) — a fact\n")
    dead = tmp_path / f".a.md.{dead_pid()}-k1ll3d0x.tmp"
    alive = tmp_path / f".a.md.{os.getpid()}-wr1t1ng0.tmp"
    young = tmp_path / ".a.md.n0p1dy0u.tmp"
    old = tmp_path / ".memdir" / ".state.json.0ldf1l3x.tmp"
    index_temp = tmp_path / f".{ENTRYPOINT_NAME}.{os.getpid()}-1ndext0p.tmp"
    for path in (dead, alive, young, old, index_temp):
        path.parent.mkdir(exist_ok=True)
        path.write_text("partial")
    hour_ago = time.time() - 3600
    os.utime(old, (hour_ago, hour_ago))
    found = kinds(repair_memory_dir(MemoryDir(tmp_path)))
    assert sorted(found) == sorted(
        ("temp_removed", p.relative_to(tmp_path).as_posix()) for p in (dead, old, index_temp)
    )
    # A live writer's file and a young one without a writer's id are left alone; the
    # index's own is not, since every writer of the index holds the lock the repair holds.
    assert alive.exists()
    assert young.exists()


def test_incomplete_trash_entries_go(tmp_path: Path) -> None:
    memory(tmp_path, "a.md")
    index(tmp_path, "- [a](a.md) — a fact\n")
    trash = tmp_path / TRASH_DIR_NAME
    (trash / "20260101T000000.000000Z").mkdir(parents=True)  # killed before its copy
    copy_only = trash / "20260101T000001.000000Z"
    copy_only.mkdir()
    (copy_only / "memory.gz").write_bytes(gzip.compress(b"x"))  # killed before its record
    (trash / "not-an-entry").mkdir()  # not ours: left alone
    found = kinds(repair_memory_dir(MemoryDir(tmp_path)))
    assert found == [
        ("trash_removed", f"{TRASH_DIR_NAME}/20260101T000000.000000Z"),
        ("trash_removed", f"{TRASH_DIR_NAME}/20260101T000001.000000Z"),
    ]
    assert sorted(os.listdir(trash)) == ["not-an-entry"]


def killed_forget(root: Path, name: str, *, index_done: bool) -> Path:
    """What a forget killed before removing the file leaves: the entry complete, the file
    still there, and the index lines gone (``index_done``) or not yet."""
    before = index(root)
    data = (root / name).read_bytes()
    entry = forget_memory(MemoryDir(root), name)
    (root / name).write_bytes(data)
    if not index_done:
        index(root, before)
    return entry.path


def test_a_forget_killed_after_the_index_is_finished(tmp_path: Path) -> None:
    memory(tmp_path, "a.md")
    memory(tmp_path, "b.md")
    index(tmp_path, "- [a](a.md) — a fact\n- [b](b.md) — a fact\n")
    folder = killed_forget(tmp_path, "a.md", index_done=True)
    assert kinds(repair_memory_dir(MemoryDir(tmp_path))) == [("trash_completed", "a.md")]
    assert not (tmp_path / "a.md").exists()
    assert index(tmp_path) == "- [b](b.md) — a fact\n"
    # Still restorable, lines and all.
    restored = restore_memory(MemoryDir(tmp_path))
    assert restored.path == folder
    assert (tmp_path / "a.md").exists()
    assert index(tmp_path) == "- [a](a.md) — a fact\n- [b](b.md) — a fact\n"


def test_a_forget_killed_before_the_index_is_undone(tmp_path: Path) -> None:
    memory(tmp_path, "a.md")
    index(tmp_path, "- [a](a.md) — a fact\n")
    folder = killed_forget(tmp_path, "a.md", index_done=False)
    found = kinds(repair_memory_dir(MemoryDir(tmp_path)))
    assert found == [("trash_removed", folder.relative_to(tmp_path).as_posix())]
    assert (tmp_path / "a.md").exists()
    assert index(tmp_path) == "- [a](a.md) — a fact\n"
    assert trash_entries(MemoryDir(tmp_path)) == []


def test_a_trash_entry_whose_name_a_newer_memory_took_stays(tmp_path: Path) -> None:
    memory(tmp_path, "a.md", "the old fact")
    index(tmp_path, "- [a](a.md) — the old fact\n")
    forget_memory(MemoryDir(tmp_path), "a.md")
    memory(tmp_path, "a.md", "a new fact")
    index(tmp_path, "- [a](a.md) — a new fact\n")
    assert repair_memory_dir(MemoryDir(tmp_path)) == []
    assert len(trash_entries(MemoryDir(tmp_path))) == 1


def test_a_consistent_folder_needs_nothing(tmp_path: Path) -> None:
    memory(tmp_path, "a.md")
    index(tmp_path, "- [a](a.md) — a fact\n")
    forget_memory(MemoryDir(tmp_path), "a.md")
    assert repair_memory_dir(MemoryDir(tmp_path)) == []
    assert repair_memory_dir(MemoryDir(tmp_path / "missing")) == []


def test_a_dry_run_reports_and_changes_nothing(tmp_path: Path) -> None:
    memory(tmp_path, "new.md")
    (tmp_path / "retired.md").write_text("")
    index(tmp_path, "- [Gone](gone.md) — x\n- [Retired](retired.md) — y\n")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    pending = repair_memory_dir(MemoryDir(tmp_path), dry_run=True)
    assert kinds(pending) == [
        ("unlinked_line", "gone.md"),
        ("empty_removed", "retired.md"),
        ("indexed", "new.md"),
    ]
    assert pending[0].describe(done=False) == "remove the index line of the missing file gone.md"
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    assert not (tmp_path / ".memdir").exists()  # not even a lock file


def test_an_index_another_process_holds_is_left_alone(tmp_path: Path) -> None:
    memory(tmp_path, "saved.md")
    index(tmp_path, "- [Gone](gone.md) — x\n")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\nfrom memdir.store import file_lock\n"
            f"with file_lock({str(tmp_path / ENTRYPOINT_NAME)!r}):\n"
            "    print('held', flush=True)\n    sys.stdin.readline()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        assert repair_memory_dir(MemoryDir(tmp_path), lock_timeout=0) == []
        assert index(tmp_path) == "- [Gone](gone.md) — x\n"
    finally:
        holder.communicate("\n", timeout=30)
    assert [r.kind for r in repair_memory_dir(MemoryDir(tmp_path))] == ["unlinked_line", "indexed"]


def test_forget_and_undo_of_a_folder_memory_hold_the_main_index_lock_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The repair settles the trash under the main index's lock; a forget or an undo of a
    # memory indexed elsewhere holds it too, or the repair could see its entry half-made.
    memory(tmp_path, "notes/a.md")
    (tmp_path / "notes" / ENTRYPOINT_NAME).write_text("- [a](a.md) — a fact\n")
    locked: list[str] = []
    from memdir.store import file_lock as real_lock

    def recording(path: str | os.PathLike[str], **kwargs: float) -> Any:
        locked.append(Path(path).relative_to(tmp_path).as_posix())
        return real_lock(path, **kwargs)

    monkeypatch.setattr(trash_module, "file_lock", recording)
    forget_memory(MemoryDir(tmp_path), "notes/a.md")
    restore_memory(MemoryDir(tmp_path))
    assert locked == [ENTRYPOINT_NAME, f"notes/{ENTRYPOINT_NAME}"] * 2


def test_a_memory_its_folders_own_index_lists_gets_no_second_line(tmp_path: Path) -> None:
    memory(tmp_path, "notes/a.md")
    (tmp_path / "notes" / ENTRYPOINT_NAME).write_text("- [a](a.md) — a fact\n")
    memory(tmp_path, "notes/b.md")  # listed nowhere: the main index takes it
    assert kinds(repair_memory_dir(MemoryDir(tmp_path))) == [("indexed", "notes/b.md")]
    assert index(tmp_path) == "- [b](notes/b.md) — a fact\n"
