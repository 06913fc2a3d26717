"""The fake provider servers, driven by the official SDKs over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import http.client
import json
import math
import socket
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anthropic
import httpx2
import openai
import pytest
from openai.types.chat import ChatCompletionMessageFunctionToolCall

from memdir.errors import UsageError
from memdir.messages import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    message_from_anthropic,
)
from memdir.testing._http import Exchange
from memdir.testing._servers import FakeAnthropicServer, FakeOpenAIServer, Fault, Reply

USER: Any = [{"role": "user", "content": "hi"}]  # Any: the SDKs' TypedDict params
LONG_SYSTEM = "You keep a memory directory of Markdown files for the user. " * 100  # 6,000 chars


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


def claude(server: FakeAnthropicServer, **options: Any) -> anthropic.AsyncAnthropic:
    options.setdefault("max_retries", 0)
    return anthropic.AsyncAnthropic(base_url=server.base_url, api_key="test", **options)


def gpt(server: FakeOpenAIServer, **options: Any) -> openai.AsyncOpenAI:
    options.setdefault("max_retries", 0)
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="test", **options)


async def ask_claude(
    server: FakeAnthropicServer, *, stream: bool = False, **params: Any
) -> anthropic.types.Message:
    params = {"model": "claude-test", "max_tokens": 100, "messages": USER, **params}
    message: anthropic.types.Message
    async with claude(server) as client:
        if not stream:
            message = await client.messages.create(**params)
        else:
            async with client.messages.stream(**params) as events:
                message = await events.get_final_message()
    return message


async def ask_gpt(
    server: FakeOpenAIServer, *, stream: bool = False, **params: Any
) -> openai.types.chat.ChatCompletion:
    params = {"model": "gpt-test", "messages": USER, **params}
    completion: openai.types.chat.ChatCompletion
    async with gpt(server) as client:
        if not stream:
            completion = await client.chat.completions.create(**params)
        else:
            params["stream_options"] = {"include_usage": True}
            async with client.chat.completions.stream(**params) as events:
                completion = await events.get_final_completion()
    return completion


async def ask_either(server: FakeAnthropicServer | FakeOpenAIServer, **params: Any) -> object:
    if isinstance(server, FakeAnthropicServer):
        return await ask_claude(server, **params)
    return await ask_gpt(server, **params)


THINK = ThinkingBlock(thinking="The user wants their preference kept.", signature="sig-123")
READ = ToolUseBlock(id="toolu_01", name="Read", input={"file_path": "/m/MEMORY.md", "limit": 5})
WRITE = ToolUseBlock(
    id="toolu_02",
    name="Write",
    input={"file_path": "/m/user.md", "content": "Prefers tabs — “always”.", "tags": [1, None]},
)


@dataclass(frozen=True)
class Case:
    name: str
    reply: Message
    stop: str


CASES = [
    Case("text", Message.assistant("Nothing worth saving."), "end_turn"),
    Case(
        "tool_use",
        Message(role="assistant", content=(TextBlock(text="Reading."), READ)),
        "tool_use",
    ),
    Case(
        "thinking", Message(role="assistant", content=(THINK, TextBlock(text="Done."))), "end_turn"
    ),
    Case("parallel_tools", Message(role="assistant", content=(READ, WRITE)), "tool_use"),
]
STREAM = pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])


# Replies through the SDKs.


@STREAM
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_anthropic_reply_round_trips(case: Case, stream: bool) -> None:
    async def scenario() -> None:
        async with FakeAnthropicServer([case.reply]) as server:
            message = await ask_claude(server, stream=stream)
        assert message_from_anthropic(message.to_dict()).content == case.reply.content
        assert message.stop_reason == case.stop
        assert message.model == "claude-fake-1"
        assert message.usage.output_tokens >= 1
        assert message.usage.model_dump(exclude_none=True) == server.requests[0].usage
        server.assert_all_used()

    run(scenario())


def test_anthropic_thinking_without_signature_gets_one() -> None:
    reply = Message(role="assistant", content=(ThinkingBlock(thinking="hm"), TextBlock(text="ok")))

    async def scenario() -> None:
        async with FakeAnthropicServer([reply, reply]) as server:
            for stream in (False, True):
                block = (await ask_claude(server, stream=stream)).content[0]
                assert block.type == "thinking"
                assert block.thinking == "hm"
                assert block.signature

    run(scenario())


@STREAM
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_openai_reply_round_trips(case: Case, stream: bool) -> None:
    async def scenario() -> None:
        async with FakeOpenAIServer([case.reply]) as server:
            completion = await ask_gpt(server, stream=stream)
        choice = completion.choices[0]
        message = choice.message
        thinking = [b.thinking for b in case.reply.content if isinstance(b, ThinkingBlock)]
        assert getattr(message, "reasoning_content", None) == (thinking[0] if thinking else None)
        assert message.content == (case.reply.text or None)
        calls = [
            (c.id, c.function.name, json.loads(c.function.arguments))
            for c in message.tool_calls or ()
            if isinstance(c, ChatCompletionMessageFunctionToolCall)
        ]
        assert len(calls) == len(message.tool_calls or ())
        assert calls == [(b.id, b.name, b.input) for b in case.reply.tool_uses]
        assert choice.finish_reason == ("tool_calls" if case.stop == "tool_use" else "stop")
        assert completion.model == "gpt-fake-1"
        assert completion.usage is not None
        assert completion.usage.model_dump(exclude_none=True) == server.requests[0].usage
        server.assert_all_used()

    run(scenario())


def test_openai_raw_stream_ends_with_usage_chunk_and_done() -> None:
    async def scenario() -> list[Any]:
        async with FakeOpenAIServer(["hello there"]) as server, gpt(server) as client:
            stream = await client.chat.completions.create(
                model="m", messages=USER, stream=True, stream_options={"include_usage": True}
            )
            return [chunk async for chunk in stream]

    chunks = run(scenario())
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "hello there"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage.prompt_tokens > 0


def test_stop_reason_can_be_scripted() -> None:
    reply = Message(
        role="assistant", content=(TextBlock(text="cut"),), extra={"stop_reason": "max_tokens"}
    )

    async def scenario() -> None:
        async with FakeAnthropicServer([reply]) as fake_claude:
            assert (await ask_claude(fake_claude)).stop_reason == "max_tokens"
        async with FakeOpenAIServer([reply]) as fake_gpt:
            assert (await ask_gpt(fake_gpt)).choices[0].finish_reason == "length"

    run(scenario())


# Recording.


def test_requests_are_recorded_as_sent() -> None:
    async def scenario() -> None:
        async with FakeAnthropicServer(["a", "b"]) as fake_claude:
            await ask_claude(fake_claude, system="be brief")
            await ask_claude(fake_claude, stream=True)
        first, second = fake_claude.requests
        assert first.path == "/v1/messages"
        assert json.loads(first.raw) == first.body
        assert first.body["system"] == "be brief"
        assert first.body["messages"] == USER
        assert not first.stream
        assert second.stream
        # This SDK sends the key as a bearer token; older ones sent x-api-key.
        auth = (first.headers.get("x-api-key"), first.headers.get("authorization"))
        assert auth in (("test", None), (None, "Bearer test"))
        assert "anthropic-version" in first.headers

        async with FakeOpenAIServer(["c"]) as fake_gpt:
            await ask_gpt(fake_gpt)
        (request,) = fake_gpt.requests
        assert request.path == "/v1/chat/completions"
        assert json.loads(request.raw) == request.body
        assert request.body["messages"] == USER
        assert request.headers["authorization"] == "Bearer test"

    run(scenario())


# The Anthropic cache.


def text(value: str, *, mark: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": value}
    if mark:
        block["cache_control"] = {"type": "ephemeral"}
    return block


def tokens(block: dict[str, Any]) -> int:
    """The fake's estimate: characters / 4, rounded up, of the canonical JSON."""
    canonical = json.dumps(block, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return math.ceil(len(canonical) / 4)


def turn(role: str, value: str, *, mark: bool = False) -> dict[str, Any]:
    return {"role": role, "content": [text(value, mark=mark)]}


TOOLS = [
    {
        "name": "Read",
        "description": "Read a file from the memory directory.",
        "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
    }
]


@dataclass(frozen=True)
class Tokens:
    input: int
    read: int
    creation: int


async def usage_of(server: FakeAnthropicServer, **params: Any) -> Tokens:
    usage = (await ask_claude(server, **params)).usage
    read, creation = usage.cache_read_input_tokens, usage.cache_creation_input_tokens
    assert read is not None
    assert creation is not None  # the fake always reports both
    return Tokens(input=usage.input_tokens, read=read, creation=creation)


def test_anthropic_cache_follows_a_moving_breakpoint() -> None:
    system = [text(LONG_SYSTEM, mark=True)]
    first = [turn("user", "Remember that I prefer tabs.", mark=True)]
    second = [
        turn("user", "Remember that I prefer tabs."),
        turn("assistant", "Noted."),
        turn("user", "Also, deadlines are on Fridays.", mark=True),
    ]

    async def scenario() -> None:
        async with FakeAnthropicServer(["a", "b", "c", "d", "e"]) as server:
            a = await usage_of(server, tools=TOOLS, system=system, messages=first)
            b = await usage_of(server, tools=TOOLS, system=system, messages=second, stream=True)
            other = [text(LONG_SYSTEM + " Be terse.", mark=True)]
            c = await usage_of(server, tools=TOOLS, system=other, messages=first)
            d = await usage_of(server, tools=TOOLS, system=system, messages=first, model="other")
            thinking = {"type": "enabled", "budget_tokens": 1024}
            e = await usage_of(
                server, tools=TOOLS, system=system, messages=first, thinking=thinking
            )
        assert a.read == 0
        assert a.creation > len(LONG_SYSTEM) // 4
        assert a.input == 0  # everything sits before the last breakpoint
        assert b.read == a.creation
        prefix = [TOOLS[0], text(LONG_SYSTEM), text("Remember that I prefer tabs.")]
        assert a.creation == sum(map(tokens, prefix))
        assert b.creation == tokens(text("Noted.")) + tokens(
            text("Also, deadlines are on Fridays.")
        )
        assert c.read == 0
        assert d.read == 0
        # Thinking settings invalidate the messages only: tools and system are still read.
        assert e.read == tokens(TOOLS[0]) + tokens(text(LONG_SYSTEM))
        assert e.creation == tokens(text("Remember that I prefer tabs."))

    run(scenario())


def test_anthropic_short_prefix_is_never_cached() -> None:
    messages = [turn("user", "short", mark=True)]

    async def scenario() -> None:
        async with FakeAnthropicServer(["a", "b"]) as server:
            for _ in range(2):
                usage = await usage_of(server, system=[text("tiny", mark=True)], messages=messages)
                assert usage.read == 0
                assert usage.creation == 0
                assert usage.input > 0

    run(scenario())


def test_anthropic_min_cache_tokens_is_configurable() -> None:
    messages = [turn("user", "x" * 400, mark=True)]  # about 105 tokens

    async def scenario() -> None:
        async with FakeAnthropicServer(["a", "b"], min_cache_tokens=100) as server:
            a = await usage_of(server, messages=messages)
            b = await usage_of(server, messages=messages)
        assert a.creation > 100
        assert b.read == a.creation
        assert b.creation == 0

    run(scenario())


# The earlier write sits at position added + 1 from the breakpoint, the breakpoint being
# the first of the 20 positions the look-back covers.
@pytest.mark.parametrize(("added", "hit"), [(19, True), (20, False)])
def test_anthropic_lookback_is_twenty_blocks(added: int, hit: bool) -> None:
    first = [{"role": "user", "content": [text(LONG_SYSTEM, mark=True)]}]
    more = [text(f"note {i}") for i in range(added)]
    more[-1] = text(f"note {added - 1}", mark=True)
    second = [{"role": "user", "content": [text(LONG_SYSTEM), *more]}]

    async def scenario() -> None:
        async with FakeAnthropicServer(["a", "b"]) as server:
            a = await usage_of(server, messages=first)
            b = await usage_of(server, messages=second)
        assert b.read == (a.creation if hit else 0)

    run(scenario())


def test_anthropic_reset_cache_and_marker_limit() -> None:
    messages = [turn("user", LONG_SYSTEM, mark=True)]
    too_many = [turn("user", f"{i}", mark=True) for i in range(5)]

    async def scenario() -> None:
        async with FakeAnthropicServer(["a", "b"]) as server:
            await usage_of(server, messages=messages)
            server.reset_cache()
            assert (await usage_of(server, messages=messages)).read == 0
            with pytest.raises(anthropic.BadRequestError, match="maximum of 4 blocks"):
                await usage_of(server, messages=too_many)
        assert server.unused == 0  # the refused request took no reply
        with pytest.raises(AssertionError, match="cache_control"):
            server.assert_no_errors()

    run(scenario())


@pytest.mark.parametrize(
    ("block", "refusal"),
    [
        ({"type": "text", "text": ""}, "cannot be set for empty text blocks"),
        ({"type": "thinking", "thinking": "t", "signature": "s"}, "cannot be set for thinking"),
    ],
    ids=["empty-text", "thinking"],
)
def test_anthropic_refuses_a_marker_where_the_api_does(block: dict[str, Any], refusal: str) -> None:
    marked = {**block, "cache_control": {"type": "ephemeral"}}
    messages = [
        turn("user", "Plan it."),
        {"role": "assistant", "content": [text("The plan."), marked]},
        turn("user", "Go on."),
    ]

    async def scenario() -> None:
        async with FakeAnthropicServer(["a"]) as server:
            with pytest.raises(anthropic.BadRequestError, match=refusal):
                await usage_of(server, messages=messages)
            assert server.unused == 1

    run(scenario())


# The OpenAI cache.


def test_openai_cache_counts_shared_prefix_in_steps() -> None:
    system = {"role": "system", "content": LONG_SYSTEM}

    async def scenario() -> list[int]:
        async with FakeOpenAIServer(["a", "b", "c", "d"]) as server:
            cached = []
            for messages in (
                [system, *USER],
                [system, *USER, {"role": "assistant", "content": "ok"}, *USER],
                [{"role": "system", "content": "Other. " + LONG_SYSTEM}, *USER],
                [{"role": "user", "content": "short"}],
            ):
                usage = (await ask_gpt(server, messages=messages)).usage
                assert usage is not None
                assert usage.prompt_tokens_details is not None
                cached.append(usage.prompt_tokens_details.cached_tokens or 0)
        return cached

    first, shared, different, short = run(scenario())
    assert first == 0
    assert shared >= 1024
    assert shared % 128 == 0
    assert shared <= len(LONG_SYSTEM) // 4 + 16
    assert different == 0
    assert short == 0


def test_openai_short_shared_prefix_is_not_cached() -> None:
    messages = [{"role": "user", "content": "x" * 2000}]  # about 500 tokens, below 1,024

    async def scenario() -> None:
        async with FakeOpenAIServer(["a", "b"]) as server:
            for _ in range(2):
                usage = (await ask_gpt(server, messages=messages)).usage
                assert usage is not None
                assert usage.prompt_tokens_details is not None
                assert usage.prompt_tokens_details.cached_tokens == 0

    run(scenario())


# Faults.


@dataclass(frozen=True)
class FaultCase:
    name: str
    status: int
    error: type[Exception]


ANTHROPIC_FAULTS = [
    FaultCase("rate_limit", 429, anthropic.RateLimitError),
    FaultCase("overloaded", 529, anthropic.InternalServerError),
    FaultCase("server_error", 500, anthropic.InternalServerError),
]
OPENAI_FAULTS = [
    FaultCase("rate_limit", 429, openai.RateLimitError),
    FaultCase("server_error", 500, openai.InternalServerError),
    FaultCase("unavailable", 503, openai.InternalServerError),
]


@pytest.mark.parametrize("case", ANTHROPIC_FAULTS, ids=lambda c: c.name)
def test_anthropic_faults_surface_as_sdk_errors(case: FaultCase) -> None:
    fault = Fault(case.status, headers={"retry-after": "7"})

    async def scenario() -> None:
        async with FakeAnthropicServer([fault]) as server:
            with pytest.raises(case.error) as caught:
                await ask_claude(server)
        assert isinstance(caught.value, anthropic.APIStatusError)
        assert caught.value.status_code == case.status
        assert caught.value.response.headers["retry-after"] == "7"
        assert isinstance(caught.value.body, dict)
        assert caught.value.body["type"] == "error"
        server.assert_all_used()  # a scripted fault is not a problem

    run(scenario())


@pytest.mark.parametrize("case", OPENAI_FAULTS, ids=lambda c: c.name)
def test_openai_faults_surface_as_sdk_errors(case: FaultCase) -> None:
    async def scenario() -> None:
        async with FakeOpenAIServer([Fault(case.status)]) as server:
            with pytest.raises(case.error) as caught:
                await ask_gpt(server)
        assert isinstance(caught.value, openai.APIStatusError)
        assert caught.value.status_code == case.status
        assert isinstance(caught.value.body, dict)
        assert set(caught.value.body) == {"message", "type", "param", "code"}

    run(scenario())


def test_custom_fault_body() -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}

    async def scenario() -> None:
        async with FakeAnthropicServer([Fault(529, body=body), Fault(503, body="gone")]) as server:
            with pytest.raises(anthropic.APIStatusError) as first:
                await ask_claude(server)
            with pytest.raises(anthropic.APIStatusError) as second:
                await ask_claude(server)
        assert first.value.body == body
        assert second.value.body == "gone"

    run(scenario())


# Each retry waits what retry-after-ms says; a retry-after of "0" makes the SDKs fall back
# to their own backoff (about 0.5 s, then 1 s), so the fast header is the millisecond one.
QUICK = {"retry-after": "0", "retry-after-ms": "1"}


def test_sdk_retries_through_faults() -> None:
    script: list[Reply] = [Fault(429, headers=QUICK), Fault(500, headers=QUICK), "ok"]

    async def scenario() -> None:
        async with FakeAnthropicServer(script) as fake_claude:
            async with claude(fake_claude, max_retries=2) as client:
                reply = await client.messages.create(model="m", max_tokens=5, messages=USER)
            assert reply.content[0].type == "text"
            assert reply.content[0].text == "ok"
        async with FakeOpenAIServer(script) as fake_gpt:
            async with gpt(fake_gpt, max_retries=2) as client:
                done = await client.chat.completions.create(model="m", messages=USER)
            assert done.choices[0].message.content == "ok"
        for server in (fake_claude, fake_gpt):
            assert [r.status for r in server.requests] == [429, 500, 200]
            assert [r.headers["x-stainless-retry-count"] for r in server.requests] == [
                "0",
                "1",
                "2",
            ]
            server.assert_all_used()

    run(scenario())


@STREAM
def test_malformed_answer_makes_the_sdk_raise(stream: bool) -> None:
    async def scenario() -> None:
        async with FakeAnthropicServer([Fault(malformed=True)]) as fake_claude:
            with pytest.raises(ValueError, match="line 1"):
                await ask_claude(fake_claude, stream=stream)
        async with FakeOpenAIServer([Fault(malformed=True)]) as fake_gpt:
            with pytest.raises(ValueError, match="line 1"):
                await ask_gpt(fake_gpt, stream=stream)

    run(scenario())


@STREAM
def test_truncated_answer_makes_the_sdk_raise(stream: bool) -> None:
    async def scenario() -> None:
        async with FakeAnthropicServer([Fault(truncate_stream=True)]) as fake_claude:
            # The Anthropic SDK lets the transport's error through mid-stream.
            with pytest.raises((anthropic.APIError, httpx2.HTTPError)):
                await ask_claude(fake_claude, stream=stream)
        async with FakeOpenAIServer([Fault(truncate_stream=True)]) as fake_gpt:
            with pytest.raises(openai.APIConnectionError):
                await ask_gpt(fake_gpt, stream=stream)

    run(scenario())


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_delay_times_out_and_stop_is_prompt(provider: str) -> None:
    server: FakeAnthropicServer | FakeOpenAIServer
    if provider == "anthropic":
        server = FakeAnthropicServer([Fault(delay=60)])
    else:
        server = FakeOpenAIServer([Fault(delay=60)])

    async def scenario() -> None:
        with pytest.raises((anthropic.APITimeoutError, openai.APITimeoutError)):
            await ask_either(server, timeout=0.2)

    with server:
        run(scenario())
        started = time.monotonic()  # the server is still waiting out the delay
    assert time.monotonic() - started < 5
    assert len(server.requests) == 1


# Script discipline.


def test_unexpected_request_is_a_500_and_a_problem() -> None:
    async def scenario() -> None:
        async with FakeAnthropicServer() as server:
            with pytest.raises(anthropic.InternalServerError, match="no scripted reply left"):
                await ask_claude(server)
        assert server.requests[0].status == 500
        with pytest.raises(AssertionError, match="no scripted reply left"):
            server.assert_all_used()
        with pytest.raises(AssertionError, match="no scripted reply left"):
            server.assert_no_errors()

    run(scenario())


def test_unused_replies_fail_assert_all_used() -> None:
    server = FakeOpenAIServer(["one", Fault(429)])
    server.add_replies("three")
    assert server.unused == 3

    async def scenario() -> None:
        async with server:
            await ask_gpt(server)

    run(scenario())
    assert server.unused == 2
    server.assert_no_errors()
    with pytest.raises(AssertionError, match="2 scripted replies never used"):
        server.assert_all_used()


def test_handler_decides_after_the_script() -> None:
    seen: list[dict[str, Any]] = []

    def handler(body: dict[str, Any]) -> str:
        seen.append(body)
        body["messages"].clear()  # editing the argument must not change the record
        return f"echo {len(seen)}"

    async def scenario() -> list[str]:
        async with FakeOpenAIServer(["scripted"], handler=handler) as server:
            answers = [(await ask_gpt(server)).choices[0].message.content or "" for _ in range(3)]
        assert all(r.body["messages"] == USER for r in server.requests)
        server.assert_all_used()
        return answers

    assert run(scenario()) == ["scripted", "echo 1", "echo 2"]
    assert len(seen) == 2


def test_failing_handler_is_a_problem() -> None:
    def handler(body: dict[str, Any]) -> str:
        raise RuntimeError("boom")

    async def scenario() -> None:
        async with FakeAnthropicServer(handler=handler) as server:
            with pytest.raises(anthropic.InternalServerError):
                await ask_claude(server)
        with pytest.raises(AssertionError, match="boom"):
            server.assert_no_errors()

    run(scenario())


def test_reply_the_wire_format_cannot_carry_is_a_problem() -> None:
    result = ToolResultBlock(tool_use_id="toolu_01", content="no")
    reply = Message(role="assistant", content=(result,))

    async def scenario() -> None:
        async with FakeOpenAIServer([reply]) as server:
            with pytest.raises(openai.InternalServerError, match="could not be sent"):
                await ask_gpt(server)
        with pytest.raises(AssertionError, match="tool result cannot be in an assistant"):
            server.assert_no_errors()

    run(scenario())


def test_unknown_path_is_a_provider_shaped_404() -> None:
    async def scenario() -> None:
        async with FakeAnthropicServer() as fake_claude, claude(fake_claude) as client:
            with pytest.raises(anthropic.NotFoundError) as caught:
                await client.models.list()
        assert isinstance(caught.value.body, dict)
        assert caught.value.body["error"]["type"] == "not_found_error"
        async with FakeOpenAIServer() as fake_gpt, gpt(fake_gpt) as other:
            with pytest.raises(openai.NotFoundError):
                await other.models.list()
        assert fake_gpt.requests[0].path == "/v1/models"
        with pytest.raises(AssertionError, match="not served"):
            fake_gpt.assert_all_used()

    run(scenario())


def test_replies_must_be_assistant_messages() -> None:
    with pytest.raises(UsageError, match="assistant"):
        FakeAnthropicServer([Message.user("hi")])
    server = FakeOpenAIServer()
    with pytest.raises(UsageError, match="a reply must be"):
        server.add_replies(42)  # type: ignore[arg-type]


# Lifecycle.


def test_binds_only_loopback_127_0_0_1() -> None:
    with FakeAnthropicServer() as server:
        url = urlsplit(server.base_url)
        assert url.hostname == "127.0.0.1"
        assert url.port is not None
        # The whole of 127/8 is loopback on Linux: a server bound to every address would
        # answer on 127.0.0.2 too.
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.2", url.port)) != 0


def test_start_stop_and_base_url() -> None:
    server = FakeOpenAIServer(["a", "b"])
    with pytest.raises(UsageError, match="not running"):
        server.base_url  # noqa: B018 - the property is what is tested
    server.start()
    first = server.base_url
    assert first.startswith("http://127.0.0.1:")
    assert first.endswith("/v1")
    with pytest.raises(UsageError, match="already running"):
        server.start()
    server.stop()
    server.stop()  # a second stop is harmless
    with server:  # and it can serve again
        run(ask_gpt(server))
    server.stop()
    assert len(server.requests) == 1


def test_client_left_open_does_not_hold_stop() -> None:
    async def scenario() -> float:
        server = FakeAnthropicServer(["a"]).start()
        client = claude(server)
        try:
            await client.messages.create(model="m", max_tokens=5, messages=USER)
            started = time.monotonic()
            server.stop()  # the client's keep-alive connection is still open
            return time.monotonic() - started
        finally:
            await client.close()

    assert run(scenario()) < 5


class _CountedWrites:
    """A connection's writer that keeps the size of each write."""

    def __init__(self, inner: Any, sizes: list[int]) -> None:
        self._inner, self._sizes = inner, sizes

    def write(self, data: bytes) -> int:
        self._sizes.append(len(data))
        return int(self._inner.write(data))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_an_answer_leaves_in_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    # urllib raises on a 400 once it has the headers; a test that then stops the server
    # cuts the connection. Were the body a second write, it could be cut off unsent.
    sizes: list[int] = []
    setup = Exchange.setup

    def counted_setup(self: Exchange) -> None:
        setup(self)
        self.wfile = _CountedWrites(self.wfile, sizes)  # type: ignore[assignment]

    monkeypatch.setattr(Exchange, "setup", counted_setup)
    payload = {"model": "claude-test", "max_tokens": 5, "messages": USER}
    with FakeAnthropicServer(context_tokens=1) as server:
        url = urlsplit(server.base_url)
        assert url.port is not None
        client = http.client.HTTPConnection("127.0.0.1", url.port)
        try:
            client.request("POST", "/v1/messages", body=json.dumps(payload))
            answer = client.getresponse()
            body = answer.read()
        finally:
            client.close()
    assert answer.status == 400
    assert json.loads(body)["error"]["type"] == "invalid_request_error"
    assert len(sizes) == 1
    assert sizes[0] > len(body)


def test_answers_are_not_held_back_by_nagle() -> None:
    # A stream goes out as several writes (headers, then each frame): with Nagle's algorithm
    # on, each waits for the client's delayed ACK of the last, ~40 ms a write.
    with FakeOpenAIServer(["a"]) as server:
        url = urlsplit(server.base_url)
        assert url.port is not None
        client = http.client.HTTPConnection("127.0.0.1", url.port)
        try:
            body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]})
            client.request("POST", url.path + "/chat/completions", body=body)
            assert client.getresponse().read()
            http_server = server._http
            assert http_server is not None
            connections = list(http_server._connections)
            assert connections
            for connection in connections:
                assert connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        finally:
            client.close()
