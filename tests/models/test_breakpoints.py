"""Anthropic's four breakpoints: the host's own markers are counted and kept, never exceeded."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.fork import CacheSafeParams
from memdir.messages import Message, ToolUseBlock
from memdir.models import AnthropicModel, ModelRequest, RetryPolicy
from memdir.models._anthropic import MAX_BREAKPOINTS, breakpoint_count
from memdir.telemetry import CollectingSink
from memdir.testing import FakeAnthropicServer, Fault
from tests.memory_files import same_memory

ONE_HOUR = {"type": "ephemeral", "ttl": "1h"}
FIVE_MINUTES = {"type": "ephemeral"}


def tools(marked_last: bool = True) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {
            "name": f"tool_{i}",
            "description": f"Tool number {i}. " * 20,
            "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}},
        }
        for i in range(3)
    ]
    if marked_last:
        out[-1]["cache_control"] = dict(FIVE_MINUTES)
    return out


def system(first: dict[str, str] | None = None) -> list[dict[str, Any]]:
    static: dict[str, Any] = {"type": "text", "text": "Static guidance. " * 400}
    if first is not None:
        static["cache_control"] = dict(first)
    return [static, {"type": "text", "text": "Today is Wednesday."}]


CONVERSATION = (
    Message.user("Remember that the release train leaves on Thursdays."),
    Message.assistant("Noted: releases go out on Thursdays."),
)


def wire(request: ModelRequest) -> dict[str, Any]:
    return AnthropicModel("claude-test", api_key="k").wire_request(request)


def test_a_host_with_four_markers_keeps_them_and_the_fork_stays_within_four() -> None:
    host = ModelRequest(system=system(FIVE_MINUTES), tools=tools(), messages=CONVERSATION)
    sent = wire(host)
    # The host's last tool and its static system block, memdir's last system block and the
    # last message: four, as the host asked.
    assert breakpoint_count(sent) == MAX_BREAKPOINTS
    assert sent["tools"][-1]["cache_control"] == FIVE_MINUTES
    assert sent["system"][0]["cache_control"] == FIVE_MINUTES
    fork = ModelRequest(
        system=system(FIVE_MINUTES),
        tools=tools(),
        messages=(*CONVERSATION, Message.user("# Memory update")),
        cache_points=(1,),  # the host's final answer: no room left for it
    )
    forked = wire(fork)
    assert breakpoint_count(forked) == MAX_BREAKPOINTS
    marked = [i for i, m in enumerate(forked["messages"]) if "cache_control" in m["content"][-1]]
    assert marked == [2]  # the conversation's own marker, on the prompt, won
    assert forked["tools"] == sent["tools"]
    assert forked["system"] == sent["system"]


def test_extra_points_take_what_is_left_latest_first() -> None:
    messages = tuple(Message.user(f"m{i}") for i in range(8))
    request = ModelRequest(system="s", messages=messages, cache_points=(1, 3, 5))
    sent = wire(request)
    marked = [i for i, m in enumerate(sent["messages"]) if "cache_control" in m["content"][-1]]
    assert marked == [3, 5, 7]  # the system prompt took one; the oldest point gave way
    assert breakpoint_count(sent) == MAX_BREAKPOINTS


def test_a_one_hour_ttl_is_never_downgraded() -> None:
    blocks = [{"type": "text", "text": "a", "cache_control": dict(ONE_HOUR)}]
    blocks.append({"type": "text", "text": "b", "cache_control": dict(ONE_HOUR)})
    sent = wire(ModelRequest(system=blocks, messages=CONVERSATION))
    assert [b["cache_control"] for b in sent["system"]] == [ONE_HOUR, ONE_HOUR]
    assert sent["messages"][-1]["content"][-1]["cache_control"] == FIVE_MINUTES


def test_markers_the_host_cannot_fit_give_way_from_the_earliest() -> None:
    many = tools()
    for tool in many:
        tool["cache_control"] = dict(FIVE_MINUTES)
    sent = wire(ModelRequest(system=system(FIVE_MINUTES), tools=many, messages=CONVERSATION))
    assert breakpoint_count(sent) == MAX_BREAKPOINTS
    assert "cache_control" not in sent["tools"][0]
    assert "cache_control" not in sent["tools"][1]
    assert sent["messages"][-1]["content"][-1]["cache_control"] == FIVE_MINUTES


def test_a_top_level_automatic_marker_takes_a_slot() -> None:
    request = ModelRequest(
        system=system(FIVE_MINUTES),
        tools=tools(),
        messages=(*CONVERSATION, Message.user("next")),
        params={"cache_control": dict(FIVE_MINUTES)},
        cache_points=(0, 1),
    )
    sent = wire(request)
    assert breakpoint_count(sent) == MAX_BREAKPOINTS


def test_the_wire_form_is_shared_but_never_changed_by_a_marker() -> None:
    model = AnthropicModel("claude-test", api_key="k")
    first = model.wire_request(ModelRequest(messages=CONVERSATION))
    second = model.wire_request(ModelRequest(messages=(*CONVERSATION, Message.user("more"))))
    # The same message converted once: the unmarked form is shared, the marked one a copy.
    assert second["messages"][0] is first["messages"][0]
    assert "cache_control" in first["messages"][1]["content"][-1]
    assert "cache_control" not in str(second["messages"][1])


def test_a_host_with_four_markers_still_gets_its_memories(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    note = memory / "release_train.md"
    content = (
        "---\nname: Release train\ndescription: releases leave on Thursdays\ntype: project\n"
        "---\n\nReleases leave on Thursdays.\n\n**Why:** the train.\n\n**How to apply:** plan.\n"
    )
    write = ToolUseBlock(id="w1", name="Write", input={"file_path": str(note), "content": content})
    sink = CollectingSink()
    with FakeAnthropicServer(["Noted.", Message(role="assistant", content=(write,))]) as fake:
        model = AnthropicModel(
            "claude-test", api_key="k", base_url=fake.base_url, retry=RetryPolicy(max_retries=0)
        )
        params = CacheSafeParams(model=model, system=system(FIVE_MINUTES), tools=tools())
        extractor = MemoryExtractor(memory, model, ExtractConfig(mode="fork"), sink=sink)

        async def main() -> None:
            host = ModelRequest(system=params.system, tools=params.tools, messages=CONVERSATION[:1])
            answer = await model.request(host)
            turn = TurnContext(messages=(CONVERSATION[0], answer.message), params=params)
            extractor.on_turn_end(turn)
            await extractor.drain()
            await model.aclose()

        asyncio.run(main())
        fake.assert_all_used()
        requests = fake.requests
    assert [breakpoint_count(r.body) for r in requests] == [4, 4]
    assert sink.named("extract.error") == []
    (run,) = sink.named("extract.run")
    assert run.fields["mode"] == "fork"
    assert run.fields["memories_saved"] == 1
    assert same_memory(note.read_text(), content)


def test_a_refused_request_says_why(tmp_path: Path) -> None:
    refusal = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens"},
    }
    sink = CollectingSink()
    with FakeAnthropicServer([Fault(status=400, body=refusal)]) as fake:
        model = AnthropicModel(
            "claude-test", api_key="k", base_url=fake.base_url, retry=RetryPolicy(max_retries=0)
        )
        extractor = MemoryExtractor(tmp_path / "memory", model, sink=sink)

        async def main() -> None:
            extractor.on_turn_end(TurnContext(messages=CONVERSATION, cwd=str(tmp_path)))
            await extractor.drain()
            await model.aclose()

        asyncio.run(main())
    (error,) = sink.named("extract.error")
    assert error.fields["error_type"] == "ModelError"
    assert "HTTP 400" in error.fields["reason"]
    assert "prompt is too long: 210000 tokens" in error.fields["reason"]
    assert "\n" not in error.fields["reason"]
