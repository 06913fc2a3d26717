"""autoDream: the gates, the lock, rollback, and a consolidation pass."""

from __future__ import annotations

import asyncio
import os
import re
import time
from pathlib import Path

import pytest

from memdir.dream import (
    LOCK_NAME,
    AutoDream,
    DreamConfig,
    build_consolidation_prompt,
    last_consolidated_at,
    record_consolidation,
    try_acquire,
)
from memdir.errors import ModelError
from memdir.extract import MemorySaved
from memdir.messages import Message, ToolUseBlock
from memdir.models import OfflineModel
from memdir.store import (
    MAX_ENTRYPOINT_LINES,
    MemoryDir,
    format_memory_file,
    parse_memory_file,
    truncate_entrypoint,
)
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


# --- the current layout and links -----------------------------------------------------------

SESSION = "3f2c9a4e-7b1d-4c8e-9a55-1d2e3f4a5b6c"


def _stamped(memory: Path, name: str, title: str, description: str, body: str) -> None:
    memory.mkdir(parents=True, exist_ok=True)
    (memory / name).write_text(
        format_memory_file(
            name=title,
            description=description,
            type="feedback",
            body=body,
            origin_session_id="first-session",
            modified="2026-01-01T00:00:00.000Z",
        ),
        encoding="utf-8",
    )


def test_offline_pass_keeps_links_and_points_them_at_the_merged_memory(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    _stamped(
        memory,
        "feedback_polars.md",
        "Polars first",
        "Use polars instead of pandas for dataframes",
        "Use polars, not pandas, for dataframes. See [[testing-policy]].",
    )
    _stamped(
        memory,
        "feedback_polars_dataframes.md",
        "Polars for dataframes",
        "Prefer polars over pandas for dataframes",
        "Use polars, not pandas, for dataframes.\n\nLazy frames: [[lazy-frames|big files]].",
    )
    (memory / "project_etl.md").write_text(
        "---\nname: ETL rewrite\ndescription: the ETL moves to polars\ntype: project\n---\n\n"
        "Follows [[polars-for-dataframes]] and [[feedback_polars_dataframes#why]].\n",
        encoding="utf-8",
    )
    dream = AutoDream(memory, OfflineModel(), transcript_dir=None)
    assert asyncio.run(dream.run(session_id=SESSION))

    assert sorted(p.name for p in memory.glob("*.md")) == [
        "MEMORY.md",
        "feedback_polars.md",
        "project_etl.md",
    ]
    kept = parse_memory_file((memory / "feedback_polars.md").read_text(encoding="utf-8"))
    # The merge keeps both memories' links, and the memory's own stamps.
    assert kept.links == ("testing-policy", "lazy-frames")
    assert "[[lazy-frames|big files]]" in kept.body
    assert kept.origin_session_id == "first-session"
    assert kept.modified != "2026-01-01T00:00:00.000Z"
    assert kept.name == "polars-first"
    etl_text = (memory / "project_etl.md").read_text(encoding="utf-8")
    etl = parse_memory_file(etl_text)
    # Links to the retired memory, by name or by file name, now name the one that stayed.
    assert etl.links == ("polars-first",)
    assert "[[polars-first#why]]" in etl.body
    # A rewritten file is stored in the current layout, claimed by the pass's session.
    assert etl.type == "project"
    assert etl.origin_session_id == SESSION
    assert "  node_type: memory\n" in etl_text


def test_offline_pass_in_the_2_1_88_format_writes_that_layout(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    for name, description in (
        ("feedback_polars.md", "Use polars instead of pandas for dataframes"),
        ("feedback_polars_dataframes.md", "Prefer polars over pandas for dataframes"),
    ):
        (memory / name).write_text(
            format_memory_file(
                name=name.removesuffix(".md"),
                description=description,
                type="feedback",
                body=f"Use polars. {description}.",
                format="2.1.88",
            ),
            encoding="utf-8",
        )
    config = DreamConfig(memory_format="2.1.88")
    assert asyncio.run(AutoDream(memory, OfflineModel(), config=config).run())
    text = (memory / "feedback_polars.md").read_text(encoding="utf-8")
    assert text.startswith("---\nname: feedback_polars\ndescription: ")
    assert "\ntype: feedback\n---\n" in text
    assert "metadata" not in text


def test_a_model_pass_stores_its_writes_as_claude_code_does(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    _stamped(memory, "polars.md", "Polars", "polars", "Use polars.")
    merged = "---\nname: Polars only\ndescription: polars\ntype: feedback\n---\n\nPolars.\n"
    reads = Message(
        role="assistant",
        content=(
            ToolUseBlock(id="r", name="Read", input={"file_path": str(memory / "polars.md")}),
        ),
    )
    writes = Message(
        role="assistant",
        content=(
            ToolUseBlock(
                id="w1",
                name="Write",
                input={"file_path": str(memory / "polars.md"), "content": merged},
            ),
            ToolUseBlock(
                id="w2",
                name="Write",
                input={"file_path": str(memory / "new.md"), "content": merged},
            ),
        ),
    )
    model = ScriptedModel([reads, writes, "Done."])
    assert asyncio.run(dreamer(tmp_path, model).run(session_id=SESSION))
    new = parse_memory_file((memory / "new.md").read_text(encoding="utf-8"))
    assert (new.name, new.type, new.origin_session_id) == ("polars-only", "feedback", SESSION)
    # The model rewrote a stamped memory without its stamps: a new origin is recorded only
    # where the memory had none (Claude Code keeps an origin only while the file has it).
    old = parse_memory_file((memory / "polars.md").read_text(encoding="utf-8"))
    assert old.name == "polars-only"
    assert old.origin_session_id == SESSION


def test_the_prompt_asks_for_links_and_the_layout(tmp_path: Path) -> None:
    current = build_consolidation_prompt(str(tmp_path))
    assert "`[[name]]`" in current
    assert "change every `[[old-name]]`" in current
    assert "a `metadata` map holding `type`" in current
    old = build_consolidation_prompt(str(tmp_path), format="2.1.88")
    assert "frontmatter with `name`, `description` and `type` (user" in old
    assert "`[[name]]`" in old


def _trash_two(memory: Path, *, now: float) -> tuple[Path, Path]:
    """Forget two memories: one at ``now``, one 29 days after it (the folders, returned)."""
    from memdir.store import forget_memory

    md = MemoryDir(memory)
    memory.mkdir(parents=True, exist_ok=True)
    (memory / "old.md").write_text("forgotten long ago\n", encoding="utf-8")
    (memory / "recent.md").write_text("forgotten lately\n", encoding="utf-8")
    return (
        forget_memory(md, "old.md", now=now).path,
        forget_memory(md, "recent.md", now=now + 29 * DAY).path,
    )


def test_a_pass_empties_the_trash_of_entries_a_week_old_by_its_clock(tmp_path: Path) -> None:
    now = time.time()
    old, recent = _trash_two(tmp_path / "memory", now=now)
    sessions(tmp_path / "sessions", *[f"s{i}" for i in range(6)])
    events: list[Event] = []
    dream = dreamer(tmp_path, ScriptedModel(["Nothing to change."]), events)
    # Thirty days on by the dream's clock: the first is 30 days old, the second one day.
    assert asyncio.run(dream.maybe_run(now=now + 30 * DAY))
    assert not old.exists()
    assert recent.is_dir()
    completed = [e for e in events if e.name == "dream.completed"]
    assert completed[0].fields["trash_emptied"] == 1


def test_a_closed_gate_leaves_the_trash_alone(tmp_path: Path) -> None:
    now = time.time()
    old, recent = _trash_two(tmp_path / "memory", now=now - 30 * DAY)
    sessions(tmp_path / "sessions", "s1")  # too few sessions: no pass
    dream = dreamer(tmp_path, ScriptedModel(["Nothing to change."]))
    assert not asyncio.run(dream.maybe_run(now=now))
    assert old.is_dir()
    assert recent.is_dir()


def test_offline_pass_keeps_the_newer_of_two_contradicting_memories(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    reasons = "\n\n**Why:** the release plan.\n**How to apply:** plan around it."
    for name, fact, stamp in (
        ("project_ship_date.md", "The ship date moved to 2026-12-07", "2026-11-27T10:00:00.000Z"),
        ("project_release.md", "Release ships by 2026-12-04", "2026-11-20T10:00:00.000Z"),
    ):
        (memory / name).write_text(
            format_memory_file(
                name=fact,
                description=fact,
                type="project",
                body=fact + "." + reasons,
                origin_session_id="first-session",
                modified=stamp,
            ),
            encoding="utf-8",
        )
    # Written last, so the newest file of all: the stamps, not the file times, tell the
    # two ship dates apart.
    (memory / "project_demo.md").write_text(
        "---\nname: demo\ndescription: the customer demo\ntype: project\n---\n\n"
        "The demo follows [[release-ships-by-2026-12-04]].\n",
        encoding="utf-8",
    )
    (memory / "MEMORY.md").write_text(
        "- [Release](project_release.md) — ships by 2026-12-04\n"
        "- [Ship date](project_ship_date.md) — moved to 2026-12-07\n"
        "- [Demo](project_demo.md) — the customer demo\n",
        encoding="utf-8",
    )
    events: list[Event] = []
    dream = AutoDream(memory, OfflineModel(), transcript_dir=None, sink=events.append)
    notices: list[MemorySaved] = []
    assert asyncio.run(dream.run(session_id=SESSION, notify=notices.append))

    assert sorted(p.name for p in memory.glob("*.md")) == [
        "MEMORY.md",
        "project_demo.md",
        "project_ship_date.md",
    ]
    # The retired file is gone, not "improved".
    improved = {p.name for n in notices for p in n.paths}
    assert improved <= {"project_demo.md", "project_ship_date.md"}
    assert (memory / "MEMORY.md").read_text(encoding="utf-8") == (
        "- [Ship date](project_ship_date.md) — moved to 2026-12-07\n"
        "- [Demo](project_demo.md) — the customer demo\n"
    )
    kept = parse_memory_file((memory / "project_ship_date.md").read_text(encoding="utf-8"))
    assert (kept.name, kept.description) == (
        "the-ship-date-moved-to-2026-12-07",
        "The ship date moved to 2026-12-07",
    )
    assert kept.origin_session_id == "first-session"
    assert [line for line in kept.body.splitlines() if "2026-12-04" in line] == [
        '**History:** was 2026-12-04 until it changed to 2026-12-07 ("Release ships by '
        '2026-12-04.")'
    ]
    demo = parse_memory_file((memory / "project_demo.md").read_text(encoding="utf-8"))
    assert demo.links == ("the-ship-date-moved-to-2026-12-07",)
    completed = [e for e in events if e.name == "dream.completed"]
    assert completed[0].fields["files_retired"] == 1


def test_a_turn_whose_messages_do_not_read_leaves_the_lock_as_it_was(tmp_path: Path) -> None:
    from memdir.dream._lock import last_consolidated_at
    from memdir.extract import TurnContext
    from memdir.fork import CacheSafeParams

    memory = MemoryDir(tmp_path / "memory")
    memory.ensure()
    model = OfflineModel()
    turn = TurnContext(
        messages=[{"role": "user", "content": "hi"}, object()],  # type: ignore[list-item]
        params=CacheSafeParams(model=model, system="s"),
    )
    with pytest.raises(TypeError):
        asyncio.run(AutoDream(memory, model).run(turn))
    assert last_consolidated_at(memory) == 0.0


def test_a_retired_memory_goes_with_the_line_the_pass_left_it(tmp_path: Path) -> None:
    # The pass empties a memory to retire it, but its Write of the index did not happen
    # (refused as stale after a forget elsewhere, say): the file and its line both go.
    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "kept.md").write_text("---\nname: kept\ndescription: kept\ntype: user\n---\nx\n")
    (memory / "dup.md").write_text("---\nname: dup\ndescription: dup\ntype: user\n---\nx\n")
    (memory / "MEMORY.md").write_text("- [kept](kept.md) — kept\n- [dup](dup.md) — dup\n")
    retire = ToolUseBlock(
        id="w0", name="Write", input={"file_path": str(memory / "dup.md"), "content": ""}
    )
    reads = Message(
        role="assistant",
        content=(ToolUseBlock(id="r0", name="Read", input={"file_path": str(memory / "dup.md")}),),
    )
    model = ScriptedModel([reads, Message(role="assistant", content=(retire,)), "Retired dup."])
    events: list[Event] = []
    assert asyncio.run(dreamer(tmp_path, model, events).run())
    assert sorted(p.name for p in memory.glob("*.md")) == ["MEMORY.md", "kept.md"]
    assert (memory / "MEMORY.md").read_text() == "- [kept](kept.md) — kept\n"
    completed = [e for e in events if e.name == "dream.completed"]
    assert completed[0].fields["files_retired"] == 1
