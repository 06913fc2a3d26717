"""pydantic-ai at the seams of real use, written as pydantic-ai's own docs have users write it.

The agent is pydantic-ai's ``Agent`` on its ``AnthropicModel`` or ``OpenAIChatModel``, with
the client the user made; memdir's only part is ``MemdirCapability`` in ``capabilities``.
Against the fake servers: a restart over a saved ``message_history`` saves each fact once
and the new turn's fact too; a client closed before ``drain()`` loses nothing; the
client's organization, project and headers go on every memory request; and a new
conversation's first request shows the saved memory index.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

from memdir.extract import ExtractConfig
from memdir.integrations.pydantic_ai import MemdirCapability
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

# Above the 1,024-token minimum of a cache entry, as a real agent's instructions are.
INSTRUCTIONS = "You are the platform team's assistant.\n" + "\n".join(
    f"Rule {n}: answer in one sentence and say which runbook the answer comes from."
    for n in range(80)
)
CLAUDE = "claude-sonnet-4-5"
GPT = "gpt-4.1-mini"


def anthropic_agent(client: AsyncAnthropic, capability: MemdirCapability) -> Agent[None, str]:
    model = AnthropicModel(CLAUDE, provider=AnthropicProvider(anthropic_client=client))
    return Agent(model, instructions=INSTRUCTIONS, capabilities=[capability])


def openai_agent(client: AsyncOpenAI, capability: MemdirCapability) -> Agent[None, str]:
    model = OpenAIChatModel(GPT, provider=OpenAIProvider(openai_client=client))
    return Agent(model, instructions=INSTRUCTIONS, capabilities=[capability])


def strip_markers(value: Any) -> Any:
    """``value`` without ``cache_control``: markers are not part of a cached prefix."""
    if isinstance(value, dict):
        return {k: strip_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_markers(v) for v in value]
    return value


def memory_requests(script: MemoryAgentScript, requests: Sequence[RecordedRequest]) -> list[Any]:
    return [r for r in requests if script.is_memory(r)]


def host_requests(script: MemoryAgentScript, requests: Sequence[RecordedRequest]) -> list[Any]:
    return [r for r in requests if not script.is_memory(r)]


# --- 1. a restart over the same conversation --------------------------------------------------


@pytest.mark.parametrize("memory_tool", [False, True], ids=["standalone", "memory-tool"])
def test_a_restart_over_a_saved_history_saves_each_fact_once_and_the_new_one(
    tmp_path: Path, memory_tool: bool
) -> None:
    memory = tmp_path / "memory"
    script = MemoryAgentScript(memory)
    saved_history = tmp_path / "history.json"

    async def first_process(server: FakeAnthropicServer) -> None:
        capability = MemdirCapability(memory, memory_tool=memory_tool)
        async with AsyncAnthropic(base_url=server.base_url, api_key="test") as client:
            agent = anthropic_agent(client, capability)
            history: list[ModelMessage] = []
            for word in ("alpha", "bravo"):
                result = await agent.run(code_word(word), message_history=history)
                history = result.all_messages()
                await capability.drain()
        saved_history.write_bytes(ModelMessagesTypeAdapter.dump_json(history))

    async def second_process(server: FakeAnthropicServer) -> None:
        capability = MemdirCapability(memory, memory_tool=memory_tool)
        async with AsyncAnthropic(base_url=server.base_url, api_key="test") as client:
            agent = anthropic_agent(client, capability)
            history = ModelMessagesTypeAdapter.validate_json(saved_history.read_bytes())
            await agent.run(code_word("charlie"), message_history=history)
            await capability.drain()

    with FakeAnthropicServer(handler=script) as server:
        asyncio.run(first_process(server))
        before = len(script.memory_requests)
        # Before it, one run a turn, each shown its own turn (the second's with the
        # notice that the first run's save changed memory).
        assert [new_count(body) for body in script.memory_requests] == [2, 3]
        assert sorted(p.name for p in memory.glob("code_*.md")) == [
            "code_alpha.md",
            "code_bravo.md",
        ]
        asyncio.run(second_process(server))
        server.assert_no_errors()

    assert_saved_once_across_a_restart(script, before, memory)


# --- 2. a client closed before drain() --------------------------------------------------------


def test_an_anthropic_client_closed_before_drain_loses_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = tmp_path / "memory"
    script = MemoryAgentScript(memory)
    capability = MemdirCapability(memory)

    async def main(server: FakeAnthropicServer) -> None:
        async with AsyncAnthropic(base_url=server.base_url, api_key="test") as client:
            agent = anthropic_agent(client, capability)
            await agent.run(code_word("delta"))
        # The block has closed the client: the last turn's memory is still to be saved.
        await capability.drain()

    caplog.set_level(logging.DEBUG)
    with FakeAnthropicServer(handler=script) as server:
        asyncio.run(main(server))
        server.assert_no_errors()
        requests = server.requests

    assert_the_last_turn_saved_without_retries(caplog.records, script, memory)
    assert all(r.status == 200 for r in requests)


def test_an_openai_client_closed_before_drain_loses_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = tmp_path / "memory"
    script = MemoryAgentScript(memory)
    capability = MemdirCapability(memory)

    async def main(server: FakeOpenAIServer) -> None:
        async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
            agent = openai_agent(client, capability)
            await agent.run(code_word("delta"))
        await capability.drain()

    caplog.set_level(logging.DEBUG)
    with FakeOpenAIServer(handler=script, model=GPT) as server:
        asyncio.run(main(server))
        server.assert_no_errors()

    assert_the_last_turn_saved_without_retries(caplog.records, script, memory)


# --- 3. the client's settings on every memory request -----------------------------------------

FORK = {"config": ExtractConfig(mode="fork"), "memory_tool": True}
STANDALONE = {"config": ExtractConfig(mode="standalone")}
MODES = pytest.mark.parametrize("mode", [FORK, STANDALONE], ids=["fork", "standalone"])


def assert_run_as(mode: dict[str, Any], memory: Sequence[RecordedRequest]) -> None:
    """The memory requests were of the mode asked for: memdir's standalone system prompt
    is only in its own requests."""
    standalone = ["memdir's memory agent" in json.dumps(r.body) for r in memory]
    assert standalone
    assert all(s == (mode is STANDALONE) for s in standalone)


def assert_every_memory_request_carries(
    script: MemoryAgentScript, requests: Sequence[RecordedRequest], headers: dict[str, str]
) -> None:
    memory = memory_requests(script, requests)
    assert memory, "no memory request was sent"
    for request in [*host_requests(script, requests), *memory]:
        for name, value in headers.items():
            assert request.headers.get(name) == value, (name, request.body.get("messages", [])[-1:])


@MODES
def test_an_openai_clients_organization_project_and_headers_go_on_memory_requests(
    tmp_path: Path, mode: dict[str, Any]
) -> None:
    memory = tmp_path / "memory"
    script = MemoryAgentScript(memory)
    capability = MemdirCapability(memory, **mode)

    async def main(server: FakeOpenAIServer) -> None:
        async with AsyncOpenAI(
            base_url=server.base_url,
            api_key="test",
            organization="org-seams",
            project="proj-seams",
            default_headers={"X-Gateway-Key": "gateway-secret"},
        ) as client:
            agent = openai_agent(client, capability)
            history: list[ModelMessage] = []
            for word in ("alpha", "bravo"):
                result = await agent.run(code_word(word), message_history=history)
                history = result.all_messages()
                await capability.drain()

    with FakeOpenAIServer(handler=script, model=GPT) as server:
        asyncio.run(main(server))
        server.assert_no_errors()
        requests = server.requests

    assert_every_memory_request_carries(
        script,
        requests,
        {
            "openai-organization": "org-seams",
            "openai-project": "proj-seams",
            "x-gateway-key": "gateway-secret",
        },
    )
    assert_run_as(mode, memory_requests(script, requests))
    assert (memory / "code_bravo.md").exists()


@MODES
def test_an_anthropic_clients_default_headers_go_on_memory_requests(
    tmp_path: Path, mode: dict[str, Any]
) -> None:
    memory = tmp_path / "memory"
    script = MemoryAgentScript(memory)
    capability = MemdirCapability(memory, **mode)

    async def main(server: FakeAnthropicServer) -> None:
        async with AsyncAnthropic(
            base_url=server.base_url,
            api_key="test",
            default_headers={"X-Gateway-Key": "gateway-secret"},
        ) as client:
            agent = anthropic_agent(client, capability)
            history: list[ModelMessage] = []
            for word in ("alpha", "bravo"):
                result = await agent.run(code_word(word), message_history=history)
                history = result.all_messages()
                await capability.drain()

    with FakeAnthropicServer(handler=script) as server:
        asyncio.run(main(server))
        server.assert_no_errors()
        requests = server.requests

    assert_every_memory_request_carries(script, requests, {"x-gateway-key": "gateway-secret"})
    assert_run_as(mode, memory_requests(script, requests))
    assert (memory / "code_bravo.md").exists()


@MODES
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_custom_http_clients_headers_go_on_memory_requests(
    tmp_path: Path, mode: dict[str, Any], provider: str
) -> None:
    memory = tmp_path / "memory"
    script = MemoryAgentScript(memory)
    capability = MemdirCapability(memory, **mode)

    async def main(base_url: str) -> None:
        # Each SDK's documented way to bring a transport of one's own.
        headers = {"X-Transport-Key": "transport-secret"}
        agent: Agent[None, str]
        if provider == "anthropic":
            http: Any = anthropic.DefaultAsyncHttpxClient(headers=headers)
            client: Any = AsyncAnthropic(base_url=base_url, api_key="test", http_client=http)
            agent = anthropic_agent(client, capability)
        else:
            http = openai.DefaultAsyncHttpxClient(headers=headers)
            client = AsyncOpenAI(base_url=base_url, api_key="test", http_client=http)
            agent = openai_agent(client, capability)
        async with client:
            history: list[ModelMessage] = []
            for word in ("alpha", "bravo"):
                result = await agent.run(code_word(word), message_history=history)
                history = result.all_messages()
                await capability.drain()

    server: FakeAnthropicServer | FakeOpenAIServer = (
        FakeAnthropicServer(handler=script)
        if provider == "anthropic"
        else FakeOpenAIServer(handler=script, model=GPT)
    )
    with server:
        asyncio.run(main(server.base_url))
        server.assert_no_errors()
        requests = server.requests

    assert_every_memory_request_carries(script, requests, {"x-transport-key": "transport-secret"})
    assert_run_as(mode, memory_requests(script, requests))
    assert (memory / "code_bravo.md").exists()


# --- 4. memory loaded back --------------------------------------------------------------------


def test_a_new_conversation_opens_with_the_saved_index_and_a_stable_system_prompt(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory"
    seed_memory(memory)
    script = MemoryAgentScript(memory)
    capability = MemdirCapability(memory)

    async def main(server: FakeAnthropicServer) -> None:
        async with AsyncAnthropic(base_url=server.base_url, api_key="test") as client:
            agent = anthropic_agent(client, capability)
            first = await agent.run(code_word("echo"))
            await capability.drain()  # the index changes: a memory was saved
            await agent.run("When do we deploy?", message_history=first.all_messages())
            await capability.drain()

    with FakeAnthropicServer(handler=script) as server:
        asyncio.run(main(server))
        server.assert_no_errors()
        requests = server.requests

    assert "code_echo.md" in "\n".join(index_lines(memory))
    turn1, turn2 = host_requests(script, requests)
    shown = json.dumps(strip_markers(turn1.body), ensure_ascii=False)
    assert DEPLOYS_LINE in shown
    # memdir's instructions on how memory works, as memdir.recall words them.
    instructions = memory_prompt(memory).split("\n\n")[1]
    assert json.dumps(instructions, ensure_ascii=False)[1:-1] in shown
    # The system prompt does not move when memory changes, and the first turn's request
    # heads the second's: the conversation stays one cacheable prefix.
    assert strip_markers(turn2.body["system"]) == strip_markers(turn1.body["system"])
    sent = strip_markers(turn1.body["messages"])
    assert strip_markers(turn2.body["messages"][: len(sent)]) == sent
