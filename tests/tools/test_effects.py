"""What tool calls do, as values: each tool's declared effects, the table of host tool
shapes, and the one check for memory the host saved itself."""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any

import pytest

from memdir.messages import Message, ToolUseBlock
from memdir.tools import (
    MEMORY_COMMANDS,
    BashTool,
    DeclaresEffects,
    EditTool,
    GlobTool,
    GrepTool,
    Invalid,
    MemoryTool,
    ReadsPath,
    ReadTool,
    RunsCommand,
    WritesPath,
    WriteTool,
    builtin_tools,
    effects_of,
    host_wrote_memory,
    tool_call_effects,
    writes_into,
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    return folder


# each tool declares its effects


def test_every_shipped_tool_declares_its_effects(tmp_path: Path) -> None:
    tools = [*builtin_tools(tmp_path), MemoryTool(tmp_path / "memory")]
    assert all(isinstance(tool, DeclaresEffects) for tool in tools)


def test_file_tools_read_and_write_paths_against_their_own_folder(
    tmp_path: Path, home: Path
) -> None:
    cwd = str(tmp_path)
    assert ReadTool(tmp_path).effects({"file_path": "a.md"}) == (ReadsPath(f"{cwd}/a.md"),)
    write = {"file_path": "~/n.md", "content": "hello"}
    assert WriteTool(tmp_path).effects(write) == (WritesPath(f"{home}/n.md", "hello"),)
    edit = {"file_path": "/abs/x.md", "old_string": "a", "new_string": "b"}
    assert EditTool(tmp_path).effects(edit) == (WritesPath("/abs/x.md", "b"),)
    # ``..`` and symlinks are left for the containment check, which resolves them
    assert WriteTool(tmp_path).effects({"file_path": "m/../x"}) == (WritesPath(f"{cwd}/m/../x"),)


def test_searches_read_below_their_path(tmp_path: Path) -> None:
    cwd = str(tmp_path)
    assert GrepTool(tmp_path).effects({"pattern": "x"}) == (ReadsPath(f"{cwd}/."),)
    assert GlobTool(tmp_path).effects({"pattern": "*", "path": "/etc"}) == (ReadsPath("/etc"),)
    # A pattern's leading folder is where Glob walks from: it reads there too.
    assert GlobTool(tmp_path).effects({"pattern": "ssh/*", "path": "/etc"}) == (
        ReadsPath("/etc"),
        ReadsPath("/etc/ssh"),
    )
    assert GlobTool(tmp_path).effects({"pattern": "/var/log/*.log"}) == (
        ReadsPath(f"{cwd}/."),
        ReadsPath("/var/log"),
    )


def test_bash_runs_its_command(tmp_path: Path) -> None:
    assert BashTool(tmp_path).effects({"command": "ls"}) == (RunsCommand("ls"),)
    assert BashTool(tmp_path).effects({"command": ["ls"]}) == (RunsCommand(None),)


@pytest.mark.parametrize("path", [None, 42, "", "x\0y", ["a.md"]])
def test_an_unusable_path_is_none(tmp_path: Path, path: object) -> None:
    assert WriteTool(tmp_path).effects({"file_path": path, "content": "x"}) == (
        WritesPath(None, "x"),
    )


def test_an_input_that_is_no_object_is_invalid(tmp_path: Path) -> None:
    for tool in [*builtin_tools(tmp_path), MemoryTool(tmp_path / "memory")]:
        (effect,) = tool.effects("a.md")  # type: ignore[attr-defined]
        assert isinstance(effect, Invalid)
        assert effect.reason == "invalid_input"


# the memory tool


def test_memory_commands_map_onto_the_memory_directory(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    tool = MemoryTool(memory)
    at, virtual = f"{memory}/n.md", "/memories/n.md"
    cases: list[tuple[dict[str, Any], tuple[object, ...]]] = [
        ({"command": "view", "path": "/memories"}, (ReadsPath(str(memory)),)),
        ({"command": "view", "path": virtual}, (ReadsPath(at),)),
        ({"command": "create", "path": virtual, "file_text": "t"}, (WritesPath(at, "t"),)),
        (
            {"command": "str_replace", "path": virtual, "old_str": "a", "new_str": "b"},
            (WritesPath(at, "b"),),
        ),
        (
            {"command": "insert", "path": virtual, "insert_line": 0, "insert_text": "i"},
            (WritesPath(at, "i"),),
        ),
        ({"command": "delete", "path": virtual}, (WritesPath(at),)),
        (
            {"command": "rename", "old_path": virtual, "new_path": "/memories/t/n.md"},
            (WritesPath(at), WritesPath(f"{memory}/t/n.md")),
        ),
    ]
    assert {case[0]["command"] for case in cases} == set(MEMORY_COMMANDS)
    for tool_input, expected in cases:
        assert tool.effects(tool_input) == expected, tool_input


def test_memory_paths_the_tool_refuses_make_the_call_invalid(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "out").symlink_to(tmp_path)
    tool = MemoryTool(memory)
    for tool_input in [
        {"command": "view", "path": "/etc/passwd"},
        {"command": "create", "path": "/memories/../x.md", "file_text": "x"},
        {"command": "create", "path": "/memories/out/x.md", "file_text": "x"},
        {"command": "create", "path": "/memories/.memdir/state.json", "file_text": "{}"},
        {"command": "delete", "path": "/memories"},
        {"command": "rename", "old_path": "/memories/a.md", "new_path": 7},
    ]:
        (effect,) = tool.effects(tool_input)
        assert isinstance(effect, Invalid), tool_input
        assert effect.reason == "outside_memory_dir"
        assert "/memories" in effect.message
    (effect,) = tool.effects({"command": "rm", "path": "/memories/a.md"})
    assert isinstance(effect, Invalid)
    assert effect.reason == "invalid_input"
    assert "unknown command 'rm'; use one of view, create, str_replace" in effect.message


# host calls, by name


def test_host_calls_are_known_by_the_shape_of_their_tool(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    assert tool_call_effects("Read", {"file_path": "a"}, cwd=tmp_path) == (
        ReadsPath(f"{tmp_path}/a"),
    )
    assert tool_call_effects("Bash", {"command": "ls"}) == (RunsCommand("ls"),)
    assert tool_call_effects("Write", {"file_path": "a", "content": "c"}) == (WritesPath("a", "c"),)
    create = {"command": "create", "path": "/memories/a.md", "file_text": "x"}
    assert tool_call_effects("memory", create, memory_dir=memory) == (
        WritesPath(f"{memory}/a.md", "x"),
    )
    # where /memories lives is unknown: the kind of effect is still known
    assert tool_call_effects("memory", create) == (WritesPath(None, "x"),)
    assert tool_call_effects("memory", {"command": "view", "path": "/memories"}) == (
        ReadsPath(None),
    )
    for unknown in ["NotebookEdit", "WebFetch", "write", "mcp__fs__write_file"]:
        assert tool_call_effects(unknown, {"file_path": "a"}) is None


def test_effects_of_asks_a_tool_that_declares_them_and_names_the_others(tmp_path: Path) -> None:
    class Declares:
        name = "Write"

        def effects(self, tool_input: object) -> tuple[ReadsPath, ...]:
            return (ReadsPath("/declared"),)

    class Named:
        name = "Write"

    tool_input = {"file_path": "/x", "content": "c"}
    assert effects_of(Declares(), tool_input) == (ReadsPath("/declared"),)
    assert effects_of(Named(), tool_input) == (WritesPath("/x", "c"),)
    assert effects_of("Write", tool_input) == (WritesPath("/x", "c"),)
    assert effects_of(object(), tool_input) is None


# the direct-write check


def said(*uses: tuple[str, dict[str, Any]], role: str = "assistant") -> Message:
    blocks = tuple(ToolUseBlock(id=f"t{i}", name=n, input=inp) for i, (n, inp) in enumerate(uses))
    return Message(role=role, content=blocks)  # type: ignore[arg-type]


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    folder = tmp_path / "memory"
    folder.mkdir()
    (folder / "notes.md").write_text("alpha\n")
    return folder


NOTES = "/memories/notes.md"
WRITES_TO_MEMORY: list[tuple[str, dict[str, Any]]] = [
    ("Write", {"file_path": "memory/user.md", "content": "x"}),
    ("Edit", {"file_path": "memory/notes.md", "old_string": "alpha", "new_string": "beta"}),
    ("memory", {"command": "create", "path": "/memories/a.md", "file_text": "x"}),
    ("memory", {"command": "str_replace", "path": NOTES, "old_str": "a", "new_str": "b"}),
    ("memory", {"command": "insert", "path": NOTES, "insert_line": 0, "insert_text": "x"}),
    ("memory", {"command": "delete", "path": NOTES}),
    ("memory", {"command": "rename", "old_path": NOTES, "new_path": "/memories/n.md"}),
]  # fmt: skip


@pytest.mark.parametrize("use", WRITES_TO_MEMORY, ids=lambda u: f"{u[0]}-{u[1].get('command')}")
def test_a_host_write_into_the_memory_directory_is_seen(
    tmp_path: Path, memory: Path, use: tuple[str, dict[str, Any]]
) -> None:
    messages = [Message.user("remember"), said(use), Message.assistant("saved")]
    assert host_wrote_memory(messages, memory, cwd=tmp_path)
    assert host_wrote_memory(messages, str(memory), cwd=str(tmp_path))


@pytest.mark.parametrize(
    "use",
    [
        ("memory", {"command": "view", "path": "/memories"}),
        ("memory", {"command": "view", "path": "/memories/notes.md"}),
        ("Write", {"file_path": "elsewhere/x.md", "content": "x"}),
        ("Write", {"file_path": "memory-evil/x.md", "content": "x"}),
        ("Edit", {"file_path": "memory/../x.md", "old_string": "a", "new_string": "b"}),
        ("Read", {"file_path": "memory/notes.md"}),
        ("Bash", {"command": "echo x > memory/x.md"}),
        ("NotebookEdit", {"notebook_path": "memory/n.ipynb", "new_source": "x"}),
        ("memory", {"command": "create", "path": "/memories/../x.md", "file_text": "x"}),
        ("memory", {"command": "create", "path": "/memories", "file_text": "x"}),
        ("Write", {"file_path": None, "content": "x"}),
    ],
    ids=repr,
)
def test_what_is_no_host_write_into_the_memory_directory(
    tmp_path: Path, memory: Path, use: tuple[str, dict[str, Any]]
) -> None:
    assert not host_wrote_memory([said(use)], memory, cwd=tmp_path)


def test_only_the_assistants_calls_count(tmp_path: Path, memory: Path) -> None:
    write = ("Write", {"file_path": str(memory / "x.md"), "content": "x"})
    assert not host_wrote_memory([said(write, role="user")], memory)
    assert host_wrote_memory([said(("Read", {"file_path": "a"}), write)], memory)
    assert not host_wrote_memory([], memory)


def test_relative_paths_are_the_hosts(
    tmp_path: Path, memory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write = said(("Write", {"file_path": "x.md", "content": "x"}))
    assert host_wrote_memory([write], memory, cwd=memory)
    assert not host_wrote_memory([write], memory, cwd=tmp_path)
    monkeypatch.chdir(memory)  # without a cwd: the process's, as everywhere in memdir
    assert host_wrote_memory([write], memory)


def test_a_host_on_another_machine_is_judged_as_text() -> None:
    # The queue's worker cannot resolve the host's paths: it compares them as text,
    # against the host's own cwd and memory directory, which need not exist here.
    root, cwd = "/home/host/.claude/projects/p/memory", "/home/host/p"

    def inside(path: str) -> bool:
        full = posixpath.normpath(posixpath.join(cwd, path))
        return full.startswith(root + "/")

    def wrote(name: str, tool_input: dict[str, Any]) -> bool:
        return writes_into([said((name, tool_input))], inside, memory_dir=root)

    assert wrote("Write", {"file_path": f"{root}/a.md", "content": "x"})
    assert wrote("Edit", {"file_path": "../.claude/projects/p/memory/a.md", "new_string": "x"})
    assert wrote("memory", {"command": "delete", "path": "/memories/a.md"})
    assert not wrote("memory", {"command": "view", "path": "/memories/a.md"})
    assert not wrote("Write", {"file_path": "a.md", "content": "x"})
    # the path is handed over as the host wrote it: ``~`` is the host's home, not ours
    seen: list[str] = []

    def record(path: str) -> bool:
        seen.append(path)
        return False

    writes_into([said(("Write", {"file_path": "~/x.md", "content": "x"}))], record)
    assert seen == ["~/x.md"]
