"""memdir's Write and Edit keep each memory's ``MEMORY.md`` line themselves
(``MemoryFiles.index``), so the memory agent never writes the index."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from memdir.memory_tool import MemoryTool
from memdir.store import MemoryDir, repair_memory_dir
from memdir.tools import EditTool, MemoryFiles, ReadTool, Tool, ToolContext, ToolOutput, WriteTool

NOTE = """---
name: polars-over-pandas
description: the user wants polars for dataframes
metadata:
  type: feedback
---

Use polars.
"""


def run(tool: Tool, tool_input: Any, context: ToolContext) -> ToolOutput:
    output = asyncio.run(tool.run(tool_input, context))
    assert not output.is_error, output.content
    return output


def context(memory: Path, index: bool = True) -> ToolContext:
    return ToolContext(memory_files=MemoryFiles(memory_dir=MemoryDir(memory), index=index))


def write(memory: Path, name: str, text: str, ctx: ToolContext) -> None:
    run(WriteTool(memory), {"file_path": str(memory / name), "content": text}, ctx)


def test_a_new_memory_gets_its_line_as_claude_codes_agent_writes_them(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("# Notes\n- [role](user_role.md) — data engineer")
    (tmp_path / "user_role.md").write_text(NOTE)
    write(tmp_path, "feedback_polars.md", NOTE, context(tmp_path))
    assert (tmp_path / "MEMORY.md").read_text() == (
        "# Notes\n- [role](user_role.md) — data engineer\n"
        "- [polars-over-pandas](feedback_polars.md) — the user wants polars for dataframes\n"
    )
    # The line the repair step would have added: nothing left for it to do.
    assert repair_memory_dir(MemoryDir(tmp_path)) == []


def test_the_index_is_created_and_a_team_memory_goes_to_the_team_index(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    write(tmp_path, "feedback_polars.md", NOTE, ctx)
    write(tmp_path, "team/project_freeze.md", NOTE.replace("polars-over", "freeze"), ctx)
    private = (tmp_path / "MEMORY.md").read_text()
    team = (tmp_path / "team" / "MEMORY.md").read_text()
    assert private == (
        "- [polars-over-pandas](feedback_polars.md) — the user wants polars for dataframes\n"
    )
    assert team == "- [freeze-pandas](project_freeze.md) — the user wants polars for dataframes\n"


def test_a_long_description_is_cut_under_claude_codes_line_cap(tmp_path: Path) -> None:
    write(tmp_path, "a.md", NOTE.replace("the user wants", "x " * 200), context(tmp_path))
    (line,) = (tmp_path / "MEMORY.md").read_text().splitlines()
    assert len(line) < 150
    assert line.endswith("…")


def test_a_changed_description_updates_memdirs_line_but_not_a_hand_written_one(
    tmp_path: Path,
) -> None:
    ctx = context(tmp_path)
    write(tmp_path, "a.md", NOTE, ctx)
    write(tmp_path, "b.md", NOTE.replace("polars-over-pandas", "b"), ctx)
    index = tmp_path / "MEMORY.md"
    # Someone rewords b's hook by hand: memdir keeps their words.
    index.write_text(
        "- [polars-over-pandas](a.md) — the user wants polars for dataframes\n- [b](b.md) — mine\n"
    )
    for name in ("a.md", "b.md"):
        change = {"old_string": "polars for dataframes", "new_string": "polars, always"}
        run(EditTool(tmp_path), {"file_path": str(tmp_path / name), **change}, ctx)
    assert index.read_text() == (
        "- [polars-over-pandas](a.md) — the user wants polars, always\n- [b](b.md) — mine\n"
    )


def test_an_emptied_memory_loses_its_line(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    write(tmp_path, "a.md", NOTE, ctx)
    write(tmp_path, "b.md", NOTE.replace("polars-over-pandas", "b"), ctx)
    write(tmp_path, "a.md", "", ctx)  # how the memory agent forgets: no rm
    assert "(a.md)" not in (tmp_path / "MEMORY.md").read_text()
    assert "(b.md)" in (tmp_path / "MEMORY.md").read_text()


def test_an_index_read_in_the_run_stays_editable_after_memdirs_line(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("# Notes\n")
    ctx = context(tmp_path)
    run(ReadTool(tmp_path), {"file_path": str(tmp_path / "MEMORY.md")}, ctx)
    write(tmp_path, "a.md", NOTE, ctx)
    change = {"old_string": "# Notes", "new_string": "# Memory"}
    run(EditTool(tmp_path), {"file_path": str(tmp_path / "MEMORY.md"), **change}, ctx)
    assert (tmp_path / "MEMORY.md").read_text().startswith("# Memory\n- [polars-over-pandas](a.md)")


def test_without_index_other_files_and_non_memories_leave_the_index_alone(
    tmp_path: Path,
) -> None:
    write(tmp_path, "a.md", NOTE, context(tmp_path, index=False))
    ctx = context(tmp_path)
    write(tmp_path, "notes.txt", "plain", ctx)
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    run(WriteTool(outside), {"file_path": str(outside / "x.md"), "content": NOTE}, ctx)
    run(
        WriteTool(tmp_path), {"file_path": str(tmp_path / ".memdir" / "x.md"), "content": NOTE}, ctx
    )
    assert not (tmp_path / "MEMORY.md").exists()
    assert not (outside / "MEMORY.md").exists()
    assert sorted(os.listdir(tmp_path)) == [".memdir", "a.md", "notes.txt"]


def test_an_agent_that_adds_the_line_itself_keeps_its_words_and_no_duplicate(
    tmp_path: Path,
) -> None:
    ctx = context(tmp_path)
    write(tmp_path, "a.md", NOTE, ctx)
    index = tmp_path / "MEMORY.md"
    memdirs = index.read_text()
    run(ReadTool(tmp_path), {"file_path": str(index)}, ctx)
    # As Claude Code's memory section tells a host's agent: its own line for the memory.
    own = "- [Polars over pandas](a.md) — use polars\n"
    run(
        EditTool(tmp_path),
        {"file_path": str(index), "old_string": memdirs, "new_string": memdirs + own},
        ctx,
    )
    assert index.read_text() == own
    # A line memdir did not make stays, even when two point at one memory.
    twice = own + "- [Again](a.md) — by hand\n"
    run(WriteTool(tmp_path), {"file_path": str(index), "content": twice}, ctx)
    assert index.read_text() == twice


def test_the_memory_tool_indexes_too(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    tool = MemoryTool(tmp_path)
    run(tool, {"command": "create", "path": "/memories/a.md", "file_text": NOTE}, ctx)
    index = tmp_path / "MEMORY.md"
    assert index.read_text() == (
        "- [polars-over-pandas](a.md) — the user wants polars for dataframes\n"
    )
    change = {"old_str": "polars for dataframes", "new_str": "polars, always"}
    run(tool, {"command": "str_replace", "path": "/memories/a.md", **change}, ctx)
    assert index.read_text() == "- [polars-over-pandas](a.md) — the user wants polars, always\n"
    run(
        tool, {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"}, ctx
    )
    assert index.read_text() == "- [polars-over-pandas](b.md) — the user wants polars, always\n"
    run(tool, {"command": "delete", "path": "/memories/b.md"}, ctx)
    assert index.read_text() == ""
