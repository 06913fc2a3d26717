"""The notice that memory changed under a conversation, in each framework's real agent loop.

A conversation loads ``MEMORY.md`` once and keeps that copy for the cached prefix of its
requests. When the memory folder changes after that (here another writer puts a memory
in it between turns, as a background extraction does), the next request carries memdir's
``<system-reminder>`` saying so, once, after everything the earlier requests sent; the
request after it still carries it at the same place, so that each request starts with
the one before, and carries no second one. With no change there is never a notice.

The agents are pydantic-ai's ``Agent`` on ``AnthropicModel``, LangChain's ``create_agent``
on ``ChatAnthropic`` (checkpointed thread) and the OpenAI Agents SDK's runner on
``OpenAIChatCompletionsModel``, each against memdir's fake server. memdir's own memory
runs are off (``enabled=False``) so that the only change is the other writer's.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memdir.extract import ExtractConfig
from memdir.messages import Message
from memdir.testing import FakeAnthropicServer, FakeOpenAIServer, RecordedRequest

NOTICE = "changed since this conversation loaded it"
"""A phrase of memdir's notice, once in each."""
TURNS = ("Hi, I'm Ana.", "We use polars here.", "What do you know about me?")
ANSWERS = ("Hello Ana.", "Noted: polars.", "You are Ana; you use polars.")
OFF = ExtractConfig(enabled=False)


def memory_file(name: str, kind: str) -> str:
    return f"---\nname: {name}\ndescription: about {name}\ntype: {kind}\n---\n\n{name}.\n"


def seed(memory: Path) -> None:
    """What an earlier conversation saved: one memory and its line in the index."""
    memory.mkdir(parents=True)
    (memory / "user_ana.md").write_text(memory_file("Ana", "user"))
    (memory / "MEMORY.md").write_text("- [Ana](user_ana.md) — Ana leads the data team\n")


def another_writer(memory: Path) -> None:
    """A save from outside the conversation: a new memory and its index line."""
    (memory / "feedback_polars.md").write_text(memory_file("Polars", "feedback"))
    with (memory / "MEMORY.md").open("a") as index:
        index.write("- [Polars](feedback_polars.md) — polars, never pandas\n")


def strip_markers(value: Any) -> Any:
    """``value`` without ``cache_control``: breakpoints move, and are no part of the prefix."""
    if isinstance(value, dict):
        return {k: strip_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_markers(v) for v in value]
    return value


def notices(messages: list[Any]) -> int:
    return json.dumps(messages, ensure_ascii=False).count(NOTICE)


def notice_text(messages: list[Any]) -> str:
    """The one notice in ``messages``, as the model reads it."""
    for message in messages:
        content = message["content"]
        texts = [content] if isinstance(content, str) else [b.get("text", "") for b in content]
        for text in texts:
            if NOTICE in text:
                return str(text)
    raise AssertionError("no notice")


def assert_prefixes(requests: list[list[Any]]) -> None:
    """Each request's messages start with the ones before, byte for byte (markers aside)."""
    for earlier, later in itertools.pairwise(requests):
        assert strip_markers(later[: len(earlier)]) == strip_markers(earlier)


def assert_noticed_once(requests: list[list[Any]], memory: Path) -> None:
    """Turn 1: none; turn 2: the notice, once, after what turn 1 sent; turn 3: the same
    notice at the same place, and no other."""
    first, second, third = requests
    assert [notices(r) for r in requests] == [0, 1, 1]
    assert_prefixes(requests)
    assert notice_text(second) == notice_text(third)
    text = notice_text(second)
    assert text.startswith("<system-reminder>")
    assert text.rstrip().endswith("</system-reminder>")
    assert "feedback_polars.md" in text
    assert f"Read {memory / 'MEMORY.md'} again" in text
    # After the first turn, and in the second turn's request only.
    assert notices(second[: len(first) + 1]) == 0


def assert_never_noticed(requests: list[list[Any]]) -> None:
    assert [notices(r) for r in requests] == [0, 0, 0]
    assert_prefixes(requests)


def assert_same_system(systems: list[Any], memory: Path) -> None:
    """The loaded index stays as it was: the notice stands in for a new one."""
    assert all(strip_markers(s) == strip_markers(systems[0]) for s in systems)
    assert "feedback_polars.md" not in json.dumps(systems[0])
    assert "user_ana.md" in json.dumps(systems[0])


# --- pydantic-ai ------------------------------------------------------------------------------


def pydantic_ai_turns(
    memory: Path, *, changed: bool
) -> tuple[list[RecordedRequest], RecordedRequest, list[Message]]:
    """The three turns of one conversation, then a new conversation's first request;
    and the history the last run returned, as memdir reads it."""
    from anthropic import AsyncAnthropic
    from pydantic_ai import Agent
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    from memdir.integrations.pydantic_ai import MemdirCapability, messages_from_pydantic_ai

    seed(memory)
    capability = MemdirCapability(memory, config=OFF)
    answers = iter([*ANSWERS, "Hello."])

    async def main() -> tuple[list[RecordedRequest], list[Message]]:
        async with (
            FakeAnthropicServer(handler=lambda body: next(answers)) as fake,
            AsyncAnthropic(base_url=fake.base_url, api_key="test") as client,
        ):
            model = AnthropicModel(
                "claude-sonnet-4-5", provider=AnthropicProvider(anthropic_client=client)
            )
            agent = Agent(model, instructions="Answer briefly.", capabilities=[capability])
            history: list[Any] = []
            for number, text in enumerate(TURNS):
                if number == 1 and changed:
                    another_writer(memory)
                result = await agent.run(text, message_history=history)
                history = result.all_messages()
            await agent.run("Hi again.")
            fake.assert_no_errors()
            return fake.requests, messages_from_pydantic_ai(history)

    requests, conversation = asyncio.run(main())
    *ours, new_conversation = requests
    return ours, new_conversation, conversation


def test_pydantic_ai_is_told_once_and_keeps_the_notice_in_its_history(tmp_path: Path) -> None:
    pytest.importorskip("pydantic_ai")
    ours, new_conversation, _ = pydantic_ai_turns(tmp_path / "same", changed=False)
    assert_never_noticed([r.body["messages"] for r in ours])
    assert notices(new_conversation.body["messages"]) == 0

    memory = tmp_path / "memory"
    ours, new_conversation, conversation = pydantic_ai_turns(memory, changed=True)
    assert_noticed_once([r.body["messages"] for r in ours], memory)
    assert_same_system([r.body["system"] for r in ours], memory)
    # A conversation that begins after the change loads memory as it is: nothing to tell.
    assert notices(new_conversation.body["messages"]) == 0
    # In the history the run returned (and the next run was given): read back as
    # harness text, after the user's words.
    meta = [m for m in conversation if m.is_meta]
    assert len(meta) == 1
    assert NOTICE in meta[0].text
    assert conversation[conversation.index(meta[0]) - 1].text == TURNS[1]


# --- LangChain --------------------------------------------------------------------------------


def anthropic_chat(fake: FakeAnthropicServer) -> Any:
    from langchain_anthropic import ChatAnthropic

    settings: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "base_url": fake.base_url,
        "api_key": "test",
    }
    return ChatAnthropic(**settings)


def langchain_turns(memory: Path, *, changed: bool, call: str) -> tuple[list[Any], list[Any]]:
    """The three turns of one checkpointed thread: the requests sent, the thread's messages."""
    from langchain.agents import create_agent
    from langchain_core.messages import BaseMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from memdir.integrations.langchain import MemdirMiddleware

    seed(memory)
    middleware = MemdirMiddleware(memory, config=OFF)
    answers = iter(ANSWERS)
    config: Any = {"configurable": {"thread_id": "ana"}}

    with FakeAnthropicServer(handler=lambda body: next(answers)) as fake:
        chat = anthropic_chat(fake)
        agent = create_agent(
            chat,
            [],
            system_prompt="Answer briefly.",
            middleware=[middleware],
            checkpointer=InMemorySaver(),
        )

        async def turns() -> list[BaseMessage]:
            state: dict[str, Any] = {}
            for number, text in enumerate(TURNS):
                if number == 1 and changed:
                    another_writer(memory)
                said: Any = {"messages": [{"role": "user", "content": text}]}
                state = await agent.ainvoke(said, config)
            # langchain-anthropic keeps one client per address for the process: its
            # connections would outlive this loop, and be reported unclosed.
            await chat._async_client.close()
            return list(state["messages"])

        def sync_turns() -> list[BaseMessage]:
            state: dict[str, Any] = {}
            for number, text in enumerate(TURNS):
                if number == 1 and changed:
                    another_writer(memory)
                state = agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
            return list(state["messages"])

        try:
            thread = asyncio.run(turns()) if call == "ainvoke" else sync_turns()
        finally:
            middleware.close()
        fake.assert_no_errors()
        return fake.requests, thread


@pytest.mark.parametrize("call", ["ainvoke", "invoke"])
def test_a_langchain_agent_is_told_once_and_its_thread_keeps_the_notice(
    tmp_path: Path, call: str
) -> None:
    pytest.importorskip("langchain")
    pytest.importorskip("langchain_anthropic")
    from langchain_core.messages import HumanMessage

    from memdir.integrations.langchain import message_from_langchain

    requests, thread = langchain_turns(tmp_path / "same", changed=False, call=call)
    assert_never_noticed([r.body["messages"] for r in requests])
    assert len(thread) == 6

    memory = tmp_path / "memory"
    requests, thread = langchain_turns(memory, changed=True, call=call)
    assert_noticed_once([r.body["messages"] for r in requests], memory)
    assert_same_system([r.body["system"] for r in requests], memory)
    # In the checkpointed thread, right after the user's second message.
    kinds = ["Human", "AI", "Human", "Human", "AI", "Human", "AI"]
    assert [type(m).__name__ for m in thread] == [f"{kind}Message" for kind in kinds]
    notice = thread[3]
    assert isinstance(notice, HumanMessage)
    assert NOTICE in str(notice.content)
    assert message_from_langchain(notice).is_meta
    assert not message_from_langchain(thread[2]).is_meta


# --- OpenAI Agents SDK ------------------------------------------------------------------------


def openai_agents_turns(
    tmp_path: Path, memory: Path, *, changed: bool, history: str
) -> tuple[list[Any], list[Any]]:
    """The three turns of one conversation (its history handed back with
    ``to_input_list()``, or kept in a ``SQLiteSession``): the messages sent, and the
    SDK's own history at the end."""
    import agents
    from agents import Agent, OpenAIChatCompletionsModel, Runner, SQLiteSession
    from openai import AsyncOpenAI

    from memdir.integrations.openai_agents import MemdirRunHooks

    agents.set_tracing_disabled(True)
    seed(memory)
    session = SQLiteSession("ana", tmp_path / f"{memory.name}.db")
    hooks = MemdirRunHooks(memory, config=OFF, session=session)
    answers = iter(ANSWERS)

    with FakeOpenAIServer(handler=lambda body: next(answers), model="gpt-4.1-mini") as fake:

        async def main() -> list[Any]:
            async with AsyncOpenAI(base_url=fake.base_url, api_key="test") as client:
                agent = Agent(
                    name="assistant",
                    instructions="Answer briefly.",
                    model=OpenAIChatCompletionsModel("gpt-4.1-mini", client),
                )
                conversation: list[Any] = []
                for number, text in enumerate(TURNS):
                    if number == 1 and changed:
                        another_writer(memory)
                    if history == "session":
                        result = await Runner.run(agent, text, session=session, hooks=hooks)
                    else:
                        said = [*conversation, {"role": "user", "content": text}]
                        result = await Runner.run(agent, said, hooks=hooks)
                    conversation = result.to_input_list()
                return conversation

        try:
            conversation = asyncio.run(main())
        finally:
            session.close()
        fake.assert_no_errors()
        return [r.body["messages"] for r in fake.requests], conversation


@pytest.mark.parametrize("history", ["to_input_list", "session"])
def test_openai_agents_hooks_check_before_each_call_and_put_the_notice_back(
    tmp_path: Path, history: str
) -> None:
    pytest.importorskip("agents")
    sent, _ = openai_agents_turns(tmp_path, tmp_path / "same", changed=False, history=history)
    assert_never_noticed(sent)

    memory = tmp_path / "memory"
    sent, conversation = openai_agents_turns(tmp_path, memory, changed=True, history=history)
    assert_noticed_once(sent, memory)
    # memdir's memory instructions and index, after the agent's own: the same every call.
    assert_same_system([m[:3] for m in sent], memory)
    # Before the user's new words, after the first turn's answer.
    second = sent[1]
    assert NOTICE in second[-2]["content"]
    assert second[-1] == {"role": "user", "content": TURNS[1]}
    assert second[-3] == {"role": "assistant", "content": ANSWERS[0]}
    # The SDK's own history never holds it: the hooks put it back on each call.
    assert notices(conversation) == 0


def test_openai_agents_hooks_tell_of_a_change_made_during_a_run_after_the_tools_result(
    tmp_path: Path,
) -> None:
    """The agent saves a memory itself (memdir's Write tool) in the middle of a run: the
    run's next call gets the notice after the tool's result, and the next turn has it
    there too."""
    pytest.importorskip("agents")
    import agents
    from agents import Agent, OpenAIChatCompletionsModel, Runner
    from openai import AsyncOpenAI

    from memdir.integrations.openai_agents import MemdirRunHooks
    from memdir.messages import ToolUseBlock

    agents.set_tracing_disabled(True)
    memory = tmp_path / "memory"
    seed(memory)
    hooks = MemdirRunHooks(memory, config=OFF, cwd=tmp_path)
    write = ToolUseBlock(
        id="call_save",
        name="Write",
        input={
            "file_path": str(memory / "feedback_polars.md"),
            "content": memory_file("Polars", "feedback"),
        },
    )
    replies: Iterator[str | Message] = iter(
        [ANSWERS[0], Message(role="assistant", content=(write,)), ANSWERS[1], ANSWERS[2]]
    )

    with FakeOpenAIServer(handler=lambda body: next(replies), model="gpt-4.1-mini") as fake:

        async def main() -> None:
            async with AsyncOpenAI(base_url=fake.base_url, api_key="test") as client:
                agent = Agent(
                    name="assistant",
                    instructions="Answer briefly.",
                    model=OpenAIChatCompletionsModel("gpt-4.1-mini", client),
                    tools=hooks.tools(),
                )
                conversation: list[Any] = []
                for text in TURNS:
                    said = [*conversation, {"role": "user", "content": text}]
                    conversation = (await Runner.run(agent, said, hooks=hooks)).to_input_list()

        asyncio.run(main())
        fake.assert_no_errors()
        sent = [r.body["messages"] for r in fake.requests]

    assert (memory / "feedback_polars.md").exists()
    assert [notices(m) for m in sent] == [0, 0, 1, 1]
    assert_prefixes(sent)
    during = sent[2]
    assert during[-2]["role"] == "tool"
    assert NOTICE in during[-1]["content"]
    assert "feedback_polars.md" in during[-1]["content"]


def test_a_change_langchain_sees_only_as_the_request_goes_is_told_on_the_next_one(
    tmp_path: Path,
) -> None:
    """Memory that changes between ``before_model`` (where the notice goes into the
    thread) and memdir's ``wrap_model_call`` (where it is looked at again for the
    request's memory) is not lost: the request goes as the thread has it, and the
    thread's next one carries the notice."""
    pytest.importorskip("langchain")
    pytest.importorskip("langchain_anthropic")
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware
    from langgraph.checkpoint.memory import InMemorySaver

    from memdir.integrations.langchain import MemdirMiddleware

    memory = tmp_path / "memory"
    seed(memory)
    calls = iter(range(100))

    class WritesDuringTheSecondCall(AgentMiddleware):
        """Listed before memdir's, so its wrap_model_call runs around memdir's."""

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            if next(calls) == 1:
                another_writer(memory)
            return handler(request)

    middleware = MemdirMiddleware(memory, config=OFF)
    answers = iter(ANSWERS)
    config: Any = {"configurable": {"thread_id": "ana"}}
    with FakeAnthropicServer(handler=lambda body: next(answers)) as fake:
        chat = anthropic_chat(fake)
        agent = create_agent(
            chat,
            [],
            system_prompt="Answer briefly.",
            middleware=[WritesDuringTheSecondCall(), middleware],
            checkpointer=InMemorySaver(),
        )
        try:
            for text in TURNS:
                agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
        finally:
            middleware.close()
        fake.assert_no_errors()
        sent = [r.body["messages"] for r in fake.requests]

    assert [notices(m) for m in sent] == [0, 0, 1]
    assert_prefixes(sent)
    assert "feedback_polars.md" in notice_text(sent[2])


def test_a_list_the_runner_sends_again_gets_no_second_copy_of_the_notice(tmp_path: Path) -> None:
    """A ``call_model_input_filter`` may hand the runner the same list again, with what
    the hooks put in it last time: memory and the notice are still there once each."""
    pytest.importorskip("agents")
    from agents import Agent, OpenAIChatCompletionsModel, RunContextWrapper
    from openai import AsyncOpenAI

    from memdir.integrations.openai_agents import MemdirRunHooks

    memory = tmp_path / "memory"
    seed(memory)
    hooks = MemdirRunHooks(memory, config=OFF)

    async def main() -> tuple[list[Any], list[Any]]:
        async with AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="test") as client:
            agent = Agent(
                name="assistant", model=OpenAIChatCompletionsModel("gpt-4.1-mini", client)
            )
            context: RunContextWrapper[None] = RunContextWrapper(context=None)
            items: list[Any] = [{"role": "user", "content": TURNS[0]}]
            await hooks.on_llm_start(context, agent, "Answer briefly.", items)
            items += [
                {"role": "assistant", "content": ANSWERS[0]},
                {"role": "user", "content": TURNS[1]},
            ]
            another_writer(memory)
            await hooks.on_llm_start(context, agent, "Answer briefly.", items)
            noticed = list(items)
            await hooks.on_llm_start(context, agent, "Answer briefly.", items)
            return noticed, items

    noticed, again = asyncio.run(main())
    assert notices(noticed) == 1
    assert again == noticed
    assert NOTICE in again[-2]["content"]
    assert again[-1] == {"role": "user", "content": TURNS[1]}
