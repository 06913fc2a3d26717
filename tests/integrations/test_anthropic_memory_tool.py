"""memdir's memory tool in the Anthropic SDK's tool runner, against FakeAnthropicServer."""

from __future__ import annotations

import asyncio
import datetime
import os
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from anthropic import Anthropic, AsyncAnthropic
from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool
from anthropic.lib.tools import ToolError as SDKToolError
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from memdir.errors import UsageError
from memdir.integrations.anthropic_memory import AsyncMemdirMemoryTool, MemdirMemoryTool
from memdir.memory_tool import MemoryTool
from memdir.messages import Message, ToolUseBlock
from memdir.testing import FakeAnthropicServer
from memdir.tools import ToolContext
from tests.permissions.test_gate import ANTHROPIC_KEY

EXAMPLE = Path(__file__).parents[2] / "examples" / "anthropic_memory_tool.py"
PROMPT = "Remember: we deploy on Fridays, never on Mondays."
DEPLOYS = (
    "---\nname: Deploy day\ndescription: deploys happen on Fridays\ntype: project\n---\n\n"
    "We deploy on Fridays, never on Mondays.\n"
)
FLAVOURS = ["sync", "async"]


@pytest.fixture
def mem(tmp_path: Path) -> Path:
    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "MEMORY.md").write_text("- [Style](style.md) — tabs, not spaces\n")
    (memory / "style.md").write_text("Indent with tabs.\n")
    return memory


def memory_call(call_id: str, **tool_input: object) -> ToolUseBlock:
    return ToolUseBlock(id=call_id, name="memory", input=tool_input)


def results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool results the runner sent back in this request, in call order."""
    content = body["messages"][-1]["content"]
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def saving_agent(body: dict[str, Any]) -> Message | str:
    """A model that looks at its memory, saves one, then says so; it reads each answer."""
    last = body["messages"][-1]["content"]
    if isinstance(last, str):  # the user's prompt: look first, as Claude does
        return Message(
            role="assistant", content=(memory_call("v1", command="view", path="/memories"),)
        )
    answers = [r["content"] for r in results(body)]
    if answers[0].startswith("Here're the files and directories"):
        return Message(
            role="assistant",
            content=(
                memory_call("c1", command="create", path="/memories/deploys.md", file_text=DEPLOYS),
                memory_call(
                    "i1",
                    command="insert",
                    path="/memories/MEMORY.md",
                    insert_line=1,
                    insert_text="- [Deploy day](deploys.md) — Fridays, never Mondays\n",
                ),
                # Past the end of a two-line file: clamped, as the SDK's own tool does.
                memory_call("v2", command="view", path="/memories/MEMORY.md", view_range=[2, 99]),
            ),
        )
    return "Saved: deploys happen on Fridays."


def final_text(message: Any) -> str:
    return "".join(block.text for block in message.content if block.type == "text")


def run_runner(server: FakeAnthropicServer, flavour: str, memory: Path | MemoryTool) -> str:
    """Run the SDK's tool runner to the end with memdir's tool; the last answer's text."""
    messages: list[Any] = [{"role": "user", "content": PROMPT}]
    if flavour == "sync":
        with Anthropic(base_url=server.base_url, api_key="test") as client:
            runner = client.beta.messages.tool_runner(
                model="claude-test",
                max_tokens=1024,
                messages=messages,
                tools=[MemdirMemoryTool(memory)],
            )
            return final_text(runner.until_done())

    async def go() -> str:
        async with AsyncAnthropic(base_url=server.base_url, api_key="test") as client:
            runner = client.beta.messages.tool_runner(
                model="claude-test",
                max_tokens=1024,
                messages=messages,
                tools=[AsyncMemdirMemoryTool(memory)],
            )
            return final_text(await runner.until_done())

    return asyncio.run(go())


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_the_tool_runner_saves_memories_in_the_memory_dir(mem: Path, flavour: str) -> None:
    with FakeAnthropicServer(handler=saving_agent) as server:
        said = run_runner(server, flavour, mem)
        requests = server.requests
        server.assert_no_errors()

    assert said == "Saved: deploys happen on Fridays."
    assert len(requests) == 3
    assert requests[0].body["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    (listing,) = results(requests[1].body)
    assert not listing.get("is_error")
    assert listing["content"].splitlines()[0] == (
        "Here're the files and directories up to 2 levels deep in /memories, "
        "excluding hidden items:"
    )
    assert [row.split("\t")[1] for row in listing["content"].splitlines()[1:]] == [
        "/memories",
        "/memories/MEMORY.md",
        "/memories/style.md",
    ]
    created, inserted, viewed = results(requests[2].body)
    assert not any(r.get("is_error") for r in (created, inserted, viewed))
    assert created["content"] == "File created successfully at: /memories/deploys.md"
    assert inserted["content"] == "The file /memories/MEMORY.md has been edited."
    assert viewed["content"] == (
        "Here's the content of /memories/MEMORY.md with line numbers:\n"
        "     2\t- [Deploy day](deploys.md) — Fridays, never Mondays"
    )
    # /memories is the memory directory itself, where Claude Code reads MEMORY.md.
    assert (mem / "deploys.md").read_text() == DEPLOYS
    assert (mem / "MEMORY.md").read_text() == (
        "- [Style](style.md) — tabs, not spaces\n"
        "- [Deploy day](deploys.md) — Fridays, never Mondays\n"
    )
    assert not (mem / "memories").exists()


def files_under(root: Path) -> list[str]:
    """Every path under ``root``, but for memdir's locks in ``.memdir/``."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if ".memdir" not in p.parts)


def refusing_agent(body: dict[str, Any]) -> Message | str:
    last = body["messages"][-1]["content"]
    if not isinstance(last, str):
        return "Understood."
    style = "/memories/style.md"
    calls: list[dict[str, object]] = [
        {"command": "create", "path": "/memories/keys.md", "file_text": f"key: {ANTHROPIC_KEY}\n"},
        {"command": "create", "path": "/memories/../outside.md", "file_text": "x"},
        {"command": "create", "path": "/memories/.memdir/cursor.md", "file_text": "x"},
        {"command": "create", "path": "/etc/passwd", "file_text": "x"},
        {"command": "delete", "path": "/memories"},
        {"command": "str_replace", "path": style, "old_str": "spaces", "new_str": "x"},
        {"command": "insert", "path": style, "insert_line": True, "insert_text": "x"},
        {"command": "format", "path": "/memories"},
    ]
    uses = tuple(ToolUseBlock(id=f"r{i}", name="memory", input=c) for i, c in enumerate(calls))
    return Message(role="assistant", content=uses)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_refusals_reach_the_model_as_error_results(tmp_path: Path, mem: Path, flavour: str) -> None:
    before = files_under(tmp_path)
    with FakeAnthropicServer(handler=refusing_agent) as server:
        assert run_runner(server, flavour, mem) == "Understood."
        answers = results(server.requests[1].body)
        server.assert_no_errors()

    assert all(a["is_error"] is True for a in answers)
    texts = [a["content"] for a in answers]
    assert "credential" in texts[0]
    assert "'..' is not allowed" in texts[1]
    assert "hidden names" in texts[2]  # .memdir/ is memdir's bookkeeping, not a memory
    assert texts[3] == "Path must start with /memories, got: /etc/passwd"
    assert texts[4] == "Cannot delete the /memories directory itself"
    assert texts[5] == (
        "No replacement was performed, old_str `spaces` did not appear verbatim in "
        "/memories/style.md."
    )
    # memdir reads the model's input itself: the SDK's unchecked parse would make it 1.
    assert texts[6] == "'insert_line' must be a int, got bool"
    assert texts[7].startswith("unknown command 'format'")
    assert files_under(tmp_path) == before
    assert (mem / "style.md").read_text() == "Indent with tabs.\n"


def test_they_are_the_sdks_memory_tools(mem: Path) -> None:
    sync_tool, async_tool = MemdirMemoryTool(mem), AsyncMemdirMemoryTool(str(mem))
    assert isinstance(sync_tool, BetaAbstractMemoryTool)
    assert isinstance(async_tool, BetaAsyncAbstractMemoryTool)
    for tool in (sync_tool, async_tool):
        assert tool.name == "memory"
        assert tool.to_dict() == {"type": "memory_20250818", "name": "memory"}
        assert tool.memory_tool.memory_dir.root == mem
    cached = MemdirMemoryTool(mem, cache_control={"type": "ephemeral"})
    assert cached.to_dict() == {
        "type": "memory_20250818",
        "name": "memory",
        "cache_control": {"type": "ephemeral"},
    }
    # Each client takes only its own kind, which is why there are two classes.
    with (
        Anthropic(base_url="http://127.0.0.1:9", api_key="test") as client,
        pytest.raises(TypeError, match="async tool"),
    ):
        client.beta.messages.tool_runner(
            model="m",
            max_tokens=1,
            messages=[],
            tools=[async_tool],  # type: ignore[list-item]  # the mistake under test
        )


def text(result: object) -> str:
    """A tool's answer, which the SDK types as text or blocks; memdir's is always text."""
    assert isinstance(result, str)
    return result


def test_typed_commands_run_through_execute(mem: Path) -> None:
    tool = MemdirMemoryTool(mem)
    create = BetaMemoryTool20250818CreateCommand(
        command="create", path="/memories/a.md", file_text="one\ntwo\n"
    )
    assert tool.execute(create) == "File created successfully at: /memories/a.md"
    view = BetaMemoryTool20250818ViewCommand(command="view", path="/memories/a.md")
    assert text(tool.execute(view)).endswith("     1\tone\n     2\ttwo")
    ranged = BetaMemoryTool20250818ViewCommand(
        command="view", path="/memories/a.md", view_range=[0, 1]
    )
    assert text(tool.execute(ranged)).endswith(":\n     1\tone")
    replace = BetaMemoryTool20250818StrReplaceCommand(
        command="str_replace", path="/memories/a.md", old_str="two", new_str="2"
    )
    assert text(tool.execute(replace)).startswith("The memory file has been edited.")
    insert = BetaMemoryTool20250818InsertCommand(
        command="insert", path="/memories/a.md", insert_line=0, insert_text="zero"
    )
    assert tool.execute(insert) == "The file /memories/a.md has been edited."
    assert (mem / "a.md").read_text() == "zero\none\n2\n"
    rename = BetaMemoryTool20250818RenameCommand(
        command="rename", old_path="/memories/a.md", new_path="/memories/b.md"
    )
    assert tool.execute(rename) == "Successfully renamed /memories/a.md to /memories/b.md"
    delete = BetaMemoryTool20250818DeleteCommand(command="delete", path="/memories/b.md")
    assert tool.execute(delete) == "Successfully deleted /memories/b.md"
    with pytest.raises(SDKToolError) as info:
        tool.execute(delete)
    assert info.value.content == "The path /memories/b.md does not exist"

    async_tool = AsyncMemdirMemoryTool(mem)

    async def go() -> None:
        created = await async_tool.execute(create)
        assert created == "File created successfully at: /memories/a.md"
        assert text(await async_tool.execute(view)).endswith("     2\ttwo")
        with pytest.raises(SDKToolError, match="already exists"):
            await async_tool.execute(create)
        for command in (replace, insert, rename, delete):
            await async_tool.execute(command)

    asyncio.run(go())
    assert not (mem / "a.md").exists()
    assert not (mem / "b.md").exists()


def test_a_given_memory_tool_keeps_its_options(mem: Path) -> None:
    def clock() -> datetime.datetime:
        return datetime.datetime(2025, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)

    core = MemoryTool(mem, format="current", session_id="sess-9", clock=clock)
    tool = MemdirMemoryTool(core)
    assert tool.memory_tool is core
    tool.call({"command": "create", "path": "/memories/deploys.md", "file_text": DEPLOYS})
    stored = (mem / "deploys.md").read_text()
    assert "originSessionId: sess-9" in stored  # stamped as Claude Code stores it
    assert stored.endswith("We deploy on Fridays, never on Mondays.\n")
    for cls in (MemdirMemoryTool, AsyncMemdirMemoryTool):
        with pytest.raises(UsageError, match="MemoryTool itself"):
            cls(core, format="current")
        with pytest.raises(UsageError):
            cls(core, allow_private_secrets=True)


def test_the_context_write_guard_is_asked(mem: Path) -> None:
    seen: list[Path] = []

    def guard(target: Path, text: str) -> str | None:
        seen.append(target)
        return "refused: not in this demo"

    tool = MemdirMemoryTool(mem, context=ToolContext(write_guard=guard))
    with pytest.raises(SDKToolError, match="not in this demo"):
        tool.call({"command": "create", "path": "/memories/x.md", "file_text": "x"})
    assert seen == [mem / "x.md"]
    assert not (mem / "x.md").exists()
    allowing = AsyncMemdirMemoryTool(mem, allow_private_secrets=True)
    key = {"command": "create", "path": "/memories/k.md", "file_text": ANTHROPIC_KEY}
    assert asyncio.run(allowing.call(key)) == "File created successfully at: /memories/k.md"
    with pytest.raises(SDKToolError, match="team memory"):
        asyncio.run(allowing.call({**key, "path": "/memories/team/k.md"}))


def test_the_core_does_not_import_the_sdk() -> None:
    code = "import sys, memdir.memory_tool; print('anthropic' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_the_example_saves_a_memory_where_claude_code_reads_it(
    tmp_path: Path, mem: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeAnthropicServer(handler=saving_agent) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        monkeypatch.setenv("MEMDIR_DIR", str(mem))  # default_memory_dir's first choice
        monkeypatch.chdir(tmp_path)
        runpy.run_path(os.fspath(EXAMPLE), run_name="__main__")
        first = server.requests[0]
        server.assert_no_errors()

    assert first.body["messages"] == [{"role": "user", "content": PROMPT}]
    assert "context-management-2025-06-27" in first.headers["anthropic-beta"].split(",")
    assert capsys.readouterr().out.splitlines()[-1] == "Saved: deploys happen on Fridays."
    assert (mem / "deploys.md").read_text() == DEPLOYS
    assert "(deploys.md)" in (mem / "MEMORY.md").read_text()
