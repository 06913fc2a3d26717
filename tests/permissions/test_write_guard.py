"""The write guard: the last check, on the real target and the complete new text."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.fork import CacheSafeParams, run_forked_agent
from memdir.messages import Message, ToolUseBlock
from memdir.models import ModelRequest
from memdir.permissions import PermissionDecision, auto_mem_can_use_tool, memory_write_guard
from memdir.store import scan_secrets
from memdir.telemetry import Event
from memdir.testing import FunctionModel, ScriptedModel
from memdir.tools import EditTool, ReadTool, ToolContext, ToolError, WriteTool, builtin_tools

TOKEN = "ghp_" + "0123456789abcdefghijklmnopqrstuvwxyz"


def calls(*uses: tuple[str, str, dict[str, object]]) -> Message:
    return Message(
        role="assistant", content=tuple(ToolUseBlock(id=i, name=n, input=x) for i, n, x in uses)
    )


def test_guard_refuses_outside_and_secrets(tmp_path: Path) -> None:
    guard = memory_write_guard(tmp_path / "mem")
    assert guard(tmp_path / "mem" / "a.md", "fine") is None
    refusal = guard(tmp_path / "elsewhere.md", "fine")
    assert refusal is not None
    assert "outside the memory directory" in refusal
    refusal = guard(tmp_path / "mem" / "a.md", f"token {TOKEN}")
    assert refusal is not None
    assert "github-pat" in refusal
    assert TOKEN not in refusal
    lenient = memory_write_guard(tmp_path / "mem", allow_private_secrets=True)
    assert lenient(tmp_path / "mem" / "a.md", f"token {TOKEN}") is None
    assert lenient(tmp_path / "mem" / "team" / "a.md", f"token {TOKEN}") is not None


def test_two_edits_of_one_message_cannot_assemble_a_secret(tmp_path: Path) -> None:
    memory = tmp_path / "mem"
    (memory / "team").mkdir(parents=True)
    target = memory / "team" / "ci.md"
    target.write_text("CI token: <A><B>\n")
    half = len(TOKEN) // 2
    model = ScriptedModel(
        [
            calls(("r", "Read", {"file_path": str(target)})),
            calls(
                (
                    "e1",
                    "Edit",
                    {"file_path": str(target), "old_string": "<A>", "new_string": TOKEN[:half]},
                ),
                (
                    "e2",
                    "Edit",
                    {"file_path": str(target), "old_string": "<B>", "new_string": TOKEN[half:]},
                ),
            ),
            "done",
        ]
    )
    params = CacheSafeParams(model=model, tools=[t.definition() for t in builtin_tools(tmp_path)])
    result = asyncio.run(
        run_forked_agent(
            params,
            [Message.user("hi")],
            [Message.user("save")],
            tools=builtin_tools(tmp_path),
            can_use_tool=auto_mem_can_use_tool(memory, cwd=tmp_path),
            context=ToolContext(write_guard=memory_write_guard(memory)),
        )
    )
    outcomes = [r.is_error for r in result.messages[4].tool_results]
    assert outcomes.count(True) == 1  # whichever edit came second was refused
    assert scan_secrets(target.read_text()) == []


def test_write_through_a_symlink_and_dot_dot_lands_where_the_gate_looked(tmp_path: Path) -> None:
    memory = tmp_path / "mem"
    (memory / "archive" / "2024").mkdir(parents=True)
    (memory / "current").symlink_to(memory / "archive" / "2024")
    raw = str(memory / "current" / ".." / ".." / "escaped.md")
    gate = auto_mem_can_use_tool(memory, cwd=tmp_path)

    async def go() -> None:
        decision = await gate("Write", {"file_path": raw, "content": "x"})
        assert decision.allowed  # the kernel resolves it to mem/escaped.md
        context = ToolContext(write_guard=memory_write_guard(memory))
        output = await WriteTool(tmp_path).run({"file_path": raw, "content": "x"}, context)
        assert output.written == memory / "escaped.md"

    asyncio.run(go())
    assert (memory / "escaped.md").read_text() == "x"
    assert not (tmp_path / "escaped.md").exists()


def test_tool_refuses_a_write_the_guard_rejects(tmp_path: Path) -> None:
    memory = tmp_path / "mem"
    memory.mkdir()
    (memory / "a.md").write_text("hello\n")
    context = ToolContext(write_guard=memory_write_guard(memory))

    async def go() -> str:
        await ReadTool(tmp_path).run({"file_path": str(memory / "a.md")}, context)
        try:
            await EditTool(tmp_path).run(
                {"file_path": str(memory / "a.md"), "old_string": "hello", "new_string": TOKEN},
                context,
            )
        except ToolError as exc:
            return str(exc)
        return "written"

    assert "credential" in asyncio.run(go())
    assert (memory / "a.md").read_text() == "hello\n"


def test_a_long_chain_of_trailing_runs_does_not_stop(tmp_path: Path) -> None:
    # Under a recursion limit of 400 a recursive chain broke after about 500 runs.
    chain = 700
    memory = tmp_path / "mem"
    events: list[Event] = []
    messages: list[Message] = []
    holder: dict[str, MemoryExtractor] = {}

    def next_turn() -> TurnContext:
        messages.extend([Message.user(f"u{len(messages)}"), Message.assistant("ok")])
        return TurnContext(messages=tuple(messages), cwd=str(tmp_path))

    async def answer(request: ModelRequest) -> str:
        if len(messages) < 2 * chain:
            holder["ex"].on_turn_end(next_turn())  # a turn arrives during every run
        return "Nothing to save."

    extractor = MemoryExtractor(memory, FunctionModel(answer), ExtractConfig(), sink=events.append)
    holder["ex"] = extractor

    async def main() -> None:
        extractor.on_turn_end(next_turn())
        await extractor.drain(timeout=600)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(400)
    try:
        asyncio.run(main())
    finally:
        sys.setrecursionlimit(limit)
    runs = [e for e in events if e.name == "extract.run"]
    assert len(runs) == chain
    assert "extract.error" not in [e.name for e in events]
    assert extractor.cursor == messages[-1].uuid
    assert extractor.in_flight == 0


def test_drain_timeout_does_not_cancel_background_runs(tmp_path: Path) -> None:
    release = threading.Event()
    events: list[Event] = []

    def blocked(request: ModelRequest) -> str:
        release.wait(60)
        return "Nothing to save."

    extractor = MemoryExtractor(tmp_path / "mem", FunctionModel(blocked), sink=events.append)
    messages = [Message.user("a"), Message.assistant("b")]
    try:
        extractor.on_turn_end(TurnContext(messages=tuple(messages), cwd=str(tmp_path)))
        messages += [Message.user("c"), Message.assistant("d")]
        extractor.on_turn_end(TurnContext(messages=tuple(messages), cwd=str(tmp_path)))
        asyncio.run(extractor.drain(timeout=0.05))  # gives up waiting; cancels nothing
        release.set()
        extractor.drain_sync(timeout=60)
    finally:
        extractor.close()
    names = [e.name for e in events]
    assert names.count("extract.run") == 2
    assert extractor.cursor == messages[-1].uuid


def test_memdirs_bookkeeping_is_not_writable_by_the_memory_agent(tmp_path: Path) -> None:
    # The cursors live in .memdir/: a memory agent that rewrote them (on a transcript's
    # say-so) could make extraction skip the rest of a session.
    memory = tmp_path / "mem"
    state = memory / ".memdir" / "state.json"
    guard = memory_write_guard(memory)
    refusal = guard(state, "{}")
    assert refusal is not None
    assert "bookkeeping" in refusal
    assert guard(memory / ".memdir", "x") is not None
    assert guard(memory / "notes.memdir.md", "fine") is None
    gate = auto_mem_can_use_tool(memory)

    async def decide(name: str, tool_input: Mapping[str, object]) -> PermissionDecision:
        return await gate(name, tool_input)

    for name, tool_input in [
        ("Write", {"file_path": str(state), "content": "{}"}),
        ("Edit", {"file_path": str(memory / "sub" / ".." / ".memdir" / "x"), "new_string": "y"}),
    ]:
        decision = asyncio.run(decide(name, tool_input))
        assert decision.behavior == "deny"
        assert decision.reason == "bookkeeping"
    allowed = asyncio.run(decide("Write", {"file_path": str(memory / "a.md"), "content": "ok"}))
    assert allowed.behavior == "allow"
