"""Recall falls back to past sessions when no memory is relevant, and only when asked."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from memdir.messages import Message
from memdir.models import ModelResponse
from memdir.recall import SurfaceBudget, SurfacedMemory, select_relevant_memories
from memdir.testing import ScriptedModel
from tests.search._sessions import entry, write_session

QUERY = "which region hosts the canary deploy"
FACT = "Remember: the canary deploy always goes to eu-west-3 first."


def select(memory: Path, **kwargs: Any) -> list[SurfacedMemory]:
    return asyncio.run(select_relevant_memories(QUERY, memory, **kwargs))


def saved(memory: Path, name: str, body: str) -> None:
    (memory / f"{name}.md").write_text(
        f"---\nname: {name}\ndescription: {body}\ntype: project\n---\n{body}\n", encoding="utf-8"
    )


def test_no_memory_holds_it_so_recall_surfaces_the_passage(project: Path) -> None:
    memory = project / "memory"
    saved(memory, "lunch", "Lunch is at noon in the atrium.")
    write_session(project, "past", [entry("u7", "user", FACT), entry("a7", "assistant", "Ok.")])

    assert select(memory) == []  # off by default
    budget = SurfaceBudget()
    surfaced = select(memory, search_fallback=True, budget=budget)

    assert [m.filename for m in surfaced] == ["session:past#u7"]
    passage = surfaced[0]
    assert passage.content == FACT
    assert passage.path == project / "past.jsonl"
    assert "session past" in passage.header
    assert "2026-03-01 10:00 UTC" in passage.header
    assert passage.text.startswith("<system-reminder>\nNo saved memory matched")
    assert budget.surfaced == {"session:past#u7"}
    # Surfaced once per session, like a memory.
    assert select(memory, search_fallback=True, budget=budget) == []


def test_an_empty_memory_directory_falls_back_too(project: Path) -> None:
    write_session(project, "past", [entry("u1", "user", FACT)])
    surfaced = select(project / "memory", search_fallback=True)
    assert [m.filename for m in surfaced] == ["session:past#u1"]


def test_a_relevant_memory_wins_over_the_transcripts(project: Path) -> None:
    memory = project / "memory"
    saved(memory, "canary", "The canary deploy region is eu-west-3.")
    write_session(project, "past", [entry("u1", "user", FACT)])
    surfaced = select(memory, search_fallback=True)
    assert [m.filename for m in surfaced] == ["canary.md"]


def test_the_asking_session_is_not_searched(project: Path) -> None:
    write_session(project, "now", [entry("q", "user", QUERY)])
    write_session(project, "past", [entry("u1", "user", FACT)])
    surfaced = select(project / "memory", search_fallback=True, current_session="now")
    assert [m.filename for m in surfaced] == ["session:past#u1"]


def test_a_model_that_picks_nothing_falls_back(project: Path) -> None:
    memory = project / "memory"
    saved(memory, "lunch", "Lunch is at noon in the atrium.")
    write_session(project, "past", [entry("u1", "user", FACT)])
    model = ScriptedModel([ModelResponse(message=Message.assistant('{"selected_memories": []}'))])
    surfaced = select(memory, model=model, search_fallback=True)
    assert [m.filename for m in surfaced] == ["session:past#u1"]
