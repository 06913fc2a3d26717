"""The OpenAI Agents SDK at the seams of real use, written as the SDK's own docs have users
write it.

The agent is the SDK's ``Agent`` on ``OpenAIChatCompletionsModel`` with the client the
user made, run by ``Runner.run`` on a ``SQLiteSession``; memdir's only part is
``MemdirRunHooks`` in ``hooks=`` (and its ``tools()`` where a fork must save). Against
the fake Chat Completions server: a restart over the same session saves each fact once
and the new turn's fact too; a client closed before ``drain()`` loses nothing; the
client's organization, project and headers go on every memory request; a new
conversation's first request shows the saved memory index. (The Responses API, the SDK's
default, has no fake server to run against.)
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import agents
import openai
import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, SQLiteSession, TResponseInputItem
from openai import AsyncOpenAI

from memdir.extract import ExtractConfig
from memdir.integrations.openai_agents import MemdirRunHooks
from memdir.recall import memory_prompt
from memdir.testing import FakeOpenAIServer, RecordedRequest
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

MODEL = "gpt-4.1-mini"
# Above OpenAI's 1,024-token cache minimum, as a real agent's instructions are.
INSTRUCTIONS = "You are the platform team's assistant.\n" + "\n".join(
    f"Rule {n}: answer in one sentence and say which runbook the answer comes from."
    for n in range(80)
)


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    """The SDK would export traces to OpenAI; tests stay on this machine."""
    agents.set_tracing_disabled(True)


def assistant(client: AsyncOpenAI, hooks: MemdirRunHooks, *, tools: bool = False) -> Agent[Any]:
    """The SDK's ``Agent`` on the user's client; with ``tools``, memdir's memory tools,
    through which a fork can save."""
    return Agent(
        name="assistant",
        instructions=INSTRUCTIONS,
        model=OpenAIChatCompletionsModel(MODEL, client),
        tools=list(hooks.tools()) if tools else [],
    )


def split(
    script: MemoryAgentScript, requests: Sequence[RecordedRequest]
) -> tuple[list[RecordedRequest], list[RecordedRequest]]:
    """The host's requests and memdir's, told apart by their bodies."""
    memory = [r for r in requests if script.is_memory(r)]
    return [r for r in requests if not script.is_memory(r)], memory


@pytest.fixture
def sdk_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's process-wide defaults, put back as they were after the test."""
    from agents.models import _openai_shared

    for name in ("_default_openai_client", "_use_responses_by_default"):
        monkeypatch.setattr(_openai_shared, name, getattr(_openai_shared, name))


# --- 1. a restart over the same session -------------------------------------------------------


@pytest.mark.parametrize("tools", [False, True], ids=["standalone", "memory-tools"])
def test_a_restart_over_the_same_session_saves_each_fact_once_and_the_new_one(
    tmp_path: Path, tools: bool
) -> None:
    memory = tmp_path / "memory"
    database = tmp_path / "conversations.db"
    script = MemoryAgentScript(memory)

    async def process(server: FakeOpenAIServer, texts: Sequence[str]) -> None:
        hooks = MemdirRunHooks(memory)
        session = SQLiteSession("ana", database)
        try:
            async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
                agent = assistant(client, hooks, tools=tools)
                for text in texts:
                    await Runner.run(agent, text, session=session, hooks=hooks)
                    await hooks.drain()
        finally:
            session.close()

    with FakeOpenAIServer(handler=script, model=MODEL) as server:
        asyncio.run(process(server, [code_word("alpha"), code_word("bravo")]))
        before = len(script.memory_requests)
        # Before it, one run a turn, each shown its own turn.
        assert [new_count(body) for body in script.memory_requests] == [2, 2]
        assert sorted(p.name for p in memory.glob("code_*.md")) == [
            "code_alpha.md",
            "code_bravo.md",
        ]
        asyncio.run(process(server, [code_word("charlie")]))
        server.assert_no_errors()

    assert_saved_once_across_a_restart(script, before, memory)


# --- 2. a client closed before drain() --------------------------------------------------------


@pytest.mark.parametrize("tools", [False, True], ids=["standalone", "memory-tools"])
@pytest.mark.parametrize("default_client", [False, True], ids=["model-client", "default-client"])
@pytest.mark.usefixtures("sdk_defaults")
def test_a_client_closed_before_drain_loses_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, tools: bool, default_client: bool
) -> None:
    memory = tmp_path / "memory"
    script = MemoryAgentScript(memory)
    hooks = MemdirRunHooks(memory)

    async def main(server: FakeOpenAIServer) -> None:
        async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
            if default_client:  # the SDK's default setup: a client set for the process
                agents.set_default_openai_client(client)
                agents.set_default_openai_api("chat_completions")
                agent = Agent(
                    name="assistant",
                    instructions=INSTRUCTIONS,
                    model=MODEL,
                    tools=list(hooks.tools()) if tools else [],
                )
            else:
                agent = assistant(client, hooks, tools=tools)
            await Runner.run(agent, code_word("delta"), hooks=hooks)
        # The block has closed the client: the last turn's memory is still to be saved.
        await hooks.drain()

    caplog.set_level(logging.DEBUG)
    with FakeOpenAIServer(handler=script, model=MODEL) as server:
        asyncio.run(main(server))
        server.assert_no_errors()

    assert_the_last_turn_saved_without_retries(caplog.records, script, memory)


# --- 3. the client's settings on every memory request -----------------------------------------

MODES = pytest.mark.parametrize("fork", [True, False], ids=["fork", "standalone"])


def converse_on(client: AsyncOpenAI, hooks: MemdirRunHooks, *, fork: bool) -> Any:
    """Two turns, the conversation carried on with ``to_input_list()``."""

    async def main() -> None:
        agent = assistant(client, hooks, tools=fork)
        conversation: list[TResponseInputItem] = []
        for word in ("alpha", "bravo"):
            said: TResponseInputItem = {"role": "user", "content": code_word(word)}
            result = await Runner.run(agent, [*conversation, said], hooks=hooks)
            conversation = result.to_input_list()
            await hooks.drain()

    return main()


def assert_settings_on_every_request(
    script: MemoryAgentScript,
    requests: Sequence[RecordedRequest],
    headers: dict[str, str],
    *,
    fork: bool,
) -> None:
    host, memory = split(script, requests)
    assert memory, "no memory request was sent"
    # The runs were of the mode asked for: memdir's standalone system prompt is only in
    # its own requests.
    standalone = ["memdir's memory agent" in json.dumps(r.body) for r in memory]
    assert all(s != fork for s in standalone)
    for request in [*host, *memory]:
        for name, value in headers.items():
            assert request.headers.get(name) == value, (name, request.body["messages"][-1:])


def hooks_for(memory: Path, *, fork: bool) -> MemdirRunHooks:
    return MemdirRunHooks(memory, config=ExtractConfig(mode="fork" if fork else "standalone"))


@MODES
def test_the_clients_organization_project_and_headers_go_on_memory_requests(
    tmp_path: Path, fork: bool
) -> None:
    memory = tmp_path / "memory"
    script = MemoryAgentScript(memory)
    hooks = hooks_for(memory, fork=fork)

    async def main(server: FakeOpenAIServer) -> None:
        async with AsyncOpenAI(
            base_url=server.base_url,
            api_key="test",
            organization="org-seams",
            project="proj-seams",
            default_headers={"X-Gateway-Key": "gateway-secret"},
        ) as client:
            await converse_on(client, hooks, fork=fork)

    with FakeOpenAIServer(handler=script, model=MODEL) as server:
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
        fork=fork,
    )
    assert (memory / "code_bravo.md").exists()


@MODES
@pytest.mark.usefixtures("sdk_defaults")
def test_the_sdks_default_client_settings_go_on_memory_requests(tmp_path: Path, fork: bool) -> None:
    """The SDK's documented default setup: a client set once for the process, Chat
    Completions chosen, and the agent naming only its model."""
    memory = tmp_path / "memory"
    script = MemoryAgentScript(memory)
    hooks = hooks_for(memory, fork=fork)

    async def main(server: FakeOpenAIServer) -> None:
        async with AsyncOpenAI(
            base_url=server.base_url,
            api_key="test",
            organization="org-seams",
            project="proj-seams",
            default_headers={"X-Gateway-Key": "gateway-secret"},
        ) as client:
            agents.set_default_openai_client(client)
            agents.set_default_openai_api("chat_completions")
            agent = Agent(
                name="assistant",
                instructions=INSTRUCTIONS,
                model=MODEL,
                tools=list(hooks.tools()) if fork else [],
            )
            conversation: list[TResponseInputItem] = []
            for word in ("alpha", "bravo"):
                said: TResponseInputItem = {"role": "user", "content": code_word(word)}
                result = await Runner.run(agent, [*conversation, said], hooks=hooks)
                conversation = result.to_input_list()
                await hooks.drain()

    with FakeOpenAIServer(handler=script, model=MODEL) as server:
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
        fork=fork,
    )
    assert (memory / "code_bravo.md").exists()


@MODES
def test_a_custom_http_clients_headers_go_on_memory_requests(tmp_path: Path, fork: bool) -> None:
    memory = tmp_path / "memory"
    script = MemoryAgentScript(memory)
    hooks = hooks_for(memory, fork=fork)

    async def main(server: FakeOpenAIServer) -> None:
        # The SDK's documented way to bring a transport of one's own.
        http = openai.DefaultAsyncHttpxClient(headers={"X-Transport-Key": "transport-secret"})
        async with AsyncOpenAI(
            base_url=server.base_url, api_key="test", http_client=http
        ) as client:
            await converse_on(client, hooks, fork=fork)

    with FakeOpenAIServer(handler=script, model=MODEL) as server:
        asyncio.run(main(server))
        server.assert_no_errors()
        requests = server.requests

    assert_settings_on_every_request(
        script, requests, {"x-transport-key": "transport-secret"}, fork=fork
    )
    assert (memory / "code_bravo.md").exists()


# --- 4. memory loaded back --------------------------------------------------------------------


def test_a_new_conversation_opens_with_the_saved_index_and_a_stable_system_prompt(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory"
    seed_memory(memory)
    script = MemoryAgentScript(memory)
    hooks = MemdirRunHooks(memory)

    async def main(server: FakeOpenAIServer) -> None:
        session = SQLiteSession("ana", tmp_path / "conversations.db")
        try:
            async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
                agent = assistant(client, hooks)
                # The first turn saves a memory, so the index changes before the second.
                for text in (code_word("echo"), "When do we deploy?"):
                    await Runner.run(agent, text, session=session, hooks=hooks)
                    await hooks.drain()
        finally:
            session.close()

    with FakeOpenAIServer(handler=script, model=MODEL) as server:
        asyncio.run(main(server))
        server.assert_no_errors()
        requests = server.requests

    assert "code_echo.md" in "\n".join(index_lines(memory))
    (turn1, turn2), _ = split(script, requests)
    shown = json.dumps(turn1.body, ensure_ascii=False)
    assert DEPLOYS_LINE in shown
    # memdir's instructions on how memory works, as memdir.recall words them.
    instructions = memory_prompt(memory).split("\n\n")[1]
    assert json.dumps(instructions, ensure_ascii=False)[1:-1] in shown
    # The system message does not move when memory changes, and the first turn's request
    # heads the second's: the conversation stays one cacheable prefix.
    sent = turn1.body["messages"]
    assert turn2.body["messages"][0] == sent[0]
    assert turn2.body["messages"][: len(sent)] == sent
