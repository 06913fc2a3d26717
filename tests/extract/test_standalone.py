"""Standalone runs: memdir's own request, whose cost follows what is new, not how long the
conversation has grown."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.extract._standalone import (
    STANDALONE_SYSTEM_PROMPT,
    RenderedConversation,
    render,
)
from memdir.messages import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from memdir.models import AnthropicModel, ModelRequest, RetryPolicy
from memdir.telemetry import CollectingSink
from memdir.testing import FakeAnthropicServer, FakeClock, FunctionModel, ScriptedModel


def convo(n: int, size: int = 10, start: int = 0) -> list[Message]:
    out: list[Message] = []
    for i in range(start, start + n):
        out.append(Message.user(f"question {i} " + "x" * size))
        out.append(Message.assistant(f"answer {i} " + "y" * size))
    return out


async def rendered(messages: list[Message], limit: int = 100) -> RenderedConversation:
    conversation = RenderedConversation(limit)
    await conversation.update(messages)
    return conversation


def test_foreign_tool_calls_become_text_and_long_results_are_cut() -> None:
    call = ToolUseBlock(id="t1", name="mcp__logs__tail", input={"lines": 500})
    thinking = ThinkingBlock(thinking="private reasoning", signature="sig")
    assistant = Message(role="assistant", content=(thinking, TextBlock(text="Checking."), call))
    result = Message(role="user", content=(ToolResultBlock(tool_use_id="t1", content="L" * 5000),))
    one = render(assistant, 100)
    two = render(result, 100)
    assert one is not None
    assert two is not None
    assert one.text == 'Checking.\n\n[called tool mcp__logs__tail with {"lines": 500}]'
    assert "private reasoning" not in one.text
    assert two.text.startswith("[tool result]\n" + "L" * 100)
    assert "4900 more characters cut" in two.text
    assert len(two.text) < 200
    assert render(Message(role="assistant", content=(thinking,)), 100) is None


def test_the_window_is_bounded_and_its_start_moves_in_steps() -> None:
    messages = convo(200, size=400)  # 400 messages of about 100 tokens each

    async def main() -> list[tuple[int, int]]:
        conversation = await rendered(messages)
        out = []
        for cursor in range(100, 400, 2):  # one turn after another
            window = conversation.window(
                cursor, cursor + 2, window_tokens=3_000, chunk_tokens=10**6
            )
            assert window.window_tokens <= 3_000
            assert window.window_tokens > 1_500 - 110  # never less than half, one message aside
            out.append((window.start, window.window_tokens))
        return out

    starts = [start for start, _ in asyncio.run(main())]
    moves = sum(1 for a, b in itertools.pairwise(starts) if a != b)
    # 300 messages of 100 tokens pass the cursor; the start jumps once per half window
    # (1,500 tokens, 15 messages), so about 20 times in 150 turns, never backwards.
    assert starts == sorted(starts)
    assert 15 <= moves <= 25


def test_a_long_stretch_is_split_and_each_message_is_new_once() -> None:
    messages = convo(100, size=400)

    async def main() -> list[tuple[int, int]]:
        conversation = await rendered(messages)
        spans = []
        cursor = 0
        while cursor < len(messages):
            window = conversation.window(
                cursor, len(messages), window_tokens=500, chunk_tokens=2_000
            )
            assert window.new_tokens <= 2_000
            if window.end < len(messages):  # full, but for the last: one more would not fit
                assert (
                    window.new_tokens + conversation.tokens_between(window.end, window.end + 1)
                    > 2_000
                )
            spans.append((window.cursor, window.end))
            cursor = window.end
        return spans

    spans = asyncio.run(main())
    covered = [i for start, end in spans for i in range(start, end)]
    assert covered == list(range(len(messages)))
    assert 11 <= len(spans) <= 12  # 200 messages of about 111 tokens (text and block), 18 a run


def test_one_message_larger_than_the_budget_still_gets_a_run() -> None:
    async def main() -> tuple[int, int]:
        conversation = await rendered([Message.user("z" * 40_000), *convo(1)], limit=100)
        window = conversation.window(0, 3, window_tokens=500, chunk_tokens=1_000)
        return window.cursor, window.end

    assert asyncio.run(main()) == (0, 1)


def test_an_unchanged_conversation_is_not_rendered_again() -> None:
    messages = convo(50)

    async def main() -> None:
        conversation = await rendered(messages)
        first = conversation.window(90, 100, window_tokens=10**6, chunk_tokens=10**6).messages
        await conversation.update([*messages, *convo(1, start=50)])
        second = conversation.window(90, 100, window_tokens=10**6, chunk_tokens=10**6).messages
        assert all(a is b for a, b in zip(first, second, strict=True))
        # A compaction that replaces the start realigns from the first changed message.
        await conversation.update([Message.user("summary"), *messages[10:]])
        assert len(conversation) == 91
        assert conversation.window(0, 91, window_tokens=0, chunk_tokens=10**6).messages[0].text == (
            "summary"
        )

    asyncio.run(main())


def test_extractor_without_params_sends_its_own_request(tmp_path: Path) -> None:
    model = ScriptedModel(["Nothing to save."])
    sink = CollectingSink()
    ex = MemoryExtractor(tmp_path / "memory", model, ExtractConfig(), sink=sink)

    async def main() -> None:
        ex.on_turn_end(TurnContext(messages=tuple(convo(2)), cwd=str(tmp_path)))
        await ex.drain()

    asyncio.run(main())
    (request,) = model.requests
    assert isinstance(request.system, str)
    assert request.system.startswith(STANDALONE_SYSTEM_PROMPT)
    assert "## Types" in request.system  # the instructions, cached
    assert [t["name"] for t in request.tools] == ["Read", "Write", "Edit", "Grep"]
    opening, *conversation, prompt = request.messages
    assert opening.is_meta
    assert "The memory directory is empty." in prompt.text  # and no index is shown
    assert "MEMORY.md` as it is now" not in prompt.text
    assert [m.text for m in conversation] == [m.text for m in convo(2)]
    assert prompt.text.startswith("# Memory update")
    assert "the last ~4 messages" in prompt.text
    # The memory directory does not change from run to run: named in the cached system
    # prompt, not in the last message.
    assert f"The memory directory is `{tmp_path / 'memory'}`." in request.system
    # The opening message, the end of the conversation (for the next run) and the prompt.
    assert request.cache_points == (0, len(request.messages) - 2)
    (run,) = sink.named("extract.run")
    assert run.fields["cache_shared"] is False
    assert run.fields["mode"] == "standalone"
    assert run.fields["message_count"] == 4
    assert run.fields["estimated_cost_fork"] is None


@pytest.mark.parametrize(
    ("turns", "points"),
    [
        # Two new messages: the look back from the last reaches the first run's end.
        (3, (0, 6)),
        # Twenty: too far back for it, so the first run's end gets a breakpoint.
        (12, (0, 4, 24)),
    ],
)
def test_the_next_run_reads_where_the_last_one_ended(
    tmp_path: Path, turns: int, points: tuple[int, ...]
) -> None:
    model = ScriptedModel(["Nothing to save.", "Nothing to save."])
    ex = MemoryExtractor(tmp_path / "memory", model, ExtractConfig(window_tokens=20_000))
    messages = convo(turns)

    async def main() -> None:
        ex.on_turn_end(TurnContext(messages=tuple(messages[:4]), cwd=str(tmp_path)))
        await ex.drain()
        ex.on_turn_end(TurnContext(messages=tuple(messages), cwd=str(tmp_path)))
        await ex.drain()

    asyncio.run(main())
    first, second = model.requests
    # The second request: the opening message, 4 old messages (the window), the new, the
    # prompt.
    assert [m.text for m in second.messages[1:-1]] == [m.text for m in messages]
    assert second.cache_points == points  # the opening, (the first run's end,) this one's
    assert [m.text for m in first.messages[:5]] == [m.text for m in second.messages[:5]]


def test_a_long_turn_is_covered_by_several_runs_each_message_once(tmp_path: Path) -> None:
    seen: list[tuple[str, ...]] = []

    async def answer(request: ModelRequest) -> str:
        count = int(request.messages[-1].text.split("the last ~")[1].split(" ")[0])
        seen.append(tuple(m.text for m in request.messages[-1 - count : -1]))
        return "Nothing to save."

    messages = convo(60, size=400)
    sink = CollectingSink()
    config = ExtractConfig(context_budget_tokens=2_500, window_tokens=500)
    ex = MemoryExtractor(tmp_path / "memory", FunctionModel(answer), config, sink=sink)

    async def main() -> None:
        ex.on_turn_end(TurnContext(messages=tuple(messages), cwd=str(tmp_path)))
        await ex.drain()

    asyncio.run(main())
    runs = sink.named("extract.run")
    assert len(runs) >= 4
    assert sum(int(r.fields["message_count"]) for r in runs) == len(messages)
    assert [t for texts in seen for t in texts] == [m.text for m in messages]
    assert ex.cursor == messages[-1].uuid


def test_standalone_cost_stays_flat_as_the_conversation_grows(tmp_path: Path) -> None:
    """The prompt of a run late in a long conversation is about as big as an early one."""
    sizes: list[int] = []

    async def answer(request: ModelRequest) -> str:
        sizes.append(sum(len(m.text) for m in request.messages))
        return "Nothing to save."

    ex = MemoryExtractor(tmp_path / "memory", FunctionModel(answer))
    messages: list[Message] = []

    async def main() -> None:
        for turn in range(300):
            messages.extend(convo(1, size=800, start=turn))
            ex.on_turn_end(TurnContext(messages=tuple(messages), cwd=str(tmp_path)))
            await ex.drain()

    asyncio.run(main())
    assert len(sizes) == 300
    # The window grows from a quarter of its size to the whole, then restarts short: it
    # never holds more than 3,000 tokens, whatever the conversation's length.
    assert max(sizes[20:]) <= 1.2 * max(sizes[:20])
    assert min(sizes[20:]) < 0.5 * max(sizes[20:])
    assert max(sizes) < 4 * (3_000 + 500)


@pytest.mark.parametrize("pause", [0.0, 120.0, 400.0])
def test_successive_standalone_runs_read_what_the_last_one_cached(
    tmp_path: Path, pause: float
) -> None:
    messages = convo(60, size=300)
    clock = FakeClock()
    with FakeAnthropicServer(handler=lambda body: "Nothing to save.", clock=clock) as server:
        model = AnthropicModel(
            "claude-test", api_key="k", base_url=server.base_url, retry=RetryPolicy(max_retries=0)
        )
        config = ExtractConfig(window_tokens=3_000)  # the geometry these figures assume
        ex = MemoryExtractor(tmp_path / "memory", model, config, clock=clock)
        ex.restore(messages[79].uuid)  # the first 40 turns were handled before

        async def main() -> None:
            for end in range(82, 121, 2):  # then a run after each of 20 turns
                clock.advance(pause)
                ex.on_turn_end(TurnContext(messages=tuple(messages[:end]), cwd=str(tmp_path)))
                await ex.drain()
            await model.aclose()

        asyncio.run(main())
        requests = server.requests[1:]  # after the first, each run has one before it
    kept = [
        r
        for r, before in zip(requests, server.requests, strict=False)
        if r.body["messages"][1] == before.body["messages"][1]  # the window's start held
    ]
    assert len(kept) >= len(requests) // 2
    turn_tokens = 2 * (len(messages[-1].text) + 40) // 4
    for request in kept:
        assert request.usage is not None
        if pause < 300:
            # Everything up to the last run's end is read; the new turn and the short
            # request are written.
            assert request.usage["cache_read_input_tokens"] > 2_000
            assert request.usage["cache_creation_input_tokens"] < turn_tokens + 200
        else:  # every run whose window held reads the hour-long entry, 400 s later
            assert request.usage["cache_read_input_tokens"] > 2_000
    if pause >= 300:
        # Past five minutes the first run's five-minute entry is gone; the pause, under an
        # hour, makes the planner write the next prefix for an hour instead (restarting
        # the window short, since none of it could be read).
        second = requests[0].usage
        assert second is not None
        assert second["cache_read_input_tokens"] == 0
        assert second["cache_creation"]["ephemeral_1h_input_tokens"] > 1_000


def window_tokens_sent(body: dict[str, Any]) -> int:
    """Characters / 4 of the conversation a standalone request sends before its new
    messages (the last turn, two messages, then the final request)."""
    return sum(len(json.dumps(m)) for m in body["messages"][1:-3]) // 4


def test_after_the_cache_expired_the_window_restarts_short_and_then_grows(
    tmp_path: Path,
) -> None:
    """Past memdir's cache lifetime none of the window is cached: a run then sends only
    the last quarter of it, and the runs after it keep that start, read from the cache."""
    messages = convo(60, size=300)
    clock = FakeClock()
    pauses = [60.0] * 6 + [400.0] + [60.0] * 6
    with FakeAnthropicServer(handler=lambda body: "Nothing to save.", clock=clock) as server:
        model = AnthropicModel(
            "claude-test", api_key="k", base_url=server.base_url, retry=RetryPolicy(max_retries=0)
        )
        config = ExtractConfig(window_tokens=3_000)  # a restart keeps 750 tokens
        ex = MemoryExtractor(tmp_path / "memory", model, config, clock=clock)
        ex.restore(messages[79].uuid)

        async def main() -> None:
            for end, pause in zip(range(82, 200, 2), pauses, strict=False):
                clock.advance(pause)
                ex.on_turn_end(TurnContext(messages=tuple(messages[:end]), cwd=str(tmp_path)))
                await ex.drain()
            await model.aclose()

        asyncio.run(main())
        requests = list(server.requests)
    sizes = [window_tokens_sent(r.body) for r in requests]
    read, written = [], []
    for request in requests:
        assert request.usage is not None
        read.append(request.usage["cache_read_input_tokens"])
        written.append(request.usage["cache_creation_input_tokens"])
    # The first run (nothing cached yet) and the run after the long pause start short.
    assert sizes[0] <= 750 + 200
    assert sizes[6] <= 750 + 200
    assert sizes[5] > 1_500  # before the pause it had grown
    # After the restart the start holds: each later run reads the one before it.
    for index in range(7, 13):
        assert requests[index].body["messages"][1] == requests[6].body["messages"][1]
        assert read[index] > written[6] - 200


def test_the_window_is_rendered_off_the_hosts_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first window can hold 100k tokens of conversation: rendered on the host's loop it
    would stall the host, so it is rendered in a worker thread."""
    from memdir.extract import _standalone

    threads: set[int] = set()
    original = _standalone.render

    def recording(message: Message, limit: int) -> Message | None:
        threads.add(threading.get_ident())
        return original(message, limit)

    monkeypatch.setattr(_standalone, "render", recording)
    model = ScriptedModel(["Nothing to save."])
    ex = MemoryExtractor(tmp_path / "memory", model, ExtractConfig())

    async def main() -> int:
        ex.on_turn_end(TurnContext(messages=tuple(convo(30)), cwd=str(tmp_path)))
        await ex.drain()
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert threads  # the window was rendered
    assert loop_thread not in threads


def test_a_long_first_window_is_rendered_in_bounded_slices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first run over a long conversation renders its window a bounded slice per call,
    so no one call holds a thread (and through the GIL the host's loop) for the whole of
    it; the window is the same as one call makes."""
    from memdir.extract._standalone import RENDER_SLICE

    messages = convo(1_000)  # 2,000 messages, all new: the first window takes them all
    slices: list[int] = []
    inner = RenderedConversation._render_slice

    def recording(
        self: RenderedConversation,
        kept: dict[int, Message | None],
        start: int,
        stop: int,
    ) -> list[Message]:
        slices.append(stop - start)
        return inner(self, kept, start, stop)

    monkeypatch.setattr(RenderedConversation, "_render_slice", recording)
    model = ScriptedModel(["Nothing to save."])
    ex = MemoryExtractor(tmp_path / "memory", model, ExtractConfig(mode="standalone"))

    async def main() -> None:
        ex.on_turn_end(TurnContext(messages=tuple(messages), cwd=str(tmp_path)))
        await ex.drain()

    asyncio.run(main())
    assert slices
    assert max(slices) <= RENDER_SLICE
    assert sum(slices) == len(messages)
    assert len(slices) == -(-len(messages) // RENDER_SLICE)
    request = model.requests[0]
    assert sum(1 for m in request.messages if m.text.startswith("question")) == 1_000


def test_a_first_run_covers_only_the_most_recent_part_of_a_long_backlog(tmp_path: Path) -> None:
    """A first run over a long conversation bills at most ``backlog_tokens`` of it (100k
    by default), not the whole history: the older messages are skipped, the cursor moves
    past them, and the skip is reported."""
    seen: list[str] = []

    async def answer(request: ModelRequest) -> str:
        count = int(request.messages[-1].text.split("the last ~")[1].split(" ")[0])
        seen.extend(m.text for m in request.messages[-1 - count : -1])
        return "Nothing to save."

    messages = convo(300, size=2_000)  # 600 messages of ~500 tokens: ~300k tokens
    sink = CollectingSink()
    ex = MemoryExtractor(tmp_path / "memory", FunctionModel(answer), sink=sink)

    async def main() -> None:
        ex.on_turn_end(TurnContext(messages=tuple(messages), cwd=str(tmp_path)))
        await ex.drain()

    asyncio.run(main())
    assert ExtractConfig().backlog_tokens == 100_000
    (skipped,) = sink.named("extract.backlog_skipped")
    skip = int(skipped.fields["message_count"])
    assert 380 <= skip <= 420  # two thirds of ~300k tokens
    assert int(skipped.fields["tokens"]) > 190_000
    runs = sink.named("extract.run")
    assert sum(int(r.fields["message_count"]) for r in runs) == len(messages) - skip
    assert seen == [m.text for m in messages[skip:]]  # the most recent part, each once
    assert sum(len(t) for t in seen) // 4 <= 100_000
    assert ex.cursor == messages[-1].uuid


def test_backlog_none_covers_the_whole_backlog_in_bounded_runs(tmp_path: Path) -> None:
    """``backlog_tokens`` bounds what a turn covers; None covers everything, a run's
    budget at a time."""
    messages = convo(60, size=400)  # 120 messages of ~100 tokens
    small = ExtractConfig(context_budget_tokens=2_500, window_tokens=500, backlog_tokens=5_000)
    whole = dataclasses.replace(small, backlog_tokens=None)
    for config, covered in ((small, range(40, 56)), (whole, range(len(messages), 121))):
        sink = CollectingSink()
        model = FunctionModel(lambda request: "Nothing to save.")
        ex = MemoryExtractor(tmp_path / str(config.backlog_tokens), model, config, sink=sink)

        async def main(ex: MemoryExtractor = ex) -> None:
            ex.on_turn_end(TurnContext(messages=tuple(messages), cwd=str(tmp_path)))
            await ex.drain()

        asyncio.run(main())
        runs = sink.named("extract.run")
        assert sum(int(r.fields["message_count"]) for r in runs) in covered
        assert ex.cursor == messages[-1].uuid
        assert bool(sink.named("extract.backlog_skipped")) == (config is small)
