"""The pure pieces of bench/cost_vs_mem0.py's conditions, on small made-up inputs: the
schedules drawn from Claude Code sessions, mem0's saved turns, the seeded store, and where
a memory agent's request spends its tokens. No bench run here."""

from __future__ import annotations

import json
import lzma
import sys
from pathlib import Path
from typing import Any

import pytest

from memdir.cost import model_family
from memdir.models import Usage

BENCH = Path(__file__).parent.parent / "bench"
sys.path.insert(0, str(BENCH))  # the benches import their shared modules by name
try:
    import _conditions as conditions
    import cost_vs_mem0
finally:
    sys.path.remove(str(BENCH))

# Claude Code session files.


def line(kind: str, at: str, content: Any, **extra: Any) -> str:
    return json.dumps(
        {"type": kind, "timestamp": at, "message": {"role": kind, "content": content}, **extra}
    )


SESSION = [
    line("user", "2026-02-11T10:00:00.000Z", "Implement the importer"),
    line("assistant", "2026-02-11T10:00:05.000Z", [{"type": "text", "text": "On it."}]),
    line(
        "user",
        "2026-02-11T10:01:00.000Z",
        [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
        toolUseResult={"stdout": "ok"},
    ),
    line("user", "2026-02-11T10:02:00.000Z", "<command-name>/clear</command-name>"),
    line("user", "2026-02-11T10:03:00.000Z", [{"type": "text", "text": "[Request interrupted"}]),
    line("user", "2026-02-11T10:04:00.000Z", "summary", isCompactSummary=True),
    line("user", "2026-02-11T10:05:00.000Z", "Caveat: meta", isMeta=True),
    line("user", "2026-02-11T10:06:00.000Z", "from a subagent", isSidechain=True),
    "not json at all",
    line("user", "[trimmed for fixture]", "no time"),
    line("user", "2026-02-11T10:10:00.000Z", "<task-notification>done</task-notification>"),
    line("user", "2026-02-11T10:30:00.000Z", [{"type": "text", "text": "did you push?"}]),
    line("user", "2026-02-13T10:30:00.000Z", "two days later: a new conversation"),
]


def test_turns_start_at_prompts_and_task_notifications_only() -> None:
    times = conditions.prompt_times(SESSION)
    assert [t - times[0] for t in times] == [0.0, 600.0, 1800.0, 1800.0 + 2 * 86_400]


def test_gaps_come_from_main_sessions_of_the_sources_asked_for(tmp_path: Path) -> None:
    real = tmp_path / "someone__real" / "sessions"
    (real / "abc" / "subagents").mkdir(parents=True)
    (real / "abc.jsonl").write_text("\n".join(SESSION) + "\n")
    (real / "abc" / "subagents" / "agent-1.jsonl").write_text("\n".join(SESSION) + "\n")
    (real / "agent-old.jsonl").write_text("\n".join(SESSION) + "\n")
    mock = tmp_path / "someone__mock"
    mock.mkdir()
    (mock / "m.jsonl").write_text(
        line("user", "2026-01-01T00:00:00Z", "a") + "\n" + line("user", "2026-01-01T00:00:02Z", "b")
    )
    # Over a day apart is another conversation; a subagent's turns are the main thread's.
    assert conditions.transcript_gaps(tmp_path, ("someone__real",)) == [600.0, 1200.0]
    assert sorted(conditions.transcript_gaps(tmp_path)) == [2.0, 600.0, 1200.0]


def test_drawn_pauses_are_seeded_draws_from_the_gaps() -> None:
    gaps = [60.0, 400.0, 2000.0]
    pauses = conditions.drawn_pauses(gaps, 50, seed=7)
    assert len(pauses) == 50
    assert pauses[0] == 0.0
    assert set(pauses[1:]) <= set(gaps)
    assert len(set(pauses[1:])) > 1
    assert conditions.drawn_pauses(gaps, 50, seed=7) == pauses
    assert conditions.drawn_pauses(gaps, 50, seed=8) != pauses
    assert conditions.warm_pauses(3) == [0.0, 60.0, 60.0]
    with pytest.raises(ValueError, match="no gaps"):
        conditions.drawn_pauses([], 5, seed=1)


# mem0's saves.


def test_mem0_saved_turns_are_chat_replies_with_memories(tmp_path: Path) -> None:
    def row(turn: int, kind: str, reply: str = "") -> dict[str, Any]:
        return {"mark": {"turn": turn}, "kind": kind, "response_content": reply}

    memory = json.dumps({"memory": [{"id": "0", "text": "User is Maya"}]})
    rows = [
        row(1, "embeddings"),
        row(1, "chat", memory),
        row(2, "chat", json.dumps({"memory": []})),
        row(3, "embeddings"),
        row(4, "chat", "not json"),
        row(5, "chat", json.dumps({"facts": ["x"]})),
        row(6, "chat", memory),
        row(6, "chat", memory),
    ]
    path = tmp_path / "requests.jsonl.xz"
    with lzma.open(path, "wt") as out:
        out.write("".join(json.dumps(r) + "\n" for r in rows))
    assert conditions.mem0_saved_turns(path) == [1, 6]


def test_a_question_turn_becomes_a_project_note_of_its_own() -> None:
    first = conditions.question_note(2, "How should I structure FastAPI routers for admin?")
    assert first == conditions.question_note(2, "How should I structure FastAPI routers for admin?")
    filename, kind, title, description = first
    assert filename == "project_structure_fastapi_routers_admin_02.md"
    assert kind == "project"
    assert title == "Structure fastapi routers admin"
    assert description.startswith("decided: How should I structure")
    long = conditions.question_note(3, "word " * 100)
    assert len(long[3]) <= 100
    assert long[0] != conditions.question_note(4, "word " * 100)[0]


# The seeded store.


def test_seeded_store_has_a_file_and_a_pointer_line_per_memory(tmp_path: Path) -> None:
    saves = conditions.seed_store(tmp_path, 150)
    files = sorted(p.name for p in tmp_path.glob("*.md") if p.name != "MEMORY.md")
    assert len(files) == 150
    assert files == sorted(s.filename for s in saves)
    index = (tmp_path / "MEMORY.md").read_text().splitlines()
    assert len(index) == 150
    assert all(line.startswith("- [") and "](" in line for line in index)
    text = (tmp_path / saves[0].filename).read_text()
    assert text.startswith(f"---\nname: {saves[0].title}\ndescription: ")
    # About 75 tokens a memory: its pointer line and its line of the memory agent's list.
    shown = [
        len(f"- [{s.title}]({s.filename}) — {s.description}")
        + len(f"- [{s.type}] {s.filename} (2026-01-01T00:00:00.000Z): {s.description}")
        for s in saves
    ]
    assert 65 <= sum(shown) / len(shown) / 4 <= 85
    # Nothing from the conversation the bench holds.
    assert not any("routewise" in s.description.lower() for s in saves)
    # The same store every time, to the file times.
    again = tmp_path / "again"
    conditions.seed_store(again, 150)
    for name in files[:5]:
        assert (again / name).read_text() == (tmp_path / name).read_text()
        assert (again / name).stat().st_mtime == (tmp_path / name).stat().st_mtime
    with pytest.raises(ValueError, match="at most 150"):
        conditions.seed_store(tmp_path / "more", 151)
    assert conditions.seed_store(tmp_path / "none", 0) == []
    assert not (tmp_path / "none" / "MEMORY.md").exists()


# Where the tokens go.

HOST = "You are the host."
PROMPT = (
    "# Memory update\n\nYou are now the memory agent for this conversation. Look at the last "
    "~2 messages above and decide.\n\nThe memory directory is `/m`.\n\n## State\n\nnone"
)
TOOLS = [{"type": "function", "function": {"name": "Write", "parameters": {}}}]


def message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": text}


def chars(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def test_standalone_request_sections_in_prompt_order() -> None:
    system = message("system", "You are the memory agent.")
    opening = message("user", "The conversation follows.")
    window = [message("user", "q1"), message("assistant", "a1")]
    new = [message("user", "q2"), message("assistant", "a2")]
    prompt = message("user", PROMPT)
    own = [
        {"role": "assistant", "content": None, "tool_calls": []},
        message("tool", "1\tfile"),
    ]
    body = {"tools": TOOLS, "messages": [system, opening, *window, *new, prompt, *own]}
    sections = conditions.request_sections(
        body, host_system=HOST, conversation=frozenset({"q1", "a1", "q2", "a2"})
    )
    assert sections == [
        ("tool definitions", chars(TOOLS)),
        ("system prompt", chars(system)),
        ("opening", chars(opening)),
        ("window", sum(map(chars, window))),
        ("new messages", sum(map(chars, new))),
        ("final message", chars(prompt)),
        ("own turns", sum(map(chars, own))),
    ]
    # The fake counts the prompt as tools then messages: the sections add up to it.
    text = chars(TOOLS) + sum(chars(m) for m in body["messages"])
    assert sum(n for _, n in sections) == text


def test_state_between_the_new_messages_and_the_prompt_counts_with_the_prompt() -> None:
    system = message("system", "You are the memory agent.")
    state = message("user", "what changed in the memory directory")
    body = {
        "messages": [
            system,
            message("user", "q1"),
            message("assistant", "a1"),
            message("user", "q2"),
            message("assistant", "a2"),
            state,
            message("user", PROMPT),
        ]
    }
    sections = dict(
        conditions.request_sections(
            body, host_system=HOST, conversation=frozenset({"q1", "a1", "q2", "a2"})
        )
    )
    assert "opening" not in sections
    assert sections["window"] == chars(message("user", "q1")) + chars(message("assistant", "a1"))
    assert sections["final message"] == chars(state) + chars(message("user", PROMPT))


def test_a_window_message_cut_short_is_still_the_window() -> None:
    long = "x" * 500
    body = {
        "messages": [
            message("system", "You are the memory agent."),
            message("user", "The conversation follows."),
            message("assistant", long[:200] + " [cut]"),
            message("user", "q2"),
            message("assistant", "a2"),
            message("user", PROMPT),
        ]
    }
    sections = dict(
        conditions.request_sections(
            body, host_system=HOST, conversation=frozenset({long, "q2", "a2"})
        )
    )
    assert sections["opening"] == chars(message("user", "The conversation follows."))
    assert sections["window"] == chars(message("assistant", long[:200] + " [cut]"))


def test_a_fork_is_the_host_prefix_then_the_prompt() -> None:
    host = [message("system", HOST), message("user", "q1"), message("assistant", "a1")]
    prompt = message("user", PROMPT)
    body = {"tools": TOOLS, "messages": [*host, prompt]}
    sections = conditions.request_sections(
        body, host_system=HOST, conversation=frozenset({"q1", "a1"})
    )
    assert sections == [
        ("host prefix", chars(TOOLS) + sum(map(chars, host))),
        ("final message", chars(prompt)),
    ]


def test_cached_tokens_cover_the_sections_in_prompt_order() -> None:
    sections = [("tool definitions", 400), ("system prompt", 800), ("window", 1200)]
    assert conditions.attribute(sections, 250) == {
        "tool definitions": [100.0, 0.0],
        "system prompt": [150.0, 50.0],
        "window": [0.0, 300.0],
    }
    assert conditions.attribute(sections, 0)["tool definitions"] == [0.0, 100.0]


def test_breakdown_prices_each_part_and_splits_reasoning_from_output() -> None:
    breakdown = conditions.Breakdown(cache_read=0.1, output=8.0)
    usage = {
        "prompt_tokens": 600,
        "prompt_tokens_details": {"cached_tokens": 400},
        "completion_tokens": 70,
        "completion_tokens_details": {"reasoning_tokens": 50},
    }
    breakdown.add([("system prompt", 1600), ("window", 800)], usage)
    # system: 400 cached (40); window: 200 uncached; output 20 x 8; reasoning 50 x 8.
    assert breakdown.total() == pytest.approx(40 + 200 + 160 + 400)
    shares = breakdown.shares()
    assert shares["system prompt"] == {"total": 5.0, "cached": 5.0, "uncached": 0.0}
    assert shares["window"] == {"total": 25.0, "cached": 0.0, "uncached": 25.0}
    assert shares["visible output"] == 20.0
    assert shares["reasoning"] == 50.0
    assert shares["billed_token_equivalents"] == 800
    assert list(shares)[:2] == ["system prompt", "window"]


# The report.


def test_table_marks_ratios_over_one_half() -> None:
    results = {
        "published": {"price_models": {"a": {"ratio_to_mem0": {"memdir_auto": 0.5}}}},
        "store_150": {"price_models": {"a": {"ratio_to_mem0": {"memdir_auto": 0.73}}}},
    }
    lines = cost_vs_mem0.ratio_table(results, ["a"])
    assert lines[1].split() == ["published", "0.500"]
    assert lines[2].split() == ["store_150", "0.730*"]


def test_after_eviction_share_counts_turns_after_long_pauses() -> None:
    side = cost_vs_mem0.Side("memdir", {})
    prices = model_family("gpt-4o", "openai").prices
    usage = Usage(input_tokens=100)
    side.per_turn = {1: [usage], 2: [usage, usage], 3: [usage]}
    share = cost_vs_mem0.after_eviction(side, prices, [0.0, 301.0, 300.0])
    assert share == {"turns": 1, "share_pct": 50.0}


def run_event(billed: float, before: float, saved: int, if_saved: float, as_run: float) -> Any:
    return {
        "billed_cost": billed,
        "estimated_cost": before,
        "memories_saved": saved,
        "estimated_cost_if_saved": if_saved,
        "estimated_cost_if_nothing_saved": before * 0.8,
        "estimated_cost_as_run": as_run,
    }


def test_planner_figures_count_each_estimate_against_the_bill() -> None:
    runs = [
        # Nothing saved: the expectation before was 25% over, the outcome's estimate 0%.
        run_event(100.0, 125.0, 0, 300.0, 104.0),
        # Saved: the outcome's estimate 5% under; priced as it went, 12% over.
        run_event(200.0, 150.0, 1, 190.0, 224.0),
    ]
    figures = cost_vs_mem0.planner_figures(runs)
    assert figures["runs"] == 2
    assert figures["estimate"] == {"within_10pct": 0, "max_error_pct": 25.0}
    assert figures["as_run"] == {"within_10pct": 2, "max_error_pct": 5.0}
    assert figures["priced"] == {"within_10pct": 1, "max_error_pct": 12.0}
    assert figures["estimate_to_bill"] == round(275 / 300, 3)


def test_planner_table_sums_every_cell_and_its_hindsight() -> None:
    def cell(auto: float, best: float) -> dict[str, Any]:
        counts = {"within_10pct": 49, "max_error_pct": 11.0}
        hindsight = {
            "auto": auto,
            "hindsight": best,
            "auto_over_hindsight_pct": round(100 * (auto / best - 1), 1),
        }
        return {
            "planner_memdir_auto": {
                "runs": 50,
                "priced": counts,
                "as_run": counts,
                "estimate": counts,
                "estimate_to_bill": 0.95,
                "hindsight": hindsight,
            }
        }

    results = {
        "published": {"price_models": {"a": cell(110.0, 100.0)}},
        "store_150": {"price_models": {"a": cell(300.0, 300.0)}},
    }
    lines = cost_vs_mem0.planner_table(results, ["a"])
    assert lines[1].split()[-1] == "10.0%"
    assert lines[2].split()[-1] == "0.0%"
    assert lines[3].split() == ["all", "cells", *["98/100"] * 3, "410", "400", "2.5%"]
