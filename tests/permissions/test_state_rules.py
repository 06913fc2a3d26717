"""The rules that keep memdir's state and planted links out of every tool's reach, one by
one (the attacks through each surface are in tests/hardening/test_state_reach.py)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from memdir.permissions import auto_mem_can_use_tool, memory_write_guard
from memdir.store import MemoryDir, forget_memory, restore_memory, trash_entries
from memdir.tools._guard import is_bookkeeping, reach_refusal


@pytest.fixture
def md(tmp_path: Path) -> MemoryDir:
    (tmp_path / "mem" / "sub").mkdir(parents=True)
    (tmp_path / "mem" / "notes.md").write_text("notes\n")
    return MemoryDir(tmp_path / "mem")


def reason(md: MemoryDir, rel: str) -> str | None:
    found = reach_refusal(md, md.root / rel)
    return None if found is None else found[0]


@pytest.mark.parametrize(
    "rel",
    [
        ".memdir/state.json",
        "team/.memdir/MEMORY.md.lock",
        "sub/dir/.memdir/x",
        "sub/dir/.memdir",
        "team/.memdir/../x.md",  # each component judged, not only where it ends
        ".MEMDIR/state.json",  # one folder on a case-insensitive filesystem
    ],
)
def test_a_state_folder_at_any_depth_is_refused(md: MemoryDir, rel: str) -> None:
    assert reason(md, rel) == "bookkeeping"
    assert is_bookkeeping(md, md.root / rel)
    assert memory_write_guard(md)(md.root / rel, "x") is not None


@pytest.mark.parametrize("rel", ["notes.md", "sub/new/x.md", "notes.memdir.md", "memdir/x.md"])
def test_ordinary_memory_paths_are_not(md: MemoryDir, rel: str) -> None:
    assert reason(md, rel) is None
    assert memory_write_guard(md)(md.root / rel, "fine") is None


def test_links_are_judged_by_where_they_lead(md: MemoryDir, tmp_path: Path) -> None:
    (md.root / ".memdir").mkdir()
    (md.root / "into_state").symlink_to(".memdir")
    (md.root / "deep").symlink_to("sub/../.memdir")
    (md.root / "out").symlink_to(tmp_path)
    (md.root / "dangling").symlink_to("nowhere/at/all")
    (md.root / "alias.md").symlink_to("notes.md")  # stays inside: a link is no attack
    (md.root / "home").symlink_to(".")
    (md.root / "sub" / "up").symlink_to("..")
    assert reason(md, "into_state/state.json") == "bookkeeping"
    assert reason(md, "into_state") == "bookkeeping"
    assert reason(md, "deep/x") == "bookkeeping"
    assert reason(md, "sub/up/.memdir/x") == "bookkeeping"
    assert reason(md, "out/anything") == "link"
    assert reason(md, "dangling") == "link"
    assert reason(md, "alias.md") is None
    assert reason(md, "home/notes.md") is None


def test_a_link_outside_the_memory_dir_into_its_state_is_refused(
    md: MemoryDir, tmp_path: Path
) -> None:
    (md.root / ".memdir").mkdir()
    (tmp_path / "elsewhere").symlink_to(md.root / ".memdir")
    found = reach_refusal(md, tmp_path / "elsewhere" / "state.json")
    assert found is not None
    assert found[0] == "bookkeeping"
    # Paths that never touch the memory directory are not this rule's business.
    assert reach_refusal(md, tmp_path / "other.txt") is None
    assert reach_refusal(md, "/etc/hostname") is None


def test_a_file_with_two_names_is_refused_but_not_a_folder(md: MemoryDir, tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("x")
    os.link(tmp_path / "outside.txt", md.root / "hard.md")
    assert reason(md, "hard.md") == "shared_file"
    assert (md.root / "sub").stat().st_nlink > 1
    assert reason(md, "sub") is None
    # Outside the memory directory a file's names are not judged here.
    assert reach_refusal(md, tmp_path / "outside.txt") is None


def test_the_gate_refuses_reads_and_shell_reads_of_the_state(md: MemoryDir) -> None:
    (md.root / "team" / ".memdir").mkdir(parents=True)
    gate = auto_mem_can_use_tool(md, cwd=md.root)

    async def decide(name: str, tool_input: dict[str, object]) -> str | None:
        return (await gate(name, tool_input)).reason

    def deny_reason(name: str, tool_input: dict[str, object]) -> str | None:
        return asyncio.run(decide(name, tool_input))

    assert deny_reason("Read", {"file_path": str(md.root / "team/.memdir/x.lock")}) == (
        "bookkeeping"
    )
    assert deny_reason("Grep", {"pattern": "x", "path": "team/.memdir"}) == "bookkeeping"
    assert deny_reason("Bash", {"command": "cat team/.memdir/x.lock"}) == "bookkeeping"
    assert deny_reason("Bash", {"command": "wc --files0-from=.memdir/list"}) == "bookkeeping"
    assert deny_reason("Bash", {"command": "cat 'team/./.memdir/x.lock'"}) == "bookkeeping"
    # Glob walks from its pattern's leading folder, which is judged too.
    assert deny_reason("Glob", {"pattern": "team/.memdir/*"}) == "bookkeeping"
    assert deny_reason("Glob", {"pattern": f"{md.root}/team/.memdir/*.lock"}) == "bookkeeping"
    assert deny_reason("Glob", {"pattern": "team/*.md"}) is None
    assert deny_reason("Glob", {"pattern": "**/*", "path": str(md.root)}) is None
    assert deny_reason("Read", {"file_path": str(md.root / "notes.md")}) is None
    assert deny_reason("Bash", {"command": "cat notes.md"}) is None
    assert deny_reason("Grep", {"pattern": "x", "path": str(md.root)}) is None


@pytest.mark.parametrize(
    ("command", "refused"),
    [
        ("grep -r forgotten .", True),  # from the memory directory, its cwd here
        ("grep -rn forgotten", True),  # no folder named: the walk starts at the cwd
        ("grep --recursive x sub", True),  # a folder inside it
        ("grep -R x {parent}", True),  # a folder above it
        ("egrep -ri x .", True),
        ("rg --hidden x .", True),  # ripgrep skips hidden folders unless told
        ("rg -uu x .", True),
        ("rg x .", False),
        ("grep x notes.md", False),  # a named file is judged by its own path
        ("grep -r x {outside}", False),
        ("grep -rn 'deploy key' ~/notes", False),  # a folder named, elsewhere
        ("find . -name '*.md'", False),  # names, not contents
    ],
)
def test_a_recursive_search_may_not_walk_into_the_state(
    md: MemoryDir, tmp_path: Path, command: str, refused: bool
) -> None:
    (md.root / ".memdir").mkdir()
    (md.root / ".memdir" / "state.json").write_text('{"cursor": "secret"}')
    (tmp_path / "elsewhere").mkdir()
    gate = auto_mem_can_use_tool(md, cwd=md.root)
    line = command.format(parent=tmp_path, outside=tmp_path / "elsewhere")

    async def decide() -> str | None:
        return (await gate("Bash", {"command": line})).reason

    assert (asyncio.run(decide()) == "bookkeeping") is refused


def test_a_trash_entry_holds_no_plain_text_and_is_still_restored(md: MemoryDir) -> None:
    (md.root / "MEMORY.md").write_text("- [Notes](notes.md) — PLAINWORD in the index\n")
    entry = forget_memory(md, "notes.md")
    stored = b"".join(p.read_bytes() for p in entry.path.iterdir())
    assert b"PLAINWORD" not in stored
    assert b"notes.md" not in stored
    (loaded,) = trash_entries(md)
    assert loaded.index_lines == entry.index_lines
    restore_memory(md, loaded)
    assert "PLAINWORD" in (md.root / "MEMORY.md").read_text()
    assert (md.root / "notes.md").read_text() == "notes\n"
    # Restoring links a temporary file to its name, then drops the temporary one: the
    # memory is left with one name, so the tools read it again.
    assert (md.root / "notes.md").stat().st_nlink == 1
    assert reach_refusal(md, md.root / "notes.md") is None


def test_a_trash_entry_of_the_earlier_plain_format_is_still_restored(md: MemoryDir) -> None:
    (md.root / "MEMORY.md").write_text("- [Notes](notes.md) — old entry\n")
    entry = forget_memory(md, "notes.md")
    record = {
        "version": 1,
        "file": "notes.md",
        "index": "MEMORY.md",
        "index_lines": [{"line": 0, "text": "- [Notes](notes.md) — old entry\n"}],
        "mode": 0o600,
        "mtime_ns": 0,
        "forgotten": "2026-01-01T00:00:00+00:00",
    }
    (entry.path / "entry.json").write_text(json.dumps(record, indent=2) + "\n")
    (loaded,) = trash_entries(md)
    restore_memory(md, loaded)
    assert (md.root / "MEMORY.md").read_text() == "- [Notes](notes.md) — old entry\n"
    assert (md.root / "notes.md").read_text() == "notes\n"


def test_a_damaged_trash_record_is_an_incomplete_entry(md: MemoryDir) -> None:
    entry = forget_memory(md, "notes.md")
    (entry.path / "entry.json").write_text('{"version": 2, "record": "not base64 gzip!"}\n')
    assert trash_entries(md) == []
