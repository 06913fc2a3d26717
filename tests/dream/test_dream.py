"""autoDream: the gates, the lock, rollback, and a consolidation pass."""

from __future__ import annotations

import asyncio
import os
import re
import time
from pathlib import Path

from memdir.dream import (
    LOCK_NAME,
    AutoDream,
    DreamConfig,
    last_consolidated_at,
    record_consolidation,
    try_acquire,
)
from memdir.errors import ModelError
from memdir.extract import MemorySaved
from memdir.messages import Message, ToolUseBlock
from memdir.store import MAX_ENTRYPOINT_LINES, MemoryDir, parse_memory_file, truncate_entrypoint
from memdir.telemetry import Event
from memdir.testing import ScriptedModel

DAY = 86400.0


def sessions(folder: Path, *ids: str, mtime: float | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for sid in ids:
        path = folder / f"{sid}.jsonl"
        path.write_text("{}\n")
        if mtime is not None:
            os.utime(path, (mtime, mtime))


def dreamer(tmp_path: Path, model: ScriptedModel, events: list[Event] | None = None) -> AutoDream:
    return AutoDream(
        tmp_path / "memory",
        model,
        transcript_dir=tmp_path / "sessions",
        config=DreamConfig(),
        sink=events.append if events is not None else None,
    )


def test_time_gate_closed_after_a_recent_pass(tmp_path: Path) -> None:
    model = ScriptedModel(["Nothing to change."])
    memory = MemoryDir(tmp_path / "memory")
    record_consolidation(memory)
    sessions(tmp_path / "sessions", *[f"s{i}" for i in range(9)])
    assert not asyncio.run(dreamer(tmp_path, model).maybe_run())
    assert model.requests == []


def test_session_gate_needs_five_other_sessions(tmp_path: Path) -> None:
    model = ScriptedModel(["Nothing to change."])
    dream = dreamer(tmp_path, model)
    sessions(tmp_path / "sessions", "s1", "s2", "s3", "s4", "current", "agent-x1")
    assert not asyncio.run(dream.maybe_run(current_session="current"))
    assert model.requests == []
    sessions(tmp_path / "sessions", "s5")
    # The scan throttle holds for ten minutes after a look, whatever changed meanwhile.
    assert not asyncio.run(dream.maybe_run(current_session="current"))
    later = time.time() + 601
    assert asyncio.run(dream.maybe_run(current_session="current", now=later))
    assert len(model.requests) == 1


def test_only_sessions_since_the_last_pass_count(tmp_path: Path) -> None:
    model = ScriptedModel(["Nothing to change."])
    memory = MemoryDir(tmp_path / "memory")
    record_consolidation(memory)
    lock = memory.root / LOCK_NAME
    two_days_ago = time.time() - 2 * DAY
    os.utime(lock, (two_days_ago, two_days_ago))
    sessions(tmp_path / "sessions", "old1", "old2", "old3", mtime=two_days_ago - 60)
    sessions(tmp_path / "sessions", "n1", "n2", "n3", "n4")
    assert not asyncio.run(dreamer(tmp_path, model).maybe_run())


def test_a_live_holder_blocks_a_second_dreamer(tmp_path: Path) -> None:
    memory = MemoryDir(tmp_path / "memory")
    memory.ensure()
    lock = memory.root / LOCK_NAME
    lock.write_text(str(os.getppid()))  # alive, and not us
    assert try_acquire(memory) is None
    model = ScriptedModel([])
    assert not asyncio.run(dreamer(tmp_path, model).run())
    assert model.requests == []


def test_a_stale_lock_is_taken_over(tmp_path: Path) -> None:
    memory = MemoryDir(tmp_path / "memory")
    memory.ensure()
    lock = memory.root / LOCK_NAME
    lock.write_text(str(os.getppid()))
    old = time.time() - 2 * 3600
    os.utime(lock, (old, old))
    assert try_acquire(memory) == old
    assert lock.read_text() == str(os.getpid())


def test_a_dead_holder_does_not_block(tmp_path: Path) -> None:
    memory = MemoryDir(tmp_path / "memory")
    memory.ensure()
    (memory.root / LOCK_NAME).write_text("999999999")
    assert try_acquire(memory) is not None


def test_a_failed_pass_rolls_the_time_back(tmp_path: Path) -> None:
    memory = MemoryDir(tmp_path / "memory")
    memory.ensure()
    lock = memory.root / LOCK_NAME
    lock.write_text("")
    before = time.time() - 3 * DAY
    os.utime(lock, (before, before))
    events: list[Event] = []
    failing = ScriptedModel([ModelError("HTTP 529: overloaded")])
    assert not asyncio.run(dreamer(tmp_path, failing, events).run())
    assert abs(last_consolidated_at(memory) - before) < 1e-3
    assert [e.name for e in events] == ["dream.fired", "dream.failed"]
    # With no earlier pass, the lock file goes away again.
    lock.unlink()
    assert not asyncio.run(dreamer(tmp_path, ScriptedModel([ModelError("x")])).run())
    assert not lock.exists()


def _seed(memory: Path) -> None:
    memory.mkdir(parents=True)

    def memo(name: str, title: str, kind: str, body: str) -> None:
        (memory / name).write_text(
            f"---\nname: {title}\ndescription: {title}\ntype: {kind}\n---\n\n{body}\n"
        )

    memo("polars.md", "Use polars", "feedback", "Use polars, never pandas.")
    memo("dataframes.md", "Dataframes in polars", "feedback", "Always polars for dataframes.")
    memo("deploy_tuesday.md", "Deploy day", "project", "Deploys happen on Tuesdays.")
    memo("deploy_thursday.md", "Deploy day moved", "project", "Deploys moved to Thursdays.")
    index = [
        "- [Use polars](polars.md) — polars only",
        "- [Dataframes](dataframes.md) — polars again",
        "- [Deploy day](deploy_tuesday.md) — Tuesdays",
        "- [Deploy day moved](deploy_thursday.md) — Thursdays",
        "- [Old runbook](runbook.md) — a file that no longer exists",
    ] + [f"- filler line {i}" for i in range(260)]
    (memory / "MEMORY.md").write_text("\n".join(index) + "\n")


def test_a_pass_merges_duplicates_drops_contradictions_and_reindexes(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    _seed(memory)
    names = ["MEMORY.md", "polars.md", "dataframes.md", "deploy_tuesday.md", "deploy_thursday.md"]
    reads = Message(
        role="assistant",
        content=tuple(
            ToolUseBlock(id=f"r{i}", name="Read", input={"file_path": str(memory / n)})
            for i, n in enumerate(names)
        ),
    )
    merged = (
        "---\nname: Polars only\ndescription: use polars for dataframes, never pandas\n"
        "type: feedback\n---\n\nUse polars for all dataframes, never pandas.\n\n"
        "**Why:** the user said so twice.\n\n**How to apply:** reach for polars first.\n"
    )
    index = (
        "- [Polars only](polars.md) — polars for dataframes, never pandas\n"
        "- [Deploy day moved](deploy_thursday.md) — deploys happen on Thursdays\n"
    )

    def write(i: int, name: str, text: str) -> ToolUseBlock:
        return ToolUseBlock(
            id=f"w{i}", name="Write", input={"file_path": str(memory / name), "content": text}
        )

    writes = Message(
        role="assistant",
        content=(
            write(0, "polars.md", merged),
            write(1, "dataframes.md", ""),
            write(2, "deploy_tuesday.md", ""),
            write(3, "MEMORY.md", index),
        ),
    )
    model = ScriptedModel([reads, writes, "Merged the polars notes, kept Thursday, re-indexed."])
    events: list[Event] = []
    notices: list[MemorySaved] = []
    before = last_consolidated_at(MemoryDir(memory))
    dream = dreamer(tmp_path, model, events)
    assert asyncio.run(dream.run(notify=notices.append))
    model.assert_all_used()

    files = sorted(p.name for p in memory.glob("*.md"))
    assert files == ["MEMORY.md", "deploy_thursday.md", "polars.md"]
    text = (memory / "MEMORY.md").read_text()
    pointers = re.findall(r"\]\(([^)]+)\)", text)
    assert sorted(pointers) == ["deploy_thursday.md", "polars.md"]  # one per fact, none dangling
    capped = truncate_entrypoint(text)
    assert not capped.was_line_truncated
    assert not capped.was_byte_truncated
    assert capped.line_count <= MAX_ENTRYPOINT_LINES
    assert parse_memory_file((memory / "polars.md").read_text()).type == "feedback"
    assert [n.verb for n in notices] == ["Improved"]
    assert last_consolidated_at(MemoryDir(memory)) > before
    completed = [e for e in events if e.name == "dream.completed"]
    assert completed[0].fields["files_retired"] == 2
    # The pass ran with no turn cap: three model requests.
    assert len(model.requests) == 3
    prompt = model.requests[0].messages[-1].text
    assert str(memory) in prompt
    assert "MEMORY.md" in prompt
