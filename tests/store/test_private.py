"""What memdir creates for a person's memory is theirs alone: files 0600, folders 0700,
whatever the umask (other local users must not read who someone is or how they work)."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from memdir import MemoryExtractor, TurnContext
from memdir._hook_worker import open_log
from memdir.messages import Message
from memdir.models import OfflineModel
from memdir.queue._store import write_checkout
from memdir.state import SessionState, StateFile
from memdir.store import MemoryDir, atomic_write, forget_memory
from memdir.telemetry import JsonlSink, emit
from memdir.tools import MemoryTool, ToolContext


@pytest.fixture(params=[0o000, 0o022, 0o002], ids=["umask-000", "umask-022", "umask-002"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def modes_below(root: Path) -> dict[str, int]:
    """Every entry below ``root`` (``root`` too) and its permission bits."""
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            found[path.relative_to(root).as_posix()] = stat.S_IMODE(path.lstat().st_mode)
    return found


def assert_private(root: Path) -> None:
    for name, mode in modes_below(root).items():
        path = root / name
        want = 0o700 if path.is_dir() else 0o600
        assert mode == want, f"{name}: {oct(mode)}, want {oct(want)}"


def test_an_extractors_run_leaves_only_private_files_and_folders(
    tmp_path: Path, umask: int
) -> None:
    root = tmp_path / "home" / "projects" / "p" / "memory"
    extractor = MemoryExtractor(root, OfflineModel())
    messages = [
        Message.user("Remember that I prefer polars over pandas for dataframes."),
        Message.assistant("Noted."),
    ]

    async def turn() -> None:
        extractor.on_turn_end(TurnContext(messages=messages, session_id="s1"))
        await extractor.drain()

    asyncio.run(turn())
    assert any(p.suffix == ".md" and p.name != "MEMORY.md" for p in root.iterdir())
    assert (root / "MEMORY.md").exists()
    # Every folder memdir created on the way, not only the memory folder itself.
    assert_private(tmp_path / "home")


def test_bookkeeping_logs_state_and_trash_are_private(tmp_path: Path, umask: int) -> None:
    memory = MemoryDir(tmp_path / "memory")
    memory.ensure()
    StateFile(memory).put("s1", SessionState(cursor="u1"))
    with open_log(memory.root) as log:
        log.write("a line\n")
    sink = JsonlSink(memory.root / ".memdir" / "events" / "events.jsonl")
    emit(sink, "extract.run", memories_saved=1)
    sink.close()
    atomic_write(memory.root / "note.md", "---\nname: note\n---\n\nbody\n")
    atomic_write(memory.root / "MEMORY.md", "- [Note](note.md) — a note\n")
    forget_memory(memory, "note.md")
    assert (memory.root / ".memdir" / "trash").is_dir()
    assert_private(memory.root)


def test_the_memory_tool_and_a_queue_checkout_write_private_files(
    tmp_path: Path, umask: int
) -> None:
    memory = MemoryDir(tmp_path / "memory")
    tool = MemoryTool(memory)
    create = {"command": "create", "path": "/memories/a/b/deploys.md", "file_text": "Fridays"}
    tool.run_sync(create, ToolContext())
    tool.run_sync(
        {
            "command": "rename",
            "old_path": "/memories/a/b/deploys.md",
            "new_path": "/memories/c/d.md",
        },
        ToolContext(),
    )
    assert_private(memory.root)

    checkout = tmp_path / "checkout"
    checkout.mkdir(mode=0o700)
    write_checkout(checkout, "d1", 3, [("team/x.md", b"shared", "digest", 1_700_000_000.0)])
    assert_private(checkout)


def test_a_mode_its_owner_chose_is_kept(tmp_path: Path, umask: int) -> None:
    chosen = tmp_path / "shared.md"
    chosen.write_text("old", encoding="utf-8")
    os.chmod(chosen, 0o640)
    atomic_write(chosen, "new")
    assert stat.S_IMODE(chosen.stat().st_mode) == 0o640
    existing = tmp_path / "mine"
    existing.mkdir()
    os.chmod(existing, 0o755)
    MemoryDir(existing / "memory").ensure()
    assert stat.S_IMODE(existing.stat().st_mode) == 0o755  # not memdir's to change
    assert stat.S_IMODE((existing / "memory").stat().st_mode) == 0o700
