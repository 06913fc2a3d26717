"""Backends: the protocol a host programs against, and the in-process backend's durable,
bounded conversations (each conversation's position kept beside the memory)."""

from __future__ import annotations

import asyncio
import datetime
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from memdir.extract import (
    ExtractConfig,
    InProcessBackend,
    MemoryBackend,
    MemoryExtractor,
    TurnContext,
)
from memdir.fork import CacheSafeParams
from memdir.messages import Message, ToolUseBlock
from memdir.models import Model, ModelRequest
from memdir.state import StateFile
from memdir.telemetry import Event
from memdir.testing import FunctionModel
from memdir.tools import builtin_tools

MEMORY_FILE = "---\nname: {name}\ndescription: about {name}\ntype: user\n---\n\nbody\n"


def is_first_request(request: ModelRequest) -> bool:
    """The fork's first request ends with memdir's prompt, a later one with tool results."""
    return not request.messages[-1].is_tool_result


def saver(memory: Path) -> FunctionModel:
    """Saves one memory per run, named after the last user line the run's prompt is about."""

    async def answer(request: ModelRequest) -> Message | str:
        if not is_first_request(request):
            return "Saved."
        users = [m.text for m in request.messages if m.role == "user" and not m.is_meta]
        name = users[-2].split()[-1] + ".md"  # the last is memdir's prompt
        use = ToolUseBlock(
            id="w1",
            name="Write",
            input={"file_path": str(memory / name), "content": MEMORY_FILE.format(name=name)},
        )
        return Message(role="assistant", content=(use,))

    return FunctionModel(answer)


def prompts(model: FunctionModel) -> list[str]:
    return [r.messages[-1].text for r in model.requests if is_first_request(r)]


def names(events: list[Event]) -> list[str]:
    return [e.name for e in events if e.name.startswith("extract.")]


def provider_turns(count: int) -> list[dict[str, Any]]:
    """A conversation as an agent loop keeps it: Anthropic message dicts, no ids."""
    out: list[dict[str, Any]] = []
    for k in range(1, count + 1):
        out.append({"role": "user", "content": f"remember fact-{k}"})
        out.append({"role": "assistant", "content": [{"type": "text", "text": f"ok {k}"}]})
    return out


def params(model: Model, cwd: Path) -> CacheSafeParams:
    return CacheSafeParams(
        model=model, system="You are the host.", tools=[t.definition() for t in builtin_tools(cwd)]
    )


# --- the protocol ---------------------------------------------------------------------------


def test_the_extractor_and_the_in_process_backend_are_backends(tmp_path: Path) -> None:
    model = FunctionModel(lambda request: "done")
    assert isinstance(MemoryExtractor(tmp_path / "m", model), MemoryBackend)
    assert isinstance(InProcessBackend(tmp_path / "m", model), MemoryBackend)


def test_the_queue_is_a_backend() -> None:
    pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
    from memdir.queue import QueueExtractor

    host = QueueExtractor("postgresql://127.0.0.1:1/none", "dir")
    assert isinstance(host, MemoryBackend)
    host.close()


def test_something_without_close_is_no_backend() -> None:
    class Half:
        def on_turn_end(self, turn: TurnContext, notify: object = None) -> None: ...

        async def drain(self, timeout: float = 60.0) -> None: ...  # noqa: ASYNC109

        def drain_sync(self, timeout: float = 60.0) -> None: ...

    assert not isinstance(Half(), MemoryBackend)


# --- conversations ----------------------------------------------------------------------------


def test_each_conversation_has_its_own_extractor_and_model(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    models: dict[str | None, FunctionModel] = {}
    asked: list[str | None] = []

    def pick(turn: TurnContext) -> Model:
        asked.append(turn.session_id)
        return models.setdefault(turn.session_id, saver(memory))

    backend = InProcessBackend(memory, pick, ExtractConfig(mode="standalone"))

    async def main() -> None:
        for k in (1, 2):
            for session in ("a", "b", None):
                backend.on_turn_end(
                    TurnContext(messages=provider_turns(k), session_id=session, cwd=str(tmp_path))
                )
            await backend.drain()

    asyncio.run(main())
    assert asked == ["a", "b", None]  # once per conversation
    for session in ("a", "b", None):
        extractor = backend.extractor(session)
        assert extractor is not None
        assert extractor.model is models[session]
        assert len(prompts(models[session])) == 2
    assert backend.extractor("c") is None


# --- exactly once across processes ------------------------------------------------------------


def test_a_new_process_neither_rereads_old_turns_nor_loses_the_new_one(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    events: list[Event] = []

    def process(turns: int) -> FunctionModel:
        """One host process: a backend of its own, the conversation read from scratch."""
        model = saver(memory)
        backend = InProcessBackend(memory, model, sink=events.append)
        backend.on_turn_end(
            TurnContext(
                messages=provider_turns(turns),
                params=params(model, tmp_path),
                session_id="chat-1",
                cwd=str(tmp_path),
            )
        )
        backend.drain_sync()
        backend.close()
        return model

    first = process(2)
    second = process(3)

    assert len(prompts(first)) == 1
    assert "last ~4 messages" in prompts(first)[0]
    assert len(prompts(second)) == 1
    assert "last ~2 messages" in prompts(second)[0]  # only turn 3
    runs = [e.fields["message_count"] for e in events if e.name == "extract.run"]
    assert runs == [4, 2]
    assert sorted(p.name for p in memory.glob("fact-*.md")) == ["fact-2.md", "fact-3.md"]
    state = StateFile(memory).get("chat-1")
    assert state.cursor is not None
    assert state.covered_at is not None


def test_the_throttle_counts_across_processes(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    events: list[Event] = []
    config = ExtractConfig(every_n_turns=2, mode="standalone")

    for turns in (1, 2):
        backend = InProcessBackend(memory, saver(memory), config, sink=events.append)
        backend.on_turn_end(TurnContext(messages=provider_turns(turns), session_id="s"))
        backend.drain_sync()
        backend.close()

    assert names(events) == ["extract.throttled", "extract.run"]
    assert [e.fields["message_count"] for e in events if e.name == "extract.run"] == [4]


STAMP = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def dated_turns(count: int, at: datetime.datetime) -> list[Message]:
    """A conversation whose messages carry the times the host wrote them (stable ids)."""
    out: list[Message] = []
    for k in range(1, count + 1):
        when = at + datetime.timedelta(seconds=10 * k)
        out.append(Message.user(f"remember fact-{k}", uuid=f"u{k}", timestamp=when))
        out.append(Message.assistant(f"ok {k}", uuid=f"a{k}", timestamp=when))
    return out


def test_a_memory_an_earlier_process_saved_is_not_the_hosts_own_write(tmp_path: Path) -> None:
    # The earlier process's run stamps its memory with the conversation's id. The new
    # turn was written before that memory was (the host typed on while memory ran): only
    # knowing when the earlier process last covered the conversation tells memdir's own
    # write from one another agent made for this turn.
    memory = tmp_path / "memory"
    events: list[Event] = []
    begun = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)

    for turns in (1, 2):
        model = saver(memory)
        backend = InProcessBackend(memory, model, sink=events.append)
        backend.on_turn_end(
            TurnContext(
                messages=dated_turns(turns, begun),
                params=params(model, tmp_path),
                session_id="chat-1",
                cwd=str(tmp_path),
            )
        )
        backend.drain_sync()
        backend.close()
        assert "chat-1" in (memory / f"fact-{turns}.md").read_text()  # stamped

    assert names(events) == ["extract.run", "extract.run"]


def test_a_memory_another_agent_stamped_since_is_still_a_direct_write(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    events: list[Event] = []
    begun = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    model = saver(memory)
    backend = InProcessBackend(memory, model, sink=events.append)
    backend.on_turn_end(TurnContext(messages=dated_turns(1, begun), session_id="chat-1"))
    backend.drain_sync()
    backend.close()
    # Another agent of the same conversation saves after that run (say Claude Code's own).
    other = MEMORY_FILE.format(name="x").replace(
        "type: user\n", "type: user\nmetadata:\n  originSessionId: chat-1\n"
    )
    (memory / "theirs.md").write_text(other)

    later = InProcessBackend(memory, model, sink=events.append)
    later.on_turn_end(TurnContext(messages=dated_turns(2, begun), session_id="chat-1"))
    later.drain_sync()
    later.close()

    assert names(events) == ["extract.run", "extract.skipped_direct_write"]


# --- bounded ------------------------------------------------------------------------------------


def test_idle_conversations_are_let_go_and_reloaded_where_they_stood(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    events: list[Event] = []
    model = saver(memory)
    config = ExtractConfig(every_n_turns=2, mode="standalone", skip_index=True)
    backend = InProcessBackend(memory, model, config, sink=events.append, max_conversations=8)
    most = 0

    async def main() -> None:
        nonlocal most
        first = provider_turns(2)
        for k in (1, 2):
            backend.on_turn_end(TurnContext(messages=first[: 2 * k], session_id="c0"))
            await backend.drain()
        for n in range(1, 1000):
            backend.on_turn_end(TurnContext(messages=provider_turns(1), session_id=f"c{n}"))
            await backend.drain()
            most = max(most, backend.held_conversations)
        assert backend.extractor("c0") is None  # let go long ago
        # Reloaded: c0 resumes after its run (turns 3 and 4 are new, its count is 0 again)
        # and c5 with one throttled turn behind it (its second turn runs).
        for k in (3, 4):
            backend.on_turn_end(TurnContext(messages=provider_turns(k), session_id="c0"))
            await backend.drain()
        backend.on_turn_end(TurnContext(messages=provider_turns(2), session_id="c5"))
        await backend.drain()

    asyncio.run(main())
    assert most <= 8
    assert backend.held_conversations <= 8
    runs = [e.fields["message_count"] for e in events if e.name == "extract.run"]
    assert runs == [4, 4, 4]  # c0's turns 1-2, c0's turns 3-4, c5's turns 1-2
    saved = json.loads((memory / ".memdir" / "state.json").read_text())["sessions"]
    assert len(saved) == 1000


def test_a_conversation_with_a_run_in_flight_is_kept(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    gate = asyncio.Event()

    async def answer(request: ModelRequest) -> str:
        await gate.wait()
        return "Nothing to save."

    backend = InProcessBackend(
        memory, FunctionModel(answer), ExtractConfig(mode="standalone"), max_conversations=1
    )

    async def main() -> None:
        backend.on_turn_end(TurnContext(messages=provider_turns(1), session_id="busy"))
        backend.on_turn_end(TurnContext(messages=provider_turns(1), session_id="other"))
        assert backend.extractor("busy") is not None
        gate.set()
        await backend.drain()

    asyncio.run(main())


def test_on_turn_end_never_raises_when_the_model_cannot_be_picked(tmp_path: Path) -> None:
    events: list[Event] = []

    def pick(turn: TurnContext) -> Model:
        raise RuntimeError("no model configured")

    backend = InProcessBackend(tmp_path / "m", pick, sink=events.append)
    backend.on_turn_end(TurnContext(messages=provider_turns(1)))
    assert [e.name for e in events] == ["extract.error"]


def test_a_sync_hosts_conversations_share_one_thread(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    released: list[str] = []

    class Closing(FunctionModel):
        async def aclose(self) -> None:
            released.append(self.name)

    def pick(turn: TurnContext) -> Model:
        return Closing(lambda request: "Nothing to save.", name=f"function:{turn.session_id}")

    backend = InProcessBackend(memory, pick, ExtractConfig(mode="standalone"), max_conversations=4)
    for n in range(10):
        backend.on_turn_end(TurnContext(messages=provider_turns(1), session_id=f"c{n}"))
    backend.drain_sync()
    threads = [t for t in threading.enumerate() if t.name == "memdir-extractor"]
    assert len(threads) == 1
    backend.close()
    assert not threads[0].is_alive()
    # Every conversation's own model let go of its connections on that thread: the ones
    # let go on the way, and the four still held at the close.
    assert sorted(released) == sorted(f"function:c{n}" for n in range(10))


def test_messages_that_are_no_messages_still_raise_and_leave_nothing_held(
    tmp_path: Path,
) -> None:
    backend = InProcessBackend(tmp_path / "memory", saver(tmp_path / "memory"), max_conversations=1)
    no_message: Any = object()
    with pytest.raises(TypeError):
        backend.on_turn_end(TurnContext(messages=[no_message], session_id="bad"))
    backend.on_turn_end(
        TurnContext(messages=provider_turns(1), session_id="good", is_subagent=True)
    )
    assert backend.extractor("good") is None  # a subagent's turn makes nothing
    backend.on_turn_end(TurnContext(messages=provider_turns(1), session_id="other"))
    backend.drain_sync()
    backend.on_turn_end(TurnContext(messages=provider_turns(1), session_id="last"))
    backend.drain_sync()
    # The failed report held "bad" for no longer than the call: it was let go in turn.
    assert backend.extractor("bad") is None
    assert backend.held_conversations == 1
    backend.close()
