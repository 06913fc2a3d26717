"""What a directory's sessions commit when they run side by side in one job: each only
what it wrote itself, never from a working copy that vanished, and a run cut short
keeps the turns it did not cover."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

import psycopg

from memdir.extract import TurnContext
from memdir.messages import Message, TextBlock
from memdir.models import ModelRequest
from memdir.queue import QueueExtractor, QueueWorker, WorkerSettings
from memdir.queue._lifecycle import (
    SCRATCH_LOCK,
    make_scratch,
    remove_scratch,
    remove_stale_scratch,
    scratch_prefix,
)
from memdir.queue._runs import merge_index, read_session
from memdir.telemetry import CollectingSink, Event
from memdir.testing import FunctionModel
from tests.queue._helpers import CONFIG, conversation, one, request_texts, saving_model

_DIR_RE = re.compile(r"The memory directory is `([^`]+)`")
# memdir writes each memory's index line itself here, as it does by default.
INDEXED = dataclasses.replace(CONFIG, skip_index=False)


def _worker(dsn: str, model: FunctionModel, **kw: Any) -> QueueWorker:
    settings: dict[str, Any] = {"sweep_cron": None, "prune_cron": None, "config": CONFIG, **kw}
    return QueueWorker(WorkerSettings(dsn=dsn, models=lambda _n: model, **settings))


def _files(dsn: str) -> dict[str, bytes]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT path, content FROM memdir_files ORDER BY path").fetchall()
    return {path: bytes(content) for path, content in rows}


class _Commits:
    """A sink that tells when the job's first commit is in."""

    def __init__(self) -> None:
        self.first = asyncio.Event()
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        if event.name == "extract.committed":
            self.first.set()


def _cursor(dsn: str, session: str) -> Any:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT cursor_uuid FROM memdir_sessions WHERE session = %s", (session,)
        ).fetchone()
    return row[0] if row else None


def test_a_session_commits_only_what_it_wrote_and_a_refused_one_is_written_once(pg_dsn):
    """Session b writes a memory mid-run; a commits meanwhile; then a `memdir sync` push
    moves the generation and b's commit is refused. b's memory must not have gone in a's
    commit: the next job re-runs b's turn, which would write it a second time."""
    host = QueueExtractor(pg_dsn, "dir-x")
    for s in ("a", "b"):
        assert host.on_turn_end(TurnContext(messages=conversation(s, 1), session_id=s))
    host.close()
    saver = saving_model()
    state = {"runs_b": 0}
    b_wrote = asyncio.Event()
    commits = _Commits()

    async def answer(request: ModelRequest) -> Any:
        text = "\n".join(request_texts(request))
        first_call = not any(m.tool_uses for m in request.messages if m.role == "assistant")
        if "turn b 1" in text and first_call:
            state["runs_b"] += 1
            if state["runs_b"] == 1:
                found = _DIR_RE.search(text)
                assert found is not None
                draft = "---\nname: b draft\ndescription: b\ntype: project\n---\nB's fact.\n"
                await asyncio.to_thread(Path(found.group(1), "b-draft.md").write_text, draft)
                b_wrote.set()
                await commits.first.wait()  # a commits meanwhile
                assert _cursor(pg_dsn, "a") == "a-a1"
                with psycopg.connect(pg_dsn) as conn:  # a sync push's fenced bump
                    conn.execute(
                        "UPDATE memdir_dirs SET generation = generation + 1 WHERE dir_id = 'dir-x'"
                    )
        elif "turn a 1" in text:
            await b_wrote.wait()
        return await saver.function(request)  # type: ignore[misc]

    worker = _worker(pg_dsn, FunctionModel(answer, name="function:x"), config=INDEXED, sink=commits)
    first = asyncio.run(worker.extract("dir-x"))
    outcomes = {o.session: o.outcome for o in first.sessions}
    assert outcomes == {"a": "ran", "b": "ran"}
    assert first.conflict
    files = _files(pg_dsn)
    assert sorted(files) == ["MEMORY.md", "a-1.md"]
    assert b"b-draft" not in files["MEMORY.md"]
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT session FROM memdir_pending").fetchall() == [("b",)]

    second = asyncio.run(worker.extract("dir-x"))
    assert [(o.session, o.outcome) for o in second.sessions] == [("b", "ran")]
    files = _files(pg_dsn)
    assert sorted(files) == ["MEMORY.md", "a-1.md", "b-1.md"]
    index = files["MEMORY.md"].decode()
    assert "a-1.md" in index
    assert "b-1.md" in index


def test_sessions_committing_one_after_another_keep_each_others_index_lines(pg_dsn):
    host = QueueExtractor(pg_dsn, "dir-i")
    for s in ("a", "b", "c"):
        host.on_turn_end(TurnContext(messages=conversation(s, 1), session_id=s))
    host.close()
    run = asyncio.run(_worker(pg_dsn, saving_model(), config=INDEXED).extract("dir-i"))
    assert run.commits == 3
    files = _files(pg_dsn)
    assert sorted(files) == ["MEMORY.md", "a-1.md", "b-1.md", "c-1.md"]
    lines = files["MEMORY.md"].decode().splitlines()
    for name in ("a-1.md", "b-1.md", "c-1.md"):
        assert sum(name in line for line in lines) == 1


def test_an_index_merge_applies_one_sessions_edits_to_the_committed_index():
    base = b"# Memory\n- [old](old.md)\n- [gone](gone.md)\n"
    mine = b"# Memory\n- [old](old.md)\n- [mine](mine.md)\n"  # added mine, removed gone
    committed = b"# Memory\n- [old](old.md)\n- [gone](gone.md)\n- [theirs](theirs.md)\n"
    assert merge_index(base, mine, committed) == (
        b"# Memory\n- [old](old.md)\n- [theirs](theirs.md)\n- [mine](mine.md)\n"
    )
    assert merge_index(base, base, committed) == committed


def test_sessions_that_change_the_same_memory_commit_one_and_rerun_the_other(pg_dsn):
    host = QueueExtractor(pg_dsn, "dir-c")
    for s in ("a", "b"):
        host.on_turn_end(TurnContext(messages=conversation(s, 1), session_id=s))
    host.close()
    both_in = asyncio.Event()
    entered: list[str] = []
    commits = _Commits()

    async def answer(request: ModelRequest) -> Any:
        text = "\n".join(request_texts(request))
        if any(m.tool_uses for m in request.messages if m.role == "assistant"):
            return "Saved."
        found = _DIR_RE.search(text)
        assert found is not None
        who = "a" if "turn a 1" in text else "b"
        entered.append(who)
        if len(entered) == 2:
            both_in.set()
        if len(entered) <= 2:
            await both_in.wait()  # both sessions' runs under way at once
            if who == "b":
                await commits.first.wait()
        body = f"---\nname: shared\ndescription: x\ntype: project\n---\nBy {who}.\n"
        await asyncio.to_thread(Path(found.group(1), "shared.md").write_text, body)
        return "Saved."

    worker = _worker(pg_dsn, FunctionModel(answer, name="function:c"), sink=commits)
    first = asyncio.run(worker.extract("dir-c"))
    assert first.commits == 1
    [clash] = [e for e in commits.events if e.name == "extract.clash"]
    assert clash.fields["session"] == "b"
    # b's run is reported as not kept; only a's commit is.
    assert [e.name for e in commits.events].count("extract.committed") == 1
    b_events = [e for e in commits.events if e.fields.get("session") == "b" and e is not clash]
    assert b_events
    assert all(e.fields.get("discarded") for e in b_events)
    assert _files(pg_dsn)["shared.md"].endswith(b"By a.\n")
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT session, attempts FROM memdir_pending").fetchall() == [("b", 0)]
        # its turns run again, by a job deferred for it
        assert one(conn, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo'") == (1,)
    second = asyncio.run(worker.extract("dir-c"))
    assert [(o.session, o.outcome) for o in second.sessions] == [("b", "ran")]
    assert _files(pg_dsn)["shared.md"].endswith(b"By b.\n")


def test_a_working_copy_removed_under_a_run_fails_it_and_deletes_nothing(pg_dsn):
    host = QueueExtractor(pg_dsn, "dir-y")
    saver = saving_model()
    state = {"remove": False}

    async def answer(request: ModelRequest) -> Any:
        text = "\n".join(request_texts(request))
        if state["remove"]:
            found = _DIR_RE.search(text)
            assert found is not None
            # another process's cleaning took the folder (a pid that looked dead to it)
            shutil.rmtree(Path(found.group(1)).parent)
            return "Nothing to save."
        return await saver.function(request)  # type: ignore[misc]

    worker = _worker(pg_dsn, FunctionModel(answer, name="function:y"))
    conv = conversation("s", 3)
    for k in (1, 2):
        host.on_turn_end(TurnContext(messages=conv[: 2 * k], session_id="s"))
        asyncio.run(worker.extract("dir-y"))
    before = _files(pg_dsn)
    assert sorted(before) == ["s-1.md", "s-2.md"]
    state["remove"] = True
    host.on_turn_end(TurnContext(messages=conv, session_id="s"))
    host.close()
    run = asyncio.run(worker.extract("dir-y"))
    [outcome] = run.sessions
    assert outcome.outcome == "failed"
    assert outcome.error is not None
    assert "removed" in outcome.error
    assert run.files_changed == 0
    assert _files(pg_dsn) == before
    with psycopg.connect(pg_dsn) as conn:  # the turn waits for its retry
        assert one(conn, "SELECT attempts FROM memdir_pending") == (1,)


def test_a_scratch_folder_in_use_is_kept_whatever_its_pid(tmp_path):
    """Containers sharing /tmp under one hostname: a live worker's pid can look dead
    from another's pid namespace; the lock on its folder says it is in use."""
    dead = os.getpid() + 10**7  # no such process here
    in_use = tmp_path / f"{scratch_prefix(dead)}busy"
    in_use.mkdir()
    held = os.open(in_use / SCRATCH_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    import fcntl

    fcntl.flock(held, fcntl.LOCK_EX)
    left = tmp_path / f"{scratch_prefix(dead)}left"
    left.mkdir()
    (left / SCRATCH_LOCK).touch()  # its worker was killed: nobody holds the lock
    live_pid_unlocked = tmp_path / f"{scratch_prefix()}ended"
    live_pid_unlocked.mkdir()
    (live_pid_unlocked / SCRATCH_LOCK).touch()  # a live pid, its run ended uncleanly
    mine = make_scratch(tmp_path)
    try:
        assert remove_stale_scratch(tmp_path) == 2
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([in_use.name, mine.name])
        os.close(held)
        assert remove_stale_scratch(tmp_path) == 1
        assert [p.name for p in tmp_path.iterdir()] == [mine.name]
    finally:
        remove_scratch(mine)
    assert list(tmp_path.iterdir()) == []


def test_a_run_cut_short_after_a_chunk_keeps_the_rest_pending(pg_dsn):
    """A standalone run too long for one window goes in chunks; the second fails: the
    first chunk is committed, the rest stays pending and is covered by the retry."""
    small = dataclasses.replace(CONFIG, context_budget_tokens=60, backlog_tokens=None)
    host = QueueExtractor(pg_dsn, "dir-k")
    conv = conversation("s1", 20)
    host.on_turn_end(TurnContext(messages=conv, session_id="s1"))
    host.close()
    saver = saving_model()
    state = {"starts": 0, "fail": True}

    async def answer(request: ModelRequest) -> Any:
        if not any(m.tool_uses for m in request.messages if m.role == "assistant"):
            state["starts"] += 1
            if state["starts"] == 2 and state["fail"]:
                raise RuntimeError("provider down (injected)")
        return await saver.function(request)  # type: ignore[misc]

    worker = _worker(pg_dsn, FunctionModel(answer, name="function:k"), config=small)
    first = asyncio.run(worker.extract("dir-k"))
    [outcome] = first.sessions
    assert outcome.outcome == "ran"
    assert 0 < outcome.to_seq < 40
    with psycopg.connect(pg_dsn) as conn:
        assert one(conn, "SELECT count(*) FROM memdir_pending") == (1,)
        assert one(conn, "SELECT cursor_seq FROM memdir_sessions") == (outcome.to_seq,)
        assert one(conn, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'todo'") == (1,)
    state["fail"] = False
    for _ in range(20):
        run = asyncio.run(worker.extract("dir-k"))
        if not run.sessions:
            break
    with psycopg.connect(pg_dsn) as conn:
        assert one(conn, "SELECT count(*) FROM memdir_pending") == (0,)
        spans = conn.execute("SELECT from_seq, to_seq FROM memdir_runs ORDER BY id").fetchall()
    # Every message covered exactly once, to the last.
    assert spans[0][0] == 1
    assert spans[-1][1] == 40
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(spans))


def test_a_pruned_gap_is_never_read_as_the_whole_conversation(pg_dsn):
    """Pruning keeps the system message below the context: a page back from the cursor
    that counted it would reach seq 1 across the gap and call the read whole."""
    host = QueueExtractor(pg_dsn, "dir-g")
    system = Message(role="system", content=(TextBlock(text="Be brief."),), uuid="sys")
    conv = [system, *conversation("s1", 11)]
    host.on_turn_end(TurnContext(messages=conv, session_id="s1"))
    host.close()

    async def read() -> Any:
        async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
            await conn.execute(
                "DELETE FROM memdir_messages WHERE seq BETWEEN 2 AND 10"  # pruned
            )
            return await read_session(
                conn,
                "dir-g",
                "s1",
                cursor_seq=21,
                cursor_uuid="s1-a10",
                upto=23,
                window_tokens=10**6,
                tool_result_chars=2_000,
            )

    got = asyncio.run(read())
    assert not got.whole
    assert got.seqs == (1, *range(11, 24))
    assert got.context_from == 11


def test_a_session_that_cannot_start_fails_alone(pg_dsn):
    """Malformed stored parameters for one session: it fails as an attempt (parked at
    the limit); the directory's other session is not cancelled with it."""
    host = QueueExtractor(pg_dsn, "dir-s")
    for s in ("bad", "good"):
        host.on_turn_end(TurnContext(messages=conversation(s, 1), session_id=s))
    host.close()
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("UPDATE memdir_pending SET params = '{}'::jsonb WHERE session = 'bad'")
    worker = _worker(pg_dsn, saving_model(), max_attempts=2)
    run = asyncio.run(worker.extract("dir-s"))
    outcomes = {o.session: o for o in run.sessions}
    assert outcomes["good"].outcome == "ran"
    assert outcomes["bad"].outcome == "failed"
    assert "KeyError" in (outcomes["bad"].error or "")
    assert sorted(_files(pg_dsn)) == ["good-1.md"]
    assert _cursor(pg_dsn, "good") == "good-a1"
    again = asyncio.run(worker.extract("dir-s"))
    assert again.parked
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute(
            "SELECT session, attempts, parked_version IS NOT NULL FROM memdir_pending"
        ).fetchall() == [("bad", 2, True)]


def test_a_cancelled_job_ends_with_extract_finished_and_leaves_no_scratch(pg_dsn, tmp_path):
    host = QueueExtractor(pg_dsn, "dir-z")
    host.on_turn_end(TurnContext(messages=conversation("s", 1), session_id="s"))
    host.close()
    entered = asyncio.Event()

    async def answer(_request: ModelRequest) -> Any:
        entered.set()
        await asyncio.Event().wait()  # never answers

    sink = CollectingSink()
    worker = _worker(pg_dsn, FunctionModel(answer, name="function:z"), sink=sink, scratch=tmp_path)

    async def cancel_mid_run() -> None:
        job = asyncio.create_task(worker.extract("dir-z"))
        await entered.wait()
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await job

    asyncio.run(cancel_mid_run())
    names = sink.names()
    assert names[0] == "extract.started"
    assert names[-1] == "extract.finished"
    assert sink.events[-1].fields["cancelled"] is True
    assert list(tmp_path.iterdir()) == []
    with psycopg.connect(pg_dsn) as conn:  # the turn waits for the next job
        assert one(conn, "SELECT count(*) FROM memdir_pending") == (1,)
