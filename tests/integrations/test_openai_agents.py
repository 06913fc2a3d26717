"""The OpenAI Agents SDK hooks, with the real ``agents`` runner against the fake OpenAI server.

The host is an ``Agent`` on ``OpenAIChatCompletionsModel`` whose client talks to
:class:`~memdir.testing.FakeOpenAIServer`; a script answers as the host and as its memory
agent. What is checked: memories are saved from the runs, every message is covered by
exactly one memory run, and each fork sends the host's last request as its prefix, so the
server reads it from its prompt cache.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import agents
import pytest
from agents import (
    Agent,
    FunctionTool,
    ModelSettings,
    OpenAIChatCompletionsModel,
    Runner,
    SQLiteSession,
    TResponseInputItem,
    function_tool,
)
from agents.models.chatcmpl_converter import Converter
from agents.testing import ScriptedModel as AgentsScriptedModel
from agents.testing import assistant_message
from openai import AsyncOpenAI

from memdir.errors import MissingExtraError
from memdir.extract import ExtractConfig, MemorySaved
from memdir.extract._standalone import STANDALONE_SYSTEM_PROMPT
from memdir.integrations.openai_agents import (
    MemdirAgentHooks,
    MemdirRunHooks,
    messages_from_items,
    messages_to_items,
)
from memdir.messages import (
    ImageBlock,
    Message,
    OtherBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    messages_from_openai,
    model_visible,
)
from memdir.models import ModelRequest
from memdir.store import parse_memory_file
from memdir.telemetry import CollectingSink
from memdir.testing import FakeOpenAIServer, FunctionModel, RecordedRequest
from tests.examples import load_example

MODEL = "gpt-4.1-mini"
# Long enough instructions that the host's prompt passes OpenAI's 1,024-token minimum.
INSTRUCTIONS = (
    "You are the support agent of Acme's data platform. Answer briefly, check the tools "
    "before you answer about weather or orders, and keep the user's preferences in mind. "
) * 30
FORK_OPENER = "You are now the memory agent"
TURNS = [
    "Hi, I'm Ana. I lead the data platform team; we always use polars, never pandas.",
    "What's the weather in Paris?",
    "Remember that deploys happen on Fridays only.",
]
ANA = "user_ana.md"
DEPLOYS = "project_deploys.md"


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    """The SDK would export traces to OpenAI; tests stay on this machine."""
    agents.set_tracing_disabled(True)


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city today."""
    return f"Sunny and 24°C in {city}."


@function_tool
def lookup_order(order_id: str) -> str:
    """An order's status."""
    return f"Order {order_id} shipped yesterday."


def memory_file(name: str, kind: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {body}\ntype: {kind}\n---\n\n{body}\n"


def is_memory_run(body: dict[str, Any]) -> bool:
    """A request of memdir's memory agent: the fork's prompt, or its standalone system."""
    text = json.dumps(body["messages"], ensure_ascii=False)
    return FORK_OPENER in text or STANDALONE_SYSTEM_PROMPT.splitlines()[0] in text


class Script:
    """Answers as the host agent and as its memory agent, from what each request holds."""

    def __init__(self, memory: Path) -> None:
        self.memory = memory

    def __call__(self, body: dict[str, Any]) -> Message | str:
        messages = body["messages"]
        last = messages[-1]
        if is_memory_run(body):
            return self.memory_agent(json.dumps(messages, ensure_ascii=False), last)
        # The host answers the user's last words, not memdir's notice after them.
        last = [m for m in messages if not str(m["content"]).startswith("<system-")][-1]
        if last["role"] == "tool":
            return "It's sunny and 24°C in Paris."
        said = last["content"] if isinstance(last["content"], str) else json.dumps(last)
        if "weather" in said:
            call = ToolUseBlock(id="call_weather", name="get_weather", input={"city": "Paris"})
            return Message(role="assistant", content=(call,))
        if "deploys" in said:
            return "Noted: deploys on Fridays only."
        return "Nice to meet you, Ana. Polars it is."

    def memory_agent(self, text: str, last: dict[str, Any]) -> Message | str:
        if last["role"] == "tool":
            return "Saved."
        # Everything the new messages hold, in one turn: runs of two turns coalesce when
        # the first is still in flight as the second ends.
        notes = []
        if "I'm Ana" in text and not (self.memory / ANA).exists():
            notes.append((ANA, "Ana", "user", "Ana leads the data platform team; polars only"))
        if "deploys happen on Fridays" in text and not (self.memory / DEPLOYS).exists():
            notes.append((DEPLOYS, "Deploy days", "project", "Deploys happen on Fridays only"))
        return self.save(notes) if notes else "Nothing worth saving."

    def save(self, notes: list[tuple[str, str, str, str]]) -> Message:
        index = self.memory / "MEMORY.md"
        lines = index.read_text() if index.exists() else ""
        calls = []
        for filename, name, kind, body in notes:
            calls.append(
                ToolUseBlock(
                    id=f"mem_{filename}",
                    name="Write",
                    input={
                        "file_path": str(self.memory / filename),
                        "content": memory_file(name, kind, body),
                    },
                )
            )
            lines += f"- [{name}]({filename}) — {body}\n"
        calls.append(
            ToolUseBlock(
                id="mem_index", name="Write", input={"file_path": str(index), "content": lines}
            )
        )
        return Message(role="assistant", content=tuple(calls))


def host_agent(client: AsyncOpenAI, memory: MemdirRunHooks | MemdirAgentHooks | None) -> Agent[Any]:
    tools = [get_weather, lookup_order, *(memory.tools() if memory is not None else [])]
    return Agent(
        name="support",
        instructions=INSTRUCTIONS,
        tools=tools,
        model=OpenAIChatCompletionsModel(MODEL, client),
        model_settings=ModelSettings(temperature=0.3, parallel_tool_calls=True),
        hooks=memory if isinstance(memory, MemdirAgentHooks) else None,
    )


async def chat(
    agent: Agent[Any],
    hooks: MemdirRunHooks | None,
    *,
    drain: MemdirRunHooks | MemdirAgentHooks | None,
) -> list[TResponseInputItem]:
    """The three turns, each continuing the conversation with ``to_input_list()``; the
    memory runs are awaited after each, so every turn has its own."""
    conversation: list[TResponseInputItem] = []
    for text in TURNS:
        result = await Runner.run(
            agent, [*conversation, {"role": "user", "content": text}], hooks=hooks
        )
        conversation = result.to_input_list()
        if drain is not None:
            await drain.drain()
    return conversation


def served_chat(
    memory: Path,
    hooks: MemdirRunHooks | MemdirAgentHooks | None,
    server_type: type[FakeOpenAIServer] = FakeOpenAIServer,
) -> list[RecordedRequest]:
    """The three turns against a fake server (run hooks passed to the runner, agent hooks
    given to the agent); the requests it saw."""
    run_hooks = hooks if isinstance(hooks, MemdirRunHooks) else None
    with server_type(handler=Script(memory), model=MODEL) as server:

        async def main() -> None:
            async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
                await chat(host_agent(client, hooks), run_hooks, drain=hooks)

        asyncio.run(main())
        server.assert_no_errors()
        return server.requests


def same_bytes(a: Any, b: Any) -> bool:
    return json.dumps(a, ensure_ascii=False) == json.dumps(b, ensure_ascii=False)


def params_of(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in ("messages", "tools")}


def assert_memories(memory: Path, expected: list[str]) -> None:
    saved = sorted(p.name for p in memory.glob("*.md") if p.name != "MEMORY.md")
    assert saved == sorted(expected)
    index = (memory / "MEMORY.md").read_text()
    for name in saved:
        parsed = parse_memory_file((memory / name).read_text())
        assert parsed.name
        assert parsed.description
        assert parsed.type in ("user", "project")
        assert index.count(f"]({name})") == 1


def test_forks_read_the_hosts_cache_and_cover_every_message(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    sink = CollectingSink()
    notices: list[MemorySaved] = []
    hooks = MemdirRunHooks(
        memory,
        config=ExtractConfig(mode="fork"),
        sink=sink,
        notify=notices.append,
    )
    with FakeOpenAIServer(handler=Script(memory), model=MODEL) as server:

        async def main() -> list[TResponseInputItem]:
            async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
                return await chat(host_agent(client, hooks), hooks, drain=hooks)

        conversation = asyncio.run(main())
        requests = server.requests
        server.assert_no_errors()

    assert hooks.fallback_reason is None
    assert_memories(memory, [ANA, DEPLOYS])
    assert [len(n.paths) for n in notices] == [1, 1]

    # Every message covered by exactly one run: 2 + 4 (the tool call and its result) + 2.
    runs = sink.named("extract.run")
    assert [r.fields["mode"] for r in runs] == ["fork"] * 3
    assert [r.fields["message_count"] for r in runs] == [2, 4, 2]
    assert sum(r.fields["message_count"] for r in runs) == len(
        model_visible(messages_from_items(conversation))
    )
    assert not sink.named("extract.error")
    assert not sink.named("extract.coalesced")
    # The cursor stands on the final answer, as memdir reads the whole conversation.
    last_fork = [r for r in requests if is_memory_run(r.body)][-1].body["messages"]
    *_, prompt_at = (i for i, m in enumerate(last_fork) if FORK_OPENER in json.dumps(m))
    # After the agent's system message, memdir's memory instructions and index: sent, but
    # no part of the conversation.
    assert last_fork[1]["role"] == "system"
    assert "<system-reminder>" in last_fork[2]["content"]
    # memdir's notices that memory changed are sent too, and no part of it either.
    said = [m for m in last_fork[3:prompt_at] if not str(m["content"]).startswith("<system-")]
    read_back = messages_from_openai(said)
    assert read_back[-1].text == "Noted: deploys on Fridays only."
    assert hooks.extractor is not None
    assert hooks.extractor.cursor == read_back[-1].uuid

    # Each fork's first request starts with its host's last request, byte for byte.
    firsts = [
        i
        for i, r in enumerate(requests)
        if is_memory_run(r.body) and not is_memory_run(requests[i - 1].body)
    ]
    assert len(firsts) == 3
    for i in firsts:
        host, fork = requests[i - 1], requests[i]
        n = len(host.body["messages"])
        assert same_bytes(host.body["messages"], fork.body["messages"][:n])
        assert same_bytes(host.body["tools"], fork.body["tools"])
        assert params_of(fork.body) == params_of(host.body)
        assert fork.body["temperature"] == 0.3
        assert host.usage is not None
        assert fork.usage is not None
        host_prompt = host.usage["prompt_tokens"]
        cached = fork.usage["prompt_tokens_details"]["cached_tokens"]
        share = cached / fork.usage["prompt_tokens"]
        print(
            f"fork {firsts.index(i) + 1}: {cached} of {fork.usage['prompt_tokens']} prompt "
            f"tokens read from the host's cache ({share:.0%}); the host sent {host_prompt}"
        )
        assert cached > 0
        assert host_prompt - 128 < cached <= host_prompt  # all of it, in 128-token steps
    # The agent is left as it was: memdir watches its requests, it does not change them.
    assert all("prompt_cache_key" not in r.body for r in requests)  # a local server: none


def test_without_the_hooks_nothing_is_remembered(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    requests = served_chat(memory, None)

    assert not memory.exists()
    assert requests
    assert not any(is_memory_run(r.body) for r in requests)
    assert all("prompt_cache_key" not in r.body for r in requests)  # a local server: none


def test_agent_hooks_remember_the_agents_own_turns(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    sink = CollectingSink()
    hooks = MemdirAgentHooks(memory, config=ExtractConfig(mode="fork"), sink=sink)
    requests = served_chat(memory, hooks)

    assert_memories(memory, [ANA, DEPLOYS])
    runs = sink.named("extract.run")
    assert [r.fields["mode"] for r in runs] == ["fork"] * 3
    assert [r.fields["message_count"] for r in runs] == [2, 4, 2]
    fork = next(r for r in requests if is_memory_run(r.body))
    assert fork.usage is not None
    assert fork.usage["prompt_tokens_details"]["cached_tokens"] > 0


def test_a_model_that_is_not_chat_completions_goes_standalone(tmp_path: Path) -> None:
    """The Responses API (the SDK's default) and other model classes send requests memdir's
    adapter cannot reproduce: the turn is extracted by memdir's own request instead."""
    memory = tmp_path / "memory"
    sink = CollectingSink()
    seen: list[ModelRequest] = []

    def memory_agent(request: ModelRequest) -> Message | str:
        seen.append(request)
        if request.messages[-1].is_tool_result:
            return "Saved."
        return Script(memory).save([(ANA, "Ana", "user", "Ana leads the data platform team")])

    hooks = MemdirRunHooks(memory, FunctionModel(memory_agent), sink=sink)
    host = AgentsScriptedModel([[assistant_message("Nice to meet you, Ana.")]])
    agent = Agent(name="support", instructions=INSTRUCTIONS, model=host, tools=hooks.tools())

    async def main() -> None:
        await Runner.run(agent, TURNS[0], hooks=hooks)
        await hooks.drain()

    asyncio.run(main())
    assert hooks.fallback_reason is not None
    assert "not a Chat Completions model" in hooks.fallback_reason
    (run,) = sink.named("extract.run")
    assert run.fields["mode"] == "standalone"
    assert run.fields["message_count"] == 2
    assert_memories(memory, [ANA])
    rendered = json.dumps([m.text for m in seen[0].messages])
    assert "I'm Ana" in rendered
    assert "Nice to meet you, Ana." in rendered


def test_a_streamed_run_is_remembered_inside_the_cache_too(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    sink = CollectingSink()
    hooks = MemdirRunHooks(memory, config=ExtractConfig(mode="fork"), sink=sink)
    with FakeOpenAIServer(handler=Script(memory), model=MODEL) as server:

        async def main() -> None:
            async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
                run = Runner.run_streamed(host_agent(client, hooks), TURNS[0], hooks=hooks)
                async for _ in run.stream_events():
                    pass
                await hooks.drain()

        asyncio.run(main())
        host, fork = server.requests[:2]
        server.assert_no_errors()

    assert host.stream
    assert not fork.stream  # how the answer comes back is not part of the prompt
    assert same_bytes(host.body["messages"], fork.body["messages"][: len(host.body["messages"])])
    assert fork.usage is not None
    assert fork.usage["prompt_tokens_details"]["cached_tokens"] > 0
    assert [r.fields["mode"] for r in sink.named("extract.run")] == ["fork"]
    assert_memories(memory, [ANA])


def test_chat_messages_memdir_would_write_otherwise_are_forked_as_sent(tmp_path: Path) -> None:
    """An assistant message with text and a refusal: the SDK writes ``refusal`` before
    ``content``, memdir's adapter after it. The fork sends the recorded bytes, so it
    still reads the host's cache, and covers the turn."""
    memory = tmp_path / "memory"
    sink = CollectingSink()
    hooks = MemdirRunHooks(memory, config=ExtractConfig(mode="fork"), sink=sink)
    earlier: list[TResponseInputItem] = [
        {"role": "user", "content": "Tell me a secret."},
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_0",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": "Sorry.", "annotations": []},
                {"type": "refusal", "refusal": "I can't share that."},
            ],
        },
    ]
    with FakeOpenAIServer(handler=Script(memory), model=MODEL) as server:

        async def main() -> None:
            async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
                user: TResponseInputItem = {"role": "user", "content": TURNS[0]}
                await Runner.run(host_agent(client, hooks), [*earlier, user], hooks=hooks)
                await hooks.drain()

        asyncio.run(main())
        server.assert_no_errors()

    host, fork = server.requests[:2]
    assert hooks.fallback_reason is None
    (run,) = sink.named("extract.run")
    assert run.fields["mode"] == "fork"
    assert run.fields["message_count"] == 4
    refused = next(m for m in host.body["messages"] if "refusal" in m)
    assert list(refused)[:2] == ["role", "refusal"]  # the SDK's order, not memdir's
    assert same_bytes(host.body["messages"], fork.body["messages"][: len(host.body["messages"])])
    assert fork.usage is not None
    assert fork.usage["prompt_tokens_details"]["cached_tokens"] > 0
    assert_memories(memory, [ANA])


def test_a_run_that_ends_on_a_tool_result_is_covered_with_it(tmp_path: Path) -> None:
    """With ``tool_use_behavior="stop_on_first_tool"`` the final output is a tool's result,
    which no model call was sent: the hooks add it after the call, so the fork's
    conversation leaves no call unanswered."""
    memory = tmp_path / "memory"
    sink = CollectingSink()
    hooks = MemdirRunHooks(memory, config=ExtractConfig(mode="fork"), sink=sink)
    with FakeOpenAIServer(handler=Script(memory), model=MODEL) as server:

        async def main() -> str:
            async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
                agent = host_agent(client, hooks).clone(tool_use_behavior="stop_on_first_tool")
                result = await Runner.run(agent, TURNS[1], hooks=hooks)
                await hooks.drain()
                return str(result.final_output)

        final = asyncio.run(main())
        fork = next(r.body for r in server.requests if is_memory_run(r.body))
        server.assert_no_errors()

    assert final == "Sunny and 24°C in Paris."
    (run,) = sink.named("extract.run")
    assert run.fields["mode"] == "fork"
    assert run.fields["message_count"] == 3  # the question, the call, its result
    assert [m["role"] for m in fork["messages"][-3:]] == ["assistant", "tool", "user"]
    assert fork["messages"][-2]["content"] == final


ITEMS: list[dict[str, Any]] = [
    {"role": "developer", "content": "Be brief."},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is in this picture?"},
            {
                "type": "input_image",
                "image_url": "data:image/png;base64,iVBORw0KGgo=",
                "detail": "low",
            },
            {"type": "input_file", "file_id": "file-123"},
        ],
    },
    {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "The user wants the weather."}],
        "encrypted_content": "gAAAA",
    },
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}],
    },
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
    },
    {
        "type": "function_call",
        "call_id": "call_2",
        "name": "lookup_order",
        "arguments": '{"order_id":"7"}',
    },
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}},
    {"type": "function_call_output", "call_id": "call_1", "output": "Sunny."},
    {
        "type": "function_call_output",
        "call_id": "call_2",
        "output": [{"type": "input_text", "text": "Shipped."}],
    },
    {"content": "Sunny in Paris; order 7 shipped.", "role": "assistant"},
    {"role": "user", "content": "Thanks!"},
]


def test_items_read_into_messages_and_back() -> None:
    messages = messages_from_items(ITEMS)
    assert [m.role for m in messages] == [
        "developer",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    developer, picture, turn, results, answer, thanks = messages
    assert developer.text == "Be brief."
    assert developer.string_content
    assert [type(b) for b in picture.content] == [TextBlock, ImageBlock, OtherBlock]
    image = picture.content[1]
    assert isinstance(image, ImageBlock)
    assert image.media_type == "image/png"
    # The model's side of the turn is one message: reasoning, text, calls, hosted calls.
    assert [type(b) for b in turn.content] == [
        ThinkingBlock,
        TextBlock,
        ToolUseBlock,
        ToolUseBlock,
        OtherBlock,
    ]
    thinking = turn.content[0]
    assert isinstance(thinking, ThinkingBlock)
    assert thinking.signature == "gAAAA"
    assert [u.input for u in turn.tool_uses] == [{"city": "Paris"}, {"order_id": "7"}]
    assert results.is_tool_result
    assert [r.text for r in results.tool_results] == [
        "Sunny.",
        "Shipped.",
    ]
    assert answer.text.startswith("Sunny in Paris")
    assert thanks.text == "Thanks!"
    # Back to the same items; the same items read again give the same ids.
    assert messages_to_items(messages) == ITEMS
    assert [m.uuid for m in messages_from_items(ITEMS)] == [m.uuid for m in messages]
    assert [m.uuid for m in messages_from_items(ITEMS[:-1])] == [m.uuid for m in messages[:-1]]


def test_messages_from_elsewhere_become_valid_items() -> None:
    call = ToolUseBlock(id="toolu_1", name="get_weather", input={"city": "Oslo"})
    messages = [
        Message.user("Weather in Oslo?"),
        Message(
            role="assistant", content=(ThinkingBlock(thinking="look it up", signature="sig"), call)
        ),
        Message(role="user", content=(ToolResultBlock(tool_use_id="toolu_1", content="Rain."),)),
        Message.assistant("Rain in Oslo."),
    ]
    items = messages_to_items(messages)
    # Anthropic's thinking has no Responses item to go back as: it is left out.
    assert [i.get("type") for i in items] == [None, "function_call", "function_call_output", None]
    assert items[1] == {
        "type": "function_call",
        "call_id": "toolu_1",
        "name": "get_weather",
        "arguments": '{"city":"Oslo"}',
    }
    chat = Converter.items_to_messages(items)  # the SDK takes them as they are
    assert [m["role"] for m in chat] == ["user", "assistant", "tool", "assistant"]
    assert [m.text for m in messages_from_items(items)] == [m.text for m in messages]


def test_the_example_runs_offline_against_the_fake_server(tmp_path: Path) -> None:
    example = load_example("openai_agents_agent.py")
    memory = tmp_path / "memory"
    said: list[str] = []
    with FakeOpenAIServer(handler=Script(memory), model=MODEL) as server:

        async def main() -> list[TResponseInputItem]:
            async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
                items: list[TResponseInputItem] = await example.run_agent(
                    client, MODEL, memory, [TURNS[0], TURNS[2]], say=said.append
                )
                return items

        conversation = asyncio.run(main())
        server.assert_no_errors()

    assert_memories(memory, [ANA, DEPLOYS])
    assert said[0] == "Nice to meet you, Ana. Polars it is."
    assert sum(line.startswith("● Saved 1 memory") for line in said) == 2
    assert json.dumps(conversation[-1]).count("Noted: deploys on Fridays only.") == 1


def test_without_the_sdk_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agents", None)  # as if it were not installed
    spec = importlib.util.find_spec("memdir.integrations.openai_agents")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(MissingExtraError, match=r"pip install -e \S+\[openai-agents\]"):
        spec.loader.exec_module(module)


def test_overlapping_runs_through_one_hooks_object_never_mix_conversations(
    tmp_path: Path,
) -> None:
    import threading

    memory_requests: list[str] = []
    b_answered = threading.Event()

    def handler(body: dict[str, Any]) -> str:
        if is_memory_run(body):
            memory_requests.append(json.dumps(body["messages"]))
            return "Nothing worth saving."
        last = json.dumps(body["messages"][-1])
        if "from Ana" in last:
            # Ana's answer waits for Bo's, so that Bo's run starts and ends inside Ana's.
            assert b_answered.wait(timeout=60)
        answer = f"answer to {'Ana' if 'from Ana' in last else 'Bo'}"
        if "from Bo" in last:
            b_answered.set()
        return answer

    hooks = MemdirAgentHooks(tmp_path / "memory", config=ExtractConfig(mode="standalone"))
    with FakeOpenAIServer(handler=handler, model="gpt-4.1-mini") as server:

        async def main() -> None:
            async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
                agent: Agent[Any] = Agent(
                    name="assistant",
                    instructions="be brief",
                    model=OpenAIChatCompletionsModel("gpt-4.1-mini", client),
                    hooks=hooks,
                )
                await asyncio.gather(
                    Runner.run(agent, "a question from Ana"),
                    Runner.run(agent, "a question from Bo"),
                )
                await hooks.drain()

        asyncio.run(main())
    assert len(memory_requests) == 2
    seen = set()
    for text in memory_requests:
        # Each memory run sees one user's conversation, question and answer alike.
        assert ("from Ana" in text) != ("from Bo" in text), text
        who = "Ana" if "from Ana" in text else "Bo"
        assert f"answer to {who}" in text
        seen.add(who)
    assert seen == {"Ana", "Bo"}  # each turn reported, neither twice


def test_the_memory_tools_do_not_read_memdirs_own_files(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    (memory / ".memdir").mkdir(parents=True)
    (memory / ".memdir" / "state.json").write_text('{"sessions": {}}')
    (memory / "user_role.md").write_text("---\nname: role\ndescription: r\ntype: user\n---\nAna.\n")
    hooks = MemdirRunHooks(memory, model="offline")
    read = next(t for t in hooks.tools() if t.name == "Read")
    assert isinstance(read, FunctionTool)

    async def call(path: Path) -> str:
        arguments = json.dumps({"file_path": str(path)})
        return str(await read.on_invoke_tool(None, arguments))  # type: ignore[arg-type]

    assert "Ana." in asyncio.run(call(memory / "user_role.md"))
    refused = asyncio.run(call(memory / ".memdir" / "state.json"))
    assert "sessions" not in refused
    assert "hidden names are not memories" in refused


class OfficialEndpointModel(OpenAIChatCompletionsModel):
    """The model as on api.openai.com, where the runner sends a ``prompt_cache_key`` of
    its own choosing (a new one per run) that no hook is shown."""

    def _supports_default_prompt_cache_key(self) -> bool:
        return True


def test_the_fork_sends_the_key_the_runner_chose_and_the_agent_is_left_alone(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory"
    sink = CollectingSink()
    hooks = MemdirRunHooks(memory, config=ExtractConfig(mode="fork"), sink=sink)
    with FakeOpenAIServer(handler=Script(memory), model=MODEL) as server:

        async def main() -> Agent[Any]:
            async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
                agent = host_agent(client, hooks).clone(model=OfficialEndpointModel(MODEL, client))
                await chat(agent, hooks, drain=hooks)
                return agent

        agent = asyncio.run(main())
        requests = server.requests
        server.assert_no_errors()

    assert agent.model_settings == ModelSettings(temperature=0.3, parallel_tool_calls=True)
    assert hooks.fallback_reason is None
    assert [r.fields["mode"] for r in sink.named("extract.run")] == ["fork"] * 3
    keys = []
    for i, request in enumerate(requests):
        if is_memory_run(request.body) and not is_memory_run(requests[i - 1].body):
            host = requests[i - 1].body
            assert request.body["prompt_cache_key"] == host["prompt_cache_key"]
            assert request.usage is not None
            assert request.usage["prompt_tokens_details"]["cached_tokens"] > 0
            keys.append(host["prompt_cache_key"])
    assert len(set(keys)) == 3  # one per run, as the runner picks them, each followed


class FakeServerWithoutRequestIds(FakeOpenAIServer):
    """An OpenAI-compatible server that names no ``x-request-id`` (as some local ones)."""

    _request_id_header = "x-served-by"


def test_a_server_without_request_ids_still_forks_one_request_at_a_time(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory"
    sink = CollectingSink()
    hooks = MemdirRunHooks(memory, config=ExtractConfig(mode="fork"), sink=sink)
    served_chat(memory, hooks, FakeServerWithoutRequestIds)

    assert hooks.fallback_reason is None
    runs = sink.named("extract.run")
    assert [r.fields["mode"] for r in runs] == ["fork"] * 3
    assert [r.fields["message_count"] for r in runs] == [2, 4, 2]
    assert_memories(memory, [ANA, DEPLOYS])


# run_sync shuts its loop's async generators down after each run, and keeps the loop:
# httpx's, started in a later run, then warn (the SDK's doing, with or without memdir).
@pytest.mark.filterwarnings("ignore:asynchronous generator:ResourceWarning")
def test_run_sync_hosts_drain_with_drain_sync(tmp_path: Path) -> None:
    """``Runner.run_sync`` leaves each turn's memory run on its loop; ``drain_sync`` runs
    that loop until they end."""
    memory = tmp_path / "memory"
    sink = CollectingSink()
    hooks = MemdirRunHooks(memory, config=ExtractConfig(mode="fork"), sink=sink)
    with FakeOpenAIServer(handler=Script(memory), model=MODEL) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test")
        agent = host_agent(client, hooks)
        conversation: list[TResponseInputItem] = []
        for text in (TURNS[0], TURNS[2]):
            user: TResponseInputItem = {"role": "user", "content": text}
            result = Runner.run_sync(agent, [*conversation, user], hooks=hooks)
            conversation = result.to_input_list()
        hooks.drain_sync()
        loop = asyncio.get_event_loop_policy().get_event_loop()  # the one run_sync used
        loop.run_until_complete(client.close())
        loop.close()
        asyncio.set_event_loop(None)
        server.assert_no_errors()

    assert_memories(memory, [ANA, DEPLOYS])
    assert sum(r.fields["message_count"] for r in sink.named("extract.run")) == 4


def test_a_turn_costs_the_host_what_it_added(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last request is read as sent, not rebuilt: at each turn's end memdir converts
    only the final answer's items, and reads each chat message once over the whole
    conversation, however long it grows."""
    from memdir.messages import _native

    converted: list[tuple[str, int]] = []  # (the calling module, items converted)
    real_convert = Converter.items_to_messages.__func__  # type: ignore[attr-defined]

    def counting(cls: type[Converter], items: Any, *args: Any, **kwargs: Any) -> Any:
        items = list(items) if not isinstance(items, str) else items
        converted.append((sys._getframe(1).f_globals["__name__"], len(items)))
        return real_convert(cls, items, *args, **kwargs)

    read: list[str] = []
    real_read = _native.read_message

    def reading(item: object, where: str, *args: Any) -> Message:
        read.append(where)
        return real_read(item, where, *args)

    memory = tmp_path / "memory"
    sink = CollectingSink()
    hooks = MemdirRunHooks(memory, config=ExtractConfig(mode="fork"), sink=sink)
    with FakeOpenAIServer(handler=Script(memory), model=MODEL) as server:

        async def main() -> list[TResponseInputItem]:
            async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
                agent = host_agent(client, hooks)
                conversation: list[TResponseInputItem] = []
                for text in TURNS:
                    user: TResponseInputItem = {"role": "user", "content": text}
                    result = await Runner.run(agent, [*conversation, user], hooks=hooks)
                    conversation = result.to_input_list()
                    await hooks.drain()
                return conversation

        monkeypatch.setattr(Converter, "items_to_messages", classmethod(counting))
        monkeypatch.setattr(_native, "read_message", reading)
        conversation = asyncio.run(main())
        server.assert_no_errors()

    assert [r.fields["mode"] for r in sink.named("extract.run")] == ["fork"] * 3
    # Each chat message of the conversation (the system message aside) read once.
    chat_messages = len(Converter.items_to_messages(conversation))
    assert len(read) == chat_messages
    # memdir's conversions: at each turn's end the final answer's one item, never more.
    ours = [n for module, n in converted if module.startswith("memdir.")]
    assert ours == [1, 1, 1]
    assert any(n > 1 for module, n in converted if module.startswith("agents."))


def test_the_memory_agents_own_requests_are_never_taken_for_the_hosts(tmp_path: Path) -> None:
    """Without request ids the hooks take the one request sent during the model call; the
    memory agent sends through the host's client too, at the same time. Here the first
    turn's memory agent is answered once the last call of the second turn is sent, and
    that call once the memory run has saved: inside the host's call."""
    import threading

    memory = tmp_path / "memory"
    script = Script(memory)
    last_call_sent = threading.Event()
    first_run_saved = threading.Event()

    def handler(body: dict[str, Any]) -> Message | str:
        if is_memory_run(body):
            assert last_call_sent.wait(timeout=60)
        elif body["messages"][-1]["role"] == "tool":  # the second turn's last call
            last_call_sent.set()
            assert first_run_saved.wait(timeout=60)
        return script(body)

    sink = CollectingSink()
    hooks = MemdirRunHooks(
        memory,
        config=ExtractConfig(mode="fork"),
        sink=sink,
        notify=lambda saved: first_run_saved.set(),
    )
    reasons: list[str | None] = []
    with FakeServerWithoutRequestIds(handler=handler, model=MODEL) as server:

        async def main() -> None:
            async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
                agent = host_agent(client, hooks)
                conversation: list[TResponseInputItem] = []
                for text in TURNS[:2]:
                    user: TResponseInputItem = {"role": "user", "content": text}
                    result = await Runner.run(agent, [*conversation, user], hooks=hooks)
                    reasons.append(hooks.fallback_reason)
                    conversation = result.to_input_list()
                await hooks.drain()

        asyncio.run(main())
        server.assert_no_errors()

    assert first_run_saved.is_set()
    assert reasons == [None, None]
    runs = sink.named("extract.run")
    assert [r.fields["mode"] for r in runs] == ["fork", "fork"]
    assert sum(r.fields["message_count"] for r in runs) == 6


def test_items_are_read_once_as_the_conversation_grows(monkeypatch: pytest.MonkeyPatch) -> None:
    """A standalone host (the Responses API) hands over its items each turn: the reader
    gives what reading them all would, at every length — a turn may end inside the
    model's side, which the next items continue — reading each item about once."""
    from memdir.integrations import openai_agents

    reader = openai_agents._ItemsReader()
    for length in range(1, len(ITEMS) + 1):
        grown = [dict(item) for item in ITEMS[:length]]  # equal items, not the same objects
        assert reader.read(grown) == messages_from_items(ITEMS[:length]), length
    # A history trimmed at its front is read again from where it changed.
    assert reader.read(ITEMS[3:]) == messages_from_items(ITEMS[3:])

    reads = 0
    plain = openai_agents._plain

    def counting(item: object, where: str) -> dict[str, Any]:
        nonlocal reads
        reads += 1
        return plain(item, where)

    monkeypatch.setattr(openai_agents, "_plain", counting)
    long_reader = openai_agents._ItemsReader()
    conversation: list[dict[str, Any]] = []
    for turn in range(500):
        conversation += [
            {"role": "user", "content": f"question {turn}"},
            {"role": "assistant", "content": f"answer {turn}"},
        ]
        long_reader.read(list(conversation))
    assert len(conversation) == 1_000
    assert reads <= 2 * len(conversation)  # each item, and the last message again
    assert long_reader.read(conversation) == messages_from_items(conversation)


def test_run_hooks_and_agent_hooks_on_one_run_both_fork(tmp_path: Path) -> None:
    """Two hooks objects see the same model call: each finds its request body."""
    run_memory, agent_memory = tmp_path / "run", tmp_path / "agent"
    run_sink, agent_sink = CollectingSink(), CollectingSink()
    run_hooks = MemdirRunHooks(run_memory, config=ExtractConfig(mode="fork"), sink=run_sink)
    agent_hooks = MemdirAgentHooks(agent_memory, config=ExtractConfig(mode="fork"), sink=agent_sink)

    def handler(body: dict[str, Any]) -> Message | str:
        text = json.dumps(body["messages"], ensure_ascii=False)
        memory = agent_memory if str(agent_memory) in text else run_memory
        return Script(memory)(body)

    with FakeOpenAIServer(handler=handler, model=MODEL) as server:

        async def main() -> None:
            async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
                agent = host_agent(client, agent_hooks)
                await Runner.run(agent, TURNS[0], hooks=run_hooks)
                await run_hooks.drain()
                await agent_hooks.drain()

        asyncio.run(main())
        server.assert_no_errors()

    assert run_hooks.fallback_reason is None
    assert agent_hooks.fallback_reason is None
    assert [r.fields["mode"] for r in run_sink.named("extract.run")] == ["fork"]
    assert [r.fields["mode"] for r in agent_sink.named("extract.run")] == ["fork"]


def test_a_client_per_turn_is_neither_kept_nor_needed_after_its_turn(tmp_path: Path) -> None:
    """A host that makes (and closes) a client for each turn: memdir's standalone runs use
    a client of their own, and the hooks keep no closed client alive."""
    import gc
    import weakref

    memory = tmp_path / "memory"
    sink = CollectingSink()
    hooks = MemdirRunHooks(memory, config=ExtractConfig(mode="standalone"), sink=sink)
    clients: list[weakref.ref[AsyncOpenAI]] = []
    with FakeOpenAIServer(handler=Script(memory), model=MODEL) as server:

        async def main() -> None:
            conversation: list[TResponseInputItem] = []
            for text in TURNS:
                async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
                    clients.append(weakref.ref(client))
                    agent = host_agent(client, hooks)
                    user: TResponseInputItem = {"role": "user", "content": text}
                    result = await Runner.run(agent, [*conversation, user], hooks=hooks)
                    conversation = result.to_input_list()
                    del agent, result
                await hooks.drain()  # the run after the client closed

        asyncio.run(main())
        server.assert_no_errors()

    assert not sink.named("extract.error")
    assert [r.fields["mode"] for r in sink.named("extract.run")] == ["standalone"] * 3
    assert_memories(memory, [ANA, DEPLOYS])
    gc.collect()
    assert [ref() is None for ref in clients[:-1]] == [True, True]


def test_a_run_that_never_ends_is_let_go(tmp_path: Path) -> None:
    """A run that stops before its final answer (here: past ``max_turns``) never reaches
    ``on_agent_end``; what the hooks kept of it goes with the run."""
    import gc

    from agents.exceptions import MaxTurnsExceeded

    memory = tmp_path / "memory"
    hooks = MemdirRunHooks(memory, config=ExtractConfig(mode="fork"))
    with FakeOpenAIServer(handler=Script(memory), model=MODEL) as server:

        async def main() -> None:
            async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
                with pytest.raises(MaxTurnsExceeded):
                    await Runner.run(host_agent(client, hooks), TURNS[1], hooks=hooks, max_turns=1)

        asyncio.run(main())

    gc.collect()
    assert hooks._memory._runs == {}
    assert hooks.extractor is None  # and no turn was reported


def test_a_request_that_forces_a_tool_is_not_forked(tmp_path: Path) -> None:
    """A last request with a forced ``tool_choice`` would force the memory agent too:
    the turn is extracted by memdir's own request instead, and still covered."""
    memory = tmp_path / "memory"
    sink = CollectingSink()
    hooks = MemdirRunHooks(memory, config=ExtractConfig(mode="fork"), sink=sink)
    with FakeOpenAIServer(handler=Script(memory), model=MODEL) as server:

        async def main() -> None:
            async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
                agent = host_agent(client, hooks).clone(
                    model_settings=ModelSettings(tool_choice="required"),
                    reset_tool_choice=False,
                    tool_use_behavior="stop_on_first_tool",
                )
                await Runner.run(agent, TURNS[1], hooks=hooks)
                await hooks.drain()

        asyncio.run(main())
        server.assert_no_errors()

    assert hooks.fallback_reason is not None
    assert "tool_choice='required'" in hooks.fallback_reason
    (run,) = sink.named("extract.run")
    assert run.fields["mode"] == "standalone"
    assert run.fields["message_count"] == 3


def test_a_body_let_go_during_its_call_is_never_replaced_by_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without request ids, "the one request sent during the call" is trusted only while
    no body was let go meanwhile: the call's own may be the one that went."""
    from types import SimpleNamespace

    from memdir.integrations import openai_agents

    monkeypatch.setattr(openai_agents, "_KEPT_BYTES", 100)

    def response(body: bytes) -> Any:
        request = SimpleNamespace(
            method="POST", url=SimpleNamespace(path="/v1/chat/completions"), content=body
        )
        return SimpleNamespace(request=request, status_code=200, headers={})

    wire = openai_agents._Wire()
    started = wire.count
    asyncio.run(wire.record(response(b"x" * 80)))  # this call's request
    asyncio.run(wire.record(response(b"y" * 80)))  # another's: the first is let go
    assert wire.claim(None, started) is None
    later = wire.count
    asyncio.run(wire.record(response(b"z" * 10)))
    found = wire.claim(None, later)
    assert found is not None
    assert found.body == b"z" * 10


def test_a_run_started_from_a_notice_is_the_hosts_own() -> None:
    from memdir.integrations import openai_agents

    seen: list[bool] = []
    call = openai_agents._outside(lambda saved: seen.append(openai_agents._OWN.get()))
    token = openai_agents._OWN.set(True)
    try:
        call(MemorySaved(paths=()))
        assert openai_agents._OWN.get()
    finally:
        openai_agents._OWN.reset(token)
    assert seen == [False]


# --- one host core: restarts, the host's client, memory loaded back, the host's loop ------


def memory_requests(requests: list[RecordedRequest]) -> list[RecordedRequest]:
    return [r for r in requests if is_memory_run(r.body)]


def test_a_restart_over_the_same_session_saves_each_fact_once(tmp_path: Path) -> None:
    """A new process — new hooks, a new client — over the same ``SQLiteSession`` file
    reads only the turn that is new, and saves its fact."""
    memory, db = tmp_path / "memory", tmp_path / "conversations.db"
    sink = CollectingSink()
    with FakeOpenAIServer(handler=Script(memory), model=MODEL) as server:

        def process(texts: list[str]) -> None:
            async def main() -> None:
                session = SQLiteSession("ana", db)
                hooks = MemdirRunHooks(memory, session=session, sink=sink)
                async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
                    agent = host_agent(client, hooks)
                    for text in texts:
                        await Runner.run(agent, text, session=session, hooks=hooks)
                        await hooks.drain()
                session.close()

            asyncio.run(main())

        process(TURNS[:2])
        process(TURNS[2:])
        server.assert_no_errors()

    assert_memories(memory, [ANA, DEPLOYS])
    assert len((memory / "MEMORY.md").read_text().splitlines()) == 2
    runs = sink.named("extract.run")
    assert [r.fields["message_count"] for r in runs] == [2, 4, 2]  # the third: only new
    assert not sink.named("extract.skipped_direct_write")
    assert not sink.named("extract.error")


def responses_server(
    answers: list[str], seen: list[dict[str, Any]]
) -> Any:  # an httpx.MockTransport answering the Responses API
    import httpx

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        number = len(seen)
        text = answers[(number - 1) % len(answers)]
        return httpx.Response(
            200,
            headers={"x-request-id": f"req_{number}"},
            json={
                "id": f"resp_{number}",
                "object": "response",
                "created_at": 0,
                "model": MODEL,
                "status": "completed",
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
                "output": [
                    {
                        "type": "message",
                        "id": f"msg_{number}",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": text, "annotations": []}],
                    }
                ],
                "usage": {
                    "input_tokens": 10,
                    "output_tokens": 5,
                    "total_tokens": 15,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens_details": {"reasoning_tokens": 0},
                },
            },
        )

    return httpx.MockTransport(handle)


def test_a_restart_on_the_responses_api_saves_each_fact_once(tmp_path: Path) -> None:
    """The same on the Responses API (the SDK's default model), whose turns memdir reads
    from the input items: the second process reads the new turn only."""
    import httpx
    from agents import OpenAIResponsesModel

    memory, db = tmp_path / "memory", tmp_path / "conversations.db"
    sink = CollectingSink()
    read: list[list[str]] = []

    def memory_agent(request: ModelRequest) -> Message | str:
        if request.messages[-1].is_tool_result:
            return "Saved."
        texts = [m.text for m in request.messages]
        read.append(texts)
        said = json.dumps(texts)
        if "I'm Ana" in said and not (memory / ANA).exists():
            return Script(memory).save([(ANA, "Ana", "user", "Ana leads the data platform team")])
        if "deploys happen on Fridays" in said and not (memory / DEPLOYS).exists():
            return Script(memory).save([(DEPLOYS, "Deploy days", "project", "Fridays only")])
        return "Nothing worth saving."

    seen: list[dict[str, Any]] = []

    def process(texts: list[str]) -> None:
        async def main() -> None:
            session = SQLiteSession("ana", db)
            hooks = MemdirRunHooks(memory, FunctionModel(memory_agent), session=session, sink=sink)
            transport = responses_server(["Noted."], seen)
            http = httpx.AsyncClient(transport=transport)
            async with AsyncOpenAI(
                base_url="http://fake/v1",
                api_key="t",
                http_client=http,  # type: ignore[arg-type]  # plain httpx: the SDK takes it
            ) as c:
                agent = Agent(
                    name="support",
                    instructions=INSTRUCTIONS,
                    model=OpenAIResponsesModel(MODEL, c),
                    tools=hooks.tools(),
                )
                for text in texts:
                    await Runner.run(agent, text, session=session, hooks=hooks)
                    await hooks.drain()
            session.close()

        asyncio.run(main())

    process(TURNS[:1])
    process(TURNS[2:])

    assert_memories(memory, [ANA, DEPLOYS])
    runs = sink.named("extract.run")
    assert [r.fields["mode"] for r in runs] == ["standalone"] * 2
    assert [r.fields["message_count"] for r in runs] == [2, 2]
    assert not sink.named("extract.skipped_direct_write")
    assert not any("I'm Ana" in text for text in read[-1][-2:])


class CountingTransport:
    """A custom transport of the host's (a gateway's, a proxy's): memdir sends through it."""

    def __init__(self) -> None:
        import httpx

        self.inner = httpx.AsyncHTTPTransport()
        self.sent: list[str] = []

    async def handle_async_request(self, request: Any) -> Any:
        self.sent.append(request.url.path)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.parametrize("custom_transport", [False, True])
def test_a_client_closed_before_drain_loses_nothing(tmp_path: Path, custom_transport: bool) -> None:
    """``async with AsyncOpenAI(...) as client:`` ends before ``drain()``: the memory run
    goes on, on a client of memdir's own (through the host's transport, when it gave
    one), and never tries the closed one."""
    import httpx

    memory = tmp_path / "memory"
    sink = CollectingSink()
    hooks = MemdirRunHooks(memory, config=ExtractConfig(mode="fork"), sink=sink)
    transport = CountingTransport()
    with FakeOpenAIServer(handler=Script(memory), model=MODEL) as server:

        async def main() -> None:
            http: Any = httpx.AsyncClient(transport=transport) if custom_transport else None  # type: ignore[arg-type]
            async with AsyncOpenAI(
                base_url=server.base_url, api_key="test", http_client=http
            ) as client:
                await Runner.run(host_agent(client, hooks), TURNS[0], hooks=hooks)
            assert client.is_closed()
            await hooks.drain()

        asyncio.run(main())
        server.assert_no_errors()
        requests = server.requests

    assert not sink.named("extract.error")
    assert [r.fields["mode"] for r in sink.named("extract.run")] == ["fork"]
    assert_memories(memory, [ANA])
    fork = memory_requests(requests)[0]
    assert fork.usage is not None
    assert fork.usage["prompt_tokens_details"]["cached_tokens"] > 0
    if custom_transport:
        assert len(transport.sent) == len(requests)  # the host's and memdir's alike


@pytest.mark.parametrize("mode", ["fork", "standalone"])
@pytest.mark.parametrize("http_client", ["sdk default", "plain httpx", "the SDK's class"])
def test_the_hosts_client_settings_reach_every_memory_request(
    tmp_path: Path, mode: str, http_client: str
) -> None:
    """Organization, project and default headers on every memory request, fork and
    standalone; a custom ``http_client``'s headers and transport too."""
    import httpx
    from openai import DefaultAsyncHttpxClient

    memory = tmp_path / "memory"
    sink = CollectingSink()
    hooks = MemdirRunHooks(memory, config=ExtractConfig(mode=mode), sink=sink)  # type: ignore[arg-type]
    transport = CountingTransport()
    custom_http_client = http_client != "sdk default"
    with FakeOpenAIServer(handler=Script(memory), model=MODEL) as server:

        async def main() -> None:
            http: Any = None
            if http_client == "plain httpx":
                http = httpx.AsyncClient(transport=transport, headers={"X-Proxy-Auth": "p-1"})  # type: ignore[arg-type]
            elif http_client == "the SDK's class":
                http = DefaultAsyncHttpxClient(headers={"X-Proxy-Auth": "p-1"})
            async with AsyncOpenAI(
                base_url=server.base_url,
                api_key="test",
                organization="org-acme",
                project="proj_memory",
                default_headers={"X-Gateway-Key": "k-123"},
                http_client=http,
            ) as client:
                await chat(host_agent(client, hooks), hooks, drain=hooks)

        asyncio.run(main())
        server.assert_no_errors()
        requests = server.requests

    assert not sink.named("extract.error")
    assert [r.fields["mode"] for r in sink.named("extract.run")] == [mode] * 3
    ours = memory_requests(requests)
    assert len(ours) >= 3
    for request in ours:
        assert request.headers["openai-organization"] == "org-acme"
        assert request.headers["openai-project"] == "proj_memory"
        assert request.headers["x-gateway-key"] == "k-123"
        if custom_http_client:
            assert request.headers["x-proxy-auth"] == "p-1"
    if http_client == "plain httpx":
        assert len(transport.sent) == len(requests)  # the host's and memdir's alike
    assert_memories(memory, [ANA, DEPLOYS])


def test_a_new_conversation_is_shown_the_saved_memory(tmp_path: Path) -> None:
    """With only the hooks installed, the first request of a conversation holds memdir's
    memory instructions (a system message after the agent's own, the same text every
    time) and the ``MEMORY.md`` index (a first user message); every request of the
    conversation starts with the same messages, so they share one cached prefix."""
    from memdir.recall import memory_prompt

    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / ANA).write_text(memory_file("Ana", "user", "Ana leads the data platform team"))
    (memory / "MEMORY.md").write_text(f"- [Ana]({ANA}) — Ana leads the data platform team\n")
    hooks = MemdirRunHooks(memory, config=ExtractConfig(mode="fork"))
    requests = served_chat(memory, hooks)

    host = [r.body["messages"] for r in requests if not is_memory_run(r.body)]
    first = host[0]
    assert first[0] == {"role": "system", "content": INSTRUCTIONS}
    assert first[1] == {"role": "system", "content": memory_prompt(memory)}
    assert first[2]["role"] == "user"
    assert f"- [Ana]({ANA})" in first[2]["content"]
    assert first[3] == {"role": "user", "content": TURNS[0]}
    assert all(same_bytes(messages[:3], first[:3]) for messages in host)
    later = [r for r in requests if not is_memory_run(r.body)][-1]
    assert later.usage is not None
    assert later.usage["prompt_tokens_details"]["cached_tokens"] > 0


def test_memory_is_not_shown_when_turned_off(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    hooks = MemdirRunHooks(memory, config=ExtractConfig(mode="fork"), load_memory=False)
    requests = served_chat(memory, hooks)

    first = requests[0].body["messages"]
    assert first == [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": TURNS[0]},
    ]
    assert_memories(memory, [ANA, DEPLOYS])


def test_no_client_is_built_on_the_hosts_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """memdir's client (an SSL context: 100 ms and more) is built in a worker thread, never
    on the loop the host's agent runs on, nor is ``MEMORY.md`` read there."""
    import threading

    from memdir.integrations._host import _core

    built_on: list[str] = []
    real_init = AsyncOpenAI.__init__

    def counting_init(self: AsyncOpenAI, *args: Any, **kwargs: Any) -> None:
        built_on.append(threading.current_thread().name)
        real_init(self, *args, **kwargs)

    read_on: list[str] = []
    real_reminder = _core.memory_reminder  # type: ignore[attr-defined]

    def reminder(*args: Any, **kwargs: Any) -> str:
        read_on.append(threading.current_thread().name)
        return real_reminder(*args, **kwargs)

    memory = tmp_path / "memory"
    hooks = MemdirRunHooks(memory, config=ExtractConfig(mode="fork"))
    with FakeOpenAIServer(handler=Script(memory), model=MODEL) as server:

        async def main() -> None:
            async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
                monkeypatch.setattr(AsyncOpenAI, "__init__", counting_init)
                monkeypatch.setattr(_core, "memory_reminder", reminder)
                await Runner.run(host_agent(client, hooks), TURNS[0], hooks=hooks)
                await hooks.drain()
                loop_thread = threading.current_thread().name
                assert built_on
                assert loop_thread not in built_on
                assert read_on
                assert loop_thread not in read_on

        asyncio.run(main())
        server.assert_no_errors()
    assert_memories(memory, [ANA])


class ResponsesHost:
    """A gateway's transport for a Responses-API agent: ``/responses`` answered here,
    anything else (memdir's Chat Completions requests) sent on to the fake server; every
    request's headers kept."""

    def __init__(self) -> None:
        import httpx

        self.inner = httpx.AsyncHTTPTransport()
        self.responses: list[dict[str, Any]] = []
        self.answer = responses_server(["Noted."], self.responses)
        self.headers: list[tuple[str, dict[str, str]]] = []

    async def handle_async_request(self, request: Any) -> Any:
        self.headers.append((request.url.path, dict(request.headers)))
        if request.url.path.endswith("/responses"):
            await request.aread()
            return self.answer.handle_request(request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_a_responses_api_host_closed_before_drain_keeps_its_settings(tmp_path: Path) -> None:
    """The SDK's default model (the Responses API) inside ``async with AsyncOpenAI(...)``,
    closed before ``drain()``: the standalone memory run still goes out, through the
    host's transport with its organization, project and headers, and saves the fact."""
    import httpx
    from agents import OpenAIResponsesModel

    memory = tmp_path / "memory"
    sink = CollectingSink()
    hooks = MemdirRunHooks(memory, sink=sink)
    host = ResponsesHost()
    with FakeOpenAIServer(handler=Script(memory), model=MODEL) as server:

        async def main() -> None:
            http = httpx.AsyncClient(transport=host)  # type: ignore[arg-type]
            async with AsyncOpenAI(
                base_url=server.base_url,
                api_key="test",
                organization="org-acme",
                project="proj_memory",
                default_headers={"X-Gateway-Key": "k-123"},
                http_client=http,  # type: ignore[arg-type]  # plain httpx: the SDK takes it
            ) as client:
                agent = Agent(
                    name="support",
                    instructions=INSTRUCTIONS,
                    model=OpenAIResponsesModel(MODEL, client),
                    tools=hooks.tools(),
                )
                await Runner.run(agent, TURNS[0], hooks=hooks)
            assert client.is_closed()
            await hooks.drain()

        asyncio.run(main())
        server.assert_no_errors()
        requests = server.requests

    assert not sink.named("extract.error")
    assert [r.fields["mode"] for r in sink.named("extract.run")] == ["standalone"]
    assert_memories(memory, [ANA])
    assert len(host.responses) == 1  # the agent's own turn
    ours = [headers for path, headers in host.headers if path.endswith("/chat/completions")]
    assert ours
    assert len(ours) == len(requests)  # every memory request went through the host's transport
    for headers in ours:
        assert headers["openai-organization"] == "org-acme"
        assert headers["openai-project"] == "proj_memory"
        assert headers["x-gateway-key"] == "k-123"
