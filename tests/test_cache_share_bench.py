"""bench/cache_share.py's host keeps inside its context window by compacting, as Claude
Code does: when it compacts, what it keeps, and a short run that compacts end to end; and
the planner's estimates the bench found off by more than 10% (marked as known failures)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from memdir.cost import bill, model_family
from memdir.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock

BENCH = Path(__file__).parent.parent / "bench"


def load_bench() -> ModuleType:
    sys.path.insert(0, str(BENCH))  # the bench imports its sibling ``_scripted``
    try:
        spec = importlib.util.spec_from_file_location("cache_share_bench", BENCH / "cache_share.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while being built
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


bench = load_bench()


def turn(n: int, result_chars: int) -> list[Message]:
    """One host turn: the ask, a tool call, its result, the answer."""
    use = ToolUseBlock(id=f"toolu_{n}", name="Read", input={"file_path": f"/f{n}.py"})
    return [
        Message.user(f"ask {n}"),
        Message(role="assistant", content=(use,)),
        Message(
            role="user", content=(ToolResultBlock(tool_use_id=use.id, content="x" * result_chars),)
        ),
        Message.assistant(f"answer {n}"),
    ]


def test_threshold_is_claude_codes_window_less_summary_reserve_and_buffer() -> None:
    # 200,000 - min(64,000, 20,000) - 13,000: Claude Code's auto-compact point.
    assert bench.compact_threshold(200_000, 64_000) == 167_000
    # A model whose answers are shorter reserves only what it can write.
    assert bench.compact_threshold(200_000, 8_192) == 178_808
    assert bench.compact_threshold(200_000, None) == 167_000


def test_compacts_when_last_context_plus_added_messages_reach_the_threshold() -> None:
    added = [Message.user("y" * 4_000)]  # about 1,000 tokens
    assert not bench.needs_compaction(10_000, added, 12_000)
    assert bench.needs_compaction(11_500, added, 12_000)
    assert bench.needs_compaction(12_000, [], 12_000)


def test_kept_stretch_is_whole_recent_turns_within_budget() -> None:
    conversation = turn(0, 40_000) + turn(1, 4_000) + turn(2, 4_000)
    # Turns 1 and 2 fit in 3,000 tokens, turn 0 does not.
    assert bench.kept_start(conversation, 3_000) == 4
    # A budget under the latest turn still keeps that turn whole.
    assert bench.kept_start(conversation, 10) == 8
    # Mid-turn (the last message is a tool result): the turn under way is kept from its ask,
    # never from its tool results.
    mid = conversation[:-1]
    assert bench.kept_start(mid, 10) == 8
    assert bench.is_turn_start(mid[bench.kept_start(mid, 10)])


def test_compacted_conversation_is_a_flagged_summary_then_the_same_messages() -> None:
    conversation = turn(0, 40_000) + turn(1, 400)
    out = bench.compacted(conversation, "what happened", 3_000)
    assert out[0].is_compact_summary
    assert out[0].role == "user"
    assert "what happened" in out[0].text
    # The kept messages are the host's own objects, ids and all: the extractor's cursor
    # (the id of the last message it saw) is still found.
    assert all(a is b for a, b in zip(out[1:], conversation[4:], strict=True))


def test_summarising_request_keeps_the_hosts_prefix_and_is_told_apart() -> None:
    conversation = turn(0, 100)
    request = bench.compact_request(conversation)
    assert request[:-1] == conversation
    assert request[-1].role == "user"
    # After a tool result, the prompt joins that user message rather than following it.
    mid = conversation[:3]
    merged = bench.compact_request(mid)
    assert len(merged) == 3
    assert merged[:2] == mid[:2]
    assert isinstance(merged[2].content[-1], TextBlock)
    wire = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": bench.COMPACT_PROMPT}]}]
    }
    assert bench.is_compact_request(wire)
    assert not bench.is_compact_request({"messages": [{"role": "user", "content": "ask 0"}]})


def test_short_window_run_compacts_and_is_never_refused(tmp_path: Path) -> None:
    # A 50,000-token window (threshold 17,000) makes the host compact within six turns;
    # the fake refuses any prompt past the window, so finishing means it never passed it.
    result = asyncio.run(bench.measure(6, tmp_path, ["sonnet-4-5"], context=50_000))
    variant = result["sonnet-4-5"]
    assert variant["compactions"] >= 1
    assert variant["host_peak_prompt_tokens"] <= variant["context_window"]
    assert variant["host_compaction_cost"] > 0
    for check in variant["checks"].values():
        assert check["errors"] == 0
        assert check["messages_covered"] >= check["messages"]
        assert check["telemetry_matches_server"]


def run_estimates(tmp_path: Path, variant: str, mode: str, turns: int) -> list[tuple[float, float]]:
    """(the planner's estimate, the bill) of each run of a short session of the bench."""
    prices = model_family(bench.VARIANTS[variant][0], "anthropic").prices
    result = asyncio.run(bench.session(variant, mode, turns, tmp_path))
    return [
        (turn["estimated"], sum(bill(u, prices) for u in turn["usages"]))
        for turn in result["run_turns"]
    ]


def test_fork_estimate_on_a_model_that_drops_thinking_is_within_five_percent(
    tmp_path: Path,
) -> None:
    # The turn's thinking the fork's prompt drops is neither sent nor billed: counted in,
    # the estimate was 11% over the bill.
    for estimated, billed in run_estimates(tmp_path, "sonnet-4-5-thinking", "fork", 2):
        assert abs(estimated - billed) <= 0.05 * billed


@pytest.mark.filterwarnings("ignore:The model 'claude-opus-4-5' is deprecated:DeprecationWarning")
def test_standalone_estimate_under_the_cache_minimum_is_within_ten_percent(
    tmp_path: Path,
) -> None:
    estimated, billed = run_estimates(tmp_path, "opus-4-5-thinking", "standalone", 2)[1]
    assert abs(estimated - billed) <= 0.1 * billed
