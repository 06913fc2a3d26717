"""LangChain agents and LangGraph graphs with memdir's memory, against FakeAnthropicServer.

The agents are the real ``create_agent`` with the real ``ChatAnthropic``, talking HTTP to
the fake; the memory agent's requests are told from the host's by the memory folder's
path, which only memdir's prompt names.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import itertools
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain")
pytest.importorskip("langchain_anthropic")

from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from memdir.errors import MissingExtraError
from memdir.extract import ExtractConfig
from memdir.integrations.langchain import (
    MemdirMiddleware,
    langchain_memory_tool,
    message_from_langchain,
    messages_from_langchain,
    messages_to_langchain,
)
from memdir.messages import (
    ImageBlock,
    Message,
    OtherBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from memdir.models import AnthropicModel
from memdir.telemetry import CollectingSink
from memdir.testing import FakeAnthropicServer, Fault, RecordedRequest, Reply
from tests.examples import load_example

MODEL = "claude-sonnet-5-5"
# Long enough for the model's minimum cacheable prefix (1,024 tokens): a real agent's is.
SYSTEM_PROMPT = "You are the data team's assistant.\n" + "\n".join(
    f"{n}. House rule {n}: check the warehouse schema before you answer a question on it."
    for n in range(1, 61)
)
HOST_MARK = "the data team's assistant"
TURNS = (
    "I'm Ana, I lead the data platform team. What's the weather in Paris?",
    "Always use polars, never pandas.",
    "And the weather in Oslo?",
)
MEMORY_FILE = "---\nname: {name}\ndescription: about {name}\ntype: user\n---\n\nbody\n"


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


@tool
def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return f"sunny in {city}"


def text_of(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))


def without_reminders(value: Any) -> Any:
    """``value`` without memdir's ``<system-reminder>`` texts: the notice that memory
    changed names the memory folder too, and it goes in the host's requests."""
    if isinstance(value, str):
        return "" if value.startswith("<system-reminder>") else value
    if isinstance(value, dict):
        return {k: without_reminders(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_reminders(v) for v in value if not is_reminder_block(v)]
    return value


def is_reminder_block(value: Any) -> bool:
    return isinstance(value, dict) and str(value.get("text", "")).startswith("<system-reminder>")


def results_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    if message.get("role") == "tool":  # OpenAI's shape
        return [{"type": "tool_result", "content": message["content"]}]
    content = message["content"]
    if isinstance(content, str):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


class Script:
    """Answers as the host agent, and as memdir's memory agent when its prompt is there.

    The memory agent saves one new memory and its index line per run, through ``Write``
    or through the ``memory`` tool.
    """

    def __init__(self, memory: Path, *, saver: str = "Write") -> None:
        self.memory = memory
        self.saver = saver
        self.notes = itertools.count()
        self.calls = itertools.count()

    def is_fork(self, body: dict[str, Any]) -> bool:
        """A memory agent's request, forked or standalone: memdir's prompt, which starts
        ``# Memory update``, is among its messages (the memory folder tells nothing: the
        host's system message names it too, in memdir's memory instructions)."""
        said = [m for m in body["messages"] if m.get("role") != "system"]
        return "# Memory update" in json.dumps(without_reminders(said))

    def __call__(self, body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if self.is_fork(body):
            return "Saved." if results_of(last) else self.save()
        results = results_of(last)
        if results:
            return f"It is {results[0]['content']}."
        # The user's words, not memdir's notice that memory changed after them.
        text = text_of(without_reminders(last)).lower()
        if "weather in" in text:
            city = text.rsplit("weather in", 1)[1].strip(" ?").title()
            call = ToolUseBlock(
                id=f"toolu_{next(self.calls)}", name="get_weather", input={"city": city}
            )
            return Message(role="assistant", content=(call,))
        return "Noted."

    def save(self) -> Message:
        name = f"note_{next(self.notes)}.md"
        index = self.memory / "MEMORY.md"
        known = index.read_text() if index.exists() else ""
        line = f"- [{name}]({name}) — about {name}\n"
        body = MEMORY_FILE.format(name=name)
        if self.saver == "memory":
            # The tool's create refuses an existing file: the index grows by an insert.
            pointer: dict[str, Any] = (
                {"command": "insert", "insert_line": len(known.splitlines()), "insert_text": line}
                if known
                else {"command": "create", "file_text": line}
            )
            inputs = [
                {"command": "create", "path": f"/memories/{name}", "file_text": body},
                {**pointer, "path": "/memories/MEMORY.md"},
            ]
        else:
            inputs = [
                {"file_path": str(self.memory / name), "content": body},
                {"file_path": str(index), "content": known + line},
            ]
        uses = tuple(
            ToolUseBlock(id=f"save_{name}_{n}", name=self.saver, input=i)
            for n, i in enumerate(inputs)
        )
        return Message(role="assistant", content=uses)


def chat_model(server: FakeAnthropicServer, **kwargs: Any) -> ChatAnthropic:
    settings = {"model": MODEL, "base_url": server.base_url, "api_key": "test", **kwargs}
    return ChatAnthropic(**settings)


def weather_agent(chat: Any, *middleware: Any) -> Any:
    """``create_agent`` as a user writes it: one tool, a system prompt, a checkpointer."""
    return create_agent(
        chat,
        [get_weather],
        system_prompt=SYSTEM_PROMPT,
        middleware=list(middleware),
        checkpointer=InMemorySaver(),
    )


async def talk(
    agent: Any, memory: MemdirMiddleware | None, turns: Sequence[str], thread: str = "t1"
) -> list[BaseMessage]:
    """Each turn on one thread (the checkpointer keeps the conversation), waiting for the
    memory agent after each, as a chat loop that exits after every answer would."""
    config = {"configurable": {"thread_id": thread}}
    state: dict[str, Any] = {}
    for text in turns:
        state = await agent.ainvoke({"messages": [{"role": "user", "content": text}]}, config)
        if memory is not None:
            await memory.drain()
    return list(state["messages"])


def converse(
    agent: Any, memory: MemdirMiddleware | None, turns: Sequence[str], thread: str = "t1"
) -> list[BaseMessage]:
    """:func:`talk` on an event loop of its own. One loop per test: langchain-anthropic
    shares one HTTP client per address between all loops, and a connection a finished
    loop left in its pool is dropped unclosed by the next."""
    return asyncio.run(talk(agent, memory, turns, thread))


def strip_markers(value: Any) -> Any:
    """A request part without its ``cache_control`` markers, which are not in the cache key."""
    if isinstance(value, dict):
        return {k: strip_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_markers(v) for v in value]
    return value


def as_blocks(system: Any) -> Any:
    return [{"type": "text", "text": system}] if isinstance(system, str) else system


def prompt_tokens(request: RecordedRequest) -> int:
    usage = request.usage or {}
    return sum(
        int(usage.get(k) or 0)
        for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )


def forks_and_hosts(
    script: Script, requests: Sequence[RecordedRequest]
) -> Iterator[tuple[RecordedRequest, RecordedRequest]]:
    """Each fork's first request (a memory agent's request on the host's system prompt,
    not memdir's own), with the host request it followed."""
    host: RecordedRequest | None = None
    for request in requests:
        if not script.is_fork(request.body):
            host = request
        elif HOST_MARK in json.dumps(request.body["system"]) and not results_of(
            request.body["messages"][-1]
        ):
            assert host is not None
            yield request, host


def assert_covered_once(sink: CollectingSink, memory: MemdirMiddleware, state: list[Any]) -> None:
    """Every message of the thread counted by exactly one run, and the cursor at its end."""
    assert "extract.error" not in sink.names()
    runs = sink.named("extract.run")
    assert sum(e.fields["message_count"] for e in runs) == len(state)
    extractor = memory.extractor("t1")
    assert extractor is not None
    assert extractor.cursor == state[-1].id


# --- create_agent -------------------------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True])
def test_the_memory_agent_forks_inside_the_agents_prompt_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], streaming: bool
) -> None:
    folder = tmp_path / "memory"
    script = Script(folder)
    sink = CollectingSink()
    memory = MemdirMiddleware(folder, config=ExtractConfig(mode="fork"), sink=sink)
    with FakeAnthropicServer(handler=script) as server:
        agent = weather_agent(
            chat_model(server, streaming=streaming), AnthropicPromptCachingMiddleware(), memory
        )
        state = converse(agent, memory, TURNS)
        server.assert_no_errors()
        requests = server.requests

    # After the first turn each begins with the notice that the memory agent's last save
    # changed memory (a meta message, kept in the thread).
    assert [type(m).__name__ for m in state] == [
        *("HumanMessage", "AIMessage", "ToolMessage", "AIMessage"),
        *("HumanMessage", "HumanMessage", "AIMessage"),
        *("HumanMessage", "HumanMessage", "AIMessage", "ToolMessage", "AIMessage"),
    ]
    assert [message_from_langchain(state[i]).is_meta for i in (4, 5, 7, 8)] == [
        *(False, True),
        *(False, True),
    ]
    assert sorted(p.name for p in folder.glob("note_*.md")) == [
        "note_0.md",
        "note_1.md",
        "note_2.md",
    ]
    assert_covered_once(sink, memory, state)
    assert [e.fields["mode"] for e in sink.named("extract.run")] == ["fork"] * 3

    pairs = list(forks_and_hosts(script, requests))
    assert len(pairs) == 3
    for number, (fork, host) in enumerate(pairs):
        # The fork repeats the host's last request: the same tools, system prompt and
        # settings, and the host's messages as they were sent, before its own.
        assert strip_markers(fork.body["tools"]) == strip_markers(host.body["tools"])
        assert strip_markers(as_blocks(fork.body["system"])) == strip_markers(
            as_blocks(host.body["system"])
        )
        assert fork.body["max_tokens"] == host.body["max_tokens"]
        sent = strip_markers(host.body["messages"])
        assert strip_markers(fork.body["messages"][: len(sent)]) == sent
        # So it reads all of that request from the host's cache.
        read = int((fork.usage or {})["cache_read_input_tokens"])
        assert read >= prompt_tokens(host) > 1024
        with capsys.disabled():
            print(
                f"\nlangchain fork {number + 1}{' (streaming host)' * streaming}: {read} of "
                f"the host's {prompt_tokens(host)} prefix tokens read from its cache "
                f"({read / prompt_tokens(fork):.0%} of the fork's input)"
            )
    if not streaming:
        # The fork also marked the host's final answer, which the host's next request
        # then reads rather than writes. (A streamed answer's text blocks arrive as
        # {"text", "type"}; memdir writes {"type", "text"}, and the key order counts.)
        hosts = [r for r in requests if not script.is_fork(r.body)]
        for _, host in pairs[:-1]:
            after = hosts[hosts.index(host) + 1]
            assert int((after.usage or {})["cache_read_input_tokens"]) > prompt_tokens(host)


def test_listed_before_the_caching_middleware_it_still_forks(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    script = Script(folder)
    sink = CollectingSink()
    memory = MemdirMiddleware(folder, config=ExtractConfig(mode="fork"), sink=sink)
    with FakeAnthropicServer(handler=script) as server:
        # memdir outermost: the breakpoints are added after it saw the request, but the
        # answer's usage says the request was cached.
        agent = weather_agent(chat_model(server), memory, AnthropicPromptCachingMiddleware())
        state = converse(agent, memory, TURNS[:2])
        server.assert_no_errors()
        requests = server.requests

    assert [e.fields["mode"] for e in sink.named("extract.run")] == ["fork"] * 2
    assert_covered_once(sink, memory, state)
    for fork, host in forks_and_hosts(script, requests):
        assert int((fork.usage or {})["cache_read_input_tokens"]) >= prompt_tokens(host)


def test_without_the_middleware_nothing_is_remembered(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    script = Script(folder)
    with FakeAnthropicServer(handler=script) as server:
        agent = weather_agent(chat_model(server), AnthropicPromptCachingMiddleware())
        state = converse(agent, None, TURNS)
        requests = server.requests

    assert len(state) == 10
    assert not folder.exists()
    assert not [r for r in requests if script.is_fork(r.body)]


@pytest.mark.parametrize("memory_tool", [True, False])
def test_the_memory_tool_lets_the_planner_fork(tmp_path: Path, memory_tool: bool) -> None:
    folder = tmp_path / "memory"
    script = Script(folder, saver="memory" if memory_tool else "Write")
    sink = CollectingSink()
    memory = MemdirMiddleware(folder, memory_tool=memory_tool, sink=sink)  # mode "auto"
    with FakeAnthropicServer(handler=script) as server:
        agent = weather_agent(chat_model(server), AnthropicPromptCachingMiddleware(), memory)
        state = converse(agent, memory, TURNS)
        server.assert_no_errors()
        requests = server.requests

    runs = sink.named("extract.run")
    assert_covered_once(sink, memory, state)
    assert sorted(p.name for p in folder.glob("note_*.md")) == [
        "note_0.md",
        "note_1.md",
        "note_2.md",
    ]
    reasons = [e.fields["plan_reason"] for e in runs]
    if not memory_tool:
        # A fork is shown only the agent's tools, and none of them can save a memory.
        assert reasons == ["the host's tools cannot write memory"] * 3
        assert [e.fields["mode"] for e in runs] == ["standalone"] * 3
        return
    # With the memory tool a fork can save; the first run has no cache of memdir's own
    # to read yet, so the host's makes the fork the cheaper one. Later runs weigh both.
    assert (runs[0].fields["mode"], reasons[0]) == ("fork", "fork is cheaper")
    assert set(reasons) <= {"fork is cheaper", "standalone is cheaper"}
    pairs = list(forks_and_hosts(script, requests))
    assert pairs
    for fork, host in pairs:
        # The memory tool is a beta tool: the fork sends the host's beta header too.
        assert host.headers["anthropic-beta"] == "context-management-2025-06-27"
        assert fork.headers["anthropic-beta"] == host.headers["anthropic-beta"]
        assert fork.body["tools"][0] == {"type": "memory_20250818", "name": "memory"}
        assert int((fork.usage or {})["cache_read_input_tokens"]) >= prompt_tokens(host)


def test_a_memory_the_agent_saved_itself_is_not_extracted_again(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    script = Script(folder, saver="memory")
    sink = CollectingSink()
    saved = {"command": "create", "path": "/memories/polars.md", "file_text": "Use polars."}

    def handler(body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if not script.is_fork(body) and "polars" in text_of(last):
            call = ToolUseBlock(id="toolu_mem", name="memory", input=saved)
            return Message(role="assistant", content=(call,))
        return script(body)

    memory = MemdirMiddleware(
        folder, memory_tool=True, config=ExtractConfig(mode="fork"), sink=sink
    )
    with FakeAnthropicServer(handler=handler) as server:
        agent = weather_agent(chat_model(server), AnthropicPromptCachingMiddleware(), memory)
        state = converse(agent, memory, TURNS[1:2])
        server.assert_no_errors()

    assert (folder / "polars.md").read_text().strip().endswith("Use polars.")
    assert isinstance(state[2], ToolMessage)
    assert state[2].status == "success"
    assert sink.names() == ["extract.skipped_direct_write"]
    assert not list(folder.glob("note_*.md"))


def test_an_agent_that_caches_nothing_gets_standalone_runs(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    script = Script(folder)
    sink = CollectingSink()
    memory = MemdirMiddleware(folder, config=ExtractConfig(mode="fork"), sink=sink)
    with FakeAnthropicServer(handler=script) as server:
        # No AnthropicPromptCachingMiddleware: no breakpoint, so no cache for a fork to read.
        agent = weather_agent(chat_model(server), memory)
        state = converse(agent, memory, TURNS[:2])
        server.assert_no_errors()

    assert [e.fields["mode"] for e in sink.named("extract.run")] == ["standalone"] * 2
    assert_covered_once(sink, memory, state)
    assert sorted(p.name for p in folder.glob("note_*.md")) == ["note_0.md", "note_1.md"]


def test_each_thread_has_its_own_cursor(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    script = Script(folder)
    sink = CollectingSink()
    memory = MemdirMiddleware(folder, config=ExtractConfig(mode="fork"), sink=sink)
    with FakeAnthropicServer(handler=script) as server:
        agent = weather_agent(chat_model(server), AnthropicPromptCachingMiddleware(), memory)

        async def main() -> tuple[list[BaseMessage], list[BaseMessage]]:
            await talk(agent, memory, TURNS[:1], thread="a")
            second = await talk(agent, memory, TURNS[1:2], thread="b")
            return await talk(agent, memory, TURNS[2:], thread="a"), second

        first, second = asyncio.run(main())
        server.assert_no_errors()

    counts = [e.fields["message_count"] for e in sink.named("extract.run")]
    # Thread b's save changed memory after thread a loaded it: a's next turn is told.
    assert counts == [4, 2, 5]
    a, b = memory.extractor("a"), memory.extractor("b")
    assert a is not None
    assert b is not None
    assert (a.cursor, b.cursor) == (first[-1].id, second[-1].id)


def test_an_agent_run_with_invoke_saves_from_a_background_thread(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    script = Script(folder)
    sink = CollectingSink()
    memory = MemdirMiddleware(folder, config=ExtractConfig(mode="fork"), sink=sink)
    with FakeAnthropicServer(handler=script) as server:
        agent = weather_agent(chat_model(server), AnthropicPromptCachingMiddleware(), memory)
        config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
        try:
            for text in TURNS[:2]:
                state = agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
                memory.drain_sync()
        finally:
            memory.close()
        server.assert_no_errors()

    assert [e.fields["mode"] for e in sink.named("extract.run")] == ["fork"] * 2
    assert_covered_once(sink, memory, list(state["messages"]))


def test_a_failing_memory_model_never_fails_the_agent(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    sink = CollectingSink()

    def handler(body: dict[str, Any]) -> Reply:
        if str(folder) in json.dumps(body["messages"]):
            return Fault(status=400)  # refused for good: no retries
        return "Noted."

    memory = MemdirMiddleware(folder, config=ExtractConfig(mode="fork"), sink=sink)
    with FakeAnthropicServer(handler=handler) as server:
        agent = create_agent(
            chat_model(server),
            [],
            system_prompt=SYSTEM_PROMPT,
            middleware=[AnthropicPromptCachingMiddleware(), memory],
        )
        state = converse(agent, memory, TURNS[1:2])

    assert state[-1].text == "Noted."
    assert "extract.error" in sink.names()
    extractor = memory.extractor("t1")
    assert extractor is not None
    assert extractor.cursor is None  # tried again at the next turn


@pytest.mark.parametrize("streaming", [False, True])
def test_a_chat_openai_agent_forks_inside_its_prompt_cache_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], streaming: bool
) -> None:
    """``ChatOpenAI``'s request is rebuilt by its own payload code: the fork sends its
    messages (the system message first), tools and settings, then memdir's prompt, on
    the agent's own model; OpenAI caches every prefix without breakpoints."""
    langchain_openai = pytest.importorskip("langchain_openai")
    from memdir.testing import FakeOpenAIServer

    folder = tmp_path / "memory"
    script = Script(folder, saver="memory")
    sink = CollectingSink()
    memory = MemdirMiddleware(
        folder, config=ExtractConfig(mode="fork"), sink=sink, memory_tool=True
    )
    with FakeOpenAIServer(handler=script, model="gpt-4o") as server:
        settings = {"model": "gpt-4o", "base_url": server.base_url, "api_key": "test"}
        chat = langchain_openai.ChatOpenAI(**settings, streaming=streaming, temperature=0.2)
        agent = weather_agent(chat, memory)

        async def main() -> list[BaseMessage]:
            try:
                return await talk(agent, memory, TURNS)
            finally:
                # langchain-openai keeps one client per address for the whole process:
                # its connections would outlive this loop, and be reported unclosed.
                await chat.root_async_client.close()

        state = asyncio.run(main())
        server.assert_no_errors()
        requests = server.requests

    assert [e.fields["mode"] for e in sink.named("extract.run")] == ["fork"] * 3
    assert_covered_once(sink, memory, state)
    assert sorted(p.name for p in folder.glob("note_*.md")) == [
        "note_0.md",
        "note_1.md",
        "note_2.md",
    ]
    firsts = [
        i
        for i, r in enumerate(requests)
        if script.is_fork(r.body) and not script.is_fork(requests[i - 1].body)
    ]
    assert len(firsts) == 3
    for number, i in enumerate(firsts):
        fork, host = requests[i], requests[i - 1]
        sent = host.body["messages"]
        assert json.dumps(fork.body["messages"][: len(sent)]) == json.dumps(sent)
        assert json.dumps(fork.body["tools"]) == json.dumps(host.body["tools"])
        assert fork.body["model"] == "gpt-4o"
        assert fork.body["temperature"] == host.body["temperature"] == 0.2
        assert not fork.stream
        assert fork.usage is not None
        assert host.usage is not None
        cached = int(fork.usage["prompt_tokens_details"]["cached_tokens"])
        assert host.usage["prompt_tokens"] - 128 < cached <= host.usage["prompt_tokens"]
        with capsys.disabled():
            print(
                f"\nlangchain ChatOpenAI fork {number + 1}{' (streaming host)' * streaming}: "
                f"{cached} of the host's {host.usage['prompt_tokens']} prompt tokens read "
                f"from its cache ({cached / fork.usage['prompt_tokens']:.0%} of the fork's input)"
            )


# --- a graph of your own ------------------------------------------------------------------------


def weather_graph(model: ChatAnthropic) -> Any:
    """The usual LangGraph chat loop: a model node, a tool node, back to the model."""
    bound = model.bind_tools([get_weather])

    async def call_model(state: MessagesState) -> dict[str, Any]:
        system = SystemMessage(content=SYSTEM_PROMPT)
        return {"messages": [await bound.ainvoke([system, *state["messages"]])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode([get_weather]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition, ["tools", END])
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("how", ["after_invoke", "callback"])
def test_a_plain_graph_reports_its_turns(tmp_path: Path, how: str) -> None:
    folder = tmp_path / "memory"
    script = Script(folder)
    sink = CollectingSink()
    with FakeAnthropicServer(handler=script) as server:
        # No middleware sees a plain graph's model: memdir's is given.
        model = AnthropicModel(MODEL, api_key="test", base_url=server.base_url)
        memory = MemdirMiddleware(folder, model=model, sink=sink)
        graph = weather_graph(chat_model(server))
        config: dict[str, Any] = {"configurable": {"thread_id": "t1"}}
        if how == "callback":
            config["callbacks"] = [memory.callback_handler()]

        async def main() -> list[BaseMessage]:
            state: dict[str, Any] = {}
            for text in TURNS:
                state = await graph.ainvoke({"messages": [HumanMessage(content=text)]}, config)
                if how == "after_invoke":
                    await memory.areport_graph(graph, config)
                await memory.drain()
            return list(state["messages"])

        state = asyncio.run(main())
        server.assert_no_errors()

    assert len(state) == 10
    # No middleware saw the model's request: memdir sends one of its own.
    assert [e.fields["mode"] for e in sink.named("extract.run")] == ["standalone"] * 3
    assert_covered_once(sink, memory, state)
    assert sorted(p.name for p in folder.glob("note_*.md")) == [
        "note_0.md",
        "note_1.md",
        "note_2.md",
    ]


def test_report_takes_the_messages_a_graph_returned(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    script = Script(folder)
    sink = CollectingSink()
    with FakeAnthropicServer(handler=script) as server:
        model = AnthropicModel(MODEL, api_key="test", base_url=server.base_url)
        memory = MemdirMiddleware(folder, model=model, sink=sink)
        conversation = [
            HumanMessage(content=TURNS[1], id="h1"),
            AIMessage(content="Noted.", id="a1"),
        ]

        async def main() -> None:
            memory.report(conversation, thread_id="t1")
            await memory.drain()

        asyncio.run(main())
        server.assert_no_errors()

    assert sink.named("extract.run")[0].fields["message_count"] == 2
    extractor = memory.extractor("t1")
    assert extractor is not None
    assert extractor.cursor == "a1"


# --- messages -----------------------------------------------------------------------------------

PNG = "iVBORw0KGgo="


def test_each_kind_of_langchain_message_reads_as_memdir_does() -> None:
    read = messages_from_langchain(
        [
            SystemMessage(content="Be brief.", id="s"),
            HumanMessage(
                content=[
                    "Look at this",
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                ],
                id="h",
            ),
            AIMessage(
                content=[
                    {"type": "thinking", "thinking": "hm", "signature": "sig"},
                    {"type": "text", "text": "Checking.", "index": 1},
                    {"type": "tool_use", "id": "t1", "name": "lookup", "input": {"q": "x"}},
                ],
                tool_calls=[{"name": "lookup", "args": {"q": "x"}, "id": "t1"}],
                id="a",
            ),
            ToolMessage(content="boom", tool_call_id="t1", status="error", id="r"),
            AIMessage(
                content="",
                tool_calls=[{"name": "lookup", "args": {"q": "y"}, "id": "call_2"}],
                id="o",
            ),
            ToolMessage(content=[{"type": "text", "text": "y is 2"}], tool_call_id="call_2"),
            AIMessage(content=[{"type": "server_tool_use", "id": "s1", "name": "web"}]),
        ]
    )
    system, human, answer, error, openai_call, result, server_side = read
    assert (system.role, system.text, system.uuid) == ("system", "Be brief.", "s")
    assert human.content == (
        TextBlock(text="Look at this"),
        ImageBlock(media_type="image/png", data=PNG),
    )
    assert answer.content == (
        ThinkingBlock(thinking="hm", signature="sig"),
        TextBlock(text="Checking."),
        ToolUseBlock(id="t1", name="lookup", input={"q": "x"}),  # once, not twice
    )
    assert error.content == (ToolResultBlock(tool_use_id="t1", content="boom", is_error=True),)
    assert error.is_tool_result
    assert openai_call.content == (ToolUseBlock(id="call_2", name="lookup", input={"q": "y"}),)
    assert result.content == (ToolResultBlock(tool_use_id="call_2", content="y is 2"),)
    assert server_side.content == (
        OtherBlock(
            type="server_tool_use", data={"type": "server_tool_use", "id": "s1", "name": "web"}
        ),
    )
    # Messages without an id get one derived from the conversation: the same every time.
    again = messages_from_langchain(list(messages_to_langchain(read[:5])))
    assert (
        result.uuid
        == message_from_langchain(
            ToolMessage(content=[{"type": "text", "text": "y is 2"}], tool_call_id="call_2"),
            previous=openai_call.uuid,
        ).uuid
    )
    assert again == read[:5]


def test_langchain_messages_survive_the_round_trip() -> None:
    conversation: list[BaseMessage] = [
        HumanMessage(content="Weather in Paris?", id="1"),
        AIMessage(
            content=[
                {"type": "tool_use", "id": "t", "name": "get_weather", "input": {"city": "P"}}
            ],
            tool_calls=[{"name": "get_weather", "args": {"city": "P"}, "id": "t"}],
            id="2",
        ),
        ToolMessage(content="sunny", tool_call_id="t", id="3"),
        AIMessage(content="It is sunny.", id="4"),
    ]
    back = messages_to_langchain(messages_from_langchain(conversation))
    assert [type(m) for m in back] == [type(m) for m in conversation]
    assert [m.id for m in back] == ["1", "2", "3", "4"]
    assert [m.content for m in back] == [m.content for m in conversation]
    assert isinstance(back[1], AIMessage)
    assert [(c["name"], c["args"], c["id"]) for c in back[1].tool_calls] == [
        ("get_weather", {"city": "P"}, "t")
    ]
    assert isinstance(back[2], ToolMessage)
    assert (back[2].tool_call_id, back[2].status) == ("t", "success")


def test_a_user_message_with_tool_results_becomes_one_tool_message_each() -> None:
    message = Message(
        role="user",
        content=(
            ToolResultBlock(tool_use_id="a", content="1"),
            ToolResultBlock(tool_use_id="b", content="2", is_error=True),
            TextBlock(text="and go on"),
        ),
        uuid="u",
    )
    first, second, rest = messages_to_langchain([message])
    assert isinstance(first, ToolMessage)
    assert isinstance(second, ToolMessage)
    assert isinstance(rest, HumanMessage)
    assert [(m.tool_call_id, m.status) for m in (first, second)] == [
        ("a", "success"),
        ("b", "error"),
    ]
    assert [m.id for m in (first, second, rest)] == ["u", "u-1", "u-2"]


# --- the memory tool, the example, the missing extra ----------------------------------------------


def test_the_memory_tool_refuses_what_leaves_the_memory_folder(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    memory_tool = langchain_memory_tool(folder)
    created = memory_tool.invoke(
        {"command": "create", "path": "/memories/a.md", "file_text": "hello"}
    )
    assert "created" in created.lower()
    assert (folder / "a.md").read_text() == "hello"
    refused = asyncio.run(
        memory_tool.ainvoke(
            {
                "type": "tool_call",
                "id": "x",
                "name": "memory",
                "args": {"command": "create", "path": "/etc/passwd", "file_text": "x"},
            }
        )
    )
    assert isinstance(refused, ToolMessage)
    assert refused.status == "error"
    assert "/memories" in str(refused.content)


def test_the_example_agent_remembers(tmp_path: Path) -> None:
    example = load_example("langchain_agent.py")
    folder = tmp_path / "memory"
    script = Script(folder, saver="memory")
    with FakeAnthropicServer(handler=script) as server:
        said: list[str] = []
        asyncio.run(
            example.main(
                TURNS,
                model=MODEL,
                memory_dir=folder,
                base_url=server.base_url,
                api_key="test",
                say=said.append,
            )
        )
        server.assert_no_errors()
        requests = server.requests

    # Notices come when a run ends, in between the answers or after the last one.
    notices = [line for line in said if line.startswith("Saved ")]
    answers = [line for line in said if not line.startswith("Saved ")]
    assert answers == ["It is sunny in Paris.", "Noted.", "It is sunny in Oslo."]
    assert notices
    saved = [Path(line.split()[-1]) for line in notices]
    assert all(path.exists() and path.parent == folder for path in saved)
    assert any(script.is_fork(r.body) for r in requests)


def test_without_langchain_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "memdir.integrations.langchain")
    monkeypatch.setitem(sys.modules, "langchain.agents.middleware", None)
    with pytest.raises(MissingExtraError, match=r"pip install -e \S+\[langchain\]"):
        importlib.import_module("memdir.integrations.langchain")


def test_conversations_without_a_thread_each_keep_their_cursor(tmp_path: Path) -> None:
    # A server with no checkpointer passes each user's history back itself.
    folder = tmp_path / "memory"

    def handler(body: dict[str, Any]) -> str:
        return "ok " + json.dumps(body["messages"][-1]["content"])[:20]

    sink = CollectingSink()
    memory = MemdirMiddleware(
        folder, model="offline", config=ExtractConfig(mode="standalone"), sink=sink
    )
    with FakeAnthropicServer(handler=handler) as server:
        agent = create_agent(chat_model(server), [], middleware=[memory])

        async def main() -> int:
            history: dict[str, list[Any]] = {"ana": [], "bo": []}
            for n in range(3):
                for who in history:
                    state = await agent.ainvoke(
                        {"messages": [*history[who], {"role": "user", "content": f"{who} {n}"}]}
                    )
                    history[who] = state["messages"]
                    await memory.drain()
            return sum(len(h) for h in history.values())

        total = asyncio.run(main())
    counts = [e.fields["message_count"] for e in sink.named("extract.run")]
    assert counts == [2] * 6
    assert sum(counts) == total


# --- the host core: memory shown, the agent's client, bounded threads --------------------------


def test_a_new_thread_is_shown_the_saved_memory(tmp_path: Path) -> None:
    """With only the middleware installed, the first request of a thread holds memdir's
    memory instructions and the saved index, after the agent's own system prompt."""
    from memdir.recall import memory_prompt

    folder = tmp_path / "memory"
    folder.mkdir()
    (folder / "user_ana.md").write_text(MEMORY_FILE.format(name="user_ana.md"))
    (folder / "MEMORY.md").write_text("- [Ana](user_ana.md) — Ana leads the data team\n")
    shown = MemdirMiddleware(folder, config=ExtractConfig(mode="fork"))
    hidden = MemdirMiddleware(folder, config=ExtractConfig(mode="fork"), load_memory=False)

    def first_system(memory: MemdirMiddleware) -> str:
        with FakeAnthropicServer(handler=Script(folder)) as server:
            converse(weather_agent(chat_model(server), memory), memory, ["Who am I?"])
            body = server.requests[0].body
        system = body["system"]
        return system if isinstance(system, str) else "".join(b["text"] for b in system)

    system = first_system(shown)
    assert system.startswith(SYSTEM_PROMPT)
    assert memory_prompt(folder) in system
    assert system.index(memory_prompt(folder)) < system.index("- [Ana](user_ana.md)")
    assert first_system(hidden) == SYSTEM_PROMPT


@pytest.mark.parametrize("mode", ["fork", "standalone"])
def test_chat_openai_settings_reach_every_memory_request_after_its_client_closed(
    tmp_path: Path, mode: str
) -> None:
    """``ChatOpenAI``'s organization and default headers go with every memory request,
    fork and standalone, and its client may close before ``drain()``."""
    langchain_openai = pytest.importorskip("langchain_openai")
    from memdir.testing import FakeOpenAIServer

    folder = tmp_path / "memory"
    script = Script(folder, saver="memory")
    sink = CollectingSink()
    memory = MemdirMiddleware(
        folder,
        config=ExtractConfig(mode=mode),  # type: ignore[arg-type]
        sink=sink,
        memory_tool=True,
    )
    with FakeOpenAIServer(handler=script, model="gpt-4o") as server:
        chat = langchain_openai.ChatOpenAI(
            model="gpt-4o",
            base_url=server.base_url,
            api_key="test",
            organization="org-acme",
            default_headers={"X-Gateway-Key": "k-123"},
        )
        agent = weather_agent(chat, memory)

        async def main() -> None:
            config = {"configurable": {"thread_id": "t1"}}
            await agent.ainvoke({"messages": [{"role": "user", "content": TURNS[0]}]}, config)
            await chat.root_async_client.close()
            await memory.drain()

        asyncio.run(main())
        server.assert_no_errors()
        requests = server.requests

    assert not sink.named("extract.error")
    assert [e.fields["mode"] for e in sink.named("extract.run")] == [mode]
    ours = [r for r in requests if script.is_fork(r.body)]
    assert ours
    for request in ours:
        assert request.headers["openai-organization"] == "org-acme"
        assert request.headers["x-gateway-key"] == "k-123"
    assert (folder / "note_0.md").exists()


def test_idle_threads_are_let_go(tmp_path: Path) -> None:
    """Past ``max_threads`` the least recently used idle thread is let go (its messages
    and its extractor), so thousands of threads do not keep thousands of extractors."""
    folder = tmp_path / "memory"
    memory = MemdirMiddleware(
        folder, model="offline", config=ExtractConfig(mode="standalone"), max_threads=3
    )
    with FakeAnthropicServer(handler=lambda body: "ok") as server:
        agent = weather_agent(chat_model(server), memory)

        async def main() -> None:
            for n in range(8):
                await talk(agent, memory, [f"hello {n}"], thread=f"t{n}")

        asyncio.run(main())

    assert len(memory._threads) == 3
    held = [memory.extractor(f"t{n}") for n in range(8)]
    assert [e is not None for e in held] == [False] * 5 + [True] * 3


def test_a_restart_over_the_same_thread_saves_each_fact_once(tmp_path: Path) -> None:
    """A new process — a new middleware and agent — over the same thread of a durable
    checkpointer reads only the turn that is new, and saves from it."""
    folder = tmp_path / "memory"
    script = Script(folder)
    sink = CollectingSink()
    saver = InMemorySaver()  # stands for a durable one (SQLite, PostgreSQL)
    with FakeAnthropicServer(handler=script) as server:
        for turns in (TURNS[:2], TURNS[2:]):
            memory = MemdirMiddleware(folder, config=ExtractConfig(mode="fork"), sink=sink)
            agent = create_agent(
                chat_model(server),
                [get_weather],
                system_prompt=SYSTEM_PROMPT,
                middleware=[AnthropicPromptCachingMiddleware(), memory],
                checkpointer=saver,
            )
            state = converse(agent, memory, turns)
        server.assert_no_errors()

    assert sorted(p.name for p in folder.glob("note_*.md")) == [
        "note_0.md",
        "note_1.md",
        "note_2.md",
    ]
    runs = sink.named("extract.run")
    # The second run's: the turn and the notice that the first run's save changed memory;
    # the third (a new process, which loads memory afresh): only what is new.
    assert [e.fields["message_count"] for e in runs] == [4, 3, 4]
    assert sum(e.fields["message_count"] for e in runs) == len(state)
    assert not sink.named("extract.skipped_direct_write")


def test_a_chat_openai_agent_never_imports_langchain_anthropic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Telling that the agent's model is not ``ChatAnthropic`` must not import
    ``langchain_anthropic`` (and ``anthropic``: a second and more, on the host's loop)."""
    langchain_openai = pytest.importorskip("langchain_openai")
    from memdir.integrations import langchain as integration

    chat = langchain_openai.ChatOpenAI(model="gpt-4o", api_key="test")
    for name in [m for m in sys.modules if m.split(".")[0] == "langchain_anthropic"]:
        monkeypatch.delitem(sys.modules, name)
    assert not integration._is_direct_anthropic(chat)
    assert integration._endpoint(chat) is not None
    assert "langchain_anthropic" not in sys.modules
