"""The pydantic-ai capability, on a real pydantic-ai Agent whose AnthropicModel talks to
FakeAnthropicServer: memories saved after each run, every message covered once, and the
memory agent's prompt read from the cache the host's own requests wrote."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import json
import sys
import warnings
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from anthropic import AsyncAnthropic
from pydantic_ai import Agent
from pydantic_ai import messages as pa
from pydantic_ai.capabilities import Caching
from pydantic_ai.models.anthropic import AnthropicModel as PydanticAnthropicModel
from pydantic_ai.models.anthropic import AnthropicModelSettings
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.providers.anthropic import AnthropicProvider

from memdir.extract import ExtractConfig, MemorySaved
from memdir.integrations.pydantic_ai import (
    MemdirCapability,
    messages_from_pydantic_ai,
    messages_to_pydantic_ai,
)
from memdir.messages import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    model_visible,
)
from memdir.telemetry import CollectingSink
from memdir.testing import FakeAnthropicServer, FakeOpenAIServer, Fault, RecordedRequest, Reply
from tests.examples import load_example

# A host prompt of a realistic size: above Anthropic's 1,024-token minimum for a cache
# entry, so the fake caches it by its real rules and the planner weighs real numbers.
INSTRUCTIONS = "You are a weather assistant for a small data team.\n" + "\n".join(
    f"Rule {n}: answer briefly, name the city, and say where the forecast came from."
    for n in range(80)
)

HOST_TURNS: list[list[Message | str]] = [
    [
        Message(
            role="assistant",
            content=(ToolUseBlock(id="toolu_w1", name="get_weather", input={"city": "Paris"}),),
        ),
        "It is sunny in Paris, Ana.",
    ],
    ["Noted: polars, never pandas."],
    ["Your dashboards live at grafana.example.com."],
]
USER_TURNS = [
    "I'm Ana, I lead the data platform team. What's the weather in Paris?",
    "We always use polars here, never pandas.",
    "Where did I say our dashboards are?",
]


def texts(message: dict[str, Any]) -> list[str]:
    """A message's texts, without memdir's ``<system-reminder>`` s: the notice that memory
    changed names the memory dir too, and it goes in the host's requests."""
    content = message.get("content")
    if isinstance(content, str):
        found = [content]
    else:
        found = [str(b.get("text", "")) for b in content or () if isinstance(b, dict)]
    return [t for t in found if not t.startswith("<system-reminder>")]


# How memdir's prompt begins, in a fork and in its own request alike.
MEMORY_UPDATE = "# Memory update"


def last_text(body: dict[str, Any]) -> str:
    return "\n".join(texts(body["messages"][-1]))


def is_memdir(request: RecordedRequest, memory: Path) -> bool:
    """Whether a request is one of the memory agent's: memdir's prompt, which starts
    ``# Memory update``, is among its last two messages (the host's system message names
    the memory directory too, in memdir's memory instructions, so the path tells nothing)."""
    tail = [m for m in request.body["messages"][-2:] if m.get("role") != "system"]
    return any(MEMORY_UPDATE in text for m in tail for text in texts(m))


def memory_file(name: str) -> str:
    return f"---\nname: {name}\ndescription: about {name}\ntype: user\n---\n\nbody\n"


def memory_writes(memory: Path, n: int, tools: Sequence[str]) -> tuple[ToolUseBlock, ...]:
    """Run ``n`` of the memory agent: one note in one turn, through the ``memory`` tool
    when the request offers it (a fork of an agent that has it), else through memdir's
    own Write (a standalone request). memdir's tools write its index line."""
    if "memory" in tools:
        note = {
            "command": "create",
            "path": f"/memories/note_{n}.md",
            "file_text": memory_file(f"n{n}"),
        }
        return (ToolUseBlock(id=f"toolu_m{n}", name="memory", input=note),)
    return (
        ToolUseBlock(
            id=f"toolu_m{n}",
            name="Write",
            input={"file_path": str(memory / f"note_{n}.md"), "content": memory_file(f"n{n}")},
        ),
    )


def scripted(memory: Path, host: Iterator[Reply]) -> Callable[[dict[str, Any]], Reply]:
    """Answers as the host agent, and as its memory agent when memdir's prompt is last."""
    notes = iter(range(100))

    def handler(body: dict[str, Any]) -> Reply:
        if MEMORY_UPDATE in last_text(body):
            tools = [str(t.get("name")) for t in body.get("tools") or ()]
            return Message(role="assistant", content=memory_writes(memory, next(notes), tools))
        return next(host)

    return handler


@contextlib.asynccontextmanager
async def served(
    handler: Callable[[dict[str, Any]], Any],
) -> AsyncIterator[tuple[FakeAnthropicServer, AsyncAnthropic]]:
    """The fake server and a client of it, closed on the loop that used it."""
    async with (
        FakeAnthropicServer(handler=handler) as fake,
        AsyncAnthropic(base_url=fake.base_url, api_key="test") as client,
    ):
        yield fake, client


def weather_agent(
    client: AsyncAnthropic, *capabilities: Any, settings: AnthropicModelSettings | None = None
) -> Agent[None, str]:
    """pydantic-ai's own Agent and AnthropicModel, with one tool."""
    model = PydanticAnthropicModel(
        "claude-sonnet-4-5", provider=AnthropicProvider(anthropic_client=client)
    )
    agent: Agent[None, str] = Agent(
        model,
        instructions=INSTRUCTIONS,
        capabilities=list(capabilities),
        model_settings=settings,
    )

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city, from the team's forecast service."""
        return f"sunny in {city}"

    return agent


@dataclass
class Outcome:
    memory: Path
    requests: list[RecordedRequest]
    history: list[pa.ModelMessage]
    sink: CollectingSink
    capability: MemdirCapability | None
    conversation_id: str | None
    notices: list[MemorySaved]


def converse(
    tmp_path: Path, *, with_memory: bool = True, config: ExtractConfig | None = None, **kw: Any
) -> Outcome:
    """Three runs of one conversation, each handed the history of the one before."""
    memory = tmp_path / "memory"
    sink = CollectingSink()
    notices: list[MemorySaved] = []
    capability = (
        MemdirCapability(memory, config=config, sink=sink, notify=notices.append, **kw)
        if with_memory
        else None
    )
    host = iter([reply for turn in HOST_TURNS for reply in turn])
    history: list[pa.ModelMessage] = []
    conversation: str | None = None

    async def main() -> list[RecordedRequest]:
        nonlocal history, conversation
        async with served(scripted(memory, host)) as (fake, client):
            agent = weather_agent(client, *([capability] if capability else []))
            for text in USER_TURNS:
                result = await agent.run(text, message_history=history)
                history = result.all_messages()
                conversation = history[-1].conversation_id
                if capability is not None:
                    await capability.drain()
            fake.assert_no_errors()
            return fake.requests

    requests = asyncio.run(main())
    return Outcome(memory, requests, history, sink, capability, conversation, notices)


def strip_markers(value: Any) -> Any:
    """``value`` without ``cache_control`` anywhere: markers are not part of the prefix."""
    if isinstance(value, dict):
        return {k: strip_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_markers(v) for v in value]
    return value


def prompt_tokens(request: RecordedRequest) -> int:
    usage = request.usage or {}
    return sum(
        int(usage.get(k) or 0)
        for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )


def assert_remembered(outcome: Outcome) -> None:
    """Each run saved a memory, and the runs together covered every message once."""
    runs = outcome.sink.named("extract.run")
    assert "extract.error" not in outcome.sink.names()
    assert len(runs) == len(USER_TURNS)
    messages = messages_from_pydantic_ai(outcome.history)
    assert sum(int(r.fields["message_count"]) for r in runs) == len(model_visible(messages))
    assert outcome.capability is not None
    extractor = outcome.capability.extractor(outcome.conversation_id)
    assert extractor is not None
    assert extractor.cursor == messages[-1].uuid
    saved = sorted(p.name for p in outcome.memory.glob("note_*.md"))
    assert saved == [f"note_{n}.md" for n in range(len(USER_TURNS))]


# --- the capability on a real agent ---------------------------------------------------------


def test_each_run_saves_memories_inside_the_hosts_prompt_cache(tmp_path: Path) -> None:
    # Always the fork: which way is cheaper is the planner's call, tested on its own; on
    # a conversation this short it would soon send memdir's own cached request instead.
    outcome = converse(tmp_path, config=ExtractConfig(mode="fork"), memory_tool=True)
    assert_remembered(outcome)
    runs = outcome.sink.named("extract.run")
    assert [r.fields["mode"] for r in runs] == ["fork"] * len(USER_TURNS)
    assert [len(n.paths) for n in outcome.notices] == [1, 1, 1]

    forks = [i for i, r in enumerate(outcome.requests) if is_memdir(r, outcome.memory)]
    assert len(forks) == len(USER_TURNS)  # one request per run: write and index at once
    read = total = 0
    for i in forks:
        fork, host = outcome.requests[i], outcome.requests[i - 1]
        assert not is_memdir(host, outcome.memory)
        # The host's last request, as pydantic-ai sent it, heads the fork's: the memory
        # tool is Anthropic's own, and its beta goes along.
        assert {"name": "memory", "type": "memory_20250818"} in host.body["tools"]
        assert fork.headers["anthropic-beta"] == host.headers["anthropic-beta"]
        for key in ("model", "max_tokens", "tool_choice", "system", "tools"):
            assert strip_markers(fork.body[key]) == strip_markers(host.body[key]), key
        sent = strip_markers(host.body["messages"])
        assert strip_markers(fork.body["messages"][: len(sent)]) == sent
        # ... and the fork reads all of it from the cache that request wrote.
        assert fork.usage is not None
        assert fork.usage["cache_read_input_tokens"] == prompt_tokens(host)
        read += int(fork.usage["cache_read_input_tokens"])
        total += prompt_tokens(fork)
    share = read / total
    print(f"\nmemory agent's input read from the host's cache: {read}/{total} tokens ({share:.0%})")
    assert share > 0.5


def test_an_openai_chat_model_forks_inside_the_hosts_cache_too(tmp_path: Path) -> None:
    """pydantic-ai's OpenAIChatModel: its Chat Completions request is recorded on the
    client's pool as well, and the fork sends it first, as sent, then the final answer."""
    from openai import AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    memory = tmp_path / "memory"
    sink = CollectingSink()
    capability = MemdirCapability(
        memory, config=ExtractConfig(mode="fork"), sink=sink, memory_tool=True
    )
    replies = iter([reply for turn in HOST_TURNS for reply in turn])
    notes = iter(range(100))

    def handler(body: dict[str, Any]) -> Reply:
        if MEMORY_UPDATE in last_text(body):
            tools = [str(t["function"]["name"]) for t in body.get("tools") or ()]
            return Message(role="assistant", content=memory_writes(memory, next(notes), tools))
        return next(replies)

    history: list[pa.ModelMessage] = []

    async def main() -> list[RecordedRequest]:
        nonlocal history
        with FakeOpenAIServer(handler=handler, model="gpt-4.1-mini") as fake:
            async with AsyncOpenAI(base_url=fake.base_url, api_key="test") as client:
                model = OpenAIChatModel(
                    "gpt-4.1-mini", provider=OpenAIProvider(openai_client=client)
                )
                agent: Agent[None, str] = Agent(
                    model, instructions=INSTRUCTIONS, capabilities=[capability]
                )

                @agent.tool_plain
                def get_weather(city: str) -> str:
                    """The weather in a city, from the team's forecast service."""
                    return f"sunny in {city}"

                for text in USER_TURNS:
                    result = await agent.run(text, message_history=history)
                    history = result.all_messages()
                    await capability.drain()
            fake.assert_no_errors()
            return fake.requests

    requests = asyncio.run(main())
    assert capability.fallback_reason is None
    runs = sink.named("extract.run")
    assert [r.fields["mode"] for r in runs] == ["fork"] * len(USER_TURNS)
    messages = messages_from_pydantic_ai(history)
    assert sum(int(r.fields["message_count"]) for r in runs) == len(model_visible(messages))
    saved = sorted(p.name for p in memory.glob("note_*.md"))
    assert saved == [f"note_{n}.md" for n in range(len(USER_TURNS))]
    forks = [i for i, r in enumerate(requests) if is_memdir(r, memory)]
    assert len(forks) == len(USER_TURNS)
    read = total = 0
    for i in forks:
        fork, host = requests[i], requests[i - 1]
        sent = host.body["messages"]
        assert json.dumps(fork.body["messages"][: len(sent)]) == json.dumps(sent)
        assert json.dumps(fork.body["tools"]) == json.dumps(host.body["tools"])
        assert fork.usage is not None
        assert host.usage is not None
        cached = int(fork.usage["prompt_tokens_details"]["cached_tokens"])
        assert host.usage["prompt_tokens"] - 128 < cached <= host.usage["prompt_tokens"]
        read += cached
        total += int(fork.usage["prompt_tokens"])
    share = read / total
    print(f"\nmemory agent's input read from the host's cache: {read}/{total} tokens ({share:.0%})")
    assert share > 0.4


def test_without_a_tool_that_writes_memory_the_runs_are_standalone(tmp_path: Path) -> None:
    # A fork sees only the agent's tools: with none that saves, it could save nothing.
    outcome = converse(tmp_path)
    assert_remembered(outcome)
    runs = outcome.sink.named("extract.run")
    assert {r.fields["mode"] for r in runs} == {"standalone"}
    assert {r.fields["plan_reason"] for r in runs} == {"the host's tools cannot write memory"}
    assert outcome.capability is not None
    assert outcome.capability.fallback_reason is None  # the host's request was there


def test_without_the_capability_nothing_is_remembered(tmp_path: Path) -> None:
    outcome = converse(tmp_path, with_memory=False)
    assert not any(is_memdir(r, outcome.memory) for r in outcome.requests)
    assert not outcome.memory.exists()
    with pytest.raises(AssertionError):
        assert_remembered(outcome)


def test_a_host_request_with_no_cache_breakpoint_runs_standalone(tmp_path: Path) -> None:
    # Nothing of the host's request is cached, so a fork would have nothing to read.
    outcome = converse(tmp_path, config=ExtractConfig(mode="fork"), cache=False, memory_tool=True)
    assert_remembered(outcome)
    assert outcome.capability is not None
    assert outcome.capability.fallback_reason is not None
    assert "no cache_control" in outcome.capability.fallback_reason
    host = [r for r in outcome.requests if not is_memdir(r, outcome.memory)]
    assert all("cache_control" not in json.dumps(r.body) for r in host)
    runs = outcome.sink.named("extract.run")
    assert [r.fields["mode"] for r in runs] == ["standalone"] * len(USER_TURNS)


def test_the_agents_own_cache_settings_are_left_as_they_are(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    sink = CollectingSink()
    capability = MemdirCapability(memory, config=ExtractConfig(mode="fork"), sink=sink)
    host = iter(["Hello."])

    async def main() -> list[RecordedRequest]:
        async with served(scripted(memory, host)) as (fake, client):
            agent = weather_agent(
                client,
                capability,
                settings=AnthropicModelSettings(anthropic_cache_instructions=True),
            )
            await agent.run("Hi, I'm Ana.")
            await capability.drain()
            return fake.requests

    first = asyncio.run(main())[0]
    # Only the agent's instructions carry a marker: no automatic caching was added, and
    # memdir's memory instructions follow, as the agent's settings leave them.
    assert "cache_control" not in first.body
    assert [b.get("cache_control") is not None for b in first.body["system"]] == [True, False]
    assert "<system-reminder>" in first.body["system"][1]["text"]
    assert "cache_control" not in json.dumps(first.body["tools"])
    assert sink.named("extract.run")[0].fields["mode"] == "fork"


def test_streamed_and_iterated_runs_are_reported(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    sink = CollectingSink()
    capability = MemdirCapability(memory, config=ExtractConfig(mode="fork"), sink=sink)
    host = iter(["One.", "Two."])

    async def main() -> list[pa.ModelMessage]:
        async with served(scripted(memory, host)) as (fake, client):
            agent = weather_agent(client, capability)
            async with agent.run_stream("First question.") as stream:
                await stream.get_output()
            await capability.drain()
            async with agent.iter("Second question.", message_history=stream.all_messages()) as run:
                async for _ in run:
                    pass
            await capability.drain()
            fake.assert_no_errors()
            assert run.result is not None
            return run.result.all_messages()

    history = asyncio.run(main())
    runs = sink.named("extract.run")
    assert [r.fields["mode"] for r in runs] == ["fork", "fork"]
    assert all(int(r.fields["cache_read_input_tokens"]) > 0 for r in runs)
    visible = model_visible(messages_from_pydantic_ai(history))
    assert sum(int(r.fields["message_count"]) for r in runs) == len(visible)


def test_a_sync_run_is_reported_and_drain_sync_waits_for_it(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    sink = CollectingSink()
    capability = MemdirCapability(memory, config=ExtractConfig(mode="fork"), sink=sink)
    with FakeAnthropicServer(handler=scripted(memory, iter(["Hello, Ana."]))) as fake:
        client = AsyncAnthropic(base_url=fake.base_url, api_key="test")
        agent = weather_agent(client, capability)
        agent.run_sync("Hi, I'm Ana.")
        # run_sync keeps its event loop between calls; the run is a task there.
        assert not (memory / "note_0.md").exists()
        capability.drain_sync()
        assert (memory / "note_0.md").exists()
        loop = asyncio.get_event_loop_policy().get_event_loop()
        loop.run_until_complete(client.close())
        loop.close()
        asyncio.set_event_loop(None)
        fake.assert_no_errors()
    (run,) = sink.named("extract.run")
    assert run.fields["mode"] == "fork"
    assert int(run.fields["cache_read_input_tokens"]) > 0


def test_a_failed_run_is_no_turn(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    sink = CollectingSink()
    capability = MemdirCapability(memory, sink=sink)
    replies: Iterator[Reply] = iter([Fault(status=400), "Hello again."])

    async def main() -> None:
        async with served(scripted(memory, replies)) as (fake, client):
            agent = weather_agent(client, capability)
            with pytest.raises(Exception, match="400"):
                await agent.run("Hi, I'm Ana.")
            await capability.drain()
            assert sink.events == []
            result = await agent.run("Hi, I'm Ana.")
            await capability.drain()
            runs = sink.named("extract.run")
            assert [r.fields["message_count"] for r in runs] == [2]
            assert len(result.all_messages()) == 2

    asyncio.run(main())


def test_conversations_are_kept_apart_and_resume_from_their_cursor(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    sink = CollectingSink()
    # One conversation kept at a time: the other one's extractor goes, its cursor stays.
    capability = MemdirCapability(
        memory, config=ExtractConfig(mode="fork"), sink=sink, max_sessions=1
    )
    host = iter(["A1.", "B1.", "A2."])

    async def main() -> tuple[list[pa.ModelMessage], list[pa.ModelMessage]]:
        async with served(scripted(memory, host)) as (fake, client):
            agent = weather_agent(client, capability)
            a = (await agent.run("Conversation A.")).all_messages()
            await capability.drain()
            b = (await agent.run("Conversation B.")).all_messages()
            await capability.drain()
            a = (await agent.run("A goes on.", message_history=a)).all_messages()
            await capability.drain()
            return a, b

    a, b = asyncio.run(main())
    assert a[0].conversation_id != b[0].conversation_id
    assert [r.fields["message_count"] for r in sink.named("extract.run")] == [2, 2, 2]
    extractor = capability.extractor(a[-1].conversation_id)
    assert extractor is not None
    assert extractor.cursor == messages_from_pydantic_ai(a)[-1].uuid
    assert capability.extractor(b[-1].conversation_id) is None  # let go


def test_idle_conversations_are_let_go_their_positions_kept_on_disk(tmp_path: Path) -> None:
    """Past ``max_sessions`` an idle conversation's extractor is let go: what it had read
    is in the memory's state file, not in this process."""
    from memdir.state import StateFile

    memory = tmp_path / "memory"
    capability = MemdirCapability(
        memory, config=ExtractConfig(mode="fork"), sink=CollectingSink(), max_sessions=1
    )
    host = iter([f"Answer {n}." for n in range(5)])
    ids: list[str | None] = []

    async def main() -> None:
        async with served(scripted(memory, host)) as (fake, client):
            agent = weather_agent(client, capability)
            for n in range(5):
                result = await agent.run(f"Conversation {n}.")
                ids.append(result.all_messages()[-1].conversation_id)
                await capability.drain()

    asyncio.run(main())
    held = [capability.extractor(i) is not None for i in ids]
    assert held == [False] * 4 + [True]
    saved = StateFile(memory).load()
    assert all(i is not None and saved[i].cursor is not None for i in ids)


def test_the_agent_may_save_a_memory_itself_which_is_not_saved_again(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    sink = CollectingSink()
    capability = MemdirCapability(
        memory, config=ExtractConfig(mode="fork"), sink=sink, memory_tool=True
    )
    note = {"command": "create", "path": "/memories/user_ana.md", "file_text": memory_file("ana")}
    host: Iterator[Reply] = iter(
        [
            Message(
                role="assistant", content=(ToolUseBlock(id="toolu_s", name="memory", input=note),)
            ),
            "Saved that you are Ana.",
        ]
    )

    async def main() -> str | None:
        async with served(scripted(memory, host)) as (fake, client):
            agent = weather_agent(client, capability)
            result = await agent.run("Remember that I'm Ana.")
            await capability.drain()
            fake.assert_no_errors()
            return result.all_messages()[-1].conversation_id

    conversation = asyncio.run(main())
    saved = (memory / "user_ana.md").read_text()
    assert f"originSessionId: {conversation}" in saved  # stamped as Claude Code stamps it
    assert sink.names() == ["extract.skipped_direct_write"]


def test_another_model_gets_standalone_runs_and_the_memory_tool_as_a_function(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "MEMORY.md").write_text("- [Ana](user_ana.md) — who the user is\n")
    sink = CollectingSink()
    capability = MemdirCapability(memory, "offline", sink=sink, memory_tool=True)
    shown: list[dict[str, Any]] = []

    def reply(messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
        if len(messages) == 1:
            shown.extend(
                t.parameters_json_schema for t in info.function_tools if t.name == "memory"
            )
            view = {"command": "view", "path": "/memories/MEMORY.md"}
            return pa.ModelResponse(parts=[pa.ToolCallPart("memory", view, "c1")])
        (returned,) = messages[-1].parts
        assert isinstance(returned, pa.ToolReturnPart)
        assert "who the user is" in returned.model_response_str()
        return pa.ModelResponse(parts=[pa.TextPart(content="Polars it is.")])

    agent = Agent(FunctionModel(reply), capabilities=[capability])

    async def main() -> None:
        await agent.run("Remember that I always use polars, never pandas.")
        await capability.drain()

    asyncio.run(main())
    assert shown[0]["required"] == ["command"]  # a function tool: no native one here
    (run,) = sink.named("extract.run")
    assert run.fields["mode"] == "standalone"
    assert run.fields["memories_saved"] == 1  # the offline model heard "always use polars"
    assert capability.fallback_reason is not None
    assert "neither pydantic-ai's AnthropicModel" in capability.fallback_reason


def test_an_hour_long_host_cache_is_shared_too(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    sink = CollectingSink()
    capability = MemdirCapability(
        memory, config=ExtractConfig(mode="fork"), sink=sink, memory_tool=True
    )
    host: Iterator[Reply] = iter(["Hello, Ana."])

    async def main() -> list[RecordedRequest]:
        async with served(scripted(memory, host)) as (fake, client):
            agent = weather_agent(client, Caching(retention="1h"), capability)
            await agent.run("Hi, I'm Ana.")
            await capability.drain()
            fake.assert_no_errors()
            return fake.requests

    first, fork = asyncio.run(main())
    assert first.body["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert fork.usage is not None
    assert fork.usage["cache_read_input_tokens"] == prompt_tokens(first)
    assert sink.names() == ["extract.run"]


def test_an_agent_run_from_a_tool_is_a_subagent_and_not_remembered(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    sink = CollectingSink()
    capability = MemdirCapability(memory, "offline", sink=sink)

    def helper(messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
        return pa.ModelResponse(parts=[pa.TextPart(content="Helped.")])

    def main_agent(messages: list[pa.ModelMessage], info: AgentInfo) -> pa.ModelResponse:
        if len(messages) == 1:
            call = pa.ToolCallPart(tool_name="ask_helper", args={}, tool_call_id="c1")
            return pa.ModelResponse(parts=[call])
        return pa.ModelResponse(parts=[pa.TextPart(content="Done.")])

    inner = Agent(FunctionModel(helper), capabilities=[capability])
    outer = Agent(FunctionModel(main_agent), capabilities=[capability])

    @outer.tool_plain
    async def ask_helper() -> str:
        """Ask the helper agent."""
        return (await inner.run("Help, please.")).output

    async def main() -> list[pa.ModelMessage]:
        result = await outer.run("I'm Ana.")
        await capability.drain()
        return result.all_messages()

    history = asyncio.run(main())
    (run,) = sink.named("extract.run")  # the helper's run was no turn of its own
    assert run.fields["message_count"] == len(model_visible(messages_from_pydantic_ai(history)))


# --- the converters --------------------------------------------------------------------------

WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
PNG = b"\x89PNG\r\n\x1a\nfake"


def sample_history() -> list[pa.ModelMessage]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # RetryPromptPart is deprecated, still in old histories
        legacy_retry = pa.RetryPromptPart(
            content="bad city", tool_name="get_weather", tool_call_id="c2"
        )
    return [
        pa.ModelRequest(
            parts=[
                pa.SystemPromptPart(content="Be brief."),
                pa.UserPromptPart(
                    content=[
                        "Look at this:",
                        pa.BinaryContent(data=PNG, media_type="image/png"),
                        pa.ImageUrl(url="https://example.com/a.png"),
                        pa.DocumentUrl(url="https://example.com/spec.pdf"),
                    ]
                ),
            ],
            timestamp=WHEN,
        ),
        pa.ModelResponse(
            parts=[
                pa.ThinkingPart(content="Check it.", signature="sig", provider_name="anthropic"),
                pa.TextPart(content="Checking."),
                pa.ToolCallPart(
                    tool_name="get_weather", args='{"city": "Paris"}', tool_call_id="c1"
                ),
                pa.ToolCallPart(tool_name="get_weather", args={"city": "?"}, tool_call_id="c2"),
            ],
            timestamp=WHEN,
        ),
        pa.ModelRequest(
            parts=[
                pa.ToolReturnPart(
                    tool_name="get_weather", content={"sky": "clear"}, tool_call_id="c1"
                ),
                legacy_retry,
                pa.RetryFeedbackPart(
                    content="Answer in French.", retry=pa.RetryInfo(cause="model_retry")
                ),
            ]
        ),
        pa.ModelResponse(parts=[pa.TextPart(content="Il fait beau.")]),
    ]


def test_pydantic_ai_messages_read_as_memdir_messages() -> None:
    messages = messages_from_pydantic_ai(sample_history())
    assert [m.role for m in messages] == ["system", "user", "assistant", "user", "assistant"]
    system, user, answer, results, final = messages
    assert system.content == (TextBlock(text="Be brief."),)
    assert user.timestamp == WHEN
    assert user.content[0] == TextBlock(text="Look at this:")
    assert isinstance(user.content[1], ImageBlock)
    assert user.content[1].media_type == "image/png"
    assert user.content[2] == ImageBlock(url="https://example.com/a.png")
    assert user.content[3] == TextBlock(text="[attached file: https://example.com/spec.pdf]")
    assert answer.content[0] == ThinkingBlock(thinking="Check it.", signature="sig")
    assert answer.tool_uses[0].input == {"city": "Paris"}
    assert answer.tool_uses[0].raw_input == '{"city": "Paris"}'
    assert [b.tool_use_id for b in results.tool_results] == ["c1", "c2"]
    assert results.tool_results[0].content == '{"sky":"clear"}'
    assert results.tool_results[1].is_error
    assert "bad city" in results.tool_results[1].text
    assert "Answer in French." in results.text
    assert final.text == "Il fait beau."
    # The ids come from the content: the same history reads to the same ids.
    assert [m.uuid for m in messages_from_pydantic_ai(sample_history())] == [
        m.uuid for m in messages
    ]


def test_memdir_messages_convert_back_to_pydantic_ai() -> None:
    messages = [
        Message(role="system", content=(TextBlock(text="Be brief."),)),
        Message.user("Hi, I'm Ana."),
        Message(
            role="assistant",
            content=(
                ThinkingBlock(thinking="Look it up.", signature="sig"),
                ToolUseBlock(id="c1", name="get_weather", input={"city": "Paris"}),
            ),
        ),
        Message(
            role="user",
            content=(ToolResultBlock(tool_use_id="c1", content="down", is_error=True),),
        ),
        Message.assistant("The service is down."),
    ]
    history = messages_to_pydantic_ai(messages)
    assert [type(m).__name__ for m in history] == [
        "ModelRequest",
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
        "ModelResponse",
    ]
    assert isinstance(history[0].parts[0], pa.SystemPromptPart)
    thinking, call = history[2].parts
    assert isinstance(thinking, pa.ThinkingPart)
    assert thinking.provider_name == "anthropic"
    assert isinstance(call, pa.ToolCallPart)
    assert call.args_as_dict() == {"city": "Paris"}
    (returned,) = history[3].parts
    assert isinstance(returned, pa.ToolReturnPart)
    assert (returned.tool_name, returned.outcome) == ("get_weather", "failed")
    # And back again: the same conversation.
    again = messages_from_pydantic_ai(history)
    assert [(m.role, m.content) for m in again] == [(m.role, m.content) for m in messages]


def test_a_missing_pydantic_ai_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pydantic_ai", None)
    monkeypatch.delitem(sys.modules, "memdir.integrations.pydantic_ai")
    with pytest.raises(ImportError, match=r"pip install -e \S+\[pydantic-ai\]"):
        importlib.import_module("memdir.integrations.pydantic_ai")


# --- the example -----------------------------------------------------------------------------


def test_the_example_agent_remembers_against_the_fake_server(tmp_path: Path) -> None:
    example = load_example("pydantic_ai_agent.py")
    memory = tmp_path / "memory"
    host = iter(["Hello Ana.", "Polars it is."])
    said: list[str] = []

    async def main() -> Sequence[pa.ModelMessage]:
        async with served(scripted(memory, host)) as (fake, client):
            model = PydanticAnthropicModel(
                "claude-sonnet-4-5", provider=AnthropicProvider(anthropic_client=client)
            )
            history: Sequence[pa.ModelMessage] = await example.chat(
                model, memory, ["I'm Ana.", "We use polars."], say=said.append
            )
            fake.assert_no_errors()
            return history

    history = asyncio.run(main())
    assert len(history) == 4
    assert said[0] == "Hello Ana."
    assert any(line.startswith("● Saved 1 memory") for line in said)
    assert sorted(p.name for p in memory.glob("note_*.md")) == ["note_0.md", "note_1.md"]


# --- the host core: memory shown, the host's client, the error policy -----------------------


def test_a_new_conversation_is_shown_the_saved_memory(tmp_path: Path) -> None:
    """With only the capability installed, the first request holds memdir's memory
    instructions and the saved index, after the agent's own instructions."""
    from memdir.recall import memory_prompt

    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "user_ana.md").write_text(memory_file("ana"))
    (memory / "MEMORY.md").write_text("- [Ana](user_ana.md) — Ana leads the data team\n")
    capability = MemdirCapability(memory, config=ExtractConfig(mode="fork"), memory_tool=True)
    off = MemdirCapability(memory, config=ExtractConfig(mode="fork"), load_memory=False)

    async def main(chosen: MemdirCapability) -> RecordedRequest:
        answers = iter(["Hello, Ana.", *["Done."] * 10])  # the host, then the memory agent
        async with served(scripted(memory, answers)) as (fake, client):
            await weather_agent(client, chosen).run("Hi, who am I?")
            await chosen.drain()
            return fake.requests[0]

    first = asyncio.run(main(capability))
    system = "\n".join(block["text"] for block in first.body["system"])
    assert system.startswith(INSTRUCTIONS)
    assert memory_prompt(memory) in system
    assert "- [Ana](user_ana.md)" in system
    assert system.index(INSTRUCTIONS) < system.index("- [Ana](user_ana.md)")

    plain = asyncio.run(main(off))
    assert "".join(block["text"] for block in plain.body["system"]) == INSTRUCTIONS


def test_a_client_closed_before_drain_loses_nothing_and_keeps_its_settings(
    tmp_path: Path,
) -> None:
    """The host's ``AsyncOpenAI`` (with an organization and a gateway header) is closed
    before ``drain()``: the memory run goes on, on memdir's own client with the same
    settings, and never tries the closed one."""
    from openai import AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    memory = tmp_path / "memory"
    sink = CollectingSink()
    capability = MemdirCapability(
        memory, config=ExtractConfig(mode="fork"), sink=sink, memory_tool=True
    )
    notes = iter(range(100))

    def handler(body: dict[str, Any]) -> Reply:
        if MEMORY_UPDATE in last_text(body):
            tools = [str(t["function"]["name"]) for t in body.get("tools") or ()]
            return Message(role="assistant", content=memory_writes(memory, next(notes), tools))
        if body["messages"][-1]["role"] == "tool":
            return "Saved."
        return "Noted: polars, never pandas."

    async def main() -> list[RecordedRequest]:
        with FakeOpenAIServer(handler=handler, model="gpt-4.1-mini") as fake:
            async with AsyncOpenAI(
                base_url=fake.base_url,
                api_key="test",
                organization="org-acme",
                default_headers={"X-Gateway-Key": "k-123"},
            ) as client:
                model = OpenAIChatModel(
                    "gpt-4.1-mini", provider=OpenAIProvider(openai_client=client)
                )
                agent: Agent[None, str] = Agent(
                    model, instructions=INSTRUCTIONS, capabilities=[capability]
                )
                await agent.run(USER_TURNS[1])
            assert client.is_closed()
            await capability.drain()
            fake.assert_no_errors()
            return fake.requests

    requests = asyncio.run(main())
    assert not sink.named("extract.error")
    assert [r.fields["mode"] for r in sink.named("extract.run")] == ["fork"]
    assert (memory / "note_0.md").exists()
    ours = [r for r in requests if is_memdir(r, memory)]
    assert ours
    for request in ours:
        assert request.headers["openai-organization"] == "org-acme"
        assert request.headers["x-gateway-key"] == "k-123"


def test_a_turn_that_cannot_be_reported_is_an_error_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same error policy as the other integrations: an ``extract.error`` event, not
    only a log line, and the host's run goes on."""
    from memdir.integrations import pydantic_ai as integration

    def broken(*args: Any) -> list[Message]:
        raise RuntimeError("unreadable history")

    monkeypatch.setattr(integration, "_read", broken)
    memory = tmp_path / "memory"
    sink = CollectingSink()
    capability = MemdirCapability(memory, config=ExtractConfig(mode="fork"), sink=sink)

    async def main() -> str:
        async with served(scripted(memory, iter(["Hello."]))) as (fake, client):
            result = await weather_agent(client, capability).run("Hi.")
            await capability.drain()
            return result.output

    assert asyncio.run(main()) == "Hello."
    (error,) = sink.named("extract.error")
    assert error.fields["error_type"] == "RuntimeError"


def test_a_restart_with_a_restored_history_saves_each_fact_once(tmp_path: Path) -> None:
    """A new process — a new capability — given the history the last one stored (as
    JSON) reads only the run that is new, and saves from it: the memories the previous
    process stamped with the conversation are not taken for the agent's own."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    memory = tmp_path / "memory"
    sink = CollectingSink()
    handler = scripted(memory, iter([reply for turn in HOST_TURNS for reply in turn]))
    stored = b"[]"

    async def process(turns: Sequence[str]) -> None:
        nonlocal stored
        capability = MemdirCapability(
            memory, config=ExtractConfig(mode="fork"), sink=sink, memory_tool=True
        )
        history = ModelMessagesTypeAdapter.validate_json(stored)
        async with served(handler) as (fake, client):
            agent = weather_agent(client, capability)
            for text in turns:
                result = await agent.run(text, message_history=history)
                history = result.all_messages()
                await capability.drain()
            fake.assert_no_errors()
        stored = ModelMessagesTypeAdapter.dump_json(history)

    asyncio.run(process(USER_TURNS[:2]))
    asyncio.run(process(USER_TURNS[2:]))

    assert sorted(p.name for p in memory.glob("note_*.md")) == [
        "note_0.md",
        "note_1.md",
        "note_2.md",
    ]
    runs = sink.named("extract.run")
    # The second run's: the turn and the notice that the first run's save changed memory;
    # the third (a new process, which loads memory afresh): only what is new.
    assert [r.fields["message_count"] for r in runs] == [4, 3, 2]
    assert not sink.named("extract.skipped_direct_write")


def test_an_openai_model_never_imports_pydantic_ais_anthropic_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Telling that the agent's model is not pydantic-ai's ``AnthropicModel`` must not
    import it (and ``anthropic``: a second and more, on the host's loop)."""
    from openai import AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from memdir.integrations import pydantic_ai as integration

    client = AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="test")
    model = OpenAIChatModel("gpt-4.1-mini", provider=OpenAIProvider(openai_client=client))
    monkeypatch.delitem(sys.modules, "pydantic_ai.models.anthropic", raising=False)
    assert integration._anthropic_client(model) is None
    assert not integration._is_pydantic_anthropic(model)
    assert integration._client_of(model) is not None
    assert "pydantic_ai.models.anthropic" not in sys.modules
