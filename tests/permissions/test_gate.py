"""The permission gate: what the memory agent may and may not do."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memdir.permissions import CanUseTool, PermissionDecision, auto_mem_can_use_tool
from memdir.telemetry import Event
from memdir.tools import (
    Effect,
    Invalid,
    MemoryTool,
    ReadsPath,
    RunsCommand,
    WritesPath,
    WriteTool,
)
from tests.tools.test_readonly import ALLOWED as READ_ONLY_COMMANDS
from tests.tools.test_readonly import DENIED as WRITING_COMMANDS

ANTHROPIC_KEY = "sk-ant-api03-" + "Zq7" * 31 + "AA"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp/memory (with team/), tmp/outside, symlinks both ways; HOME points at tmp/home."""
    memory = tmp_path / "memory"
    (memory / "team").mkdir(parents=True)
    (memory / "existing.md").write_text("---\nname: x\n---\nbody\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    (tmp_path / "memory-evil").mkdir()
    (memory / "out_dir").symlink_to(outside)
    (memory / "out_file.md").symlink_to(outside / "secret.txt")
    (memory / "dangling.md").symlink_to(outside / "not-yet.md")
    (memory / "team" / "escape").symlink_to(outside)
    (outside / "into_memory").symlink_to(memory)
    (memory / "loop_a").symlink_to(memory / "loop_b")
    (memory / "loop_b").symlink_to(memory / "loop_a")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return tmp_path


def decide(
    root: Path,
    tool: str,
    tool_input: Mapping[str, Any],
    *,
    sink: list[Event] | None = None,
    **options: Any,
) -> PermissionDecision:
    gate = auto_mem_can_use_tool(
        root / "memory", cwd=root, sink=sink.append if sink is not None else None, **options
    )
    return ask(gate, tool, tool_input)


def ask(gate: CanUseTool, tool: Any, tool_input: Any) -> PermissionDecision:
    async def go() -> PermissionDecision:
        return await gate(tool, tool_input)

    return asyncio.run(go())


HOSTILE_PATHS: list[object] = [
    # plain elsewhere
    "/etc/passwd", "/etc/cron.d/x", "/tmp/x.md", "/", "/root/.ssh/authorized_keys",
    "outside/x.md", "x.md", "./x.md", "memory-evil/x.md", "memory-evil", "memoryx.md",
    "memory.md", "memory_backup/x.md", "memory", "memory/", "memory/.", "./memory",
    # traversal
    "../x.md", "memory/../x.md", "memory/../outside/x.md", "memory/../../x.md",
    "memory/team/../../x.md", "memory/a/b/../../../x.md", "memory/./../x.md",
    "memory//..//x.md", "memory/../memory-evil/x.md", "memory/new/../../outside/x.md",
    "memory/team/../../../../../etc/passwd",
    # home
    "~/x.md", "~/memory/x.md", "~/../x.md", "~root/x.md", "~nobody/.bashrc", "~/.ssh/id_rsa",
    # symlinks out of the memory directory
    "memory/out_dir/x.md", "memory/out_dir/new/x.md", "memory/out_file.md",
    "memory/dangling.md", "memory/team/escape/x.md", "memory/out_dir/../x.md",
    "memory/loop_a/x.md", "memory/loop_b",
    # unicode look-alikes and encodings that are not the memory directory
    "memory\u2215x.md", "mem\u043ery/x.md", "\uff4demory/x.md", "memory\uff0fx.md",
    "memory%2fx.md", "memory%2f..%2fx.md", "memory\\x.md", "memory\\..\\x.md",
    "MEMORY/x.md", "memory\u200b/x.md", " memory/x.md",
    # NUL and control characters
    "memory/x.md\0", "memory/\0/x.md", "\0", "memory/x\0/../../x.md",
    # not strings
    None, 42, 3.5, True, ["memory/x.md"], {"path": "memory/x.md"}, b"memory/x.md", "",
]  # fmt: skip


def test_at_least_60_hostile_paths() -> None:
    assert len(HOSTILE_PATHS) >= 60
    assert len({repr(p) for p in HOSTILE_PATHS}) == len(HOSTILE_PATHS)


@pytest.mark.parametrize("path", HOSTILE_PATHS, ids=repr)
@pytest.mark.parametrize("tool", ["Write", "Edit"])
def test_hostile_path_is_denied(tree: Path, tool: str, path: object) -> None:
    events: list[Event] = []
    tool_input = {"file_path": path, "content": "x", "old_string": "a", "new_string": "b"}
    decision = decide(tree, tool, tool_input, sink=events)
    assert decision.behavior == "deny"
    assert decision.reason == "outside_memory_dir"
    assert decision.message is not None
    assert str(tree / "memory") in decision.message
    assert [e.name for e in events] == ["permission.denied"]
    assert events[0].fields == {"tool_name": tool, "reason": "outside_memory_dir"}


INSIDE_PATHS = [
    "memory/x.md",
    "./memory/x.md",
    "memory/./x.md",
    "memory/new/deep/x.md",
    "memory/a/../x.md",
    "memory/team/conventions.md",
    "memory/existing.md",
    "outside/into_memory/x.md",  # a link from outside that lands inside
    "outside/../memory/x.md",
]


@pytest.mark.parametrize("path", INSIDE_PATHS)
@pytest.mark.parametrize("tool", ["Write", "Edit"])
def test_inside_paths_are_allowed(tree: Path, tool: str, path: str) -> None:
    tool_input = {"file_path": path, "content": "x", "old_string": "a", "new_string": "b"}
    assert decide(tree, tool, tool_input).behavior == "allow"


def test_absolute_inside_path_is_allowed(tree: Path) -> None:
    path = str(tree / "memory" / "user_role.md")
    assert decide(tree, "Write", {"file_path": path, "content": "x"}).allowed


def test_relative_paths_use_the_given_cwd(tree: Path) -> None:
    gate = auto_mem_can_use_tool(tree / "memory", cwd=tree / "memory")
    assert ask(gate, "Write", {"file_path": "x.md", "content": "x"}).allowed
    gate = auto_mem_can_use_tool(tree / "memory", cwd=tree / "outside")
    assert not ask(gate, "Write", {"file_path": "x.md", "content": "x"}).allowed


@pytest.mark.parametrize("tool", ["Read", "Grep", "Glob"])
def test_reading_is_allowed_anywhere(tree: Path, tool: str) -> None:
    assert decide(tree, tool, {"file_path": "/etc/passwd", "pattern": "x"}).allowed


@pytest.mark.parametrize(
    "tool", ["NotebookEdit", "WebFetch", "Task", "mcp__github__create_issue", "REPL", "write"]
)
def test_other_tools_are_denied(tree: Path, tool: str) -> None:
    decision = decide(tree, tool, {})
    assert decision.reason == "tool_not_allowed"
    assert decision.message is not None
    assert "Read" in decision.message
    assert str(tree / "memory") in decision.message


def test_always_allow_tools(tree: Path) -> None:
    assert decide(tree, "REPL", {"code": "x"}, always_allow_tools={"REPL"}).allowed
    assert not decide(tree, "REPL", {"code": "x"}).allowed


def test_tool_objects_are_accepted(tree: Path) -> None:
    class Named:
        name = "Read"

    gate = auto_mem_can_use_tool(tree / "memory", cwd=tree)
    assert ask(gate, Named(), {"file_path": "x"}).allowed


@pytest.mark.parametrize(
    ("command", "allowed"),
    [
        ("ls -la", True),
        ("cat MEMORY.md", True),
        ("grep -rn x outside", True),
        ("git log --oneline -5", True),
        ("rm -rf memory", False),
        ("echo x > memory/a.md", False),
        ("ls; rm x", False),
    ],
)
def test_bash_only_when_read_only(tree: Path, command: str, allowed: bool) -> None:
    decision = decide(tree, "Bash", {"command": command})
    assert decision.allowed is allowed
    if not allowed:
        assert decision.reason == "not_read_only"


@pytest.mark.parametrize("bad", [None, 1, ["ls"], {"command": "ls"}])
def test_bash_with_malformed_input_is_denied(tree: Path, bad: object) -> None:
    assert not decide(tree, "Bash", {"command": bad}).allowed


def test_non_mapping_input_is_denied(tree: Path) -> None:
    gate = auto_mem_can_use_tool(tree / "memory", cwd=tree)
    decision = ask(gate, "Write", "memory/x.md")
    assert decision.reason == "invalid_input"


# --- secrets -------------------------------------------------------------------------------


def test_secret_in_private_write_is_denied_by_default(tree: Path) -> None:
    events: list[Event] = []
    content = f"The deploy key is {ANTHROPIC_KEY}\n"
    decision = decide(
        tree, "Write", {"file_path": "memory/keys.md", "content": content}, sink=events
    )
    assert decision.reason == "secret"
    assert decision.message is not None
    assert "anthropic-api-key" in decision.message
    assert ANTHROPIC_KEY not in decision.message
    assert events[0].fields["reason"] == "secret"


def test_secret_in_private_write_allowed_when_asked(tree: Path) -> None:
    content = f"key {ANTHROPIC_KEY}"
    tool_input = {"file_path": "memory/keys.md", "content": content}
    assert decide(tree, "Write", tool_input, allow_private_secrets=True).allowed


def test_secret_in_team_write_is_always_denied(tree: Path) -> None:
    tool_input = {"file_path": "memory/team/keys.md", "content": f"key {ANTHROPIC_KEY}"}
    decision = decide(tree, "Write", tool_input, allow_private_secrets=True)
    assert decision.reason == "secret"
    assert decision.message is not None
    assert "team" in decision.message


def test_secret_added_by_edit_is_denied(tree: Path) -> None:
    tool_input = {
        "file_path": "memory/existing.md",
        "old_string": "body",
        "new_string": f"body {ANTHROPIC_KEY}",
    }
    assert decide(tree, "Edit", tool_input).reason == "secret"


def test_edit_that_removes_a_secret_is_allowed(tree: Path) -> None:
    (tree / "memory" / "leaky.md").write_text(f"key {ANTHROPIC_KEY}\n")
    tool_input = {
        "file_path": "memory/leaky.md",
        "old_string": ANTHROPIC_KEY,
        "new_string": "(in 1Password)",
    }
    assert decide(tree, "Edit", tool_input).allowed


def test_ordinary_memory_is_allowed(tree: Path) -> None:
    content = "---\nname: Role\ndescription: d\ntype: user\n---\nData scientist; SHA 3f2a9c1e.\n"
    assert decide(tree, "Write", {"file_path": "memory/user_role.md", "content": content}).allowed


# --- the shell tables, through the gate ------------------------------------------------------


# From the memory directory's parent a recursive grep of "." would walk into memdir's
# state: tests/permissions/test_state_rules.py has it refused.
@pytest.mark.parametrize("command", [c for c in READ_ONLY_COMMANDS if c != "grep -rn x ."])
def test_gate_allows_read_only_shell(tree: Path, command: str) -> None:
    assert decide(tree, "Bash", {"command": command}).allowed


@pytest.mark.parametrize("command", WRITING_COMMANDS)
def test_gate_denies_shell_that_could_write(tree: Path, command: str) -> None:
    events: list[Event] = []
    decision = decide(tree, "Bash", {"command": command}, sink=events)
    assert decision.reason == "not_read_only"
    assert events[0].fields == {"tool_name": "Bash", "reason": "not_read_only"}


def test_shell_tables_are_large_enough() -> None:
    assert len(WRITING_COMMANDS) >= 80
    for needed in (
        "ls -la",
        "cat MEMORY.md",
        "grep -rn x .",
        "find . -name '*.md'",
        "head -30 user_role.md",
        "wc -l user_role.md",
        "git log --oneline -5",
    ):
        assert needed in READ_ONLY_COMMANDS


def test_gate_understands_the_memory_tool(tree: Path) -> None:
    assert decide(tree, "memory", {"command": "view", "path": "/memories"}).allowed
    create = {"command": "create", "path": "/memories/notes.md", "file_text": "hello"}
    assert decide(tree, "memory", create).allowed
    escape = {"command": "create", "path": "/memories/../outside/x.md", "file_text": "x"}
    events: list[Event] = []
    decision = decide(tree, "memory", escape, sink=events)
    assert not decision.allowed
    assert events[0].fields["tool_name"] == "memory"
    leaked = {"command": "create", "path": "/memories/team/k.md", "file_text": f"k {ANTHROPIC_KEY}"}
    assert decide(tree, "memory", leaked, allow_private_secrets=True).reason == "secret"


# --- effects, not names ----------------------------------------------------------------------


@dataclass
class Declaring:
    """A tool known only by what it says a call does."""

    name: str
    declared: tuple[Effect, ...]

    def effects(self, tool_input: object) -> tuple[Effect, ...]:
        return self.declared


def test_the_gate_judges_what_a_call_does_not_its_name(tree: Path) -> None:
    gate = auto_mem_can_use_tool(tree / "memory", cwd=tree)
    inside, outside = str(tree / "memory" / "n.md"), str(tree / "outside" / "n.md")
    # a tool named like a reader that writes outside is refused as a write
    sneaky = Declaring("Read", (ReadsPath(inside), WritesPath(outside, "x")))
    assert ask(gate, sneaky, {}).reason == "outside_memory_dir"
    # a tool of any name that only reads, or writes inside, is allowed
    assert ask(gate, Declaring("Lookup", (ReadsPath("/etc/hosts"),)), {}).allowed
    assert ask(gate, Declaring("SaveNote", (WritesPath(inside, "note"),)), {}).allowed
    leak = Declaring("SaveNote", (WritesPath(inside, f"k {ANTHROPIC_KEY}"),))
    assert ask(gate, leak, {}).reason == "secret"
    runs = Declaring("Shell", (RunsCommand("rm -rf memory"),))
    assert ask(gate, runs, {}).reason == "not_read_only"
    assert ask(gate, Declaring("Shell", (RunsCommand("ls"),)), {}).allowed
    refused = Declaring("Anything", (Invalid("invalid_input", "no"),))
    assert ask(gate, refused, {}) == PermissionDecision(
        behavior="deny", message="no", reason="invalid_input"
    )


def test_memdirs_tools_are_judged_where_they_work(tree: Path) -> None:
    # A tool bound to the memory folder writes a relative path there, whatever the
    # gate's own cwd: the gate judges the place the tool will really write.
    gate = auto_mem_can_use_tool(tree / "memory", cwd=tree / "outside")
    tool_input = {"file_path": "x.md", "content": "x"}
    assert ask(gate, WriteTool(tree / "memory"), tool_input).allowed
    assert not ask(gate, WriteTool(tree / "outside"), tool_input).allowed
    assert not ask(gate, "Write", tool_input).allowed  # by name: against the gate's cwd
    memory = MemoryTool(tree / "memory")
    view = {"command": "view", "path": "/memories"}
    assert ask(gate, memory, view).allowed
    create = {"command": "create", "path": "/memories/out_dir/x.md", "file_text": "x"}
    assert ask(gate, memory, create).reason == "outside_memory_dir"
    # the same tool over another folder writes outside this gate's memory
    elsewhere = MemoryTool(tree / "outside")
    create = {"command": "create", "path": "/memories/x.md", "file_text": "x"}
    assert ask(gate, elsewhere, create).reason == "outside_memory_dir"
