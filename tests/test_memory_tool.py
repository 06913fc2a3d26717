"""The client-side ``memory`` tool on a memdir memory directory, and its permission check."""

from __future__ import annotations

import asyncio
import os
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memdir.memory_tool import MEMORY_TOOL_TYPE, MemoryTool, memory_tool_decision
from memdir.tools._base import Tool, ToolContext, ToolError, ToolOutput
from tests.permissions.test_gate import ANTHROPIC_KEY, HOSTILE_PATHS, tree

__all__ = ["tree"]  # the fixture, shared with the permission gate's tests


def call(tool: MemoryTool, tool_input: Any, context: ToolContext | None = None) -> ToolOutput:
    return asyncio.run(tool.run(tool_input, context if context is not None else ToolContext()))


def error(tool: MemoryTool, tool_input: Any) -> str:
    with pytest.raises(ToolError) as info:
        call(tool, tool_input)
    return str(info.value)


@pytest.fixture
def mem(tmp_path: Path) -> Path:
    memory = tmp_path / "memory"
    (memory / "team").mkdir(parents=True)
    (memory / "notes.md").write_text("alpha\nbeta\ngamma\n")
    return memory


# definition


def test_definition_is_the_sdk_memory_tool(mem: Path) -> None:
    from anthropic.types.beta import BetaMemoryTool20250818Param

    sdk_type = typing.get_type_hints(BetaMemoryTool20250818Param)["type"]
    assert typing.get_args(sdk_type) == (MEMORY_TOOL_TYPE,)
    tool = MemoryTool(mem)
    assert tool.definition() == {"type": "memory_20250818", "name": "memory"}
    assert tool.name == "memory"
    assert isinstance(tool, Tool)


# view


def test_view_lists_two_levels_with_sizes_and_no_hidden(mem: Path) -> None:
    (mem / "team" / "deep" / "deeper").mkdir(parents=True)
    (mem / "team" / "deep" / "deeper" / "too_deep.md").write_text("x")
    (mem / "team" / "conventions.md").write_text("c" * 2048)
    (mem / "team" / "half.md").write_text("h" * 1536)
    (mem / "team" / "empty.md").write_text("")
    (mem / ".hidden.md").write_text("h")
    (mem / "team" / ".notes.md.lock").write_text("")
    os.mkfifo(mem / "team" / "pipe")  # neither a file nor a folder: not listed
    out = call(MemoryTool(mem), {"command": "view", "path": "/memories"}).content
    lines = out.splitlines()
    assert lines[0] == (
        "Here're the files and directories up to 2 levels deep in /memories, "
        "excluding hidden items:"
    )
    entries = [line.split("\t") for line in lines[1:]]
    paths = [path for _size, path in entries]
    assert paths == [
        "/memories",
        "/memories/notes.md",
        "/memories/team/",
        "/memories/team/conventions.md",
        "/memories/team/deep/",
        "/memories/team/empty.md",
        "/memories/team/half.md",
    ]
    sizes = {path: size for size, path in entries}
    # The SDK's sizes: a whole number of units has no decimals.
    assert sizes["/memories/notes.md"] == "17B"
    assert sizes["/memories/team/conventions.md"] == "2K"
    assert sizes["/memories/team/half.md"] == "1.5K"
    assert sizes["/memories/team/empty.md"] == "0B"


def test_view_of_a_subfolder_and_a_missing_root(tmp_path: Path, mem: Path) -> None:
    (mem / "team" / "a.md").write_text("a")
    out = call(MemoryTool(mem), {"command": "view", "path": "/memories/team/"}).content
    assert out.splitlines()[2] == "1B\t/memories/team/a.md"
    empty = MemoryTool(tmp_path / "not-yet")
    assert call(empty, {"command": "view", "path": "/memories"}).content == (
        "Here're the files and directories up to 2 levels deep in /memories, "
        "excluding hidden items:\n0B\t/memories"
    )
    assert not (tmp_path / "not-yet").exists()


def test_view_file_numbers_lines(mem: Path) -> None:
    out = call(MemoryTool(mem), {"command": "view", "path": "/memories/notes.md"}).content
    assert out == (
        "Here's the content of /memories/notes.md with line numbers:\n"
        "     1\talpha\n     2\tbeta\n     3\tgamma"
    )


@pytest.mark.parametrize(
    ("view_range", "shown"),
    [([2, 3], ["     2\tbeta", "     3\tgamma"]), ([2, -1], ["     2\tbeta", "     3\tgamma"]),
     ([1, 1], ["     1\talpha"]), ([3, 99], ["     3\tgamma"])],
)  # fmt: skip
def test_view_range(mem: Path, view_range: list[int], shown: list[str]) -> None:
    tool_input = {"command": "view", "path": "/memories/notes.md", "view_range": view_range}
    assert call(MemoryTool(mem), tool_input).content.splitlines()[1:] == shown


@pytest.mark.parametrize(
    ("view_range", "shown"),
    [([0, 2], ["     1\talpha", "     2\tbeta"]), ([-5, 1], ["     1\talpha"]),
     ([4, 5], []), ([99, -1], []), ([3, 2], []), ([2, -3], []), ([1, 0], [])],
)  # fmt: skip
def test_an_out_of_range_view_range_is_clamped(
    mem: Path, view_range: list[int], shown: list[str]
) -> None:
    # As the SDK does: the start is at least 1, the end at most the last line, and a range
    # that ends before it starts shows nothing; none of these is an error.
    tool_input = {"command": "view", "path": "/memories/notes.md", "view_range": view_range}
    out = call(MemoryTool(mem), tool_input).content
    assert out.split("\n")[0] == "Here's the content of /memories/notes.md with line numbers:"
    assert out.split("\n")[1:] == (shown or [""])


@pytest.mark.parametrize("view_range", [[1], [1, 2, 3], "1-2", [1, True], [1.0, 2]])
def test_a_malformed_view_range_is_refused(mem: Path, view_range: object) -> None:
    tool_input = {"command": "view", "path": "/memories/notes.md", "view_range": view_range}
    assert "view_range" in error(MemoryTool(mem), tool_input)


def test_view_missing_and_empty(mem: Path) -> None:
    tool = MemoryTool(mem)
    assert error(tool, {"command": "view", "path": "/memories/nope.md"}) == (
        "The path /memories/nope.md does not exist. Please provide a valid path."
    )
    (mem / "empty.md").write_text("")
    assert call(tool, {"command": "view", "path": "/memories/empty.md"}).content == (
        "Here's the content of /memories/empty.md with line numbers:\n"
    )


def test_view_refuses_a_file_past_the_line_limit(mem: Path) -> None:
    (mem / "long.md").write_text("\n" * 1_000_000)
    assert error(MemoryTool(mem), {"command": "view", "path": "/memories/long.md"}) == (
        "File /memories/long.md exceeds maximum line limit of 999,999 lines."
    )


def test_run_sync_needs_no_event_loop_nor_context(mem: Path) -> None:
    # The SDK's synchronous tool runner calls the tool in its own thread, off any loop.
    tool = MemoryTool(mem)
    out = tool.run_sync({"command": "view", "path": "/memories/notes.md", "view_range": [3, 3]})
    assert out.content.endswith("\n     3\tgamma")
    with pytest.raises(ToolError, match="unknown command"):
        tool.run_sync({"command": "format"})
    with pytest.raises(ToolError, match="JSON object"):
        tool.run_sync(["view"])


# create


def test_create_makes_parents(mem: Path) -> None:
    tool_input = {"command": "create", "path": "/memories/a/b/c.md", "file_text": "hello\n"}
    out = call(MemoryTool(mem), tool_input)
    assert out.content == "File created successfully at: /memories/a/b/c.md"
    assert out.written == mem / "a" / "b" / "c.md"
    assert (mem / "a" / "b" / "c.md").read_text() == "hello\n"


def test_create_refuses_an_existing_file_and_the_root(mem: Path) -> None:
    tool = MemoryTool(mem)
    msg = error(tool, {"command": "create", "path": "/memories/notes.md", "file_text": "x"})
    assert msg == "File /memories/notes.md already exists"
    assert (mem / "notes.md").read_text() == "alpha\nbeta\ngamma\n"
    for root in ("/memories", "/memories/", "/memories/./"):
        msg = error(tool, {"command": "create", "path": root, "file_text": "x"})
        assert "/memories is the memory directory itself" in msg
    assert "'file_text'" in error(tool, {"command": "create", "path": "/memories/n.md"})


# str_replace


def test_str_replace_edits_and_shows_the_change(mem: Path) -> None:
    tool_input = {
        "command": "str_replace",
        "path": "/memories/notes.md",
        "old_str": "beta",
        "new_str": "BETA",
    }
    out = call(MemoryTool(mem), tool_input)
    assert (mem / "notes.md").read_text() == "alpha\nBETA\ngamma\n"
    assert out.content == (
        "The memory file has been edited. Here is the snippet showing the change "
        "(with line numbers):\n     1\talpha\n     2\tBETA\n     3\tgamma"
    )
    assert out.written == mem / "notes.md"


@pytest.mark.parametrize(
    ("old", "expected"),
    [("delta", "No replacement was performed, old_str `delta` did not appear verbatim in "
               "/memories/notes.md."),
     ("a\n", "No replacement was performed. Multiple occurrences of old_str `a\n` in lines: "
             "1, 2, 3. Please ensure it is unique")],
)  # fmt: skip
def test_str_replace_needs_exactly_one_match(mem: Path, old: str, expected: str) -> None:
    tool_input = {"command": "str_replace", "path": "/memories/notes.md", "old_str": old}
    assert error(MemoryTool(mem), {**tool_input, "new_str": "x"}) == expected
    assert (mem / "notes.md").read_text() == "alpha\nbeta\ngamma\n"


def test_str_replace_missing_file_and_empty_old(mem: Path) -> None:
    tool = MemoryTool(mem)
    tool_input = {"command": "str_replace", "path": "/memories/nope.md", "old_str": "a"}
    assert error(tool, {**tool_input, "new_str": "b"}) == (
        "The path /memories/nope.md does not exist. Please provide a valid path."
    )
    tool_input = {"command": "str_replace", "path": "/memories/notes.md", "old_str": ""}
    assert "must not be empty" in error(tool, {**tool_input, "new_str": "b"})
    not_a_file = error(tool, {**tool_input, "path": "/memories/team", "old_str": "a"})
    assert not_a_file == "The path /memories/team is not a file."
    for root in ("/memories", "/memories/"):
        root_input = {**tool_input, "path": root, "old_str": "a"}
        assert error(tool, root_input) == "The path /memories is not a file."


# insert


@pytest.mark.parametrize(
    ("line", "expected"),
    [(0, "new\nalpha\nbeta\ngamma\n"), (2, "alpha\nbeta\nnew\ngamma\n"),
     (3, "alpha\nbeta\ngamma\nnew\n")],
)  # fmt: skip
def test_insert(mem: Path, line: int, expected: str) -> None:
    tool_input = {
        "command": "insert",
        "path": "/memories/notes.md",
        "insert_line": line,
        "insert_text": "new\n",
    }
    out = call(MemoryTool(mem), tool_input)
    assert (mem / "notes.md").read_text() == expected
    assert out.content == "The file /memories/notes.md has been edited."


@pytest.mark.parametrize("line", [-1, 4, 100, True, "1"])
def test_insert_out_of_range(mem: Path, line: object) -> None:
    tool_input = {
        "command": "insert",
        "path": "/memories/notes.md",
        "insert_line": line,
        "insert_text": "x",
    }
    msg = error(MemoryTool(mem), tool_input)
    if isinstance(line, int) and not isinstance(line, bool):
        assert msg == (
            f"Invalid `insert_line` parameter: {line}. It should be within the range [0, 3]."
        )
    assert "insert_line" in msg
    assert (mem / "notes.md").read_text() == "alpha\nbeta\ngamma\n"


def test_insert_missing_file_a_folder_and_the_root(mem: Path) -> None:
    tool_input = {"command": "insert", "path": "/memories/no.md", "insert_line": 0}
    assert error(MemoryTool(mem), {**tool_input, "insert_text": "x"}) == (
        "The path /memories/no.md does not exist. Please provide a valid path."
    )
    for path, shown in [("/memories/team", "/memories/team"), ("/memories", "/memories")]:
        folder = {**tool_input, "path": path, "insert_text": "x"}
        assert error(MemoryTool(mem), folder) == f"The path {shown} is not a file."


def test_concurrent_inserts_are_all_kept(mem: Path) -> None:
    tool = MemoryTool(mem)

    async def go() -> None:
        await asyncio.gather(
            *(
                tool.run(
                    {
                        "command": "insert",
                        "path": "/memories/notes.md",
                        "insert_line": 0,
                        "insert_text": f"line {i}",
                    },
                    ToolContext(),
                )
                for i in range(12)
            )
        )

    asyncio.run(go())
    lines = (mem / "notes.md").read_text().splitlines()
    assert sorted(lines[:12]) == sorted(f"line {i}" for i in range(12))
    assert lines[12:] == ["alpha", "beta", "gamma"]


# delete


def test_delete_a_file_and_a_folder(mem: Path) -> None:
    tool = MemoryTool(mem)
    (mem / "team" / "t.md").write_text("t")
    assert call(tool, {"command": "delete", "path": "/memories/notes.md"}).content == (
        "Successfully deleted /memories/notes.md"
    )
    assert not (mem / "notes.md").exists()
    assert call(tool, {"command": "delete", "path": "/memories/team/"}).content == (
        "Successfully deleted /memories/team"
    )
    assert not (mem / "team").exists()
    assert mem.is_dir()


def test_delete_refuses_the_root_and_missing(mem: Path) -> None:
    tool = MemoryTool(mem)
    for root in ("/memories", "/memories/", "/memories//.", "/memories/./"):
        assert error(tool, {"command": "delete", "path": root}) == (
            "Cannot delete the /memories directory itself"
        )
    assert (mem / "notes.md").exists()
    assert error(tool, {"command": "delete", "path": "/memories/no.md"}) == (
        "The path /memories/no.md does not exist"
    )


def test_delete_a_link_removes_the_link_only(mem: Path) -> None:
    (mem / "sub").mkdir()
    (mem / "sub" / "kept.md").write_text("k")
    (mem / "link").symlink_to(mem / "sub")
    call(MemoryTool(mem), {"command": "delete", "path": "/memories/link"})
    assert not os.path.lexists(mem / "link")
    assert (mem / "sub" / "kept.md").read_text() == "k"


# rename


def test_rename_moves_into_a_new_folder(mem: Path) -> None:
    tool_input = {
        "command": "rename",
        "old_path": "/memories/notes.md",
        "new_path": "/memories/archive/2024/notes.md",
    }
    out = call(MemoryTool(mem), tool_input)
    assert out.content == (
        "Successfully renamed /memories/notes.md to /memories/archive/2024/notes.md"
    )
    assert not (mem / "notes.md").exists()
    assert (mem / "archive" / "2024" / "notes.md").read_text() == "alpha\nbeta\ngamma\n"


def test_rename_refuses_existing_destination_missing_source_and_root(mem: Path) -> None:
    tool = MemoryTool(mem)
    (mem / "other.md").write_text("other")
    rename = {
        "command": "rename",
        "old_path": "/memories/notes.md",
        "new_path": "/memories/other.md",
    }
    assert error(tool, rename) == "The destination /memories/other.md already exists"
    assert (mem / "other.md").read_text() == "other"
    team = error(tool, {**rename, "new_path": "/memories/team"})
    assert team == "The destination /memories/team already exists"
    gone = error(tool, {**rename, "old_path": "/memories/gone.md"})
    assert gone == "The path /memories/gone.md does not exist"
    root = error(tool, {**rename, "old_path": "/memories"})
    assert root == "Cannot rename the /memories directory itself"
    onto_root = error(tool, {**rename, "new_path": "/memories/"})
    assert onto_root == "The destination /memories already exists"
    assert "failed" in error(
        tool, {**rename, "old_path": "/memories/team", "new_path": "/memories/team/x"}
    )
    assert (mem / "notes.md").exists()


# credentials


def test_a_credential_is_refused_and_nothing_written(mem: Path) -> None:
    tool_input = {"command": "create", "path": "/memories/new/k.md", "file_text": ANTHROPIC_KEY}
    assert "credential" in error(MemoryTool(mem), tool_input)
    assert not (mem / "new").exists()
    # Allowed in private memory when the caller says so, never in team memory.
    allowing = MemoryTool(mem, allow_private_secrets=True)
    call(allowing, tool_input)
    assert (mem / "new" / "k.md").read_text() == ANTHROPIC_KEY
    team = {**tool_input, "path": "/memories/team/k.md"}
    assert "team memory" in error(allowing, team)
    assert not (mem / "team" / "k.md").exists()


def test_edits_and_moves_cannot_bring_a_credential_into_team(mem: Path) -> None:
    (mem / "team" / "t.md").write_text("key: sk-ant-api03-\n")
    strict = MemoryTool(mem, allow_private_secrets=True)
    edit = {"command": "str_replace", "path": "/memories/team/t.md", "old_str": "sk-ant-api03-"}
    assert "credential" in error(strict, {**edit, "new_str": ANTHROPIC_KEY})
    insert = {"command": "insert", "path": "/memories/team/t.md", "insert_line": 1}
    assert "credential" in error(strict, {**insert, "insert_text": ANTHROPIC_KEY})
    assert (mem / "team" / "t.md").read_text() == "key: sk-ant-api03-\n"
    (mem / "private").mkdir()
    (mem / "private" / "k.md").write_text(ANTHROPIC_KEY)
    for old, new in [("/memories/private/k.md", "/memories/team/k.md"),
                     ("/memories/private", "/memories/team/private")]:  # fmt: skip
        move = {"command": "rename", "old_path": old, "new_path": new}
        assert "credential" in error(strict, move)
    assert (mem / "private" / "k.md").exists()


def test_the_context_write_guard_is_asked(mem: Path) -> None:
    seen: list[tuple[Path, str]] = []

    def guard(target: Path, text: str) -> str | None:
        seen.append((target, text))
        return "refused: not today"

    tool_input = {"command": "create", "path": "/memories/x.md", "file_text": "hi"}
    with pytest.raises(ToolError, match="not today"):
        call(MemoryTool(mem), tool_input, ToolContext(write_guard=guard))
    assert seen == [(mem / "x.md", "hi")]
    assert not (mem / "x.md").exists()


# input


@pytest.mark.parametrize(
    "tool_input",
    [None, [], "view", {}, {"command": "format"}, {"command": "view"},
     {"command": "view", "path": 3}, {"command": "create", "path": "/memories/x", "file_text": 1}],
)  # fmt: skip
def test_bad_input_is_a_tool_error(mem: Path, tool_input: Any) -> None:
    error(MemoryTool(mem), tool_input)


# hostile paths


def snapshot(root: Path) -> dict[str, tuple[str, str | bytes]]:
    """Every entry under ``root`` except inside ``root/memory``, with its content."""
    memory = root / "memory"
    seen: dict[str, tuple[str, str | bytes]] = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if Path(folder, d) != memory]
        for name in [*dirs, *files]:
            path = Path(folder, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                seen[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                seen[rel] = ("dir", "")
            else:
                seen[rel] = ("file", path.read_bytes())
    seen["memory"] = ("link" if memory.is_symlink() else "dir" if memory.is_dir() else "?", "")
    return seen


COMMANDS: dict[str, Callable[[object], dict[str, object]]] = {
    "view": lambda p: {"command": "view", "path": p},
    "create": lambda p: {"command": "create", "path": p, "file_text": "hostile\n"},
    "str_replace": lambda p: {"command": "str_replace", "path": p, "old_str": "s", "new_str": "x"},
    "insert": lambda p: {"command": "insert", "path": p, "insert_line": 0, "insert_text": "x"},
    "delete": lambda p: {"command": "delete", "path": p},
    "rename_from": lambda p: {"command": "rename", "old_path": p, "new_path": "/memories/m.md"},
    "rename_to": lambda p: {
        "command": "rename",
        "old_path": "/memories/existing.md",
        "new_path": p,
    },
}


def virtual_forms() -> list[Any]:
    forms = [pytest.param(p, id=f"as-given-{p!r}") for p in HOSTILE_PATHS]
    forms += [
        pytest.param("/memories/" + p, id=f"under-{p!r}")
        for p in HOSTILE_PATHS
        if isinstance(p, str)
    ]
    return forms


def check_stays_inside(root: Path, command: str, path: object) -> ToolOutput | None:
    (root / "outside" / "canary.md").write_text("CANARY outside\n")
    before = snapshot(root)
    try:
        out: ToolOutput | None = call(MemoryTool(root / "memory"), COMMANDS[command](path))
    except ToolError:
        out = None
    assert snapshot(root) == before
    if out is not None:
        assert "CANARY" not in out.content
        assert "secret.txt" not in out.content
        assert str(root) not in out.content
    return out


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("path", virtual_forms())
def test_hostile_path_stays_inside(tree: Path, command: str, path: object) -> None:
    check_stays_inside(tree, command, path)


ESCAPES = [
    "/memories/../x", "/memories/../outside/secret.txt", "/memories/%2e%2e/x",
    "/memories/%2E%2E%2Fx", "/memories/a%2f..%2f..%2fx", "/memories\\..\\x", "/memories/a\\b",
    "/etc/passwd", "memories/x", "memories", "/memoriesx/y", "/memories..",
    "/memories/team/../../x", "/memories/a/../../outside/x", "/memories/x\0", "/memories/x\n.md",
    "/memories/.x.md.lock", "//memories/x", "/tmp/memories/x", "../memories/x",
    # symlinks inside the directory that lead out of it (the tree fixture's)
    "/memories/out_dir/x.md", "/memories/out_dir", "/memories/out_file.md", "/memories/dangling.md",
    "/memories/team/escape/x.md", "/memories/team/escape", "/memories/loop_a/x.md",
    "/memories/loop_b",
]  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("path", ESCAPES, ids=repr)
def test_escape_is_refused(tree: Path, command: str, path: str) -> None:
    with pytest.raises(ToolError) as info:
        call(MemoryTool(tree / "memory"), COMMANDS[command](path))
    assert str(tree) not in str(info.value)
    check_stays_inside(tree, command, path)


def test_a_relative_path_is_refused_with_a_hint(mem: Path) -> None:
    msg = error(MemoryTool(mem), {"command": "create", "path": "memories/x.md", "file_text": "x"})
    assert msg == "Path must start with /memories, got: memories/x.md"
    assert not (mem / "x.md").exists()


def test_deleting_a_folder_leaves_the_targets_of_its_links(tree: Path) -> None:
    check_stays_inside(tree, "delete", "/memories/team")
    assert not (tree / "memory" / "team").exists()
    assert (tree / "outside" / "secret.txt").read_text() == "s"


def test_listing_hides_links_that_lead_out(tree: Path) -> None:
    (tree / "memory" / "inner").mkdir()
    (tree / "memory" / "inner_link").symlink_to(tree / "memory" / "inner")
    out = call(MemoryTool(tree / "memory"), {"command": "view", "path": "/memories"}).content
    paths = {line.split("\t")[1] for line in out.splitlines()[1:]}
    assert paths == {
        "/memories",
        "/memories/existing.md",
        "/memories/inner/",
        "/memories/inner_link/",
        "/memories/team/",
    }


# the permission check


def test_decision_allows_views_and_inside_writes(tree: Path) -> None:
    memory = tree / "memory"
    for tool_input in [
        {"command": "view", "path": "/memories"},
        {"command": "view", "path": "/memories/existing.md", "view_range": [1, 2]},
        {"command": "create", "path": "/memories/a/b.md", "file_text": "x"},
        {"command": "str_replace", "path": "/memories/existing.md", "old_str": "a", "new_str": "b"},
        {"command": "insert", "path": "/memories/team/x.md", "insert_line": 0, "insert_text": "x"},
        {"command": "delete", "path": "/memories/existing.md"},
        {"command": "rename", "old_path": "/memories/existing.md", "new_path": "/memories/t/e.md"},
    ]:
        assert memory_tool_decision(tool_input, memory).allowed, tool_input


def test_decision_denies_outside_writes(tree: Path) -> None:
    memory = tree / "memory"
    for tool_input in [
        {"command": "view", "path": "/etc/passwd"},
        {"command": "view", "path": "/memories/../outside"},
        {"command": "create", "path": "/memories/out_dir/x.md", "file_text": "x"},
        {"command": "create", "path": "/memories", "file_text": "x"},
        {"command": "str_replace", "path": "/memories/out_file.md", "old_str": "s", "new_str": "t"},
        {"command": "insert", "path": "/tmp/x.md", "insert_line": 0, "insert_text": "x"},
        {"command": "delete", "path": "/memories/"},
        {"command": "rename", "old_path": "/memories/existing.md", "new_path": "/memories/../x"},
        {"command": "rename", "old_path": "/memories/out_dir", "new_path": "/memories/in"},
    ]:
        decision = memory_tool_decision(tool_input, memory)
        assert decision.behavior == "deny", tool_input
        assert decision.reason == "outside_memory_dir"
        assert decision.message is not None
        assert "/memories" in decision.message


@pytest.mark.parametrize("path", HOSTILE_PATHS, ids=repr)
def test_decision_denies_hostile_paths_as_given(tree: Path, path: object) -> None:
    tool_input = {"command": "create", "path": path, "file_text": "x"}
    assert memory_tool_decision(tool_input, tree / "memory").behavior == "deny"


def test_decision_denies_credentials_and_bad_input(tree: Path) -> None:
    memory = tree / "memory"
    create = {"command": "create", "path": "/memories/k.md", "file_text": ANTHROPIC_KEY}
    assert memory_tool_decision(create, memory).reason == "secret"
    assert memory_tool_decision(create, memory, allow_private_secrets=True).allowed
    team = {**create, "path": "/memories/team/k.md"}
    assert memory_tool_decision(team, memory, allow_private_secrets=True).reason == "secret"
    assert memory_tool_decision(None, memory).reason == "invalid_input"
    assert memory_tool_decision({"command": "rm"}, memory).reason == "invalid_input"
