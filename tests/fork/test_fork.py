"""run_forked_agent: the parent's request unchanged, concurrent tools, the gate, the cap."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from memdir.errors import ModelError
from memdir.fork import CacheSafeParams, run_forked_agent
from memdir.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from memdir.models import ModelResponse, Usage
from memdir.permissions import PermissionDecision, auto_mem_can_use_tool
from memdir.testing import ScriptedModel
from memdir.tools import (
    Effect,
    ReadsPath,
    ToolContext,
    ToolError,
    ToolOutput,
    WritesPath,
    builtin_tools,
)

TOOL_DEFS = [
    {"name": "Read", "description": "read", "input_schema": {"type": "object"}},
    {"name": "Write", "description": "write", "input_schema": {"type": "object"}},
    {"name": "Search", "description": "host tool", "input_schema": {"type": "object"}},
]


def calls(*uses: tuple[str, str, dict[str, Any]]) -> Message:
    return Message(
        role="assistant",
        content=tuple(ToolUseBlock(id=i, name=n, input=inp) for i, n, inp in uses),
    )


@dataclass
class FakeTool:
    """A tool whose behaviour a test controls."""

    name: str
    result: str = "ok"
    fail: BaseException | None = None
    writes: Path | None = None
    seen: list[Mapping[str, Any]] = field(default_factory=list)

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "description": "", "input_schema": {"type": "object"}}

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        self.seen.append(tool_input)
        if self.fail is not None:
            raise self.fail
        return ToolOutput(content=self.result, written=self.writes)


async def allow_all(tool: object, tool_input: Mapping[str, Any]) -> PermissionDecision:
    return PermissionDecision(behavior="allow")


def params(model: ScriptedModel) -> CacheSafeParams:
    return CacheSafeParams(
        model=model,
        system=[{"type": "text", "text": "You are the parent agent."}],
        tools=TOOL_DEFS,
        params={"max_tokens": 1234, "temperature": 0.2, "thinking": {"type": "disabled"}},
    )


CONTEXT = [Message.user("I'm a data scientist."), Message.assistant("Noted.")]
PROMPT = [Message.user("Save what is worth remembering.")]


def test_requests_carry_the_parent_request_unchanged() -> None:
    model = ScriptedModel([calls(("t1", "Read", {"file_path": "/m/MEMORY.md"})), "done"])
    p = params(model)
    result = asyncio.run(
        run_forked_agent(p, CONTEXT, PROMPT, tools=[FakeTool("Read")], can_use_tool=allow_all)
    )
    first, second = model.requests
    for request in (first, second):
        assert request.system is p.system
        assert request.tools is p.tools  # the full list, same order, same objects
        assert request.params is p.params  # no max_tokens or thinking changes
    assert list(first.messages) == CONTEXT + PROMPT
    # The second request extends the first: same prefix, plus the answer and its results.
    assert list(second.messages[:3]) == CONTEXT + PROMPT
    assert second.messages[3].tool_uses[0].id == "t1"
    assert second.messages[4].tool_results[0].tool_use_id == "t1"
    assert result.turn_count == 2
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]
    model.assert_all_used()


def test_tool_calls_of_one_message_overlap() -> None:
    started = {name: asyncio.Event() for name in ("a", "b", "c")}
    finished: list[str] = []
    seen_started: list[bool] = []

    @dataclass
    class Barrier:
        name: str

        def definition(self) -> dict[str, Any]:
            return {"name": self.name, "input_schema": {"type": "object"}}

        async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
            started[self.name].set()
            # Finishing needs every call started first: run one after another, this
            # would wait forever (the timeout turns that into a failure, not a hang).
            await asyncio.wait_for(
                asyncio.gather(*(e.wait() for e in started.values())), timeout=30
            )
            # Recorded as each call finishes: had every call started by then?
            seen_started.append(all(e.is_set() for e in started.values()))
            finished.append(self.name)
            return ToolOutput(content=self.name)

    model = ScriptedModel([calls(("1", "a", {}), ("2", "b", {}), ("3", "c", {})), "done"])
    tools = [Barrier("a"), Barrier("b"), Barrier("c")]
    result = asyncio.run(
        run_forked_agent(params(model), CONTEXT, PROMPT, tools=tools, can_use_tool=allow_all)
    )
    assert sorted(finished) == ["a", "b", "c"]
    assert seen_started == [True, True, True]
    assert [r.text for r in result.messages[2].tool_results] == ["a", "b", "c"]


def test_results_come_back_in_call_order() -> None:
    slow_may_finish = asyncio.Event()

    @dataclass
    class Ordered:
        name: str

        def definition(self) -> dict[str, Any]:
            return {"name": self.name, "input_schema": {"type": "object"}}

        async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
            if self.name == "slow":
                await asyncio.wait_for(slow_may_finish.wait(), timeout=30)
            else:
                slow_may_finish.set()  # the fast call finishes first
            return ToolOutput(content=self.name)

    model = ScriptedModel([calls(("1", "slow", {}), ("2", "fast", {})), "done"])
    result = asyncio.run(
        run_forked_agent(
            params(model),
            CONTEXT,
            PROMPT,
            tools=[Ordered("slow"), Ordered("fast")],
            can_use_tool=allow_all,
        )
    )
    results = result.messages[2].tool_results
    assert [(r.tool_use_id, r.text) for r in results] == [("1", "slow"), ("2", "fast")]


def test_denied_calls_get_the_gate_message(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    gate = auto_mem_can_use_tool(memory, cwd=tmp_path)
    write = FakeTool("Write", writes=memory / "a.md")
    model = ScriptedModel(
        [
            calls(
                ("1", "Write", {"file_path": "/etc/passwd", "content": "x"}),
                ("2", "Write", {"file_path": str(memory / "a.md"), "content": "x"}),
                ("3", "Search", {"q": "x"}),
            ),
            "done",
        ]
    )
    result = asyncio.run(
        run_forked_agent(params(model), CONTEXT, PROMPT, tools=[write], can_use_tool=gate)
    )
    r1, r2, r3 = result.messages[2].tool_results
    assert r1.is_error
    assert "only allowed for files inside the memory directory" in r1.text
    assert not r2.is_error
    assert r3.is_error
    assert "not available to the memory agent" in r3.text
    assert len(write.seen) == 1  # the denied Write never ran
    assert result.denied_calls == 2
    assert result.tool_calls == 3
    assert result.written_paths == (memory / "a.md",)


def test_allowed_but_missing_tool_is_an_error_result() -> None:
    model = ScriptedModel([calls(("1", "Search", {"q": "x"})), "done"])
    result = asyncio.run(
        run_forked_agent(params(model), CONTEXT, PROMPT, tools=[], can_use_tool=allow_all)
    )
    (r,) = result.messages[2].tool_results
    assert r.is_error
    assert "No tool named 'Search'" in r.text


def test_tool_failures_become_error_results() -> None:
    broken = FakeTool("Read", fail=RuntimeError("disk on fire"))
    refused = FakeTool("Write", fail=ToolError("Write: 'content' must be a string"))
    model = ScriptedModel([calls(("1", "Read", {}), ("2", "Write", {"content": 5})), "done"])
    result = asyncio.run(
        run_forked_agent(
            params(model), CONTEXT, PROMPT, tools=[broken, refused], can_use_tool=allow_all
        )
    )
    r1, r2 = result.messages[2].tool_results
    assert r1.is_error
    assert "RuntimeError: disk on fire" in r1.text
    assert r2.is_error
    assert r2.text == "Write: 'content' must be a string"
    assert result.written_paths == ()


def test_max_turns_caps_requests_and_runs_the_last_calls(tmp_path: Path) -> None:
    write = FakeTool("Write", writes=tmp_path / "m.md")
    loop = [calls((str(i), "Write", {})) for i in range(3)]
    model = ScriptedModel(loop)
    result = asyncio.run(
        run_forked_agent(
            params(model), CONTEXT, PROMPT, tools=[write], can_use_tool=allow_all, max_turns=3
        )
    )
    assert result.turn_count == 3
    assert result.hit_max_turns
    assert len(write.seen) == 3  # the third answer's call ran too
    assert result.written_paths == (tmp_path / "m.md",)  # distinct paths only
    model.assert_all_used()


def test_no_cap_runs_until_the_model_stops() -> None:
    model = ScriptedModel([calls((str(i), "Read", {})) for i in range(7)] + ["done"])
    result = asyncio.run(
        run_forked_agent(
            params(model),
            CONTEXT,
            PROMPT,
            tools=[FakeTool("Read")],
            can_use_tool=allow_all,
            max_turns=None,
        )
    )
    assert result.turn_count == 8
    assert not result.hit_max_turns


def test_usage_is_summed() -> None:
    def answer(message: Message, n: int) -> ModelResponse:
        return ModelResponse(
            message=message,
            usage=Usage(input_tokens=n, output_tokens=1, cache_read_input_tokens=10 * n),
        )

    model = ScriptedModel([answer(calls(("1", "Read", {})), 1), answer(Message.assistant("ok"), 2)])
    result = asyncio.run(
        run_forked_agent(
            params(model), CONTEXT, PROMPT, tools=[FakeTool("Read")], can_use_tool=allow_all
        )
    )
    assert result.usage == Usage(input_tokens=3, output_tokens=2, cache_read_input_tokens=30)


def test_model_errors_propagate() -> None:
    model = ScriptedModel([ModelError("overloaded")])
    with pytest.raises(ModelError, match="overloaded"):
        asyncio.run(
            run_forked_agent(params(model), CONTEXT, PROMPT, tools=[], can_use_tool=allow_all)
        )


def test_bad_max_turns() -> None:
    model = ScriptedModel([])
    with pytest.raises(ValueError, match="max_turns"):
        asyncio.run(
            run_forked_agent(
                params(model), CONTEXT, PROMPT, tools=[], can_use_tool=allow_all, max_turns=0
            )
        )


def test_text_only_answer_ends_the_run() -> None:
    model = ScriptedModel(
        [Message(role="assistant", content=(TextBlock(text="Nothing to save."),))]
    )
    result = asyncio.run(
        run_forked_agent(params(model), CONTEXT, PROMPT, tools=[], can_use_tool=allow_all)
    )
    assert result.turn_count == 1
    assert result.tool_calls == 0
    assert isinstance(result.messages[-1].content[0], TextBlock)
    assert not any(isinstance(b, ToolResultBlock) for m in result.messages for b in m.content)


def test_malformed_tool_input_is_answered_not_raised(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    gate = auto_mem_can_use_tool(memory, cwd=tmp_path)
    model = ScriptedModel(
        [
            calls(
                ("1", "Write", {"file_path": str(memory / "a.md"), "content": 5}),
                ("2", "Edit", {"file_path": str(memory / "a.md")}),
                ("3", "Read", {"file_path": ["not", "a", "path"]}),
                ("4", "Grep", {"pattern": "(unclosed"}),
                ("5", "Glob", {}),
            ),
            calls(("6", "Write", {"file_path": str(memory / "a.md"), "content": "fixed\n"})),
            "saved",
        ]
    )
    result = asyncio.run(
        run_forked_agent(
            params(model), CONTEXT, PROMPT, tools=builtin_tools(tmp_path), can_use_tool=gate
        )
    )
    errors = result.messages[2].tool_results
    assert [r.is_error for r in errors] == [True] * 5
    assert "'content' must be a string" in errors[0].text
    assert "missing required parameter" in errors[1].text
    assert result.turn_count == 3
    assert result.written_paths == (memory / "a.md",)
    assert (memory / "a.md").read_text() == "fixed\n"
    model.assert_all_used()


@dataclass
class Saver(FakeTool):
    """A tool of memdir's kind: it says what a call does."""

    declared: tuple[Effect, ...] = ()

    def effects(self, tool_input: object) -> tuple[Effect, ...]:
        return self.declared


@pytest.mark.parametrize(
    ("declared", "requests"),
    [
        ((WritesPath("/m/a.md", "x"),), 1),  # the work is done: no request to hear it said
        ((ReadsPath("/m/a.md"),), 2),  # a read needs its answer read
        ((), 2),
    ],
)
def test_a_turn_of_writes_ends_the_fork_whatever_the_tool_is_called(
    declared: tuple[Effect, ...], requests: int
) -> None:
    model = ScriptedModel([calls(("t1", "Note", {})), "done"])
    tool = Saver("Note", declared=declared)
    result = asyncio.run(
        run_forked_agent(
            params(model), CONTEXT, PROMPT, tools=[tool], can_use_tool=allow_all,
            end_after_writes=True,
        )
    )  # fmt: skip
    assert result.turn_count == requests
