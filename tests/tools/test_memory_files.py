"""Write, Edit and the memory tool store memory files as Claude Code 2.1.332 stores them."""

from __future__ import annotations

import asyncio
import datetime
import os
from pathlib import Path
from typing import Any

import pytest

from memdir.extract import build_extract_auto_only_prompt
from memdir.memory_tool import MemoryTool
from memdir.messages import Message
from memdir.models import ModelRequest, OfflineModel
from memdir.store import MemoryDir, MemoryFormat, parse_memory_file
from memdir.tools import EditTool, MemoryFiles, ReadTool, Tool, ToolContext, ToolOutput, WriteTool

SESSION = "3f2c9a4e-7b1d-4c8e-9a55-1d2e3f4a5b6c"
NOW = datetime.datetime(2026, 3, 5, 14, 3, 22, 120456, tzinfo=datetime.UTC)
STAMP = "2026-03-05T14:03:22.120Z"
LATER = datetime.datetime(2026, 3, 6, 9, 0, tzinfo=datetime.UTC)

WRITTEN = """---
name: Always use polars, never pandas
description: The user wants polars for dataframes
type: feedback
---

Use polars.

**Why:** speed.
"""
STORED = f"""---
name: always-use-polars-never-pandas
description: The user wants polars for dataframes
metadata:
  node_type: memory
  type: feedback
  originSessionId: {SESSION}
  modified: {STAMP}
---

Use polars.

**Why:** speed.
"""


def run(tool: Tool, tool_input: Any, context: ToolContext) -> ToolOutput:
    return asyncio.run(tool.run(tool_input, context))


def context(memory: Path, **kwargs: Any) -> ToolContext:
    kwargs.setdefault("session_id", SESSION)
    kwargs.setdefault("clock", lambda: NOW)
    return ToolContext(memory_files=MemoryFiles(memory_dir=MemoryDir(memory), **kwargs))


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    root.mkdir()
    return root


def test_write_of_a_memory_file_is_stored_in_the_current_layout(memory: Path) -> None:
    ctx = context(memory)
    out = run(WriteTool(memory), {"file_path": "feedback_polars.md", "content": WRITTEN}, ctx)
    assert not out.is_error
    assert (memory / "feedback_polars.md").read_text(encoding="utf-8") == STORED
    # The stored text is what the run has seen: an Edit needs no new Read.
    edit = {"file_path": "feedback_polars.md", "old_string": "speed.", "new_string": "speed!"}
    later = context(memory, clock=lambda: LATER)
    later.read_files.update(ctx.read_files)
    assert not run(EditTool(memory), edit, later).is_error
    text = (memory / "feedback_polars.md").read_text(encoding="utf-8")
    assert text == STORED.replace("speed.", "speed!").replace(STAMP, "2026-03-06T09:00:00.000Z")


def test_edit_of_a_2_1_88_memory_migrates_it(memory: Path) -> None:
    (memory / "polars.md").write_text(WRITTEN, encoding="utf-8")
    ctx = context(memory)
    run(ReadTool(memory), {"file_path": "polars.md"}, ctx)
    edit = {"file_path": "polars.md", "old_string": "Use polars.", "new_string": "Use polars!"}
    assert not run(EditTool(memory), edit, ctx).is_error
    stored = (memory / "polars.md").read_text(encoding="utf-8")
    assert stored == STORED.replace("Use polars.", "Use polars!")


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("notes.txt", WRITTEN),  # not Markdown
        ("plain.md", "No frontmatter here.\n"),
        ("bom.md", "\ufeff" + WRITTEN),
    ],
)
def test_other_files_in_the_memory_dir_are_stored_as_written(
    memory: Path, name: str, content: str
) -> None:
    run(WriteTool(memory), {"file_path": name, "content": content}, context(memory))
    assert (memory / name).read_text(encoding="utf-8") == content


def test_files_outside_the_memory_dir_are_never_touched(tmp_path: Path, memory: Path) -> None:
    ctx = context(memory)
    outside = tmp_path / "elsewhere.md"
    run(WriteTool(tmp_path), {"file_path": str(outside), "content": WRITTEN}, ctx)
    assert outside.read_text(encoding="utf-8") == WRITTEN
    sibling = tmp_path / "memory-evil"
    sibling.mkdir()
    run(WriteTool(tmp_path), {"file_path": str(sibling / "x.md"), "content": WRITTEN}, ctx)
    assert (sibling / "x.md").read_text(encoding="utf-8") == WRITTEN


def test_a_symlink_out_of_the_memory_dir_is_not_stamped(tmp_path: Path, memory: Path) -> None:
    target = tmp_path / "target.md"
    target.write_text("", encoding="utf-8")
    os.symlink(target, memory / "link.md")
    ctx = context(memory)
    run(ReadTool(memory), {"file_path": "link.md"}, ctx)
    run(WriteTool(memory), {"file_path": "link.md", "content": WRITTEN}, ctx)
    assert target.read_text(encoding="utf-8") == WRITTEN


def test_team_memory_only_gets_a_modified_line(memory: Path) -> None:
    run(WriteTool(memory), {"file_path": "team/t.md", "content": WRITTEN}, context(memory))
    stored = (memory / "team" / "t.md").read_text(encoding="utf-8")
    assert stored == WRITTEN.replace("type: feedback\n", f"type: feedback\nmodified: {STAMP}\n")


def test_the_2_1_88_format_stores_as_written(memory: Path) -> None:
    ctx = context(memory, format="2.1.88")
    run(WriteTool(memory), {"file_path": "a.md", "content": WRITTEN}, ctx)
    assert (memory / "a.md").read_text(encoding="utf-8") == WRITTEN


def test_without_memory_files_everything_is_stored_as_written(memory: Path) -> None:
    run(WriteTool(memory), {"file_path": "a.md", "content": WRITTEN}, ToolContext())
    assert (memory / "a.md").read_text(encoding="utf-8") == WRITTEN


def test_an_unknown_session_writes_no_origin(memory: Path) -> None:
    unknown = context(memory, session_id=None)
    run(WriteTool(memory), {"file_path": "a.md", "content": WRITTEN}, unknown)
    parsed = parse_memory_file((memory / "a.md").read_text(encoding="utf-8"))
    assert parsed.origin_session_id is None
    assert parsed.modified == STAMP
    assert parsed.type == "feedback"


def test_the_write_guard_judges_the_stamped_text(memory: Path) -> None:
    seen: list[str] = []
    ctx = context(memory)
    ctx.write_guard = lambda path, text: seen.append(text)
    run(WriteTool(memory), {"file_path": "a.md", "content": WRITTEN}, ctx)
    assert seen == [STORED]


# --- the memory tool --------------------------------------------------------------------------


def test_the_memory_tool_stamps_when_asked(memory: Path) -> None:
    tool = MemoryTool(memory, format="current", session_id=SESSION, clock=lambda: NOW)
    create = {"command": "create", "path": "/memories/p.md", "file_text": WRITTEN}
    assert not run(tool, create, ToolContext()).is_error
    assert (memory / "p.md").read_text(encoding="utf-8") == STORED
    replace = {"command": "str_replace", "path": "/memories/p.md"}
    replace |= {"old_str": "speed.", "new_str": "x"}
    out = run(tool, replace, ToolContext())
    assert "**Why:** x" in out.content  # the snippet follows the edit down the file
    assert (memory / "p.md").read_text(encoding="utf-8") == STORED.replace("speed.", "x")


def test_the_memory_tool_follows_the_runs_settings(memory: Path) -> None:
    tool = MemoryTool(memory)
    ctx = context(memory, format="2.1.88")
    run(tool, {"command": "create", "path": "/memories/p.md", "file_text": WRITTEN}, ctx)
    assert (memory / "p.md").read_text(encoding="utf-8") == WRITTEN
    plain = {"command": "create", "path": "/memories/n.txt", "file_text": WRITTEN}
    run(MemoryTool(memory, format="current", session_id=SESSION), plain, ToolContext())
    assert (memory / "n.txt").read_text(encoding="utf-8") == WRITTEN
    # Neither the run nor the tool asks for stamps: stored as written.
    raw = {"command": "create", "path": "/memories/raw.md", "file_text": WRITTEN}
    run(MemoryTool(memory), raw, ToolContext())
    assert (memory / "raw.md").read_text(encoding="utf-8") == WRITTEN
    stamped = {"command": "create", "path": "/memories/s.md", "file_text": WRITTEN}
    run(MemoryTool(memory), stamped, context(memory))
    assert (memory / "s.md").read_text(encoding="utf-8") == STORED


# --- the offline model's writes ---------------------------------------------------------------


@pytest.mark.parametrize("layout", [None, "current", "2.1.88"])
def test_offline_model_writes_reach_disk_in_claude_codes_layout(
    memory: Path, layout: MemoryFormat | None
) -> None:
    prompt = build_extract_auto_only_prompt(1, "", True, memory_dir=str(memory))
    said = Message.user("Remember that I prefer polars over pandas.")
    request = ModelRequest(messages=(said, Message.user(prompt)))
    response = asyncio.run(
        OfflineModel(today=datetime.date(2026, 3, 5), format=layout).request(request)
    )
    [write] = response.message.tool_uses
    content = write.input["content"]
    # Unasked, it writes what the prompt's example shows (the extraction prompt shows
    # today's layout by default); the stamps are the Write tool's to add.
    nested = layout != "2.1.88"
    assert ("\nmetadata:\n  node_type: memory\n  type: feedback\n" in content) is nested
    assert "originSessionId" not in content
    run(WriteTool(memory), dict(write.input), context(memory))
    stored = (Path(write.input["file_path"])).read_text(encoding="utf-8")
    assert stored.startswith(
        "---\nname: the-user-prefers-polars-over-pandas\n"
        "description: The user prefers polars over pandas\n"
        f"metadata:\n  node_type: memory\n  type: feedback\n  originSessionId: {SESSION}\n"
        f"  modified: {STAMP}\n---\n\nThe user prefers polars over pandas.\n"
    )
