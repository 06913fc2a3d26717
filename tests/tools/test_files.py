"""Read, Write and Edit; input checking for every builtin tool; ``builtin_tools``."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memdir.errors import StoreError
from memdir.store import MemoryDir, atomic_write, file_lock
from memdir.tools._base import FileStamp, MemoryFiles, Tool, ToolContext, ToolError, ToolOutput
from memdir.tools._bash import BashTool
from memdir.tools._builtin import builtin_tools
from memdir.tools._files import EditTool, ReadTool, WriteTool
from memdir.tools._search import GlobTool, GrepTool


def run(tool: Tool, tool_input: Any, context: ToolContext | None = None) -> ToolOutput:
    return asyncio.run(tool.run(tool_input, context if context is not None else ToolContext()))


def touch_later(path: Path) -> None:
    """Give ``path`` another mtime, as an outside writer would."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


# Read


def test_read_numbers_lines_like_cat_n(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("first\n\tindented\nlast")
    out = run(ReadTool(tmp_path), {"file_path": "a.md"})
    assert out.content == "     1\tfirst\n     2\t\tindented\n     3\tlast"
    nulls = {"file_path": "a.md", "offset": None, "limit": None}  # null: not given
    assert run(ReadTool(tmp_path), nulls).content == out.content
    assert not out.is_error
    assert out.written is None


def test_read_window_and_continuation_note(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    out = run(ReadTool(tmp_path), {"file_path": "a.md", "offset": 3, "limit": 2})
    lines = out.content.split("\n")
    assert lines[:2] == ["     3\tline 3", "     4\tline 4"]
    assert "offset=5" in lines[-1]
    tail = run(ReadTool(tmp_path), {"file_path": "a.md", "offset": 9, "limit": 2})
    assert tail.content == "     9\tline 9\n    10\tline 10"  # the window reaches the end


def test_read_default_limit_is_2000_lines(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x\n" * 2005)
    lines = run(ReadTool(tmp_path), {"file_path": "big.txt"}).content.split("\n")
    assert lines[1999] == "  2000\tx"
    assert lines[2000] == ""
    assert "offset=2001" in lines[2001]


def test_read_cuts_long_lines_at_2000_characters(tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text("x" * 2500 + "\n" + "é" * 3000 + "\nend\n")
    lines = run(ReadTool(tmp_path), {"file_path": "long.txt"}).content.split("\n")
    assert lines[0] == "     1\t" + "x" * 2000 + " … (line cut)"
    assert lines[1] == "     2\t" + "é" * 2000 + " … (line cut)"
    assert lines[2] == "     3\tend"


def test_read_strips_crlf_and_replaces_undecodable_bytes(tmp_path: Path) -> None:
    (tmp_path / "w.txt").write_bytes(b"one\r\nt\xffo\r\n")
    assert (
        run(ReadTool(tmp_path), {"file_path": "w.txt"}).content == "     1\tone\n     2\tt\ufffdo"
    )


def test_read_empty_file_and_offset_past_the_end(tmp_path: Path) -> None:
    (tmp_path / "empty.md").write_text("")
    (tmp_path / "two.md").write_text("a\nb\n")
    context = ToolContext()
    empty = run(ReadTool(tmp_path), {"file_path": "empty.md"}, context)
    assert empty.content == f"({tmp_path / 'empty.md'} is empty)"
    assert not empty.is_error
    assert str(tmp_path / "empty.md") in context.read_files  # so Write may replace it
    past = run(ReadTool(tmp_path), {"file_path": "two.md", "offset": 5})
    assert "has 2 lines" in past.content
    assert "offset 5" in past.content


def test_read_records_the_stamp_by_real_path(tmp_path: Path) -> None:
    target = tmp_path / "real.md"
    target.write_text("hello\n")
    (tmp_path / "link.md").symlink_to(target)
    context = ToolContext()
    run(ReadTool(tmp_path), {"file_path": str(tmp_path / "link.md")}, context)
    st = os.stat(target)
    assert context.read_files == {
        os.path.realpath(target): FileStamp(mtime_ns=st.st_mtime_ns, size=st.st_size)
    }


def test_read_expands_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "h.md").write_text("home\n")
    assert run(ReadTool("/"), {"file_path": "~/h.md"}).content == "     1\thome"


def test_read_errors(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ToolError, match="does not exist"):
        run(ReadTool(tmp_path), {"file_path": "missing.md"})
    with pytest.raises(ToolError, match="is a directory"):
        run(ReadTool(tmp_path), {"file_path": "."})
    with pytest.raises(ToolError, match="not a regular file"):
        run(ReadTool(tmp_path), {"file_path": "fifo"})


# Write


def test_write_creates_file_and_parents(tmp_path: Path) -> None:
    out = run(WriteTool(tmp_path), {"file_path": "a/b/new.md", "content": "hi\n"})
    target = tmp_path / "a" / "b" / "new.md"
    assert out == ToolOutput(content=f"Created {target}", written=target)
    assert target.read_text() == "hi\n"
    up = run(WriteTool(tmp_path / "a"), {"file_path": "../up.md", "content": "x"})
    assert up.written == tmp_path / "up.md"  # relative to the tool's cwd, normalised


def test_write_over_unread_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "old.md").write_text("old\n")
    with pytest.raises(ToolError, match="Read it first"):
        run(WriteTool(tmp_path), {"file_path": "old.md", "content": "new\n"})
    assert (tmp_path / "old.md").read_text() == "old\n"


def test_write_after_read_updates(tmp_path: Path) -> None:
    target = tmp_path / "old.md"
    target.write_text("old\n")
    context = ToolContext()
    run(ReadTool(tmp_path), {"file_path": "old.md"}, context)
    out = run(WriteTool(tmp_path), {"file_path": "old.md", "content": "new\n"}, context)
    assert out == ToolOutput(content=f"Updated {target}", written=target)
    assert target.read_text() == "new\n"
    again = run(WriteTool(tmp_path), {"file_path": "old.md", "content": "newer\n"}, context)
    assert again.content == f"Updated {target}"  # our own write counts as seen


def test_write_refuses_a_file_changed_since_read(tmp_path: Path) -> None:
    target = tmp_path / "old.md"
    target.write_text("old\n")
    context = ToolContext()
    run(ReadTool(tmp_path), {"file_path": "old.md"}, context)
    touch_later(target)
    with pytest.raises(ToolError, match="changed on disk since it was Read"):
        run(WriteTool(tmp_path), {"file_path": "old.md", "content": "new\n"}, context)
    assert target.read_text() == "old\n"


def test_write_goes_through_atomic_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str | bytes]] = []

    def spy(path: str | os.PathLike[str], data: str | bytes) -> None:
        calls.append((os.fspath(path), data))
        atomic_write(path, data)

    monkeypatch.setattr("memdir.tools._files.atomic_write", spy)
    run(WriteTool(tmp_path), {"file_path": "n.md", "content": "x"})
    assert calls == [(str(tmp_path / "n.md"), "x")]


def test_failed_write_keeps_old_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(path: str | os.PathLike[str], data: str | bytes) -> None:
        raise StoreError(f"cannot write {path}: No space left on device")

    target = tmp_path / "old.md"
    target.write_text("old\n")
    context = ToolContext()
    run(ReadTool(tmp_path), {"file_path": "old.md"}, context)
    monkeypatch.setattr("memdir.tools._files.atomic_write", broken)
    with pytest.raises(ToolError, match="No space left"):
        run(WriteTool(tmp_path), {"file_path": "old.md", "content": "new\n"}, context)
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["old.md"]


def test_write_through_a_symlink_changes_its_target(tmp_path: Path) -> None:
    target = tmp_path / "real.md"
    target.write_text("old\n")
    link = tmp_path / "link.md"
    link.symlink_to(target)
    context = ToolContext()
    run(ReadTool(tmp_path), {"file_path": "link.md"}, context)
    out = run(WriteTool(tmp_path), {"file_path": "link.md", "content": "new\n"}, context)
    assert out.written == target  # the file that changed, so one file counts once
    assert link.is_symlink()
    assert target.read_text() == "new\n"


def test_write_to_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="is a directory"):
        run(WriteTool(tmp_path), {"file_path": str(tmp_path), "content": "x"})


# Edit


def _read(tmp_path: Path, name: str, text: str) -> ToolContext:
    (tmp_path / name).write_text(text)
    context = ToolContext()
    run(ReadTool(tmp_path), {"file_path": name}, context)
    return context


def test_edit_replaces_a_unique_string(tmp_path: Path) -> None:
    context = _read(tmp_path, "m.md", "alpha beta gamma\n")
    edit = {"file_path": "m.md", "old_string": "beta", "new_string": "BETA"}
    out = run(EditTool(tmp_path), edit, context)
    assert out == ToolOutput(
        content=f"Edited {tmp_path / 'm.md'}: replaced 1 occurrence", written=tmp_path / "m.md"
    )
    assert (tmp_path / "m.md").read_text() == "alpha BETA gamma\n"


def test_edit_refuses_an_ambiguous_string_and_replace_all_takes_all(tmp_path: Path) -> None:
    context = _read(tmp_path, "m.md", "x y x y x\n")
    edit = {"file_path": "m.md", "old_string": "x", "new_string": "z"}
    with pytest.raises(ToolError, match="occurs 3 times"):
        run(EditTool(tmp_path), edit, context)
    assert (tmp_path / "m.md").read_text() == "x y x y x\n"
    out = run(EditTool(tmp_path), {**edit, "replace_all": True}, context)
    assert out.content.endswith("replaced 3 occurrences")
    assert (tmp_path / "m.md").read_text() == "z y z y z\n"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("absent", "x", "was not found"),
        ("same", "same", "are the same"),
        ("", "x", "must not be empty"),
    ],
)
def test_edit_refusals(tmp_path: Path, old: str, new: str, message: str) -> None:
    context = _read(tmp_path, "m.md", "same text\n")
    with pytest.raises(ToolError, match=message):
        run(
            EditTool(tmp_path), {"file_path": "m.md", "old_string": old, "new_string": new}, context
        )
    assert (tmp_path / "m.md").read_text() == "same text\n"


def test_edit_needs_a_read_and_an_unchanged_file(tmp_path: Path) -> None:
    (tmp_path / "m.md").write_text("abc\n")
    edit = {"file_path": "m.md", "old_string": "b", "new_string": "B"}
    with pytest.raises(ToolError, match="has not been Read"):
        run(EditTool(tmp_path), edit)
    with pytest.raises(ToolError, match="does not exist"):
        run(EditTool(tmp_path), {**edit, "file_path": "none.md"})
    context = _read(tmp_path, "m.md", "abc\n")
    touch_later(tmp_path / "m.md")
    with pytest.raises(ToolError, match="changed on disk"):
        run(EditTool(tmp_path), edit, context)
    assert (tmp_path / "m.md").read_text() == "abc\n"


def test_edit_after_write_needs_no_new_read(tmp_path: Path) -> None:
    context = ToolContext()
    run(WriteTool(tmp_path), {"file_path": "m.md", "content": "one two\n"}, context)
    edit = {"file_path": "m.md", "old_string": "two", "new_string": "2"}
    run(EditTool(tmp_path), edit, context)
    run(EditTool(tmp_path), {**edit, "old_string": "one", "new_string": "1"}, context)
    assert (tmp_path / "m.md").read_text() == "1 2\n"


def test_concurrent_edits_of_one_file_both_land(tmp_path: Path) -> None:
    context = _read(tmp_path, "m.md", "a\nb\n")
    tool = EditTool(tmp_path)

    async def both() -> None:
        await asyncio.gather(
            tool.run({"file_path": "m.md", "old_string": "a", "new_string": "A"}, context),
            tool.run({"file_path": "m.md", "old_string": "b", "new_string": "B"}, context),
        )

    asyncio.run(both())
    assert (tmp_path / "m.md").read_text() == "A\nB\n"


def test_edit_keeps_crlf_line_endings(tmp_path: Path) -> None:
    (tmp_path / "w.md").write_bytes(b"one\r\ntwo\r\n")
    context = ToolContext()
    run(ReadTool(tmp_path), {"file_path": "w.md"}, context)
    edit = {"file_path": "w.md", "old_string": "one\ntwo", "new_string": "1\n2"}
    run(EditTool(tmp_path), edit, context)
    assert (tmp_path / "w.md").read_bytes() == b"1\r\n2\r\n"


def test_edit_refuses_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_bytes(b"a\xffb\n")
    context = ToolContext()
    run(ReadTool(tmp_path), {"file_path": "b.md"}, context)
    with pytest.raises(ToolError, match="not UTF-8"):
        run(
            EditTool(tmp_path), {"file_path": "b.md", "old_string": "a", "new_string": "c"}, context
        )


# Input checking, all tools


@dataclass(frozen=True)
class Bad:
    tool: type[Any]
    tool_input: Any
    message: str


EDIT = {"file_path": "a.md", "old_string": "x", "new_string": "y"}
BAD_INPUTS = [
    Bad(ReadTool, ["a.md"], "must be a JSON object"),
    Bad(ReadTool, None, "must be a JSON object"),
    Bad(ReadTool, {}, "missing required parameter 'file_path'"),
    Bad(ReadTool, {"file_path": 3}, "'file_path' must be a string"),
    Bad(ReadTool, {"file_path": ""}, "'file_path' must not be empty"),
    Bad(ReadTool, {"file_path": "a\0b"}, "NUL"),
    Bad(ReadTool, {"file_path": "a.md", "pages": "1"}, "unknown parameter 'pages'"),
    Bad(ReadTool, {"file_path": "a.md", "offset": 0}, "'offset' must be at least 1"),
    Bad(ReadTool, {"file_path": "a.md", "limit": -5}, "'limit' must be at least 1"),
    Bad(ReadTool, {"file_path": "a.md", "limit": "10"}, "'limit' must be an integer"),
    Bad(ReadTool, {"file_path": "a.md", "offset": True}, "'offset' must be an integer"),
    Bad(ReadTool, {"file_path": "a.md", "limit": 2.5}, "'limit' must be an integer"),
    Bad(ReadTool, {1: "x", "file_path": "a.md"}, "unknown parameter 1"),
    Bad(WriteTool, {"file_path": "a.md"}, "missing required parameter 'content'"),
    Bad(WriteTool, {"file_path": "a.md", "content": None}, "missing required parameter"),
    Bad(WriteTool, {"file_path": "a.md", "content": b"x"}, "'content' must be a string"),
    Bad(EditTool, {**EDIT, "old_string": 1}, "'old_string' must be a string"),
    Bad(EditTool, {"file_path": "a.md", "old_string": "x"}, "'new_string'"),
    Bad(EditTool, {**EDIT, "replace_all": "yes"}, "'replace_all' must be a boolean"),
    Bad(GrepTool, {}, "missing required parameter 'pattern'"),
    Bad(GrepTool, {"pattern": "x", "output_mode": "lines"}, "'output_mode' must be one of"),
    Bad(GrepTool, {"pattern": "x", "-A": -1}, "'-A' must be at least 0"),
    Bad(GrepTool, {"pattern": "x", "head_limit": 0}, "'head_limit' must be at least 1"),
    Bad(GrepTool, {"pattern": "x", "type": "rust"}, "'type' must be one of"),
    Bad(GrepTool, {"pattern": "x", "-i": "true"}, "'-i' must be a boolean"),
    Bad(GrepTool, {"pattern": "x", "offset": 1}, "unknown parameter 'offset'"),
    Bad(GrepTool, {"pattern": ["x"]}, "'pattern' must be a string"),
    Bad(GlobTool, {"pattern": 5}, "'pattern' must be a string"),
    Bad(GlobTool, {"pattern": "*", "path": ""}, "'path' must not be empty"),
    Bad(GlobTool, {"pattern": "*", "recursive": True}, "unknown parameter"),
    Bad(BashTool, {}, "missing required parameter 'command'"),
    Bad(BashTool, {"command": ""}, "'command' must not be empty"),
    Bad(BashTool, {"command": "ls", "timeout": 0}, "'timeout' must be at least 1"),
    Bad(BashTool, {"command": "ls", "timeout": 600_001}, "at most 600000"),
    Bad(BashTool, {"command": "ls", "timeout": "100"}, "'timeout' must be an integer"),
    Bad(BashTool, {"command": "ls", "run_in_background": True}, "unknown parameter"),
    Bad(BashTool, "ls", "must be a JSON object"),
]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=lambda c: f"{c.tool.__name__}-{c.message}")
def test_malformed_input_is_a_tool_error(tmp_path: Path, case: Bad) -> None:
    (tmp_path / "a.md").write_text("x\n")
    tool = case.tool(tmp_path)
    with pytest.raises(ToolError) as caught:
        run(tool, case.tool_input)
    message = str(caught.value)
    assert message.startswith(f"{tool.name}: ")
    assert case.message in message
    assert "\n" not in message


# builtin_tools


def test_builtin_tools_are_claude_codes_six_in_order(tmp_path: Path) -> None:
    tools = builtin_tools(tmp_path)
    assert [tool.name for tool in tools] == ["Read", "Write", "Edit", "Grep", "Glob", "Bash"]
    for tool in tools:
        assert isinstance(tool, Tool)
        definition = tool.definition()
        assert set(definition) == {"name", "description", "input_schema"}
        assert definition["name"] == tool.name
        assert definition["description"].strip()
        schema: Mapping[str, Any] = definition["input_schema"]
        assert schema["type"] == "object"
        assert schema["additionalProperties"] is False
        assert set(schema["required"]) <= set(schema["properties"])
        for spec in schema["properties"].values():
            assert spec["type"] in {"string", "integer", "boolean"}
            assert spec["description"].strip()
        assert json.loads(json.dumps(definition)) == definition
        schema["required"].append("changed by a caller")  # a copy: ours stays as it was
        assert "changed by a caller" not in tool.definition()["input_schema"]["required"]


def test_the_folded_index_the_agent_was_shown_is_never_written_back(tmp_path: Path) -> None:
    """The memory agent sees MEMORY.md with its pointer lines folded into one line; a
    Write (or Edit) that would put that line in the index is refused and the pointers
    stay, while an Edit of the index's real lines goes through."""
    from memdir.extract._prompts import _ELISION
    from memdir.tools import memory_write_guard

    memory = tmp_path / "memory"
    memory.mkdir()
    index = memory / "MEMORY.md"
    pointers = "".join(f"- [Fact {i}](fact-{i}.md) — fact {i}\n" for i in range(3))
    index.write_text(f"# Memory\n\n{pointers}")
    context = ToolContext(write_guard=memory_write_guard(memory))
    shown = (
        "# Memory\n\n"
        + _ELISION.format(count=2, lines="lines")
        + "\n- [Fact 2](fact-2.md) — fact 2\n"
    )
    run(ReadTool(memory), {"file_path": str(index)}, context)

    with pytest.raises(ToolError, match="pointer lines folded"):
        run(WriteTool(memory), {"file_path": str(index), "content": shown}, context)
    assert index.read_text() == f"# Memory\n\n{pointers}"

    new = "- [Fact 3](fact-3.md) — fact 3"
    old = "- [Fact 2](fact-2.md) — fact 2"
    edit = {"file_path": str(index), "old_string": old, "new_string": f"{old}\n{new}"}
    run(EditTool(memory), edit, context)
    assert index.read_text() == f"# Memory\n\n{pointers}{new}\n"


# The index's lock


def index_lock_held(path: str | os.PathLike[str]) -> bool:
    """Whether another holder has ``path``'s cross-process lock right now."""
    try:
        with file_lock(path, timeout=0):
            return False
    except StoreError:
        return True


def spy_on_index_writes(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record, for each write of a ``MEMORY.md``, whether its lock was held meanwhile."""
    held: list[bool] = []

    def spy(path: str | os.PathLike[str], data: str | bytes) -> None:
        if Path(path).name == "MEMORY.md":
            held.append(index_lock_held(path))
        atomic_write(path, data)

    monkeypatch.setattr("memdir.tools._files.atomic_write", spy)
    return held


def memory_context(root: Path) -> ToolContext:
    return ToolContext(memory_files=MemoryFiles(memory_dir=MemoryDir(root), format="2.1.88"))


def test_write_and_edit_of_the_index_hold_its_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # forget and undo rewrite the index under this lock: a Write or Edit that checked
    # the index unchanged and then wrote it outside the lock could undo their change.
    held = spy_on_index_writes(monkeypatch)
    context = memory_context(tmp_path)
    index = tmp_path / "MEMORY.md"
    run(WriteTool(tmp_path), {"file_path": str(index), "content": "- [a](a.md) — a\n"}, context)
    edit = {"file_path": str(index), "old_string": "— a", "new_string": "— b"}
    run(EditTool(tmp_path), edit, context)
    run(WriteTool(tmp_path), {"file_path": str(tmp_path / "a.md"), "content": "a\n"}, context)
    assert held == [True, True]
    assert not index_lock_held(index)  # and let go after


def test_a_plain_write_of_a_memory_md_elsewhere_leaves_no_state_folder(tmp_path: Path) -> None:
    run(WriteTool(tmp_path), {"file_path": "MEMORY.md", "content": "notes\n"})
    assert sorted(os.listdir(tmp_path)) == ["MEMORY.md"]


def test_the_index_changed_by_another_process_since_read_is_refused(tmp_path: Path) -> None:
    index = tmp_path / "MEMORY.md"
    index.write_text("- [a](a.md) — a\n- [b](b.md) — b\n")
    context = memory_context(tmp_path)
    run(ReadTool(tmp_path), {"file_path": str(index)}, context)
    with file_lock(index):  # as forget does it
        atomic_write(index, "- [b](b.md) — b\n")
    write = {"file_path": str(index), "content": "- [a](a.md) — a\n- [b](b.md) — b\n- [c](c.md)\n"}
    with pytest.raises(ToolError, match="changed on disk since it was Read; Read it again"):
        run(WriteTool(tmp_path), write, context)
    assert index.read_text() == "- [b](b.md) — b\n"  # the forgotten line stays gone


def test_write_refuses_to_bring_back_a_file_deleted_since_read(tmp_path: Path) -> None:
    target = tmp_path / "a.md"
    target.write_text("old\n")
    context = ToolContext()
    run(ReadTool(tmp_path), {"file_path": "a.md"}, context)
    target.unlink()  # forgotten meanwhile
    with pytest.raises(ToolError, match="deleted since it was Read; Read it again"):
        run(WriteTool(tmp_path), {"file_path": "a.md", "content": "new\n"}, context)
    assert not target.exists()
    # Read again (and seen missing), it may be created anew.
    with pytest.raises(ToolError, match="does not exist"):
        run(ReadTool(tmp_path), {"file_path": "a.md"}, context)
    run(WriteTool(tmp_path), {"file_path": "a.md", "content": "new\n"}, context)
    assert target.read_text() == "new\n"
