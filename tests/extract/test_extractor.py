"""MemoryExtractor: one test per rule of the state machine (DESIGN §4 items 1 to 8)."""

from __future__ import annotations

import asyncio
import datetime
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memdir.errors import ModelError
from memdir.extract import ExtractConfig, MemoryExtractor, MemorySaved, TurnContext
from memdir.fork import CacheSafeParams
from memdir.messages import Message, ToolUseBlock
from memdir.models import ModelRequest
from memdir.telemetry import Event
from memdir.testing import FunctionModel
from memdir.tools import builtin_tools
from tests.memory_files import same_memory

MEMORY_FILE = "---\nname: {name}\ndescription: about {name}\ntype: user\n---\n\nbody\n"


class Host:
    """A host agent's conversation, growing turn by turn."""

    def __init__(self, memory: Path, model: FunctionModel) -> None:
        self.memory = memory
        self.messages: list[Message] = []
        self.params = CacheSafeParams(
            model=model,
            system="You are the host agent.",
            tools=[t.definition() for t in builtin_tools(memory.parent)],
        )

    def turn(self, text: str = "hello", *extra: Message, subagent: bool = False) -> TurnContext:
        n = len(self.messages)
        self.messages += [Message.user(f"{text} {n}"), *extra, Message.assistant(f"ok {n}")]
        return TurnContext(
            messages=tuple(self.messages),
            params=self.params,
            is_subagent=subagent,
            cwd=str(self.memory.parent),
        )

    def direct_write(self) -> Message:
        use = ToolUseBlock(
            id=f"w{len(self.messages)}",
            name="Write",
            input={"file_path": str(self.memory / "mine.md"), "content": "x"},
        )
        return Message(role="assistant", content=(use,))


class Recorder:
    """Events and notices, for assertions."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.notices: list[MemorySaved] = []

    def names(self) -> list[str]:
        return [e.name for e in self.events if e.name != "permission.denied"]

    def runs(self) -> list[Event]:
        return [e for e in self.events if e.name == "extract.run"]


def is_first_request(request: ModelRequest) -> bool:
    """The fork's first request ends with memdir's prompt, a later one with tool results."""
    return not request.messages[-1].is_tool_result


def writer(memory: Path, *names: str, gate: asyncio.Event | None = None) -> Callable[..., Any]:
    """A model function: first request → Write each name (memdir's tools write the index
    lines); then → done."""

    async def answer(request: ModelRequest) -> Message | str:
        if gate is not None:
            await gate.wait()
        if not is_first_request(request) or not names:
            return "Nothing more to save."
        uses = tuple(
            ToolUseBlock(
                id=f"t{i}",
                name="Write",
                input={"file_path": str(memory / n), "content": MEMORY_FILE.format(name=n)},
            )
            for i, n in enumerate(names)
        )
        return Message(role="assistant", content=uses)

    return answer


def setup(
    tmp_path: Path, function: Callable[..., Any] | None = None, **config: Any
) -> tuple[Host, MemoryExtractor, Recorder, FunctionModel]:
    memory = tmp_path / "memory"
    model = FunctionModel(function or writer(memory))
    recorder = Recorder()
    extractor = MemoryExtractor(memory, model, ExtractConfig(**config), sink=recorder.events.append)
    return Host(memory, model), extractor, recorder, model


def first_requests(model: FunctionModel) -> list[ModelRequest]:
    return [r for r in model.requests if is_first_request(r)]


# --- gates --------------------------------------------------------------------------------


def test_subagent_turn_does_nothing(tmp_path: Path) -> None:
    host, ex, rec, model = setup(tmp_path)

    async def main() -> None:
        ex.on_turn_end(host.turn(subagent=True))
        await ex.drain()

    asyncio.run(main())
    assert rec.events == []
    assert model.requests == []
    assert ex.cursor is None


def test_disabled_does_nothing(tmp_path: Path) -> None:
    host, ex, rec, model = setup(tmp_path, enabled=False)

    async def main() -> None:
        ex.on_turn_end(host.turn())
        await ex.drain()

    asyncio.run(main())
    assert rec.events == []
    assert model.requests == []


# --- order of checks, stash, direct writes, throttle ---------------------------------------


def test_order_in_progress_is_checked_before_direct_writes(tmp_path: Path) -> None:
    gate = asyncio.Event()
    host, ex, rec, model = setup(tmp_path, writer(tmp_path / "memory", gate=gate))

    async def main() -> None:
        ex.on_turn_end(host.turn())
        await asyncio.sleep(0)  # let the first run start and block on the model
        ex.on_turn_end(host.turn("again", host.direct_write()))  # stashed, not judged yet
        await asyncio.sleep(0)
        assert rec.names() == ["extract.coalesced"]
        gate.set()
        await ex.drain()

    asyncio.run(main())
    assert rec.names() == ["extract.coalesced", "extract.run", "extract.skipped_direct_write"]
    assert ex.cursor == host.messages[-1].uuid


def test_direct_write_skips_the_fork_and_leaves_the_throttle_alone(tmp_path: Path) -> None:
    host, ex, rec, model = setup(tmp_path, every_n_turns=2)

    async def main() -> None:
        ex.on_turn_end(host.turn("a", host.direct_write()))
        await ex.drain()
        assert rec.names() == ["extract.skipped_direct_write"]
        assert ex.cursor == host.messages[-1].uuid
        assert model.requests == []
        ex.on_turn_end(host.turn("b"))  # first counted turn: throttled
        await ex.drain()
        ex.on_turn_end(host.turn("c"))  # second: runs
        await ex.drain()

    asyncio.run(main())
    assert rec.names() == ["extract.skipped_direct_write", "extract.throttled", "extract.run"]
    assert rec.events[0].fields == {"message_count": 3, "source": "tool_call"}
    assert rec.runs()[0].fields["message_count"] == 4  # only what came after the skip


STAMPED = (
    '---\nname: prefers-polars\ndescription: "Uses polars"\nmetadata:\n  node_type: memory\n'
    "  type: feedback\n  originSessionId: {session}\n  modified: 2026-12-03T10:00:00.000Z\n"
    "---\n\nUse polars, never pandas.\n"
)


def session_turn(host: Host, session: str, text: str) -> TurnContext:
    n = len(host.messages)
    now = datetime.datetime.now(datetime.UTC)
    host.messages += [
        Message.user(f"{text} {n}", timestamp=now - datetime.timedelta(seconds=5)),
        Message.assistant(f"ok {n}", timestamp=now - datetime.timedelta(seconds=4)),
    ]
    return TurnContext(
        messages=tuple(host.messages),
        params=host.params,
        cwd=str(host.memory.parent),
        session_id=session,
    )


def test_a_memory_another_agent_stamped_with_this_session_counts_as_a_direct_write(
    tmp_path: Path,
) -> None:
    # Claude Code's own extractor writes memories with no trace in the transcript, but
    # stamps them with the session: memdir must not save the same memory again.
    host, ex, rec, model = setup(tmp_path)

    async def main() -> None:
        host.memory.mkdir(parents=True)
        turn = session_turn(host, "sess-1", "I always use polars")
        (host.memory / "prefers-polars.md").write_text(STAMPED.format(session="sess-1"))
        ex.on_turn_end(turn)
        await ex.drain()
        assert rec.names() == ["extract.skipped_direct_write"]
        assert rec.events[0].fields == {"message_count": 2, "source": "origin_session"}
        assert ex.cursor == host.messages[-1].uuid
        assert model.requests == []
        # The next turn changes nothing stamped: it runs.
        ex.on_turn_end(session_turn(host, "sess-1", "and what else"))
        await ex.drain()

    asyncio.run(main())
    assert rec.names() == ["extract.skipped_direct_write", "extract.run"]


def test_a_memory_of_another_session_or_from_before_is_no_direct_write(tmp_path: Path) -> None:
    host, ex, rec, model = setup(tmp_path)

    async def main() -> None:
        host.memory.mkdir(parents=True)
        older = host.memory / "older.md"
        older.write_text(STAMPED.format(session="sess-1"))
        os.utime(older, (time.time() - 3600, time.time() - 3600))
        turn = session_turn(host, "sess-1", "hello")
        (host.memory / "other.md").write_text(STAMPED.format(session="sess-2"))
        ex.on_turn_end(turn)
        await ex.drain()

    asyncio.run(main())
    assert rec.names() == ["extract.run"]


def test_stash_keeps_only_the_latest_turn(tmp_path: Path) -> None:
    gate = asyncio.Event()
    host, ex, rec, model = setup(tmp_path, writer(tmp_path / "memory", gate=gate))

    async def main() -> None:
        ex.on_turn_end(host.turn("one"))
        await asyncio.sleep(0)
        for word in ("two", "three", "four"):
            ex.on_turn_end(host.turn(word))
            await asyncio.sleep(0)
        gate.set()
        await ex.drain()

    asyncio.run(main())
    assert rec.names().count("extract.coalesced") == 3
    assert len(rec.runs()) == 2  # the first run and one trailing run
    _, trailing = first_requests(model)
    assert len(trailing.messages) == len(host.messages) + 1  # turn four's snapshot + prompt
    assert rec.runs()[1].fields["message_count"] == 6  # turns two to four
    assert ex.cursor == host.messages[-1].uuid


def test_every_n_turns_runs_on_the_nth_with_all_messages(tmp_path: Path) -> None:
    host, ex, rec, model = setup(tmp_path, every_n_turns=3)

    async def main() -> None:
        for word in ("a", "b"):
            ex.on_turn_end(host.turn(word))
            await ex.drain()
            assert ex.cursor is None  # a throttled turn leaves the cursor
        ex.on_turn_end(host.turn("c"))
        await ex.drain()

    asyncio.run(main())
    assert rec.names() == ["extract.throttled", "extract.throttled", "extract.run"]
    assert [e.fields for e in rec.events[:2]] == [
        {"turns_since_last": 1, "every_n_turns": 3},
        {"turns_since_last": 2, "every_n_turns": 3},
    ]
    assert rec.runs()[0].fields["message_count"] == 6
    assert len(first_requests(model)[0].messages) == 7  # all three turns, then the prompt
    assert ex.cursor == host.messages[-1].uuid


def test_every_n_turns_can_be_a_callable_read_each_turn(tmp_path: Path) -> None:
    setting = {"n": 5}
    host, ex, rec, model = setup(tmp_path, every_n_turns=lambda: setting["n"])

    async def main() -> None:
        ex.on_turn_end(host.turn())
        await ex.drain()
        setting["n"] = 2
        ex.on_turn_end(host.turn())
        await ex.drain()

    asyncio.run(main())
    assert rec.names() == ["extract.throttled", "extract.run"]


def test_trailing_run_skips_the_throttle_and_sees_only_new_messages(tmp_path: Path) -> None:
    gate = asyncio.Event()
    host, ex, rec, model = setup(tmp_path, writer(tmp_path / "memory", gate=gate), every_n_turns=2)

    async def main() -> None:
        ex.on_turn_end(host.turn("a"))  # throttled (1 of 2)
        await ex.drain()
        ex.on_turn_end(host.turn("b"))  # runs, blocked on the model
        await asyncio.sleep(0)
        ex.on_turn_end(host.turn("c"))  # stashed: as a normal turn it would be throttled
        await asyncio.sleep(0)
        gate.set()
        await ex.drain()

    asyncio.run(main())
    assert rec.names() == ["extract.throttled", "extract.coalesced", "extract.run", "extract.run"]
    assert [r.fields["message_count"] for r in rec.runs()] == [4, 2]
    assert ex.cursor == host.messages[-1].uuid


# --- cursor -----------------------------------------------------------------------------------


def test_failing_fork_keeps_the_cursor_and_the_next_turn_covers_it(tmp_path: Path) -> None:
    calls = {"n": 0}
    ok = writer(tmp_path / "memory", "a.md")

    async def flaky(request: ModelRequest) -> Message | str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ModelError("HTTP 529: overloaded")
        answer: Message | str = await ok(request)
        return answer

    host, ex, rec, model = setup(tmp_path, flaky)

    async def main() -> None:
        ex.on_turn_end(host.turn("first"))
        await ex.drain()
        assert ex.cursor is None
        ex.on_turn_end(host.turn("second"))
        await ex.drain()

    asyncio.run(main())
    assert rec.names() == ["extract.error", "extract.run"]
    assert rec.events[0].fields["error_type"] == "ModelError"
    assert rec.runs()[0].fields["message_count"] == 4  # both turns
    assert ex.cursor == host.messages[-1].uuid


def test_compacted_away_cursor_counts_everything(tmp_path: Path) -> None:
    host, ex, rec, model = setup(tmp_path)

    async def main() -> None:
        ex.on_turn_end(host.turn("before"))
        await ex.drain()
        # Compaction replaces the history: the cursor's message is gone.
        host.messages = [Message.user("Summary of earlier work", is_compact_summary=True)]
        ex.on_turn_end(host.turn("after"))
        await ex.drain()

    asyncio.run(main())
    assert [r.fields["message_count"] for r in rec.runs()] == [2, 3]


def test_compacted_away_cursor_also_scans_everything_for_direct_writes(tmp_path: Path) -> None:
    host, ex, rec, model = setup(tmp_path)

    async def main() -> None:
        ex.on_turn_end(host.turn("before"))
        await ex.drain()
        host.messages = [host.direct_write()]
        ex.on_turn_end(host.turn("after"))
        await ex.drain()

    asyncio.run(main())
    assert rec.names() == ["extract.run", "extract.skipped_direct_write"]


# --- drain ------------------------------------------------------------------------------------


def test_drain_returns_at_once_with_nothing_in_flight(tmp_path: Path) -> None:
    host, ex, rec, model = setup(tmp_path)

    async def main() -> None:
        assert ex.in_flight == 0
        await ex.drain(timeout=3600)  # would hang the test if it waited for nothing

    asyncio.run(main())
    ex.drain_sync(timeout=3600)


def test_drain_returns_at_its_timeout_with_a_hung_model(tmp_path: Path) -> None:
    never = asyncio.Event()
    host, ex, rec, model = setup(tmp_path, writer(tmp_path / "memory", gate=never))

    async def main() -> None:
        ex.on_turn_end(host.turn())
        await ex.drain(timeout=0.05)
        assert ex.in_flight == 1  # still running; drain did not wait for it
        never.set()
        await ex.drain()
        assert ex.in_flight == 0

    asyncio.run(main())


# --- what is counted and told -----------------------------------------------------------------


def test_memory_md_is_not_a_memory(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    # Where memdir does not keep the index, the agent may write one itself.
    host, ex, rec, model = setup(
        tmp_path, writer(memory, "user_role.md", "MEMORY.md"), skip_index=True
    )

    async def main() -> None:
        ex.on_turn_end(host.turn(), notify=rec.notices.append)
        await ex.drain()

    asyncio.run(main())
    run = rec.runs()[0].fields
    assert run["files_written"] == 2
    assert run["memories_saved"] == 1
    assert [n.paths for n in rec.notices] == [(memory / "user_role.md",)]
    assert str(rec.notices[0]).startswith("Saved 1 memory")


def test_team_memories_are_counted_apart(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    host, ex, rec, model = setup(
        tmp_path, writer(memory, "user_role.md", "team/conventions.md"), team=True
    )

    async def main() -> None:
        ex.on_turn_end(host.turn(), notify=rec.notices.append)
        await ex.drain()

    asyncio.run(main())
    assert rec.runs()[0].fields["memories_saved"] == 2
    assert rec.runs()[0].fields["team_memories_saved"] == 1
    assert rec.notices[0].team_count == 1
    assert "1 team memory" in str(rec.notices[0])
    prompt = first_requests(model)[0].messages[-1].text
    assert str(memory / "team") in prompt


def test_no_notice_when_nothing_was_saved(tmp_path: Path) -> None:
    host, ex, rec, model = setup(tmp_path, writer(tmp_path / "memory"))

    async def main() -> None:
        ex.on_turn_end(host.turn(), notify=rec.notices.append)
        await ex.drain()

    asyncio.run(main())
    assert rec.runs()[0].fields["memories_saved"] == 0
    assert rec.notices == []


def test_denied_write_is_not_counted(tmp_path: Path) -> None:
    host, ex, rec, model = setup(tmp_path, writer(tmp_path / "elsewhere", "x.md"))

    async def main() -> None:
        ex.on_turn_end(host.turn(), notify=rec.notices.append)
        await ex.drain()

    asyncio.run(main())
    assert rec.runs()[0].fields["files_written"] == 0
    assert "permission.denied" in [e.name for e in rec.events]
    assert rec.notices == []


def test_extract_run_has_every_field(tmp_path: Path) -> None:
    host, ex, rec, model = setup(tmp_path, writer(tmp_path / "memory", "a.md"))

    async def main() -> None:
        ex.on_turn_end(host.turn())
        await ex.drain()

    asyncio.run(main())
    fields = rec.runs()[0].fields
    for key in (
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
        "message_count",
        "turn_count",
        "files_written",
        "memories_saved",
        "team_memories_saved",
        "duration_ms",
        "mode",
        "plan_reason",
        "estimated_cost_fork",
        "estimated_cost_standalone",
        "cost",
        "hit_max_turns",
    ):
        assert key in fields
    # The write succeeded, so the run ended there: no request to say it is done.
    assert fields["turn_count"] == 1
    assert fields["cache_shared"] is True
    assert fields["mode"] == "fork"


# --- isolation and hosts ----------------------------------------------------------------------


def test_two_extractors_share_no_state(tmp_path: Path) -> None:
    gate = asyncio.Event()
    host_a, ex_a, rec_a, _ = setup(tmp_path / "a", writer(tmp_path / "a" / "memory", gate=gate))
    host_b, ex_b, rec_b, _ = setup(tmp_path / "b", every_n_turns=2)

    async def main() -> None:
        ex_a.on_turn_end(host_a.turn())
        await asyncio.sleep(0)
        ex_b.on_turn_end(host_b.turn())  # a's run in progress must not stash b's turn
        await ex_b.drain()
        assert rec_b.names() == ["extract.throttled"]
        gate.set()
        await ex_a.drain()

    asyncio.run(main())
    assert rec_a.names() == ["extract.run"]
    assert ex_a.cursor == host_a.messages[-1].uuid
    assert ex_b.cursor is None


def test_sync_host_uses_a_background_thread(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    host, ex, rec, model = setup(tmp_path, writer(memory, "a.md"))
    try:
        ex.on_turn_end(host.turn(), notify=rec.notices.append)
        ex.drain_sync(timeout=60)
    finally:
        ex.close()
    assert rec.names() == ["extract.run"]
    assert (memory / "a.md").exists()
    assert len(rec.notices) == 1


def test_on_turn_end_never_raises(tmp_path: Path) -> None:
    host, ex, rec, model = setup(tmp_path)

    class Broken:
        def __len__(self) -> int:
            raise RuntimeError("boom")

    async def main() -> None:
        ex.on_turn_end(TurnContext(messages=Broken()))  # type: ignore[arg-type]
        await ex.drain()

    asyncio.run(main())
    assert rec.names() == ["extract.error"]


def test_burst_covers_every_message_exactly_once(tmp_path: Path) -> None:
    turns = 120

    async def slow(request: ModelRequest) -> str:
        for _ in range(20):  # yield many times, so that turns keep arriving meanwhile
            await asyncio.sleep(0)
        return "Nothing to save."

    host, ex, rec, model = setup(tmp_path, slow)

    async def main() -> None:
        for i in range(turns):
            ex.on_turn_end(host.turn(f"t{i}"))
            await asyncio.sleep(0)
        await ex.drain()

    asyncio.run(main())
    runs = rec.runs()
    # Each run's snapshot ends where the next one's new messages start: no gap, no overlap.
    ends = [len(r.messages) - 1 for r in first_requests(model)]  # without memdir's prompt
    assert ends == sorted(set(ends))
    assert ends[-1] == len(host.messages)
    counts = [r.fields["message_count"] for r in runs]
    assert counts == [b - a for a, b in zip([0, *ends[:-1]], ends, strict=True)]
    assert sum(counts) == len(host.messages)
    assert len(runs) < turns / 4
    assert "extract.error" not in rec.names()


def test_a_memory_tool_write_by_the_host_counts_as_a_direct_write(tmp_path: Path) -> None:
    host, ex, rec, model = setup(tmp_path)
    create = ToolUseBlock(
        id="m1",
        name="memory",
        input={"command": "create", "path": "/memories/x.md", "file_text": "x"},
    )
    view = ToolUseBlock(id="m2", name="memory", input={"command": "view", "path": "/memories"})

    async def main() -> None:
        ex.on_turn_end(host.turn("a", Message(role="assistant", content=(view,))))
        await ex.drain()
        ex.on_turn_end(host.turn("b", Message(role="assistant", content=(create,))))
        await ex.drain()

    asyncio.run(main())
    assert rec.names() == ["extract.run", "extract.skipped_direct_write"]


def test_the_fork_can_save_through_the_memory_tool(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    text = "---\nname: Role\ndescription: the user's role\ntype: user\n---\n\nData scientist.\n"

    async def answer(request: ModelRequest) -> Message | str:
        if not is_first_request(request):
            return "Saved."
        use = ToolUseBlock(
            id="m1",
            name="memory",
            input={"command": "create", "path": "/memories/user_role.md", "file_text": text},
        )
        return Message(role="assistant", content=(use,))

    host, ex, rec, model = setup(tmp_path, answer)
    host.params = CacheSafeParams(
        model=model, system="host", tools=[{"type": "memory_20250818", "name": "memory"}]
    )

    async def main() -> None:
        ex.on_turn_end(host.turn(), notify=rec.notices.append)
        await ex.drain()

    asyncio.run(main())
    assert same_memory((memory / "user_role.md").read_text(), text)
    assert rec.runs()[0].fields["memories_saved"] == 1
    assert rec.notices[0].paths == (memory / "user_role.md",)


def test_malformed_tool_input_in_the_host_conversation_does_not_block_extraction(
    tmp_path: Path,
) -> None:
    host, ex, rec, model = setup(tmp_path)
    odd = ToolUseBlock(id="m1", name="memory", input={"command": ["create"], "path": {}})
    odd_write = ToolUseBlock(id="w1", name="Write", input={"file_path": ["x"], "content": 1})

    async def main() -> None:
        ex.on_turn_end(host.turn("a", Message(role="assistant", content=(odd, odd_write))))
        await ex.drain()

    asyncio.run(main())
    assert rec.names() == ["extract.run"]
