"""Atomic writes and the cross-process lock."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memdir.errors import StoreError
from memdir.store import atomic_write, file_lock, lock_path, update_file


def test_writes_text_and_bytes(tmp_path: Path) -> None:
    atomic_write(tmp_path / "a" / "b.md", "héllo\n")
    assert (tmp_path / "a" / "b.md").read_text(encoding="utf-8") == "héllo\n"
    atomic_write(tmp_path / "c.bin", b"\x00\x01")
    assert (tmp_path / "c.bin").read_bytes() == b"\x00\x01"


def test_failed_replace_keeps_the_old_file_and_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "note.md"
    target.write_text("old\n")

    def broken(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(StoreError, match="No space left"):
        atomic_write(target, "new\n")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["note.md"]


def test_interrupted_write_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "note.md"
    target.write_text("old\n")

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, "new\n")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["note.md"]


def test_keeps_permission_bits(tmp_path: Path) -> None:
    target = tmp_path / "private.md"
    target.write_text("x")
    target.chmod(0o640)
    atomic_write(target, "y")
    assert target.stat().st_mode & 0o777 == 0o640
    atomic_write(tmp_path / "fresh.md", "z")
    # Private by default: a new file is its owner's alone.
    assert (tmp_path / "fresh.md").stat().st_mode & 0o777 == 0o600


def test_replaces_a_symlink_instead_of_writing_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched")
    link = tmp_path / "link.md"
    link.symlink_to(outside)
    atomic_write(link, "new")
    assert outside.read_text() == "untouched"
    assert not link.is_symlink()
    assert link.read_text() == "new"


def test_lock_files_live_in_the_hidden_state_folder(tmp_path: Path) -> None:
    assert lock_path(tmp_path / "MEMORY.md") == tmp_path / ".memdir" / "MEMORY.md.lock"
    state = tmp_path / ".memdir" / "state.json"
    assert lock_path(state) == tmp_path / ".memdir" / "state.json.lock"
    with file_lock(tmp_path / "MEMORY.md", timeout=0):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == [".memdir"]


_HOLDER = textwrap.dedent(
    """
    import sys
    from memdir.store import file_lock
    with file_lock(sys.argv[1], timeout=5):
        print("held", flush=True)
        sys.stdin.readline()
    """
)


def test_lock_excludes_another_process(tmp_path: Path) -> None:
    target = tmp_path / "MEMORY.md"
    with subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(target)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdin is not None
        assert holder.stdout is not None
        try:
            assert holder.stdout.readline().strip() == "held"
            with (
                pytest.raises(StoreError, match="locked by another process"),
                file_lock(target, timeout=0),
            ):
                pass
        finally:
            holder.stdin.write("\n")
            holder.stdin.flush()
        assert holder.wait(timeout=30) == 0
    with file_lock(target, timeout=0):
        pass


_INCREMENTER = textwrap.dedent(
    """
    import sys
    from memdir.store import update_file
    for _ in range(int(sys.argv[2])):
        update_file(sys.argv[1], lambda t: str(int(t or "0") + 1), timeout=60)
    """
)


def test_concurrent_updates_are_never_lost(tmp_path: Path) -> None:
    counter = tmp_path / "state.txt"
    workers = [
        subprocess.Popen([sys.executable, "-c", _INCREMENTER, str(counter), "60"]) for _ in range(3)
    ]
    for worker in workers:
        assert worker.wait(timeout=120) == 0
    assert counter.read_text() == "180"


def test_update_file_sees_none_for_a_missing_file(tmp_path: Path) -> None:
    seen: list[str | None] = []

    def add_line(text: str | None) -> str:
        seen.append(text)
        return (text or "") + "- [A](a.md)\n"

    update_file(tmp_path / "MEMORY.md", add_line)
    update_file(tmp_path / "MEMORY.md", add_line)
    assert seen == [None, "- [A](a.md)\n"]
    assert (tmp_path / "MEMORY.md").read_text() == "- [A](a.md)\n- [A](a.md)\n"


def test_update_file_does_not_rewrite_unchanged_text(tmp_path: Path) -> None:
    target = tmp_path / "same.md"
    target.write_text("x")
    os.utime(target, (1_000_000, 1_000_000))
    update_file(target, lambda t: t or "")
    assert target.stat().st_mtime == 1_000_000
