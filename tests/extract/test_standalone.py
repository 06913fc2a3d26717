"""Standalone runs: memdir's own request when the host shares none (transcripts, plain hosts)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from memdir.extract import STANDALONE_SYSTEM_PROMPT, ExtractConfig, MemoryExtractor, TurnContext
from memdir.extract._standalone import build_standalone_context
from memdir.messages import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from memdir.models import AnthropicModel, RetryPolicy
from memdir.telemetry import Event
from memdir.testing import FakeAnthropicServer, ScriptedModel


def convo(n: int, size: int = 10) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        out.append(Message.user(f"question {i} " + "x" * size))
        out.append(Message.assistant(f"answer {i} " + "y" * size))
    return out


def test_foreign_tool_calls_become_text_and_long_results_are_cut() -> None:
    messages = [
        Message.user("look at the logs"),
        Message(
            role="assistant",
            content=(
                ThinkingBlock(thinking="private reasoning", signature="sig"),
                TextBlock(text="Checking."),
                ToolUseBlock(id="t1", name="mcp__logs__tail", input={"lines": 500}),
            ),
        ),
        Message(role="user", content=(ToolResultBlock(tool_use_id="t1", content="L" * 5000),)),
        Message.assistant("The deploy failed at 14:02."),
    ]
    ctx = build_standalone_context(
        messages, cursor_index=0, budget_tokens=100_000, tool_result_chars=100
    )
    texts = [m.text for m in ctx.messages]
    assert all(len(m.content) == 1 and isinstance(m.content[0], TextBlock) for m in ctx.messages)
    assert texts[1] == 'Checking.\n\n[called tool mcp__logs__tail with {"lines": 500}]'
    assert "private reasoning" not in "".join(texts)
    assert texts[2].startswith("[tool result]\n" + "L" * 100)
    assert "4900 more characters cut" in texts[2]
    assert len(texts[2]) < 200
    assert ctx.dropped == 0


def test_conversation_starting_with_the_assistant_gets_a_user_opening() -> None:
    ctx = build_standalone_context(
        [Message.assistant("hi"), Message.user("hello")],
        cursor_index=0,
        budget_tokens=1000,
        tool_result_chars=100,
    )
    assert [m.role for m in ctx.messages] == ["user", "assistant", "user"]


def test_budget_drops_old_handled_messages_in_stable_steps() -> None:
    messages = convo(100, size=400)  # 200 messages of about 100 tokens each
    ctx = build_standalone_context(
        messages, cursor_index=190, budget_tokens=12_000, tool_result_chars=100
    )
    assert ctx.dropped % 32 == 0
    assert ctx.dropped > 0
    assert sum(len(m.text) // 4 + 1 for m in ctx.messages) <= 12_000
    # One more turn later the start has not moved: the cached prefix is kept.
    more = messages + convo(1, size=400)
    later = build_standalone_context(
        more, cursor_index=200, budget_tokens=12_000, tool_result_chars=100
    )
    assert later.dropped == ctx.dropped
    assert later.messages[0].text == ctx.messages[0].text


def test_new_messages_are_kept_over_old_ones_when_nothing_else_fits() -> None:
    messages = convo(50, size=400)
    ctx = build_standalone_context(
        messages, cursor_index=0, budget_tokens=1_000, tool_result_chars=100
    )
    assert ctx.messages[-1].text == messages[-1].text
    assert sum(len(m.text) // 4 + 1 for m in ctx.messages) <= 1_000 + 200


def test_extractor_without_params_sends_its_own_request(tmp_path: Path) -> None:
    model = ScriptedModel(["Nothing to save."])
    events: list[Event] = []
    ex = MemoryExtractor(tmp_path / "memory", model, ExtractConfig(), sink=events.append)

    async def main() -> None:
        ex.on_turn_end(TurnContext(messages=tuple(convo(2)), cwd=str(tmp_path)))
        await ex.drain()

    asyncio.run(main())
    (request,) = model.requests
    assert request.system == STANDALONE_SYSTEM_PROMPT
    assert [t["name"] for t in request.tools] == ["Read", "Write", "Edit", "Grep", "Glob", "Bash"]
    assert request.cache_points == (len(request.messages) - 2,)  # the end of the conversation
    assert "memory" in request.messages[-1].text
    (run,) = [e for e in events if e.name == "extract.run"]
    assert run.fields["cache_shared"] is False
    assert run.fields["message_count"] == 4


def test_successive_standalone_runs_share_a_cached_prefix(tmp_path: Path) -> None:
    messages = convo(20, size=300)
    with FakeAnthropicServer(["Nothing to save.", "Nothing to save."]) as server:
        model = AnthropicModel(
            "claude-test", api_key="k", base_url=server.base_url, retry=RetryPolicy(max_retries=0)
        )
        ex = MemoryExtractor(tmp_path / "memory", model)

        async def main() -> None:
            ex.on_turn_end(TurnContext(messages=tuple(messages[:-2]), cwd=str(tmp_path)))
            await ex.drain()
            ex.on_turn_end(TurnContext(messages=tuple(messages), cwd=str(tmp_path)))
            await ex.drain()
            await model.client.close()

        asyncio.run(main())
        first, second = server.requests
    assert first.usage is not None
    assert second.usage is not None
    assert first.usage["cache_creation_input_tokens"] > 1024
    # The second run reads the conversation the first one cached (all but the first
    # run's prompt, which is not shared) and writes only the new turn and its own prompt.
    first_written = first.usage["cache_creation_input_tokens"]
    read = second.usage["cache_read_input_tokens"]
    assert 1024 < read < first_written
    assert second.usage["cache_creation_input_tokens"] < first_written - read + 200
    marked = [
        i
        for i, m in enumerate(second.body["messages"])
        if any("cache_control" in b for b in m["content"])
    ]
    assert marked == [len(second.body["messages"]) - 2, len(second.body["messages"]) - 1]
