"""The fakes are as strict as the APIs where a bill depends on it: a prompt past the
model's context window is refused with the provider's 400, and a reasoning model reports
the reasoning tokens it bills as output."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Coroutine
from typing import Any

import anthropic
import openai
import pytest

from memdir.cost import bill, model_family
from memdir.errors import ModelError
from memdir.messages import Message
from memdir.models import ModelRequest, OpenAIModel
from memdir.testing import DEFAULT_REASONING_TOKENS, FakeAnthropicServer, FakeOpenAIServer
from memdir.testing._cache import anthropic_prompt_tokens, openai_prompt_tokens


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


def user(chars: int) -> list[dict[str, Any]]:
    """One user message whose compact JSON makes a prompt of about ``chars / 4`` tokens."""
    return [{"role": "user", "content": "x" * chars}]


async def post_claude(server: FakeAnthropicServer, body: dict[str, Any]) -> tuple[int, Any]:
    async with anthropic.AsyncAnthropic(
        base_url=server.base_url, api_key="test", max_retries=0
    ) as client:
        try:
            message = await client.messages.create(**body)
        except anthropic.BadRequestError as error:
            return error.status_code, error.body
    return 200, message


async def post_gpt(server: FakeOpenAIServer, body: dict[str, Any]) -> tuple[int, Any]:
    async with openai.AsyncOpenAI(
        base_url=server.base_url, api_key="test", max_retries=0
    ) as client:
        try:
            completion = await client.chat.completions.create(**body)
        except openai.BadRequestError as error:
            return error.status_code, error.body
    return 200, completion


def claude_body(model: str, chars: int) -> dict[str, Any]:
    return {"model": model, "max_tokens": 100, "messages": user(chars)}


# The context window: Anthropic.


def test_anthropic_refuses_a_prompt_past_the_window_as_the_api_does() -> None:
    # Sonnet 4.5 takes 200,000 tokens; this prompt has a few thousand more.
    body = claude_body("claude-sonnet-4-5", 4 * 203_000)
    tokens = anthropic_prompt_tokens(body)
    assert tokens > 200_000
    server = FakeAnthropicServer(["never sent"])
    with server:
        status, error = run(post_claude(server, body))
    assert status == 400
    message = f"prompt is too long: {tokens} tokens > 200000 maximum"
    assert error == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": message},
        "request_id": "req_fake_1",
    }
    (recorded,) = server.requests
    assert recorded.status == 400
    assert recorded.usage is None
    assert json.loads(recorded.raw)["model"] == "claude-sonnet-4-5"
    assert server.unused == 1  # the script's reply waits for a request the API would serve
    assert any("prompt is too long" in problem for problem in server.problems)


def test_anthropic_error_body_has_the_documented_shape() -> None:
    payload = {"model": "claude-test", "max_tokens": 5, "messages": user(400)}
    with FakeAnthropicServer(context_tokens=10) as server:
        request = urllib.request.Request(
            f"{server.base_url}/v1/messages",
            data=json.dumps(payload).encode(),
            headers={"content-type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=10)
    assert caught.value.code == 400
    body = json.loads(caught.value.read())
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith("prompt is too long: ")
    assert body["error"]["message"].endswith(" tokens > 10 maximum")


def test_anthropic_serves_a_prompt_inside_the_window() -> None:
    body = claude_body("claude-sonnet-4-5", 4 * 190_000)
    with FakeAnthropicServer(["ok"]) as server:
        status, message = run(post_claude(server, body))
        server.assert_all_used()
    assert status == 200
    usage = message.usage
    total = usage.input_tokens + usage.cache_read_input_tokens
    total += usage.cache_creation_input_tokens
    assert total == anthropic_prompt_tokens(body) <= 200_000


@pytest.mark.parametrize(("extra", "served"), [(0, True), (1, False)])
def test_the_limit_itself_is_served_and_one_token_more_is_not(extra: int, served: bool) -> None:
    base = claude_body("claude-test", 0)
    limit = anthropic_prompt_tokens(base) + 50
    body = claude_body("claude-test", 4 * (50 + extra))
    assert anthropic_prompt_tokens(body) == limit + extra
    with FakeAnthropicServer(["ok"], context_tokens=limit) as server:
        status, _ = run(post_claude(server, body))
    assert (status == 200) is served


def test_a_model_the_table_does_not_know_is_not_refused() -> None:
    # No window is known for it, so the fake does not invent one.
    body = claude_body("claude-fake-1", 4 * 1_100_000)
    with FakeAnthropicServer(["ok"]) as server:
        status, _ = run(post_claude(server, body))
        server.assert_all_used()
    assert status == 200


def test_a_million_token_model_takes_what_a_200k_one_refuses() -> None:
    body = claude_body("claude-sonnet-5-5", 4 * 300_000)
    with FakeAnthropicServer(["ok"]) as server:
        status, _ = run(post_claude(server, body))
    assert status == 200
    assert model_family("claude-sonnet-5-5").context_tokens == 1_000_000


def test_dropped_thinking_does_not_count_towards_the_window() -> None:
    # Sonnet 4.5 drops earlier turns' thinking: it is not in the window, so a prompt whose
    # old thinking would take it past 200,000 tokens is still served.
    thinking = {"type": "thinking", "thinking": "t" * (4 * 60_000), "signature": "s"}
    messages = [
        {"role": "user", "content": "x" * (4 * 150_000)},
        {"role": "assistant", "content": [thinking, {"type": "text", "text": "Noted."}]},
        {"role": "user", "content": "And now?"},
    ]
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": messages}
    assert anthropic_prompt_tokens(body, keeps_thinking=True) > 200_000
    with FakeAnthropicServer(["ok"]) as server:
        status, _ = run(post_claude(server, body))
    assert status == 200
    # Opus 4.6 keeps earlier thinking: the same conversation is past its window.
    with FakeAnthropicServer(["ok"]) as server:
        status, _ = run(post_claude(server, {**body, "model": "claude-opus-4-6"}))
    assert status == 400


# The context window: OpenAI.


def test_openai_refuses_a_prompt_past_the_window_with_context_length_exceeded() -> None:
    body = {"model": "gpt-4o", "messages": user(4 * 130_000)}
    tokens = openai_prompt_tokens(body)
    with FakeOpenAIServer(["never sent"]) as server:
        status, error = run(post_gpt(server, body))
        assert server.unused == 1
    assert status == 400
    assert error == {
        "message": (
            f"This model's maximum context length is 128000 tokens. However, your messages "
            f"resulted in {tokens} tokens. Please reduce the length of the messages."
        ),
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }


def test_gpt_5_takes_272k_tokens_of_prompt_in_its_400k_window() -> None:
    inside = {"model": "gpt-5-mini", "messages": user(4 * 250_000)}
    past = {"model": "gpt-5-mini", "messages": user(4 * 280_000)}
    with FakeOpenAIServer(["ok", "never sent"]) as server:
        served, _ = run(post_gpt(server, inside))
        status, error = run(post_gpt(server, past))
    assert served == 200
    assert status == 400
    assert error["code"] == "context_length_exceeded"
    assert error["message"] == (
        "Input tokens exceed the configured limit of 272000 tokens. Your messages resulted "
        f"in {openai_prompt_tokens(past)} tokens. Please reduce the length of the messages."
    )


def test_openai_model_the_table_does_not_know_is_not_refused() -> None:
    with FakeOpenAIServer(["ok"]) as server:
        status, _ = run(post_gpt(server, {"model": "gpt-fake-1", "messages": user(4 * 300_000)}))
    assert status == 200


def test_memdir_sees_the_refusal_as_a_model_error() -> None:
    async def ask(server: FakeOpenAIServer) -> None:
        model = OpenAIModel("gpt-4o", base_url=server.base_url, api_key="test")
        await model.request(ModelRequest(messages=(Message.user("x" * (4 * 130_000)),)))

    with FakeOpenAIServer(["never sent"]) as server, pytest.raises(ModelError) as caught:
        run(ask(server))
    assert caught.value.status == 400
    assert "maximum context length is 128000 tokens" in str(caught.value)


# Reasoning tokens.


def completion_usage(server: FakeOpenAIServer, model: str, **params: Any) -> Any:
    body = {"model": model, "messages": user(40), **params}
    status, completion = run(post_gpt(server, body))
    assert status == 200
    return completion.usage


def test_reasoning_models_report_reasoning_tokens_billed_as_output() -> None:
    answer = "Saved."  # 6 characters: 2 visible tokens
    with FakeOpenAIServer([answer, answer, answer]) as server:
        mini = completion_usage(server, "gpt-5-mini")
        o4 = completion_usage(server, "o4-mini")
        plain = completion_usage(server, "gpt-4o")
    assert DEFAULT_REASONING_TOKENS == 300
    for usage in (mini, o4):
        assert usage.completion_tokens_details.reasoning_tokens == 300
        assert usage.completion_tokens == 2 + 300
        assert usage.total_tokens == usage.prompt_tokens + 302
    assert plain.completion_tokens_details.reasoning_tokens == 0
    assert plain.completion_tokens == 2


def test_the_reasoning_count_is_configurable_per_server_and_per_reply() -> None:
    override = Message.assistant("Saved.")
    override = Message(role="assistant", content=override.content, extra={"reasoning_tokens": 7})
    with FakeOpenAIServer(["Saved.", override, "Saved."], reasoning_tokens=50) as server:
        assert completion_usage(server, "gpt-5").completion_tokens == 52
        assert completion_usage(server, "gpt-5").completion_tokens == 9
        # No reasoning at effort "none".
        none = completion_usage(server, "gpt-5.1", reasoning_effort="none")
    assert none.completion_tokens == 2
    assert none.completion_tokens_details.reasoning_tokens == 0


def test_reasoning_tokens_in_the_streamed_usage() -> None:
    messages: Any = user(40)  # Any: the SDK's TypedDict params

    async def stream(server: FakeOpenAIServer) -> Any:
        async with openai.AsyncOpenAI(
            base_url=server.base_url, api_key="test", max_retries=0
        ) as client:
            chunks = await client.chat.completions.create(
                model="gpt-5-mini",
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
            )
            return [chunk async for chunk in chunks][-1].usage

    with FakeOpenAIServer(["Saved."]) as server:
        usage = run(stream(server))
    assert usage.completion_tokens == 302
    assert usage.completion_tokens_details.reasoning_tokens == 300


def test_memdir_bills_reasoning_tokens_as_output() -> None:
    async def ask(server: FakeOpenAIServer) -> Any:
        model = OpenAIModel("gpt-5-mini", base_url=server.base_url, api_key="test")
        return await model.request(ModelRequest(messages=(Message.user("hi"),)))

    with FakeOpenAIServer(["Saved."]) as server:
        response = run(ask(server))
    usage = response.usage
    assert usage.output_tokens == 302
    assert usage.reasoning_tokens == 300
    assert (usage + usage).reasoning_tokens == 600
    prices = model_family("gpt-5-mini").prices
    assert prices.output == 8.0
    assert bill(usage, prices) == usage.input_tokens + 302 * 8.0
    assert model_family("gpt-5-mini").reasoning
    assert not model_family("gpt-4o").reasoning


def test_the_reasoning_spent_follows_the_effort_and_the_models_default() -> None:
    with FakeOpenAIServer(["Saved."] * 5) as server:
        medium = completion_usage(server, "gpt-5-mini")  # before gpt-5.1: medium by default
        minimal = completion_usage(server, "gpt-5-mini", reasoning_effort="minimal")
        high = completion_usage(server, "gpt-5-mini", reasoning_effort="high")
        plain = completion_usage(server, "gpt-5.1")  # from gpt-5.1 on: none by default
        low = completion_usage(server, "gpt-5.1", reasoning_effort="low")
    assert medium.completion_tokens_details.reasoning_tokens == DEFAULT_REASONING_TOKENS
    assert minimal.completion_tokens_details.reasoning_tokens == 100
    assert high.completion_tokens_details.reasoning_tokens == 900
    assert plain.completion_tokens_details.reasoning_tokens == 0
    assert low.completion_tokens_details.reasoning_tokens == 150


@pytest.mark.parametrize(
    ("model", "effort", "says"),
    [
        ("gpt-5-mini", "none", "does not support 'none' with this model"),  # gpt-5.1 and later
        ("gpt-5.1", "minimal", "does not support 'minimal' with this model"),
        ("o3", "minimal", "Supported values are: 'low', 'medium', 'high'."),
        ("gpt-4o", "low", "'reasoning_effort' is not supported with this model"),
    ],
)
def test_an_effort_the_model_does_not_take_is_refused(model: str, effort: str, says: str) -> None:
    with FakeOpenAIServer(["never sent"]) as server:
        status, error = run(
            post_gpt(server, {"model": model, "messages": user(40), "reasoning_effort": effort})
        )
    assert status == 400
    assert says in str(error)
