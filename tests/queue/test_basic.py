"""The queue backend in one process: a turn recorded, a job run, a fenced commit."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

import psycopg

from memdir.extract import TurnContext
from memdir.queue import QueueExtractor, QueueWorker, WorkerSettings, export_dir, queue_status
from memdir.telemetry import CollectingSink, Sink
from tests.queue._helpers import CONFIG, conversation, memory_name, one, saving_model


def _worker(dsn: str, sink: Sink | None = None, **kw) -> QueueWorker:
    model = saving_model(**kw)
    return QueueWorker(WorkerSettings(dsn=dsn, models=lambda _n: model, config=CONFIG, sink=sink))


def test_turns_coalesce_into_one_job_and_one_run(pg_dsn, tmp_path):
    host = QueueExtractor(pg_dsn, "dir-a")
    conv = conversation("s1", 3)
    results = [
        host.on_turn_end(TurnContext(messages=conv[: 2 * k], session_id="s1")) for k in (1, 2, 3)
    ]
    host.close()
    assert [r.enqueued for r in results if r] == [True, False, False]
    assert [r.shipped for r in results if r] == [2, 2, 2]
    status = queue_status(pg_dsn)
    assert status.jobs == {"todo": 1}
    assert status.pending_sessions == 1

    run = asyncio.run(_worker(pg_dsn).extract("dir-a"))
    assert run.committed
    assert [(o.outcome, o.from_seq, o.to_seq) for o in run.sessions] == [("ran", 1, 6)]
    with psycopg.connect(pg_dsn) as conn:
        (gen,) = one(conn, "SELECT generation FROM memdir_dirs")
        (cursor,) = one(conn, "SELECT cursor_uuid FROM memdir_sessions")
        (pending,) = one(conn, "SELECT count(*) FROM memdir_pending")
        paths = [p for (p,) in conn.execute("SELECT path FROM memdir_files")]
    assert (gen, cursor, pending) == (1, "s1-a3", 0)
    assert paths == [memory_name("s1", 3)]
    assert export_dir(pg_dsn, "dir-a", tmp_path / "mirror") == 1
    assert (tmp_path / "mirror" / memory_name("s1", 3)).exists()


def test_a_turn_arriving_mid_run_keeps_its_row(pg_dsn):
    host = QueueExtractor(pg_dsn, "dir-a")
    conv = conversation("s1", 2)
    host.on_turn_end(TurnContext(messages=conv[:2], session_id="s1"))

    async def scenario() -> None:
        import threading

        started, release = threading.Event(), threading.Event()
        worker = _worker(pg_dsn, started=started, block=release)
        task = asyncio.create_task(worker.extract("dir-a"))
        await asyncio.to_thread(started.wait)
        # The first job is still "todo" (extract was called directly), so this coalesces.
        host.on_turn_end(TurnContext(messages=conv[:4], session_id="s1"))
        release.set()
        run = await task
        assert [(o.from_seq, o.to_seq) for o in run.sessions] == [(1, 2)]
        second = await _worker(pg_dsn).extract("dir-a")
        assert [(o.from_seq, o.to_seq) for o in second.sessions] == [(3, 4)]

    asyncio.run(scenario())
    host.close()
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM memdir_pending").fetchone() == (0,)


def test_a_zombie_commit_is_refused(pg_dsn):
    host = QueueExtractor(pg_dsn, "dir-z")
    conv = conversation("s1", 1)
    host.on_turn_end(TurnContext(messages=conv, session_id="s1"))
    host.close()
    zombie_events, fresh_events = CollectingSink(), CollectingSink()

    async def scenario() -> None:
        import threading

        started, release = threading.Event(), threading.Event()
        zombie = _worker(pg_dsn, sink=zombie_events, started=started, block=release)
        late = asyncio.create_task(zombie.extract("dir-z"))
        await asyncio.to_thread(started.wait)
        # Presumed dead: another worker runs the directory and commits first.
        fresh = await _worker(pg_dsn, sink=fresh_events).extract("dir-z")
        assert fresh.committed
        assert fresh.memories == (memory_name("s1", 1),)
        release.set()
        refused = await late
        assert refused.conflict
        assert not refused.committed

    asyncio.run(scenario())
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT generation FROM memdir_dirs").fetchone() == (1,)
        assert conn.execute("SELECT count(*) FROM memdir_runs").fetchone() == (1,)
    # Only what was committed is reported saved; the zombie's run is reported discarded.
    assert [e.fields["path"] for e in fresh_events.events if e.name == "queue.memory_saved"] == [
        memory_name("s1", 1)
    ]
    assert "queue.memory_saved" not in zombie_events.names()
    [late_run] = [e for e in zombie_events.events if e.name == "extract.run"]
    assert late_run.fields["discarded"] is True
    # A job ends with extract.finished, after its sessions' commits (refused here).
    assert zombie_events.names()[-2:] == ["extract.conflict", "extract.finished"]


@pytest.mark.parametrize("use_async", [False, True])
def test_host_ships_only_new_messages(pg_dsn, use_async):
    host = QueueExtractor(pg_dsn, "dir-b")
    conv = conversation("s1", 4)

    async def arecord(k: int):
        return await host.aon_turn_end(TurnContext(messages=conv[: 2 * k], session_id="s1"))

    shipped = []
    for k in (1, 2, 3, 4):
        if use_async:
            shipped.append(asyncio.run(arecord(k)))
            asyncio.run(host.aclose())
        else:
            shipped.append(host.on_turn_end(TurnContext(messages=conv[: 2 * k], session_id="s1")))
    host.close()
    assert [r.shipped for r in shipped if r] == [2, 2, 2, 2]
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM memdir_messages").fetchone() == (8,)


def test_checked_out_files_do_not_pass_for_a_direct_write(pg_dsn):
    """memdir stamps its memories with the session; a checkout must keep their times, or
    the session's next run would take its own earlier memory for the host's write."""
    import datetime

    from memdir.extract import ExtractConfig
    from memdir.messages import Message

    stamp = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
    conv = []
    for k in (1, 2):
        at = stamp + datetime.timedelta(minutes=k)
        conv.append(Message.user(f"turn s1 {k}", uuid=f"s1-u{k}", timestamp=at))
        conv.append(Message.assistant(f"noted {k}", uuid=f"s1-a{k}", timestamp=at))
    model = saving_model()
    config = ExtractConfig(skip_index=True, mode="standalone", memory_format="current")
    worker = QueueWorker(WorkerSettings(dsn=pg_dsn, models=lambda _n: model, config=config))
    host = QueueExtractor(pg_dsn, "dir-t")
    outcomes = []
    for k in (1, 2):
        host.on_turn_end(TurnContext(messages=conv[: 2 * k], session_id="s1"))
        outcomes += [o.outcome for o in asyncio.run(worker.extract("dir-t")).sessions]
    host.close()
    assert outcomes == ["ran", "ran"]


def test_a_failed_record_ships_its_messages_with_the_next_turn(pg_dsn):
    from memdir.queue._tempdb import _free_port
    from memdir.telemetry import CollectingSink

    sink = CollectingSink()
    down = f"host=127.0.0.1 port={_free_port()} user=postgres connect_timeout=5"
    host = QueueExtractor(down, "dir-e", sink=sink)
    conv = conversation("s1", 2)
    assert host.on_turn_end(TurnContext(messages=conv[:2], session_id="s1")) is None
    assert [e.name for e in sink.events] == ["queue.record_error"]
    host.dsn = pg_dsn  # the database is back
    recorded = host.on_turn_end(TurnContext(messages=conv, session_id="s1"))
    host.close()
    assert recorded is not None
    assert recorded.shipped == 4


def test_a_rewound_conversation_replaces_what_was_shipped(pg_dsn):
    host = QueueExtractor(pg_dsn, "dir-rw")
    conv = conversation("s1", 3)
    host.on_turn_end(TurnContext(messages=conv, session_id="s1"))
    other = conversation("s1", 1) + conversation("t1", 1)  # the same start, then elsewhere
    recorded = host.on_turn_end(TurnContext(messages=other, session_id="s1"))
    host.close()
    assert recorded is not None
    assert (recorded.reset, recorded.shipped) == (True, 4)
    with psycopg.connect(pg_dsn) as conn:
        uuids = [u for (u,) in conn.execute("SELECT uuid FROM memdir_messages ORDER BY seq")]
    assert uuids == ["s1-u1", "s1-a1", "t1-u1", "t1-a1"]


def test_the_turns_rows_and_its_job_commit_together(pg_dsn):
    """A defer that fails takes the turn's messages and pending row with it (nothing
    pending without a job to run it), and the next turn ships them again."""
    sink = CollectingSink()
    host = QueueExtractor(pg_dsn, "dir-tx", sink=sink)
    conv = conversation("s1", 2)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'no job today'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON procrastinate_jobs "
            "FOR EACH ROW EXECUTE FUNCTION refuse()"
        )
        assert host.on_turn_end(TurnContext(messages=conv[:2], session_id="s1")) is None
        assert "no job today" in sink.events[-1].fields["reason"]
        for table in ("memdir_messages", "memdir_pending", "memdir_sessions"):
            assert one(conn, f"SELECT count(*) FROM {table}") == (0,), table
        conn.execute("DROP TRIGGER refuse ON procrastinate_jobs")
        recorded = host.on_turn_end(TurnContext(messages=conv, session_id="s1"))
        host.close()
        assert recorded is not None
        assert (recorded.shipped, recorded.enqueued) == (4, True)
        assert one(conn, "SELECT count(*) FROM memdir_messages") == (4,)
        assert one(conn, "SELECT count(*) FROM procrastinate_jobs") == (1,)


def test_the_host_takes_the_local_extractors_calls(pg_dsn):
    """``notify`` and ``drain`` as :class:`~memdir.MemoryExtractor` has them, so a host
    switches backends by changing one constructor."""
    notices: list[object] = []
    host = QueueExtractor(pg_dsn, "dir-api")
    conv = conversation("s1", 2)
    assert host.on_turn_end(TurnContext(messages=conv[:2], session_id="s1"), notify=notices.append)
    host.drain_sync()

    async def later() -> None:
        recorded = await host.aon_turn_end(
            TurnContext(messages=conv, session_id="s1"), notify=notices.append
        )
        assert recorded is not None
        await host.drain()
        await host.aclose()

    asyncio.run(later())
    host.close()
    assert notices == []  # memories are saved later, on a worker, and reported there
    with psycopg.connect(pg_dsn) as conn:
        assert one(conn, "SELECT count(*) FROM memdir_messages") == (4,)
