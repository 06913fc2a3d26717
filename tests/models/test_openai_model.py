"""OpenAIModel over real HTTP: the official SDK talking to FakeOpenAIServer."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from memdir.errors import ModelError
from memdir.messages import Message, ToolResultBlock, ToolUseBlock
from memdir.models import ModelRequest, ModelResponse, OpenAIModel, RetryPolicy, openai_tools
from memdir.testing import FakeOpenAIServer, Fault

FAST = RetryPolicy(max_retries=3, initial_delay=0.0, jitter=0.0)
TOOLS = [
    {
        "name": "get_weather",
        "description": "Weather for a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        "cache_control": {"type": "ephemeral"},
    }
]


def ask(
    server: FakeOpenAIServer, request: ModelRequest, retry: RetryPolicy = FAST
) -> ModelResponse:
    model = OpenAIModel("gpt-test", api_key="test-key", base_url=server.base_url, retry=retry)

    async def go() -> ModelResponse:
        try:
            return await model.request(request)
        finally:
            await model.client.close()

    return asyncio.run(go())


def test_tool_definitions_convert_to_functions() -> None:
    assert openai_tools(TOOLS) == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    already: dict[str, Any] = {"type": "function", "function": {"name": "x", "parameters": {}}}
    assert openai_tools([already]) == [already]


def test_parallel_tool_calls_both_ways() -> None:
    answer = Message(
        role="assistant",
        content=(
            ToolUseBlock(id="call_1", name="get_weather", input={"city": "Paris"}),
            ToolUseBlock(id="call_2", name="get_weather", input={"city": "Rome"}),
        ),
    )
    request = ModelRequest(
        system="Be brief.", tools=TOOLS, messages=(Message.user("Paris and Rome?"),)
    )
    with FakeOpenAIServer([answer], min_cache_tokens=0) as server:
        response = ask(server, request)
        body = server.requests[0].body
    assert [(u.id, dict(u.input)) for u in response.message.tool_uses] == [
        ("call_1", {"city": "Paris"}),
        ("call_2", {"city": "Rome"}),
    ]
    assert response.stop_reason == "tool_use"
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["tools"][0]["function"]["name"] == "get_weather"

    # Send the calls and their results back: tool_calls and tool messages on the wire.
    follow = ModelRequest(
        tools=TOOLS,
        messages=(
            Message.user("Paris and Rome?"),
            response.message,
            Message(role="user", content=(ToolResultBlock(tool_use_id="call_1", content="18C"),)),
            Message(role="user", content=(ToolResultBlock(tool_use_id="call_2", content="22C"),)),
        ),
    )
    with FakeOpenAIServer(["Paris 18C, Rome 22C."], min_cache_tokens=0) as server:
        final = ask(server, follow)
        sent = server.requests[0].body["messages"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["call_1", "call_2"]
    assert json.loads(sent[1]["tool_calls"][1]["function"]["arguments"]) == {"city": "Rome"}
    assert sent[2] == {"role": "tool", "tool_call_id": "call_1", "content": "18C"}
    assert sent[3] == {"role": "tool", "tool_call_id": "call_2", "content": "22C"}
    assert final.message.text == "Paris 18C, Rome 22C."
    assert final.stop_reason == "end_turn"


def test_cached_tokens_are_read() -> None:
    system = "House rules. " * 800
    request = ModelRequest(system=system, messages=(Message.user("hi"),))
    with FakeOpenAIServer(["a", "b"]) as server:
        first = ask(server, request)
        second = ask(server, request)
    assert first.usage.cache_read_input_tokens == 0
    cached = second.usage.cache_read_input_tokens
    assert cached >= 1024
    assert cached % 128 == 0
    assert second.usage.input_tokens + cached == first.usage.input_tokens


def test_identical_answers_get_distinct_uuids() -> None:
    request = ModelRequest(messages=(Message.user("hi"),))
    with FakeOpenAIServer(["same", "same"], min_cache_tokens=0) as server:
        a = ask(server, request)
        b = ask(server, request)
    assert a.message.uuid != b.message.uuid


@pytest.mark.parametrize("status", [429, 500, 502])
def test_transient_failures_are_retried(status: int) -> None:
    with FakeOpenAIServer(
        [Fault(status=status), Fault(status=status), "ok"], min_cache_tokens=0
    ) as server:
        response = ask(server, ModelRequest(messages=(Message.user("hi"),)))
        assert len(server.requests) == 3
    assert response.message.text == "ok"


def test_retries_run_out_into_model_error() -> None:
    policy = RetryPolicy(max_retries=1, initial_delay=0.0, jitter=0.0)
    with FakeOpenAIServer([Fault(status=429), Fault(status=429)], min_cache_tokens=0) as server:
        with pytest.raises(ModelError, match="HTTP 429"):
            ask(server, ModelRequest(messages=(Message.user("hi"),)), policy)
        assert len(server.requests) == 2


def test_client_error_is_not_retried() -> None:
    with FakeOpenAIServer([Fault(status=401)], min_cache_tokens=0) as server:
        with pytest.raises(ModelError, match="HTTP 401"):
            ask(server, ModelRequest(messages=(Message.user("hi"),)))
        assert len(server.requests) == 1
