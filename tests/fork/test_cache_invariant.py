"""The central invariant: a fork reads its parent's prompt cache, shown over real HTTP.

The parent's request and the fork's first request are both sent by the official SDK to a
fake server that keeps a prompt cache by the provider's rules. The fork must send the same
tools, system prompt and leading messages, and the server must report the parent's
prefix as read from the cache.
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.fork import CacheSafeParams, ForkResult, run_forked_agent
from memdir.messages import Message
from memdir.models import (
    AnthropicModel,
    Model,
    ModelRequest,
    ModelResponse,
    OpenAIModel,
    RetryPolicy,
)
from memdir.permissions import auto_mem_can_use_tool
from memdir.testing import FakeAnthropicServer, FakeOpenAIServer
from memdir.tools import builtin_tools

SYSTEM = "You are a careful coding agent working in the user's repository. " * 120
TOOLS = [tool.definition() for tool in builtin_tools("/")] + [
    {
        "name": "search_docs",
        "description": "Search the product documentation.",
        "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}},
    }
]
PARAMS = {"max_tokens": 2048, "temperature": 0.3}
CONVERSATION = [
    Message.user("I'm Ana, I run the data platform team. Always use polars, never pandas."),
    Message.assistant("Understood: polars only. What are we working on?"),
    Message.user("The ingest job misses its Friday 2026-12-04 deadline; speed it up."),
]
PROMPT = [Message.user("Review the conversation above and save what is worth remembering.")]
NO_CACHE_MARKER = "cache_control"


def strip_markers(value: Any) -> Any:
    """``value`` without cache_control keys: a marker is not part of the cache key."""
    value = copy.deepcopy(value)
    for message in value:
        if isinstance(message.get("content"), list):
            for block in message["content"]:
                block.pop(NO_CACHE_MARKER, None)
    return value


def same_bytes(a: Any, b: Any) -> bool:
    return json.dumps(a, ensure_ascii=False) == json.dumps(b, ensure_ascii=False)


async def parent_then_fork(model: Model, tmp_path: Path) -> tuple[ModelResponse, ForkResult]:
    parent = await model.request(
        ModelRequest(system=SYSTEM, tools=TOOLS, messages=tuple(CONVERSATION), params=PARAMS)
    )
    turn = [*CONVERSATION, parent.message]
    params = CacheSafeParams(model=model, system=SYSTEM, tools=TOOLS, params=PARAMS)
    fork = await run_forked_agent(
        params,
        turn,
        PROMPT,
        tools=builtin_tools(tmp_path),
        can_use_tool=auto_mem_can_use_tool(tmp_path / "memory", cwd=tmp_path),
    )
    await model.client.close()  # type: ignore[attr-defined]
    return parent, fork


def test_anthropic_fork_reads_the_parent_cache(tmp_path: Path) -> None:
    with FakeAnthropicServer(["On it.", "Nothing new to save."]) as server:
        model = AnthropicModel(
            "claude-test", api_key="k", base_url=server.base_url, retry=RetryPolicy(max_retries=0)
        )
        parent, fork = asyncio.run(parent_then_fork(model, tmp_path))
        parent_body, fork_body = (r.body for r in server.requests)
        parent_raw, fork_raw = (r.raw for r in server.requests)

    # Same tools (all of them, same order, same schemas), same system, same parameters.
    assert same_bytes(parent_body["tools"], fork_body["tools"])
    assert same_bytes(parent_body["system"], fork_body["system"])
    for key in ("model", "max_tokens", "temperature"):
        assert parent_body[key] == fork_body[key]
    assert "thinking" not in fork_body
    # The parent's messages lead the fork's, identical but for the moved cache marker.
    n = len(parent_body["messages"])
    assert same_bytes(
        strip_markers(parent_body["messages"]), strip_markers(fork_body["messages"][:n])
    )
    assert fork_body["messages"][n]["role"] == "assistant"  # the parent's answer
    assert fork_body["messages"][-1]["content"][0]["text"].startswith("Review the conversation")
    assert json.loads(parent_raw) == parent_body
    assert json.loads(fork_raw) == fork_body

    # The server saw the parent's prefix again: read from the cache, not written anew.
    written_by_parent = parent.usage.cache_creation_input_tokens
    assert written_by_parent > 1024
    assert fork.usage.cache_read_input_tokens == written_by_parent
    assert fork.usage.cache_creation_input_tokens < written_by_parent // 10


def test_openai_fork_reads_the_parent_cache(tmp_path: Path) -> None:
    with FakeOpenAIServer(["On it.", "Nothing new to save."]) as server:
        model = OpenAIModel(
            "gpt-test", api_key="k", base_url=server.base_url, retry=RetryPolicy(max_retries=0)
        )
        parent, fork = asyncio.run(parent_then_fork(model, tmp_path))
        parent_body, fork_body = (r.body for r in server.requests)

    assert same_bytes(parent_body["tools"], fork_body["tools"])
    n = len(parent_body["messages"])
    assert same_bytes(parent_body["messages"], fork_body["messages"][:n])
    assert parent_body["messages"][0] == {"role": "system", "content": SYSTEM}

    parent_prompt = parent.usage.input_tokens + parent.usage.cache_read_input_tokens
    cached = fork.usage.cache_read_input_tokens
    assert cached >= 1024
    assert cached % 128 == 0
    # Everything the parent sent is cached, up to the provider's 128-token granularity.
    assert parent_prompt - 128 < cached <= parent_prompt + 128


def test_the_hosts_next_request_reads_the_answer_the_fork_cached(tmp_path: Path) -> None:
    """The extractor's fork marks the host's final answer too, so the host's next request
    reads that answer from the cache instead of writing it a second time."""
    answer = "Here is the plan for the ingest job, step by step. " * 80  # about 1,000 tokens
    with FakeAnthropicServer([answer, "Nothing new to save.", "Done."]) as server:
        model = AnthropicModel(
            "claude-test", api_key="k", base_url=server.base_url, retry=RetryPolicy(max_retries=0)
        )
        params = CacheSafeParams(model=model, system=SYSTEM, tools=TOOLS, params=PARAMS)

        async def go() -> tuple[ModelResponse, ModelResponse]:
            first = await model.request(
                ModelRequest(
                    system=SYSTEM, tools=TOOLS, messages=tuple(CONVERSATION), params=PARAMS
                )
            )
            turn = (*CONVERSATION, first.message)
            extractor = MemoryExtractor(tmp_path / "memory", model, ExtractConfig(mode="fork"))
            extractor.on_turn_end(TurnContext(messages=turn, params=params, cwd=str(tmp_path)))
            await extractor.drain()
            follow_up = (*turn, Message.user("Thanks. Add a test for it."))
            second = await model.request(
                ModelRequest(system=SYSTEM, tools=TOOLS, messages=follow_up, params=PARAMS)
            )
            await model.aclose()
            return first, second

        first, second = asyncio.run(go())
        server.assert_no_errors()
    assert len(server.requests) == 3
    answer_tokens = first.usage.output_tokens
    assert answer_tokens > 900
    # Everything up to the answer was read; only the new question was written.
    assert second.usage.cache_creation_input_tokens < 50
    assert second.usage.cache_read_input_tokens > first.usage.cache_creation_input_tokens
