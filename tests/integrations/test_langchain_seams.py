"""LangChain at the seams of real use, written as LangChain's own docs have users write it.

The agent is ``langchain.agents.create_agent`` on ``ChatAnthropic`` or ``ChatOpenAI`` with
a LangGraph checkpointer and a ``thread_id``; memdir's only part is ``MemdirMiddleware`` in
``middleware``. Against the fake servers: a restart over the same thread saves each fact
once and the new turn's fact too; an HTTP client closed before ``drain()`` loses nothing;
the model's organization and headers go on every memory request; a new conversation's
first request shows the saved memory index; and many threads through one middleware are
not all kept.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain")
pytest.importorskip("langchain_anthropic")
pytest.importorskip("langchain_openai")

import openai
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from memdir import MemoryExtractor
from memdir.extract import ExtractConfig
from memdir.integrations.langchain import MemdirMiddleware
from memdir.recall import memory_prompt
from memdir.testing import FakeAnthropicServer, FakeOpenAIServer, RecordedRequest
from tests.integrations._seams import (
    DEPLOYS_LINE,
    MemoryAgentScript,
    assert_saved_once_across_a_restart,
    assert_the_last_turn_saved_without_retries,
    code_word,
    index_lines,
    new_count,
    seed_memory,
)

CLAUDE = "claude-sonnet-4-5"
GPT = "gpt-4o"
# Above the 1,024-token minimum of a cache entry, as a real agent's system prompt is.
SYSTEM_PROMPT = "You are the platform team's assistant.\n" + "\n".join(
    f"{n}. Answer in one sentence and say which runbook the answer comes from."
    for n in range(1, 81)
)


@pytest.fixture(autouse=True)
def _no_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    """LangSmith stays off: nothing here may try to send traces anywhere."""
    for name in (
        "LANGSMITH_TRACING",
        "LANGSMITH_TRACING_V2",
        "LANGCHAIN_TRACING",
        "LANGCHAIN_TRACING_V2",
        "LANGSMITH_API_KEY",
        "LANGCHAIN_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)


def claude(server: FakeAnthropicServer, **settings: Any) -> ChatAnthropic:
    """``ChatAnthropic`` on the fake, with the user's ``settings``."""
    settings = {"model_name": CLAUDE, "base_url": server.base_url, "api_key": "test", **settings}
    return ChatAnthropic(**settings)


def gpt(server: FakeOpenAIServer, **settings: Any) -> ChatOpenAI:
    """``ChatOpenAI`` on the fake, with the user's ``settings``."""
    settings = {"model": GPT, "base_url": server.base_url, "api_key": "test", **settings}
    return ChatOpenAI(**settings)


def agent_of(chat: Any, memory: MemdirMiddleware, checkpointer: InMemorySaver, *before: Any) -> Any:
    """``create_agent`` as its docs show it; ``before``: the user's own middleware."""
    return create_agent(
        chat,
        [],
        system_prompt=SYSTEM_PROMPT,
        middleware=[*before, memory],
        checkpointer=checkpointer,
    )


async def say(agent: Any, memory: MemdirMiddleware, texts: Sequence[str], thread: str) -> None:
    """Each text as a turn of one thread, the memory agent waited for after each."""
    config = {"configurable": {"thread_id": thread}}
    for text in texts:
        await agent.ainvoke({"messages": [{"role": "user", "content": text}]}, config)
        await memory.drain()


def strip_markers(value: Any) -> Any:
    """``value`` without ``cache_control``: markers are not part of a cached prefix."""
    if isinstance(value, dict):
        return {k: strip_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_markers(v) for v in value]
    return value


def split(
    script: MemoryAgentScript, requests: Sequence[RecordedRequest]
) -> tuple[list[RecordedRequest], list[RecordedRequest]]:
    """The host's requests and memdir's, told apart by their bodies."""
    memory = [r for r in requests if script.is_memory(r)]
    return [r for r in requests if not script.is_memory(r)], memory


# --- 1. a restart over the same thread --------------------------------------------------------


@pytest.mark.parametrize("memory_tool", [False, True], ids=["standalone", "memory-tool"])
def test_a_restart_over_the_same_thread_saves_each_fact_once_and_the_new_one(
    tmp_path: Path, memory_tool: bool
) -> None:
    memory = tmp_path / "memory"
    script = MemoryAgentScript(memory)
    # The conversation outlives the process: the checkpointer keeps the thread.
    checkpointer = InMemorySaver()

    async def process(server: FakeAnthropicServer, texts: Sequence[str]) -> None:
        middleware = MemdirMiddleware(memory, memory_tool=memory_tool)
        chat = claude(server)
        await say(agent_of(chat, middleware, checkpointer), middleware, texts, "ana")

    # Each "process" on a server of its own: langchain-anthropic keeps one HTTP client per
    # address for the whole process, which a second event loop must not inherit.
    with FakeAnthropicServer(handler=script) as first:
        asyncio.run(process(first, [code_word("alpha"), code_word("bravo")]))
        first.assert_no_errors()
    before = len(script.memory_requests)
    # Before it, one run a turn, each shown its own turn (the second's with the notice
    # that the first run's save changed memory).
    assert [new_count(body) for body in script.memory_requests] == [2, 3]
    assert sorted(p.name for p in memory.glob("code_*.md")) == ["code_alpha.md", "code_bravo.md"]
    with FakeAnthropicServer(handler=script) as second:
        asyncio.run(process(second, [code_word("charlie")]))
        second.assert_no_errors()

    assert_saved_once_across_a_restart(script, before, memory)


# --- 2. a client closed before drain() --------------------------------------------------------


def test_an_http_client_closed_before_drain_loses_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = tmp_path / "memory"
    script = MemoryAgentScript(memory)
    middleware = MemdirMiddleware(memory)

    async def main(server: FakeOpenAIServer) -> None:
        # ChatOpenAI's documented way to bring one's own HTTP client, closed by its block.
        async with openai.DefaultAsyncHttpxClient() as http:
            chat = gpt(server, http_async_client=http)
            agent = agent_of(chat, middleware, InMemorySaver())
            config = {"configurable": {"thread_id": "ana"}}
            message = {"role": "user", "content": code_word("delta")}
            await agent.ainvoke({"messages": [message]}, config)
        # The block has closed the client: the last turn's memory is still to be saved.
        await middleware.drain()

    caplog.set_level(logging.DEBUG)
    with FakeOpenAIServer(handler=script, model=GPT) as server:
        asyncio.run(main(server))
        server.assert_no_errors()

    assert_the_last_turn_saved_without_retries(caplog.records, script, memory)


# --- 3. the model's settings on every memory request ------------------------------------------

FORK = {"config": ExtractConfig(mode="fork"), "memory_tool": True}
STANDALONE = {"config": ExtractConfig(mode="standalone")}
MODES = pytest.mark.parametrize("mode", [FORK, STANDALONE], ids=["fork", "standalone"])


def assert_settings_on_every_request(
    script: MemoryAgentScript,
    requests: Sequence[RecordedRequest],
    headers: dict[str, str],
    mode: dict[str, Any],
) -> None:
    host, memory = split(script, requests)
    assert memory, "no memory request was sent"
    # The runs were of the mode asked for: memdir's standalone system prompt is only in
    # its own requests.
    standalone = ["memdir's memory agent" in json.dumps(r.body) for r in memory]
    assert all(s == (mode is STANDALONE) for s in standalone)
    for request in [*host, *memory]:
        for name, value in headers.items():
            assert request.headers.get(name) == value, (name, request.body["messages"][-1:])


@MODES
def test_chat_openai_organization_project_and_headers_go_on_memory_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: dict[str, Any]
) -> None:
    # ChatOpenAI has no project field: the OpenAI client reads it from the environment.
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-seams")
    memory = tmp_path / "memory"
    script = MemoryAgentScript(memory)
    middleware = MemdirMiddleware(memory, **mode)

    async def main(server: FakeOpenAIServer) -> None:
        chat = gpt(
            server, organization="org-seams", default_headers={"X-Gateway-Key": "gateway-secret"}
        )
        try:
            words = [code_word("alpha"), code_word("bravo")]
            await say(agent_of(chat, middleware, InMemorySaver()), middleware, words, "ana")
        finally:
            # langchain-openai keeps its client for the process; this loop's connections go.
            await chat.root_async_client.close()

    with FakeOpenAIServer(handler=script, model=GPT) as server:
        asyncio.run(main(server))
        server.assert_no_errors()
        requests = server.requests

    assert_settings_on_every_request(
        script,
        requests,
        {
            "openai-organization": "org-seams",
            "openai-project": "proj-seams",
            "x-gateway-key": "gateway-secret",
        },
        mode,
    )
    assert (memory / "code_bravo.md").exists()


@MODES
def test_chat_openai_http_clients_headers_go_on_memory_requests(
    tmp_path: Path, mode: dict[str, Any]
) -> None:
    memory = tmp_path / "memory"
    script = MemoryAgentScript(memory)
    middleware = MemdirMiddleware(memory, **mode)

    async def main(server: FakeOpenAIServer) -> None:
        headers = {"X-Transport-Key": "transport-secret"}
        async with openai.DefaultAsyncHttpxClient(headers=headers) as http:
            chat = gpt(server, http_async_client=http)
            words = [code_word("alpha"), code_word("bravo")]
            await say(agent_of(chat, middleware, InMemorySaver()), middleware, words, "ana")

    with FakeOpenAIServer(handler=script, model=GPT) as server:
        asyncio.run(main(server))
        server.assert_no_errors()
        requests = server.requests

    assert_settings_on_every_request(
        script, requests, {"x-transport-key": "transport-secret"}, mode
    )
    assert (memory / "code_bravo.md").exists()


@MODES
def test_chat_anthropic_default_headers_go_on_memory_requests(
    tmp_path: Path, mode: dict[str, Any]
) -> None:
    memory = tmp_path / "memory"
    script = MemoryAgentScript(memory)
    middleware = MemdirMiddleware(memory, **mode)

    async def main(server: FakeAnthropicServer) -> None:
        chat = claude(server, default_headers={"X-Gateway-Key": "gateway-secret"})
        # A fork reads the agent's cache: the agent caches, as LangChain's docs show.
        caching = [AnthropicPromptCachingMiddleware()] if mode is FORK else []
        agent = agent_of(chat, middleware, InMemorySaver(), *caching)
        await say(agent, middleware, [code_word("alpha"), code_word("bravo")], "ana")

    with FakeAnthropicServer(handler=script) as server:
        asyncio.run(main(server))
        server.assert_no_errors()
        requests = server.requests

    assert_settings_on_every_request(script, requests, {"x-gateway-key": "gateway-secret"}, mode)
    assert (memory / "code_bravo.md").exists()


# --- 4. memory loaded back --------------------------------------------------------------------


def test_a_new_thread_opens_with_the_saved_index_and_a_stable_system_prompt(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory"
    seed_memory(memory)
    script = MemoryAgentScript(memory)
    middleware = MemdirMiddleware(memory)

    async def main(server: FakeAnthropicServer) -> None:
        chat = claude(server)
        agent = agent_of(chat, middleware, InMemorySaver())
        # The first turn saves a memory, so the index changes before the second.
        await say(agent, middleware, [code_word("echo"), "When do we deploy?"], "ana")

    with FakeAnthropicServer(handler=script) as server:
        asyncio.run(main(server))
        server.assert_no_errors()
        requests = server.requests

    assert "code_echo.md" in "\n".join(index_lines(memory))
    (turn1, turn2), _ = split(script, requests)
    shown = json.dumps(strip_markers(turn1.body), ensure_ascii=False)
    assert DEPLOYS_LINE in shown
    # memdir's instructions on how memory works, as memdir.recall words them.
    instructions = memory_prompt(memory).split("\n\n")[1]
    assert json.dumps(instructions, ensure_ascii=False)[1:-1] in shown
    # The system prompt does not move when memory changes, and the first turn's request
    # heads the second's: the conversation stays one cacheable prefix.
    assert strip_markers(turn2.body.get("system")) == strip_markers(turn1.body.get("system"))
    sent = strip_markers(turn1.body["messages"])
    assert strip_markers(turn2.body["messages"][: len(sent)]) == sent


# --- 5. bounded -------------------------------------------------------------------------------


def test_two_thousand_threads_through_one_middleware_are_not_all_kept(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    middleware = MemdirMiddleware(memory, model="offline")
    threads = [f"user-{n}" for n in range(2000)]

    async def main() -> None:
        for n, thread in enumerate(threads):
            turn = [
                HumanMessage(f"Hello, I am user {n}.", id=f"h{n}"),
                AIMessage("Hi.", id=f"a{n}"),
            ]
            middleware.report(turn, thread_id=thread)
            if n % 200 == 199:
                await middleware.drain()
        await middleware.drain()

    asyncio.run(main())
    gc.collect()
    kept = sum(middleware.extractor(thread) is not None for thread in threads)
    alive = sum(isinstance(o, MemoryExtractor) for o in gc.get_objects())
    assert kept <= len(threads) // 2, f"{kept} of {len(threads)} threads' extractors kept"
    assert alive <= len(threads) // 2, f"{alive} extractors alive"
