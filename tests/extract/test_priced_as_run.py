"""A run's estimate priced with what the run then did (``estimated_cost_as_run``).

Before a run the planner cannot know whether the model saves, or reads a memory before
updating it; with the run's own requests and output taken as they came, what is left
of the gap to the bill is the planner's view of the request and the cache. These runs
go over HTTP to the fake Anthropic server, which bills by the documented cache rules.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.extract._own_cache import shared_opening_tokens
from memdir.extract._run import _growth_per_request
from memdir.extract._standalone import wire_tokens
from memdir.fork import CacheSafeParams, ForkResult
from memdir.messages import Message, ToolResultBlock, ToolUseBlock
from memdir.models import AnthropicModel, ModelRequest, RetryPolicy, Usage
from memdir.telemetry import CollectingSink
from memdir.testing import FakeAnthropicServer, FakeClock
from tests.extract.test_planner import WRITE_TOOLS, served_runs

SYSTEM = "You are a coding agent. " * 300

# A memory long enough that reading it back is most of what a second request adds.
LONG_MEMORY = (
    "---\ndescription: how the ingest job batches and retries its writes\n---\n\n"
    + "The ingest job batches writes by partition and flushes every second.\n" * 90
)


def _sonnet(base_url: str) -> AnthropicModel:
    return AnthropicModel(
        "claude-sonnet-5-5", api_key="k", base_url=base_url, retry=RetryPolicy(max_retries=0)
    )


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    last = body["messages"][-1]["content"]
    return last if isinstance(last, list) else [{"type": "text", "text": last}]


def test_an_update_that_reads_its_memory_first_is_priced_with_what_the_read_added(
    tmp_path: Path,
) -> None:
    """The second run reads the memory the first wrote, then edits it: two requests, the
    second carrying the file's text as a tool result. Counted by its text alone (tool
    calls and results left out), what a later request adds was near nothing, and such a
    run was priced far under its bill."""
    calls = iter(
        [
            ToolUseBlock(
                id="toolu_w",
                name="Write",
                input={"file_path": "project_ingest.md", "content": LONG_MEMORY},
            ),
            ToolUseBlock(id="toolu_r", name="Read", input={"file_path": "project_ingest.md"}),
            ToolUseBlock(
                id="toolu_e",
                name="Edit",
                input={
                    "file_path": "project_ingest.md",
                    "old_string": "how the ingest job batches",
                    "new_string": "how the ingest job batches (per partition)",
                },
            ),
        ]
    )

    def reply(body: dict[str, Any]) -> Message | str:
        blocks = _blocks(body)
        memory_run = any(b.get("type") == "tool_result" for b in blocks) or str(
            blocks[0].get("text", "")
        ).startswith("# Memory update")
        if not memory_run:
            return "Batch by partition."
        call = next(calls, None)
        return Message(role="assistant", content=(call,)) if call else "Nothing to save."

    runs, _ = served_runs(tmp_path, system=SYSTEM, tools=WRITE_TOOLS, turns=3, reply=reply)
    update = runs[1]
    assert update["turn_count"] == 2
    assert update["memories_saved"] == 1
    billed = update["billed_cost"]
    assert abs(update["estimated_cost_as_run"] - billed) <= 0.1 * billed
    # The read's result is most of what the second request added: well over what the
    # file's text costs written once.
    assert update["cache_creation_input_tokens"] > len(LONG_MEMORY) // 4
    for run in runs:
        assert abs(run["estimated_cost_as_run"] - run["billed_cost"]) <= 0.1 * run["billed_cost"]


@pytest.mark.parametrize("pause", [20.0, 100.0, 250.0])
def test_a_window_started_afresh_still_reads_the_list_of_memory_files_before_it(
    tmp_path: Path, pause: float
) -> None:
    """When the window outgrows its budget while memdir's cache lives, it starts afresh;
    the opening message before it (the list of memory files) is unchanged and has a
    breakpoint of its own in every request, so the request reads it. Priced as if only
    the instructions were cached, such a run was estimated as writing the list again;
    and with the breakpoint given up to the run before's end, the list's entry lived
    only five minutes from the first run (pauses of 100 s and more outlived it)."""
    memory = tmp_path / "memory"
    memory.mkdir()
    index = []
    for n in range(15):
        name = f"reference_topic_{n}.md"
        description = f"where the team keeps the runbooks and dashboards for subsystem {n}"
        (memory / name).write_text(
            f"---\nname: topic {n}\ndescription: {description}\ntype: reference\n---\n\n"
            f"Runbooks for subsystem {n} live in the ops wiki.\n",
            encoding="utf-8",
        )
        index.append(f"- [topic {n}]({name}) — {description}")
    (memory / "MEMORY.md").write_text("\n".join(index) + "\n", encoding="utf-8")

    runs, _ = served_runs(tmp_path, system=SYSTEM, tools=WRITE_TOOLS, turns=10, pauses=[pause])
    afresh = [r for r in runs if r["estimate_note"] == "memdir's instructions and list cached"]
    assert afresh, [r["estimate_note"] for r in runs]
    for run in runs[1:]:
        assert run["mode"] == "standalone"
        billed = run["billed_cost"]
        assert abs(run["estimated_cost_as_run"] - billed) <= 0.1 * billed, run["estimate_note"]
        assert abs(run["estimated_cost_if_nothing_saved"] - billed) <= 0.1 * billed


def test_openai_reads_a_list_grown_at_its_end_up_to_where_it_changed() -> None:
    """OpenAI caches any prefix (in steps of 128 tokens, which the pricing applies): a
    list with one memory added at its end is read up to the addition. Anthropic reads
    only at breakpoints, so a changed opening message is read not at all."""
    before = "The memory files:\n" + "".join(f"- topic_{n}.md: runbooks\n" for n in range(60))
    after = before + "- topic_60.md: runbooks\n"
    assert shared_opening_tokens(before, after, "openai") == len(before) // 4
    assert shared_opening_tokens(before, after, "anthropic") == 0
    assert shared_opening_tokens(before, before, "anthropic") == len(before) // 4 + 1 + 8


def _call(n: int) -> ToolUseBlock:
    return ToolUseBlock(id=f"toolu_{n}", name="Read", input={"file_path": f"memory_{n}.md"})


def _result(n: int, text: str) -> Message:
    block = ToolResultBlock(tool_use_id=f"toolu_{n}", content=text)
    return Message(role="user", content=(block,))


@pytest.mark.parametrize("trailing_result", [False, True])
def test_what_a_later_request_adds_is_the_answer_before_it_and_its_results(
    trailing_result: bool,
) -> None:
    """Request k carries everything before the k-th answer: what each later request adds
    is the answer before it, tool calls and all, and that answer's results; not the
    prompt, and not the results of the last answer (a run ended on its writes, or at its
    last turn, never sends them)."""
    prompt = Message.user("# Memory update " * 50)
    first = Message(role="assistant", content=(_call(1),))
    read = _result(1, "a memory's text\n" * 200)
    second = Message(role="assistant", content=(_call(2),))
    searched = _result(2, "another memory\n" * 40)
    last = Message(role="assistant", content=(_call(3),))
    messages = [prompt, first, read, second, searched, last]
    if trailing_result:
        messages.append(_result(3, "written " * 500))
    result = ForkResult(
        messages=tuple(messages),
        usage=Usage(),
        turn_count=3,
        written_paths=(),
        hit_max_turns=trailing_result,
    )
    added = sum(wire_tokens(m) for m in (first, read, second, searched))
    assert _growth_per_request(result) == added / 2
    assert _growth_per_request(result) > len("a memory's text\n" * 200) // 8


def test_a_run_of_one_request_adds_nothing() -> None:
    prompt = Message.user("# Memory update")
    result = ForkResult(
        messages=(prompt, Message.assistant("Nothing to save.")),
        usage=Usage(),
        turn_count=1,
        written_paths=(),
    )
    assert _growth_per_request(result) == 0.0


def test_turns_of_many_tool_calls_are_priced_as_the_cache_serves_them(tmp_path: Path) -> None:
    """A coding agent's turn holds many tool calls and results: the look back from the
    last new message cannot reach the run before's entry, so that run's end takes the
    opening message's breakpoint. Each run is still priced as the server bills it: the
    window read where it was cached, and the list of memory files counted as cached only
    while an entry of its own lives."""
    memory = tmp_path / "memory"
    memory.mkdir()
    for n in range(15):
        (memory / f"reference_topic_{n}.md").write_text(
            f"---\nname: topic {n}\ndescription: runbooks and dashboards of subsystem {n}\n"
            "type: reference\n---\n\nIn the ops wiki.\n",
            encoding="utf-8",
        )
    clock = FakeClock()
    with FakeAnthropicServer(handler=lambda body: "Nothing to save.", clock=clock) as server:
        model = _sonnet(server.base_url)
        sink = CollectingSink()
        extractor = MemoryExtractor(memory, model, ExtractConfig(), sink=sink, clock=clock)

        async def main() -> None:
            messages: list[Message] = []
            for turn in range(8):
                clock.advance(100.0)
                messages.append(Message.user(f"Turn {turn}: find why the ingest job stalls. " * 3))
                for n in range(9):
                    call = ToolUseBlock(
                        id=f"toolu_{turn}_{n}", name="Grep", input={"pattern": f"stall{n}"}
                    )
                    messages.append(Message(role="assistant", content=(call,)))
                    found = ToolResultBlock(
                        tool_use_id=call.id,
                        content=f"src/ingest.py:{turn}{n}: stall handling " * 8,
                    )
                    messages.append(Message(role="user", content=(found,)))
                messages.append(
                    Message.assistant(f"Turn {turn}: the flush blocks on a lock. " * 10)
                )
                extractor.on_turn_end(TurnContext(messages=tuple(messages), cwd=str(tmp_path)))
                await extractor.drain()
            await model.aclose()

        asyncio.run(main())
        server.assert_no_errors()
    runs = [dict(e.fields) for e in sink.named("extract.run")]
    assert len(runs) == 8
    for run in runs:
        billed = run["billed_cost"]
        assert abs(run["estimated_cost_as_run"] - billed) <= 0.1 * billed, run["estimate_note"]


def test_an_entry_written_for_an_hour_is_priced_as_read_after_shorter_ones_expire(
    tmp_path: Path,
) -> None:
    """With pauses of five minutes and more between short ones, some runs write memdir's
    prefix for an hour and the runs soon after them for five minutes. The instructions'
    and the list's entries, read or written again, keep the hour: a run more than five
    minutes after the last still reads them. Priced from the last request's five minutes
    alone, such runs were taken for cold at over twice their bill."""
    pauses = [20.0, 400.0, *[20.0] * 10, 400.0]
    runs, _ = served_runs(tmp_path, system=SYSTEM, tools=WRITE_TOOLS, turns=13, pauses=pauses)
    notes = [r["estimate_note"] for r in runs]
    # An hour's write after the first long pause; five minutes once short ones prevail.
    assert notes[1].endswith("written for an hour")
    assert not notes[-2].endswith("written for an hour")
    for run in runs:
        billed = run["billed_cost"]
        assert abs(run["estimated_cost_as_run"] - billed) <= 0.1 * billed, run["estimate_note"]


@pytest.mark.parametrize("forked", [2, 17, 20])
def test_a_run_after_a_fork_reads_the_window_the_run_before_the_fork_left(
    tmp_path: Path, forked: int
) -> None:
    """A fork leaves memdir's own cache as it was: the next standalone run continues the
    window of the one before the fork, whose entry now lies behind the messages the fork
    covered. Counted from the new messages alone, seventeen forked messages and four new
    ones left that entry out of the look back's reach, unmarked, and the run wrote the
    window again while priced as reading it."""
    clock = FakeClock()
    with FakeAnthropicServer(handler=lambda body: "Nothing to save.", clock=clock) as server:
        model = _sonnet(server.base_url)
        params = CacheSafeParams(model=model, system=SYSTEM, tools=WRITE_TOOLS)
        sink = CollectingSink()
        config = ExtractConfig(mode="fork")  # the fork where the host's request is given
        extractor = MemoryExtractor(tmp_path / "memory", model, config, sink=sink, clock=clock)

        def say(messages: list[Message], count: int, tag: str) -> None:
            for n in range(count):
                text = f"{tag} {n}: the ingest job misses its window at peak load. " * 2
                messages.append(Message.user(text) if n % 2 == 0 else Message.assistant(text))

        async def main() -> None:
            messages: list[Message] = []
            say(messages, 30, "before")
            extractor.on_turn_end(TurnContext(messages=tuple(messages), cwd=str(tmp_path)))
            await extractor.drain()
            clock.advance(20.0)
            say(messages, forked, "forked")
            request = ModelRequest(system=SYSTEM, tools=WRITE_TOOLS, messages=tuple(messages))
            await model.request(request)
            turn = TurnContext(
                messages=tuple(messages), params=params, last_request_at=clock(), cwd=str(tmp_path)
            )
            extractor.on_turn_end(turn)
            await extractor.drain()
            clock.advance(20.0)
            say(messages, 4, "after")
            extractor.on_turn_end(TurnContext(messages=tuple(messages), cwd=str(tmp_path)))
            await extractor.drain()
            await model.aclose()

        asyncio.run(main())
        server.assert_no_errors()
    first, fork, after = (dict(e.fields) for e in sink.named("extract.run"))
    assert (first["mode"], fork["mode"], after["mode"]) == ("standalone", "fork", "standalone")
    assert after["estimate_note"] == "memdir's window cached"
    # The window the first run wrote is read, not written again.
    assert after["cache_read_input_tokens"] >= first["cache_creation_input_tokens"] - 100
    billed = after["billed_cost"]
    assert abs(after["estimated_cost_as_run"] - billed) <= 0.1 * billed
