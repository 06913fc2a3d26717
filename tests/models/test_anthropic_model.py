"""AnthropicModel over real HTTP: the official SDK talking to FakeAnthropicServer."""

from __future__ import annotations

import asyncio
import gc
import json
import weakref

import pytest

from memdir.errors import ModelError
from memdir.messages import Message, ToolResultBlock, ToolUseBlock
from memdir.models import AnthropicModel, ModelRequest, RetryPolicy
from memdir.testing import FakeAnthropicServer, Fault

FAST = RetryPolicy(max_retries=3, initial_delay=0.0, jitter=0.0)
TOOLS = [
    {
        "name": "Read",
        "description": "Read a file",
        "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
    }
]


def model_for(
    server: FakeAnthropicServer, retry: RetryPolicy = FAST, timeout: float = 30.0
) -> AnthropicModel:
    return AnthropicModel(
        "claude-test", api_key="test-key", base_url=server.base_url, retry=retry, timeout=timeout
    )


def ask(model: AnthropicModel, request: ModelRequest) -> object:
    async def go() -> object:
        try:
            return await model.request(request)
        finally:
            await model.client.close()

    return asyncio.run(go())


REQUEST = ModelRequest(
    system="You are terse.",
    tools=TOOLS,
    messages=(Message.user("What is in MEMORY.md?"),),
    params={"temperature": 0},
)


def test_text_answer_and_wire_shape() -> None:
    with FakeAnthropicServer(["It lists two memories."], min_cache_tokens=0) as server:
        response = ask(model_for(server), REQUEST)
        body = server.requests[0].body
    assert response.message.role == "assistant"  # type: ignore[attr-defined]
    assert response.message.text == "It lists two memories."  # type: ignore[attr-defined]
    assert response.stop_reason == "end_turn"  # type: ignore[attr-defined]
    assert body["model"] == "claude-test"
    assert body["max_tokens"] == 8192
    assert body["temperature"] == 0
    assert body["tools"] == TOOLS
    assert body["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "What is in MEMORY.md?",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        }
    ]


def test_only_the_last_message_carries_a_breakpoint() -> None:
    earlier = Message(
        role="user",
        content=(
            ToolResultBlock(
                tool_use_id="t0", content="x", extra={"cache_control": {"type": "ephemeral"}}
            ),
        ),
    )
    request = ModelRequest(
        system=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        messages=(Message.user("hi"), Message.assistant("hello"), Message.user("again")),
    )
    with FakeAnthropicServer(["ok"], min_cache_tokens=0) as server:
        ask(model_for(server), request)
        body = server.requests[0].body
    assert "cache_control" not in body["system"][0]
    assert body["system"][1]["cache_control"] == {"type": "ephemeral"}
    marked = [b for m in body["messages"] for b in m["content"] if "cache_control" in b]
    assert marked == [{"type": "text", "text": "again", "cache_control": {"type": "ephemeral"}}]
    assert earlier.content  # a marker from elsewhere would be stripped the same way


def test_tool_use_answer_round_trips() -> None:
    answer = Message(
        role="assistant",
        content=(ToolUseBlock(id="toolu_1", name="Read", input={"file_path": "/m/MEMORY.md"}),),
    )
    with FakeAnthropicServer([answer], min_cache_tokens=0) as server:
        response = ask(model_for(server), REQUEST)
    (use,) = response.message.tool_uses  # type: ignore[attr-defined]
    assert (use.id, use.name, dict(use.input)) == ("toolu_1", "Read", {"file_path": "/m/MEMORY.md"})
    assert response.stop_reason == "tool_use"  # type: ignore[attr-defined]
    # What came back can be sent again as it is.
    follow = ModelRequest(
        messages=(
            *REQUEST.messages,
            response.message,  # type: ignore[attr-defined]
            Message(
                role="user", content=(ToolResultBlock(tool_use_id="toolu_1", content="- a.md"),)
            ),
        )
    )
    with FakeAnthropicServer(["done"], min_cache_tokens=0) as server:
        ask(model_for(server), follow)
        sent = server.requests[0].body["messages"][1]
    assert sent == {
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "Read",
                "input": {"file_path": "/m/MEMORY.md"},
            }
        ],
    }


def test_usage_is_read() -> None:
    long_system = "Rules. " * 1200
    request = ModelRequest(system=long_system, messages=(Message.user("hi"),))
    with FakeAnthropicServer(["a", "b"]) as server:
        first = ask(model_for(server), request)
        second = ask(model_for(server), request)
    assert first.usage.cache_creation_input_tokens > 1024  # type: ignore[attr-defined]
    assert first.usage.cache_read_input_tokens == 0  # type: ignore[attr-defined]
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens  # type: ignore[attr-defined]
    assert second.usage.output_tokens >= 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("status", [429, 529, 500, 503])
def test_transient_failures_are_retried(status: int) -> None:
    faults = [Fault(status=status, headers={"retry-after": "0"}) for _ in range(3)]
    with FakeAnthropicServer([*faults, "finally"], min_cache_tokens=0) as server:
        response = ask(model_for(server), REQUEST)
        assert len(server.requests) == 4
    assert response.message.text == "finally"  # type: ignore[attr-defined]


@pytest.mark.parametrize("status", [429, 529, 500])
def test_retries_run_out_into_model_error(status: int) -> None:
    faults = [Fault(status=status) for _ in range(3)]
    policy = RetryPolicy(max_retries=2, initial_delay=0.0, jitter=0.0)
    with FakeAnthropicServer(faults, min_cache_tokens=0) as server:
        with pytest.raises(ModelError, match=f"HTTP {status}") as info:
            ask(model_for(server, policy), REQUEST)
        assert len(server.requests) == 3
    assert "gave up after 3 attempts" in str(info.value)
    assert "anthropic:claude-test" in str(info.value)


def test_client_errors_are_not_retried() -> None:
    with FakeAnthropicServer([Fault(status=400)], min_cache_tokens=0) as server:
        with pytest.raises(ModelError, match="HTTP 400"):
            ask(model_for(server), REQUEST)
        assert len(server.requests) == 1


def test_malformed_body_is_retried_then_fails() -> None:
    policy = RetryPolicy(max_retries=1, initial_delay=0.0, jitter=0.0)
    faults = [Fault(status=200, malformed=True), Fault(status=200, malformed=True)]
    with FakeAnthropicServer(faults, min_cache_tokens=0) as server, pytest.raises(ModelError):
        ask(model_for(server, policy), REQUEST)


def test_truncated_stream_is_retried() -> None:
    with FakeAnthropicServer(
        [Fault(status=200, truncate_stream=True), "whole"], min_cache_tokens=0
    ) as server:
        response = ask(model_for(server), REQUEST)
    assert response.message.text == "whole"  # type: ignore[attr-defined]


def test_timeout_becomes_model_error() -> None:
    policy = RetryPolicy(max_retries=0)
    with (
        FakeAnthropicServer([Fault(status=200, delay=30.0)], min_cache_tokens=0) as server,
        pytest.raises(ModelError, match="Timeout"),
    ):
        ask(model_for(server, policy, timeout=0.3), REQUEST)


def test_request_body_is_json_as_sent() -> None:
    with FakeAnthropicServer(["ok"], min_cache_tokens=0) as server:
        ask(model_for(server), REQUEST)
        recorded = server.requests[0]
    assert json.loads(recorded.raw) == recorded.body


def test_breakpoints_skip_blocks_the_api_refuses_to_mark() -> None:
    """A breakpoint never lands on a thinking block or an empty text block."""
    from memdir.messages import TextBlock, ThinkingBlock

    answer = Message(
        role="assistant",
        content=(TextBlock(text="The plan."), ThinkingBlock(thinking="more", signature="sig")),
    )
    request = ModelRequest(
        system="s",
        messages=(Message.user("plan it"), answer, Message.user("")),
        cache_points=(1,),
    )
    wire = AnthropicModel("claude-test", api_key="k").wire_request(request)["messages"]
    text, thinking = wire[1]["content"]
    assert text["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in thinking
    assert all("cache_control" not in block for block in wire[2]["content"])  # empty text


def test_the_sdks_stream_snapshot_class_survives_a_collection() -> None:
    # The SDK's stream helper parametrises ParsedMessage on every response; pydantic keeps
    # the class only weakly, and rebuilding it took 6 to 12 ms on the host's loop. After
    # a request the model holds it, so a collection cannot free it.
    from anthropic.lib._parse._response import ResponseFormatT
    from anthropic.types.parsed_message import ParsedMessage

    with FakeAnthropicServer(["Done."], min_cache_tokens=0) as server:
        ask(model_for(server), REQUEST)
    built = weakref.ref(ParsedMessage[ResponseFormatT])  # type: ignore[valid-type]
    gc.collect()
    assert built() is not None
