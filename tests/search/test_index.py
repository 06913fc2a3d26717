"""memdir.search: what it finds, where it keeps the index, and what each pass reads."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memdir.errors import StoreError, UsageError
from memdir.permissions import PermissionDecision, auto_mem_can_use_tool
from memdir.search import SEARCH_DB_NAME, SearchIndex, index_sessions, search
from memdir.search import _index as index_module
from memdir.search._passages import fts_query, split_passages
from tests.search._sessions import append, entry, write_session

FACT = "The staging database password rotates every Tuesday at noon."


def memory_file(folder: Path, name: str, description: str, body: str) -> Path:
    path = folder / f"{name}.md"
    path.write_text(
        f"---\nname: {name}\ndescription: {description}\ntype: project\n---\n{body}\n",
        encoding="utf-8",
    )
    return path


def test_finds_a_fact_that_only_a_transcript_holds(project: Path) -> None:
    memory = project / "memory"
    memory_file(memory, "deploys", "how releases ship", "Releases go out from main on Fridays.")
    write_session(
        project,
        "s-1",
        [
            entry("u1", "user", "Can you look at the flaky login test?"),
            entry("a1", "assistant", "Sure, the retry loop races with the session cookie."),
            entry("u2", "user", FACT, minute=5),
        ],
    )

    hits = search(memory, "when does the staging password rotate")

    assert hits, "the transcript's fact was not found"
    top = hits[0]
    assert (top.kind, top.session_id, top.uuid, top.role) == ("turn", "s-1", "u2", "user")
    assert top.text == FACT
    assert top.timestamp == datetime(2026, 3, 1, 10, 5, tzinfo=UTC)
    assert top.path == project / "s-1.jsonl"
    assert top.memory_file is None


def test_memories_are_searched_and_follow_their_files(project: Path) -> None:
    memory = project / "memory"
    note = memory_file(memory, "kafka", "the event bus", "Topics are created by Terraform only.")
    memory_file(memory, "other", "unrelated", "Lunch is at noon.")

    hits = search(memory, "terraform topics", sessions=False)
    assert [(h.kind, h.memory_file) for h in hits] == [("memory", "kafka.md")]
    assert hits[0].path == memory / "kafka.md"

    # A changed memory is indexed again; a deleted one drops out.
    note.write_text("---\nname: kafka\n---\nTopics now come from Pulumi.\n", encoding="utf-8")
    os.utime(note, ns=(1, 1))
    assert search(memory, "terraform", sessions=False) == []
    assert [h.memory_file for h in search(memory, "pulumi", sessions=False)] == ["kafka.md"]
    note.unlink()
    with SearchIndex(memory) as index:
        stats = index.index_memories()
        assert stats.memories_removed == 1
        assert index.search("pulumi") == []


def test_indexing_a_session_reads_only_what_it_added(project: Path) -> None:
    lines = [entry(f"u{i}", "user", f"message number {i} about widgets") for i in range(50)]
    path = write_session(project, "grow", lines)
    with SearchIndex(project / "memory") as index:
        first = index.index_sessions()
        assert (first.lines_read, first.bytes_read) == (50, path.stat().st_size)
        assert first.passages_added == 50

        again = index.index_sessions()
        assert (again.lines_read, again.bytes_read, again.passages_added) == (0, 0, 0)
        assert again.sessions_unchanged == 1  # not even opened

        added = b"".join(
            [
                entry("u50", "user", "the gizmo supplier is Acme Corp"),
                entry("a50", "assistant", "Acme it is."),
                entry("t50", "user", "", toolUseResult={"stdout": "ok"}),
            ]
        )
        append(path, added)
        grown = index.index_sessions()
        assert (grown.lines_read, grown.bytes_read) == (3, len(added))
        assert grown.passages_added == 2
        assert grown.sessions_reindexed == 0
        assert [h.uuid for h in index.search("gizmo supplier")] == ["u50"]


def test_a_line_still_being_written_waits_for_the_next_pass(project: Path) -> None:
    path = write_session(project, "live", [entry("u1", "user", "first words")])
    line = entry("u2", "user", "the canary region is eu-west-3")
    append(path, line[:20])
    with SearchIndex(project / "memory") as index:
        assert index.index_sessions().lines_read == 1
        assert index.search("canary region") == []
        append(path, line[20:])
        stats = index.index_sessions()
        assert (stats.lines_read, stats.bytes_read) == (1, len(line))
        assert [h.uuid for h in index.search("canary region")] == ["u2"]


@pytest.mark.parametrize("longer", [True, False], ids=["rewritten", "cut"])
def test_a_rewritten_or_cut_transcript_is_indexed_again(project: Path, longer: bool) -> None:
    old = [entry(f"u{i}", "user", f"old line {i} mentions zebras") for i in range(5)]
    path = write_session(project, "s", old)
    with SearchIndex(project / "memory") as index:
        index.index_sessions()
        assert len(index.search("zebras", limit=20)) == 5
        new = [entry("n1", "user", "fresh start about giraffes")]
        if longer:
            new += [entry(f"n{i}", "user", "padding " * 40) for i in range(2, 8)]
        path.write_bytes(b"".join(new))
        assert (path.stat().st_size > sum(map(len, old))) is longer

        stats = index.index_sessions()

        assert stats.sessions_reindexed == 1
        assert stats.lines_read == len(new)
        assert index.search("zebras") == []
        assert [h.uuid for h in index.search("giraffes")] == ["n1"]


def test_what_is_not_said_is_not_indexed(project: Path) -> None:
    write_session(
        project,
        "s",
        [
            entry("m", "user", "caveat marmot", isMeta=True),
            entry("c", "user", "summary marmot", isCompactSummary=True),
            entry("x", "assistant", "sidechain marmot", isSidechain=True),
            b'{"type": "summary", "summary": "marmot"}\n',
            b"not json marmot\n",
            entry("ok", "user", "a real marmot"),
        ],
    )
    assert [h.uuid for h in search(project / "memory", "marmot")] == ["ok"]


def test_queries_are_words_not_syntax(project: Path) -> None:
    write_session(project, "s", [entry("u", "user", 'the "NEAR" operator and col:on text')])
    for query in ('NEAR("x"', "col:on", "a AND OR NOT", '"', "-minus*"):
        search(project / "memory", query)  # never an FTS5 syntax error
    assert search(project / "memory", "  ...  ") == []
    assert fts_query("the who") == '"the" OR "who"'  # only stop words: kept
    assert fts_query("What is the deploy key?") == '"deploy" OR "key"'


def test_long_turns_become_passages() -> None:
    text = "\n\n".join(f"Paragraph {i}. " + "word " * 100 for i in range(10))
    passages = split_passages(text, max_chars=1200)
    assert len(passages) > 1
    assert all(len(p) <= 1200 for p in passages)
    assert " ".join(passages).split() == text.split()  # nothing lost, nothing added


def test_excluded_sessions_and_kinds(project: Path) -> None:
    memory = project / "memory"
    memory_file(memory, "otters", "otters", "Otters hold hands.")
    write_session(project, "a", [entry("ua", "user", "otters are great")])
    write_session(project, "b", [entry("ub", "user", "otters again")])
    hits = search(memory, "otters", exclude_sessions=["a"])
    assert sorted((h.kind, h.session_id) for h in hits) == [("memory", None), ("turn", "b")]
    assert {h.kind for h in search(memory, "otters", memories=False)} == {"turn"}
    with pytest.raises(UsageError):
        search(memory, "otters", limit=0)


def test_the_index_is_private_state_the_memory_agent_cannot_read(project: Path) -> None:
    memory = project / "memory"
    index_sessions(memory)
    db = memory / SEARCH_DB_NAME
    assert db.parent.name == ".memdir"
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    gate = auto_mem_can_use_tool(memory)

    async def ask() -> PermissionDecision:
        return await gate("Read", {"file_path": str(db)})

    decision = asyncio.run(ask())
    assert decision.behavior == "deny"


def test_without_fts5_it_says_so(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_module, "fts5_available", lambda: False)
    with pytest.raises(StoreError, match="FTS5"):
        search(project / "memory", "anything")


def test_an_unreadable_session_is_reported_and_skipped(project: Path) -> None:
    pipe = project / "pipe.jsonl"
    os.mkfifo(pipe)
    ok = write_session(project, "ok", [entry("u", "user", "beavers build dams")])
    stats = index_sessions(project / "memory", [pipe, ok])  # named: a pipe never blocks it
    assert len(stats.errors) == 1
    assert "pipe.jsonl" in stats.errors[0]
    assert [h.uuid for h in search(project / "memory", "beavers")] == ["u"]


def test_two_indexers_at_once_add_each_line_once(project: Path) -> None:
    lines = [entry(f"u{i}", "user", f"shared line {i} about lemurs") for i in range(200)]
    write_session(project, "s", lines)
    start = threading.Barrier(2)
    results: list[int] = []

    def index() -> None:
        with SearchIndex(project / "memory") as mine:
            start.wait()
            results.append(mine.index_sessions().lines_read)

    workers = [threading.Thread(target=index) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sorted(results) == [0, 200]  # one read it all, the other found it done
    assert len(search(project / "memory", "lemurs", limit=1000)) == 200


def test_progress_counts_the_bytes_to_read(project: Path) -> None:
    a = write_session(project, "a", [entry("u", "user", "one")])
    b = write_session(project, "b", [entry("v", "user", "two")])
    total = a.stat().st_size + b.stat().st_size
    seen: list[tuple[int, int]] = []
    index_sessions(project / "memory", progress=lambda done, all_: seen.append((done, all_)))
    assert seen == [(0, total), (a.stat().st_size, total), (total, total)]


def test_an_index_of_another_version_is_rebuilt(project: Path) -> None:
    write_session(project, "s", [entry("u", "user", "ocelots nap")])
    index_sessions(project / "memory")
    db = sqlite3.connect(project / "memory" / SEARCH_DB_NAME)
    try:
        with db:
            db.execute("UPDATE meta SET value = 'old' WHERE key = 'schema'")
    finally:
        db.close()
    with SearchIndex(project / "memory") as index:
        assert index.search("ocelots") == []  # emptied, not misread
        assert index.index_sessions().lines_read == 1
        assert [h.uuid for h in index.search("ocelots")] == ["u"]
