"""memdir's own state, and what links planted in the memory folder lead to, on every surface.

Each case of the attack report, tried through every tool surface that has the operation:
the memory tool (and its SDK, LangChain and pydantic-ai wrappers, each called as its
framework calls it), the OpenAI Agents host tools (Read, Write, Edit), and the memory
agent's own tools behind its permission gate (Read, Write, Grep with both engines, Glob,
read-only Bash). The folder holds state at the root and under ``team/``, a symlink
``x -> .memdir``, a hard link to an outside file, and a forgotten memory in the trash.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memdir.permissions import auto_mem_can_use_tool
from memdir.store import MemoryDir, file_lock, forget_memory
from memdir.tools import (
    BashTool,
    GlobTool,
    GrepTool,
    MemoryTool,
    ReadTool,
    ToolContext,
    ToolError,
    WriteTool,
    memory_write_guard,
)
from memdir.tools._search import find_rg

CURSOR = "CURSOR-SENTINEL"
FORGOTTEN = "FORGOTTEN-SENTINEL"
OUTSIDE = "OUTSIDE-SENTINEL"
LOCK_TEXT = "held by pid 4242\n"


@dataclass(frozen=True)
class Folder:
    memory: Path
    outside: Path
    project: Path


@pytest.fixture
def folder(tmp_path: Path) -> Folder:
    memory = tmp_path / "memory"
    outside = tmp_path / "outside"
    project = tmp_path / "project"
    for path in (memory / "team", outside, project):
        path.mkdir(parents=True)
    (memory / "MEMORY.md").write_text(
        f"- [Notes](notes.md) — notes\n- [Old](old.md) — {FORGOTTEN} project\n"
    )
    (memory / "notes.md").write_text("notes\n")
    (memory / "old.md").write_text("old\n")
    md = MemoryDir(memory)
    forget_memory(md, "old.md")  # the trash now holds the forgotten line
    (memory / ".memdir" / "state.json").write_text(json.dumps({"cursor": CURSOR}))
    (memory / "team" / "MEMORY.md").write_text("- [T](t.md) — team\n")
    with file_lock(memory / "team" / "MEMORY.md"):
        pass  # the lock file stays, as after any write of the team index
    (memory / "team" / ".memdir" / "MEMORY.md.lock").write_text(LOCK_TEXT)
    (memory / "x").symlink_to(".memdir")
    (outside / "secret.txt").write_text(OUTSIDE)
    os.link(outside / "secret.txt", memory / "hard.md")
    return Folder(memory=memory, outside=outside, project=project)


Outcome = tuple[bool, str]
"""Whether the call succeeded, and what the model was told."""


class Surface:
    """One tool surface; an operation it lacks is ``None``."""

    name = ""
    read: Callable[[str], Outcome] | None = None
    write: Callable[[str, str], Outcome] | None = None
    replace: Callable[[str, str], Outcome] | None = None
    delete: Callable[[str], Outcome] | None = None
    rename: Callable[[str, str], Outcome] | None = None
    search: Callable[[str], Outcome] | None = None


class CommandSurface(Surface):
    """A surface of the ``memory`` tool's commands: ``call`` runs one command."""

    def __init__(self, name: str, call: Callable[[dict[str, Any]], Outcome]) -> None:
        self.name = name
        self.call = call
        self.read = lambda rel: call({"command": "view", "path": f"/memories/{rel}"})
        self.write = lambda rel, text: call(
            {"command": "create", "path": f"/memories/{rel}", "file_text": text}
        )
        self.replace = lambda rel, text: call(
            {"command": "insert", "path": f"/memories/{rel}", "insert_line": 0,
             "insert_text": text}
        )  # fmt: skip
        self.delete = lambda rel: call({"command": "delete", "path": f"/memories/{rel}"})
        self.rename = lambda old, new: call(
            {"command": "rename", "old_path": f"/memories/{old}", "new_path": f"/memories/{new}"}
        )
        # The command's own way of finding text: listing folders, then viewing each file.
        self.search = lambda rel: _search_by_viewing(call, rel)


def _search_by_viewing(call: Callable[[dict[str, Any]], Outcome], rel: str) -> Outcome:
    ok, listing = call({"command": "view", "path": f"/memories/{rel}".rstrip("/")})
    found = [listing]
    for row in listing.splitlines()[1:]:
        virtual = row.split("\t", 1)[-1]
        if not virtual.endswith("/"):
            found.append(call({"command": "view", "path": virtual})[1])
    return ok, "\n".join(found)


def memory_tool_surface(memory: Path) -> CommandSurface:
    tool = MemoryTool(memory)

    def call(command: dict[str, Any]) -> Outcome:
        try:
            return True, tool.run_sync(command).content
        except ToolError as exc:
            return False, str(exc)

    return CommandSurface("memory", call)


def sdk_surface(memory: Path) -> Surface:
    pytest.importorskip("anthropic")
    from anthropic.lib.tools import ToolError as SDKToolError

    from memdir.integrations.anthropic_memory import MemdirMemoryTool

    tool = MemdirMemoryTool(memory)

    def call(command: dict[str, Any]) -> Outcome:
        try:
            return True, str(tool.call(command))
        except SDKToolError as exc:
            return False, str(exc.content)

    return CommandSurface("sdk", call)


def langchain_surface(memory: Path) -> Surface:
    pytest.importorskip("langchain_core")
    from memdir.integrations.langchain import langchain_memory_tool

    tool = langchain_memory_tool(memory)

    def call(command: dict[str, Any]) -> Outcome:
        message = tool.invoke({"type": "tool_call", "id": "c", "name": "memory", "args": command})
        return message.status != "error", str(message.content)

    return CommandSurface("langchain", call)


def pydantic_ai_surface(memory: Path) -> Surface:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai.exceptions import ModelRetry

    from memdir.integrations.pydantic_ai import MemdirCapability

    capability = MemdirCapability(memory, "offline", memory_tool=True)
    context = types.SimpleNamespace(conversation_id=None)

    def call(command: dict[str, Any]) -> Outcome:
        try:
            return True, asyncio.run(capability._memory_command(context, **command))  # type: ignore[arg-type]
        except (ModelRetry, Exception) as exc:
            return False, str(exc)

    return CommandSurface("pydantic_ai", call)


def openai_agents_surface(memory: Path) -> Surface:
    pytest.importorskip("agents")
    from agents import FunctionTool

    from memdir.integrations.openai_agents import MemdirRunHooks

    hooks = MemdirRunHooks(memory, model="offline")
    tools = {t.name: t for t in hooks.tools() if isinstance(t, FunctionTool)}

    def call(name: str, arguments: dict[str, Any]) -> Outcome:
        async def invoke() -> object:
            return await tools[name].on_invoke_tool(None, json.dumps(arguments))  # type: ignore[arg-type]

        text = str(asyncio.run(invoke()))
        # The host tools answer refusals as text too: a success is numbered lines (Read)
        # or the file written (Write).
        succeeded = re.match(r" *\d+\t", text) or re.match(r"(Created|Updated|Wrote) /", text)
        return succeeded is not None, text

    surface = Surface()
    surface.name = "openai_agents"
    surface.read = lambda rel: call("Read", {"file_path": str(memory / rel)})
    surface.write = lambda rel, text: call(
        "Write", {"file_path": str(memory / rel), "content": text}
    )

    def replace(rel: str, text: str) -> Outcome:
        call("Read", {"file_path": str(memory / rel)})
        return call("Write", {"file_path": str(memory / rel), "content": text})

    surface.replace = replace
    return surface


class ForkSurface(Surface):
    """The memory agent's own tools, each call asked of its permission gate first."""

    def __init__(self, memory: Path, project: Path, engine: str) -> None:
        self.name = f"fork-{engine}"
        md = MemoryDir(memory)
        self.gate = auto_mem_can_use_tool(md, cwd=project)
        self.context = ToolContext(write_guard=memory_write_guard(md))
        self.memory = memory
        grep = GrepTool(project, engine="python" if engine == "python" else "rg")
        self.tools: Mapping[str, Any] = {
            "Read": ReadTool(project),
            "Write": WriteTool(project),
            "Grep": grep,
            "Glob": GlobTool(project),
            "Bash": BashTool(project),
        }
        self.read = self._read
        self.write = self._write
        self.replace = self._replace
        self.search = self._search

    def _read(self, rel: str) -> Outcome:
        return self.call("Read", {"file_path": str(self.memory / rel)})

    def _write(self, rel: str, text: str) -> Outcome:
        return self.call("Write", {"file_path": str(self.memory / rel), "content": text})

    def call(self, name: str, tool_input: dict[str, Any]) -> Outcome:
        async def go() -> Outcome:
            tool = self.tools[name]
            decision = await self.gate(tool, tool_input)
            if not decision.allowed:
                return False, decision.message or ""
            try:
                output = await tool.run(tool_input, self.context)
            except ToolError as exc:
                return False, str(exc)
            return not output.is_error, output.content

        return asyncio.run(go())

    def _replace(self, rel: str, text: str) -> Outcome:
        self._read(rel)  # Write replaces only a file read first
        return self._write(rel, text)

    def _search(self, rel: str) -> Outcome:
        where = str(self.memory / rel)
        outcomes = [
            self.call("Grep", {"pattern": "SENTINEL", "path": where, "output_mode": "content"}),
            self.call("Glob", {"pattern": "**/*", "path": where}),
        ]
        return all(ok for ok, _ in outcomes), "\n".join(text for _, text in outcomes)


ENGINES = ["python", *(["rg"] if find_rg() else [])]


def _fork(engine: str) -> Callable[[Folder], Surface]:
    return lambda f: ForkSurface(f.memory, f.project, engine)


SURFACES: dict[str, Callable[[Folder], Surface]] = {
    "memory": lambda f: memory_tool_surface(f.memory),
    "sdk": lambda f: sdk_surface(f.memory),
    "langchain": lambda f: langchain_surface(f.memory),
    "pydantic_ai": lambda f: pydantic_ai_surface(f.memory),
    "openai_agents": lambda f: openai_agents_surface(f.memory),
    **{f"fork-{engine}": _fork(engine) for engine in ENGINES},
}


@pytest.fixture(params=sorted(SURFACES))
def surface(request: pytest.FixtureRequest, folder: Folder) -> Surface:
    return SURFACES[request.param](folder)


def _needs(op: object) -> Any:
    if op is None:
        pytest.skip("this surface has no such operation")
    return op


def _state_intact(folder: Folder) -> None:
    state = folder.memory / ".memdir"
    assert CURSOR in (state / "state.json").read_text()
    assert any((state / "trash").iterdir())
    assert (folder.memory / "team" / ".memdir" / "MEMORY.md.lock").read_text() == LOCK_TEXT
    assert (folder.outside / "secret.txt").read_text() == OUTSIDE


def test_a_write_into_a_nested_state_folder_is_refused(folder: Folder, surface: Surface) -> None:
    write = _needs(surface.write)
    ok, said = write("team/.memdir/planted.md", "x")
    assert not ok, said
    assert not (folder.memory / "team" / ".memdir" / "planted.md").exists()


def test_a_nested_lock_file_is_not_replaced(folder: Folder, surface: Surface) -> None:
    replace = _needs(surface.replace)
    ok, said = replace("team/.memdir/MEMORY.md.lock", "stolen\n")
    assert not ok, said
    _state_intact(folder)


def test_the_state_is_not_read_through_a_planted_symlink(folder: Folder, surface: Surface) -> None:
    read = _needs(surface.read)
    for rel in ("x/state.json", "x", "x/trash"):
        ok, said = read(rel)
        assert CURSOR not in said, (rel, said)
        assert FORGOTTEN not in said, (rel, said)
        assert not ok, (rel, said)


def test_the_state_is_not_deleted_through_a_planted_symlink(
    folder: Folder, surface: Surface
) -> None:
    delete = _needs(surface.delete)
    for rel in ("x/state.json", "x/trash"):
        ok, said = delete(rel)
        assert not ok, (rel, said)
    _state_intact(folder)


def test_the_state_is_not_renamed_through_a_planted_symlink(
    folder: Folder, surface: Surface
) -> None:
    rename = _needs(surface.rename)
    for old, new in (
        ("x/state.json", "taken.json"),  # the source in the state
        ("x/trash", "bin"),
        ("notes.md", "x/state.json.new"),  # the target in the state
        ("notes.md", "team/.memdir/MEMORY.md.lock2"),
    ):
        ok, said = rename(old, new)
        assert not ok, (old, new, said)
    _state_intact(folder)
    assert (folder.memory / "notes.md").read_text() == "notes\n"


def test_a_hard_link_to_an_outside_file_is_not_read(folder: Folder, surface: Surface) -> None:
    read = _needs(surface.read)
    ok, said = read("hard.md")
    assert not ok, said
    assert OUTSIDE not in said
    assert "hard link" in said


def test_a_hard_link_to_an_outside_file_is_not_written(folder: Folder, surface: Surface) -> None:
    replace = _needs(surface.replace)
    ok, said = replace("hard.md", "changed\n")
    assert not ok, said
    assert (folder.memory / "hard.md").read_text() == OUTSIDE


def test_a_search_of_the_memory_folder_finds_no_forgotten_line(
    folder: Folder, surface: Surface
) -> None:
    search = _needs(surface.search)
    _ok, found = search("")
    assert FORGOTTEN not in found
    assert CURSOR not in found


@pytest.mark.parametrize("engine", ENGINES)
def test_a_shell_command_reaches_no_state_and_finds_no_forgotten_line(
    folder: Folder, engine: str
) -> None:
    """Read-only Bash: a file named in the command is judged like Read's; a recursive
    search reads what it finds by itself, and the trash holds no plain text to find."""
    fork = ForkSurface(folder.memory, folder.project, engine)
    memory = folder.memory
    for command in (
        f"cat {memory}/.memdir/state.json",
        f"cat {memory}/x/state.json",
        f"head -c 100 {memory}/team/.memdir/MEMORY.md.lock",
        f"cat {memory}/hard.md",
        f"ls {memory}/x/trash",
        f"cat {memory}/x/*.json",
        "cat ../memory/x/state.json",
    ):
        ok, said = fork.call("Bash", {"command": command})
        assert not ok, (command, said)
        assert CURSOR not in said, (command, said)
        assert OUTSIDE not in said, (command, said)
    ok, said = fork.call("Bash", {"command": f"grep -r -a {FORGOTTEN} {memory}"})
    assert FORGOTTEN not in said, said
    ok, said = fork.call("Bash", {"command": f"cat {memory}/notes.md"})
    assert ok, said
    assert said.startswith("notes"), said


def test_a_symlink_leading_out_of_the_memory_folder_is_not_followed(
    folder: Folder, surface: Surface
) -> None:
    (folder.memory / "out").symlink_to(folder.outside)
    (folder.outside / "plain.md").write_text(OUTSIDE)
    read = _needs(surface.read)
    ok, said = read("out/plain.md")
    assert not ok, said
    assert OUTSIDE not in said, said


def test_the_memory_agent_still_works_with_ordinary_memories(folder: Folder) -> None:
    """The same surfaces read, write, search and rename ordinary memories as before."""
    fork = ForkSurface(folder.memory, folder.project, "python")
    assert fork._read("notes.md") == (True, "     1\tnotes")
    assert fork._write("team/new.md", "hello\n")[0]
    assert fork.call("Grep", {"pattern": "hello", "path": str(folder.memory)})[0]
    tool = memory_tool_surface(folder.memory)
    assert _needs(tool.rename)("team", "shared")[0]
    assert "hello" in _needs(tool.read)("shared/new.md")[1]
    host = openai_agents_surface(folder.memory)
    assert _needs(host.read)("notes.md")[0]
    assert _needs(host.write)("fresh.md", "fresh\n")[0]


def test_memdirs_own_writes_leave_every_file_with_one_name(folder: Folder) -> None:
    """Atomic writes replace a file by renaming a fresh one, so the link-count rule never
    refuses a file memdir wrote itself."""
    tool = memory_tool_surface(folder.memory)
    assert _needs(tool.write)("a.md", "one\n")[0]
    edit = {"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "2"}
    assert tool.call(edit)[0]
    assert _needs(tool.replace)("a.md", "zero\n")[0]
    for path in folder.memory.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.name != "hard.md":
            assert path.stat().st_nlink == 1, path
