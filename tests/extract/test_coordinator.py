"""The turn coordinator: decisions as values, and what carrying a turn out returns."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memdir.errors import ModelError
from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.extract._coordinator import (
    Decision,
    Outcome,
    decide,
    host_memory_paths,
    start_after,
    wrote_memory,
)
from memdir.extract._types import Position
from memdir.messages import Message, ToolUseBlock
from memdir.models import ModelRequest
from memdir.store import MemoryDir
from memdir.testing import FunctionModel


def conversation(turns: int) -> list[Message]:
    out: list[Message] = []
    for k in range(1, turns + 1):
        out += [Message.user(f"turn {k}", uuid=f"u{k}"), Message.assistant("ok", uuid=f"a{k}")]
    return out


def calling(name: str, **tool_input: Any) -> Message:
    use = ToolUseBlock(id="t", name=name, input=tool_input)
    return Message(role="assistant", content=(use,), uuid=f"call-{name}")


_MEMORY = MemoryDir("/m")


def under_m(path: object) -> bool:
    return isinstance(path, str) and path.startswith("/m/")


def nowhere(path: object) -> bool:
    return False


def everywhere(path: object) -> bool:
    return True


def decision(
    position: Position,
    messages: list[Message],
    *,
    trailing: bool = False,
    every: int = 2,
    in_memory: Any = under_m,
    turns: int = 1,
) -> Decision:
    return decide(
        position,
        messages,
        trailing=trailing,
        every_n_turns=every,
        in_memory=in_memory,
        now=100.0,
        turns=turns,
        memory_dir=_MEMORY,
    )


# --- decide -------------------------------------------------------------------------------------


def test_a_direct_write_is_decided_before_the_throttle_and_leaves_its_count() -> None:
    messages = [
        *conversation(1),
        calling("memory", command="create", path="/memories/x.md", file_text="a"),
    ]
    got = decision(Position(turns_since_run=0), messages)
    assert got.action == "skip_direct_write"
    assert got.position == Position(cursor="call-memory", turns_since_run=0, covered_at=100.0)
    assert (got.event, dict(got.fields)) == (
        "extract.skipped_direct_write",
        {"message_count": 3, "source": "tool_call"},
    )


def test_the_throttle_counts_turns_and_leaves_the_cursor() -> None:
    messages = conversation(2)
    got = decision(Position(cursor="a1", turns_since_run=0, covered_at=5.0), messages)
    assert got.action == "throttled"
    assert got.position == Position(cursor="a1", turns_since_run=1, covered_at=5.0)
    assert dict(got.fields) == {"turns_since_last": 1, "every_n_turns": 2}
    due = decision(got.position, conversation(3))
    assert due.action == "run"
    assert (due.start, due.end, due.message_count) == (2, 6, 4)
    assert due.position.turns_since_run == 0


def test_several_turns_at_once_count_as_several() -> None:
    assert decision(Position(), conversation(2), turns=2).action == "run"


def test_a_trailing_run_skips_the_throttle() -> None:
    got = decision(Position(cursor="a1", turns_since_run=0), conversation(2), trailing=True)
    assert got.action == "run"
    assert got.start == 2


def test_a_cursor_compacted_away_counts_and_scans_everything() -> None:
    messages = [*conversation(2), Message.user("x", uuid="last")]
    got = decision(Position(cursor="gone"), messages, every=1)
    assert (got.start, got.message_count) == (0, 5)
    assert start_after(messages, "u2") == 3
    assert start_after(messages, None) == 0


# --- the one direct-write check -----------------------------------------------------------------


@dataclass(frozen=True)
class WriteCase:
    name: str
    message: Message
    in_memory: Any
    wrote: bool


def memory_call(command: str, **tool_input: Any) -> Message:
    return calling("memory", command=command, **tool_input)


WRITE_CASES = [
    WriteCase("Write into memory", calling("Write", file_path="/m/x.md"), under_m, True),
    WriteCase("Edit into memory", calling("Edit", file_path="/m/x.md"), under_m, True),
    WriteCase("Write elsewhere", calling("Write", file_path="/src/x.py"), under_m, False),
    WriteCase("Read in memory", calling("Read", file_path="/m/x.md"), everywhere, False),
    WriteCase(
        "memory create",
        memory_call("create", path="/memories/x.md", file_text="a"),
        under_m,
        True,
    ),
    WriteCase(
        "memory str_replace",
        memory_call("str_replace", path="/memories/x.md", old_str="a", new_str="b"),
        under_m,
        True,
    ),
    WriteCase(
        "memory insert",
        memory_call("insert", path="/memories/x.md", insert_line=0, insert_text="a"),
        under_m,
        True,
    ),
    WriteCase("memory delete", memory_call("delete", path="/memories/x.md"), under_m, True),
    WriteCase(
        "memory rename",
        memory_call("rename", old_path="/memories/x.md", new_path="/memories/y.md"),
        under_m,
        True,
    ),
    WriteCase("memory view", memory_call("view", path="/memories"), everywhere, False),
    WriteCase("memory without command", calling("memory"), everywhere, False),
    WriteCase(
        "memory escaping its folder",
        memory_call("create", path="/memories/../x.md", file_text="a"),
        everywhere,
        False,
    ),
    WriteCase(
        "a tool of another name is not judged by its name",
        calling("save_note", file_path="/m/x.md"),
        everywhere,
        False,
    ),
]


@pytest.mark.parametrize("case", WRITE_CASES, ids=[c.name for c in WRITE_CASES])
def test_what_counts_as_the_hosts_own_save(case: WriteCase) -> None:
    assert wrote_memory([case.message], case.in_memory, memory_dir=_MEMORY) is case.wrote


def test_a_users_message_never_counts() -> None:
    use = ToolUseBlock(id="t", name="Write", input={"file_path": "/m/x.md"})
    assert not wrote_memory([Message(role="user", content=(use,))], everywhere)


def test_a_remote_hosts_paths_are_compared_as_text() -> None:
    inside = host_memory_paths("/home/ana/.claude/projects/p/memory", "/home/ana/p")
    assert inside("/home/ana/.claude/projects/p/memory/x.md")
    assert inside("../.claude/projects/p/memory/team/y.md")
    assert not inside("/home/ana/.claude/projects/p/memory-evil/x.md")
    assert not inside("/home/ana/.claude/projects/p/memory")
    assert not inside("/home/ana/.claude/projects/p/memory/\0x.md")
    assert not inside(42)
    assert not host_memory_paths(None, "/")("/anything.md")


# --- the outcome of carrying a turn out ---------------------------------------------------------


def saving(memory: Path) -> FunctionModel:
    async def answer(request: ModelRequest) -> Message | str:
        if request.messages[-1].is_tool_result:
            return "Saved."
        body = "---\nname: role\ndescription: the role\ntype: user\n---\n\nA data scientist.\n"
        use = ToolUseBlock(
            id="w", name="Write", input={"file_path": str(memory / "role.md"), "content": body}
        )
        return Message(role="assistant", content=(use,))

    return FunctionModel(answer)


def test_process_returns_what_the_turn_did(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    config = ExtractConfig(every_n_turns=2, mode="standalone", skip_index=True)
    extractor = MemoryExtractor(memory, saving(memory), config)
    messages = conversation(3)

    async def main() -> list[Outcome]:
        out = []
        for k in (1, 2):
            out.append(await extractor.process(TurnContext(messages=messages[: 2 * k])))
        wrote = [*messages[:4], calling("Write", file_path=str(memory / "x.md"))]
        out.append(await extractor.process(TurnContext(messages=wrote, cwd=str(tmp_path))))
        out.append(await extractor.process(TurnContext(messages=wrote, is_subagent=True)))
        return out

    throttled, ran, skipped, ignored = asyncio.run(main())
    assert throttled == Outcome(status="throttled", start=0, end=0)
    assert ran == Outcome(
        status="ran", start=0, end=4, message_count=4, runs=1, memories=(memory / "role.md",)
    )
    assert skipped == Outcome(status="skipped", start=4, end=5, message_count=1, source="tool_call")
    assert ignored == Outcome(status="ignored")


def test_process_says_why_a_run_failed(tmp_path: Path) -> None:
    def fail(request: ModelRequest) -> str:
        raise ModelError("the provider is down")

    extractor = MemoryExtractor(
        tmp_path / "memory", FunctionModel(fail), ExtractConfig(mode="standalone")
    )
    got = asyncio.run(extractor.process(TurnContext(messages=conversation(1))))
    assert got.status == "failed"
    assert got.end == got.start == 0
    assert got.error is not None
    assert extractor.cursor is None
