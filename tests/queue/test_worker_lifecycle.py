"""A worker's life: it outlives a server restart, stops within its bound on SIGTERM,
starts beside a frozen worker without waiting on it, and leaves no scratch checkout.

Each test that stops the server runs its own :class:`TemporaryPostgres` (never the
shared one). Progress is awaited by polling the database against a deadline.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

import psycopg

from memdir.extract import TurnContext
from memdir.messages import Message
from memdir.models import ModelRequest, ModelResponse
from memdir.queue import (
    PostgresNotFoundError,
    QueueExtractor,
    QueueWorker,
    TemporaryPostgres,
    WorkerSettings,
    migrate_schema,
    sweep,
)
from memdir.queue._app import EXTRACT_TASK, SWEEP_TASK
from memdir.queue._lifecycle import SCRATCH_PREFIX, remove_stale_scratch, scratch_prefix
from memdir.testing import FunctionModel
from tests.queue._helpers import CONFIG, conversation, one, run_until_drained, saving_model
from tests.queue.test_cli import _WORKER
from tests.queue.test_worker_schema import source_path

_spawn = multiprocessing.get_context("spawn")


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    """Collect what a test's cut-off runs leave (cancelled coroutines, their frames and
    connections) before the next test: finalizers run by a collection that happens to
    fall inside a later ``ast.parse`` (pytest rewriting a module it imports) trip
    CPython 3.11 before 3.11.8 into a SystemError about the AST recursion depth."""
    yield
    gc.collect()


def _wait_for(check: Callable[[], bool], deadline: float, what: str) -> float:
    """Poll ``check`` until true; returns the seconds it took."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > deadline:
            raise AssertionError(f"{what}: not within {deadline:g} s")
        time.sleep(0.05)  # a poll interval, not a wait for the outcome
    return time.monotonic() - start


def _query(dsn: str, sql: str, params: Any = ()) -> tuple[Any, ...] | None:
    try:
        with psycopg.connect(dsn, connect_timeout=2) as conn:
            return one(conn, sql, params)
    except psycopg.OperationalError:
        return None  # the server is not back yet


def _record(dsn: str, dir_id: str, session: str, turns: int) -> None:
    host = QueueExtractor(dsn, dir_id)
    try:
        conv = conversation(session, turns)
        assert host.on_turn_end(TurnContext(messages=conv, session_id=session)) is not None
    finally:
        host.close()


def _covered(dsn: str, dir_id: str, session: str, turns: int) -> Callable[[], bool]:
    def check() -> bool:
        row = _query(
            dsn,
            "SELECT count(*) FILTER (WHERE cursor_uuid = %s), "
            "(SELECT count(*) FROM memdir_pending WHERE dir_id = %s) "
            "FROM memdir_sessions WHERE dir_id = %s",
            (f"{session}-a{turns}", dir_id, dir_id),
        )
        return row is not None and row[0] == 1 and row[1] == 0

    return check


def _registered(dsn: str) -> int:
    row = _query(dsn, "SELECT count(*) FROM procrastinate_workers")
    return int(row[0]) if row else -1


def _ghosts(dsn: str) -> list[Any]:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT * FROM procrastinate_workers").fetchall()


def _start_cli_worker(dsn: str, log: IO[bytes], *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "MEMDIR_DB": dsn, "PYTHONPATH": source_path()}
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MEMDIR_MODEL"):
        env.pop(name, None)
    return subprocess.Popen(
        [sys.executable, "-c", _WORKER, "--model", "offline", *args],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _stop_all(workers: list[subprocess.Popen[bytes]]) -> list[int | None]:
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
    codes: list[int | None] = []
    for worker in workers:
        try:
            codes.append(worker.wait(30))
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
            codes.append(None)
    return codes


@pytest.fixture
def own_server() -> Iterator[TemporaryPostgres]:
    """A server of this test's own, to restart at will."""
    server = TemporaryPostgres(max_connections=100, durable=True)
    try:
        server.start()
    except PostgresNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the PostgreSQL tests: {exc}")
        pytest.skip(str(exc))
    try:
        migrate_schema(server.dsn())
        yield server
    finally:
        server.stop()


def test_workers_outlive_a_server_restart(own_server, tmp_path):
    dsn = own_server.dsn()
    paths = [tmp_path / f"w{i}.log" for i in range(3)]
    logs = [path.open("wb") for path in paths]
    workers = [
        _start_cli_worker(dsn, log, "--name", f"w{i}", "--concurrency", "2")
        for i, log in enumerate(logs)
    ]
    try:
        _wait_for(lambda: _registered(dsn) == 3, 60, "three workers registered")
        _record(dsn, "d0", "s0", 1)
        _wait_for(_covered(dsn, "d0", "s0", 1), 30, "a turn before the restart")

        # pg_ctl restart: every connection cut, the server back at once.
        own_server.restart()
        _record(dsn, "d1", "s1", 1)
        took = _wait_for(_covered(dsn, "d1", "s1", 1), 5, "a turn after the restart")
        assert [w.poll() for w in workers] == [None, None, None], "a worker exited"

        # A real outage: the server stays down until every worker has noticed.
        before = [p.read_bytes().count(b"lost the database") for p in paths]
        own_server.halt()
        _wait_for(
            lambda: all(
                p.read_bytes().count(b"lost the database") > n
                for p, n in zip(paths, before, strict=True)
            ),
            30,
            "every worker noticed the outage",
        )
        own_server.resume()
        _record(dsn, "d0", "s0", 2)
        took = max(took, _wait_for(_covered(dsn, "d0", "s0", 2), 5, "a turn after the outage"))
        assert [w.poll() for w in workers] == [None, None, None], "a worker exited"
        _wait_for(lambda: _registered(dsn) == 3, 10, f"three workers, no ghosts: {_ghosts(dsn)}")
    finally:
        codes = _stop_all(workers)
        for log in logs:
            log.close()
    assert codes == [0, 0, 0], [p.read_text()[-2000:] for p in paths]
    text = paths[0].read_text()
    assert "Traceback" not in text  # a lost connection is a line, not a stack
    assert "INFO memdir.queue: worker w0 starting" in text
    assert "INFO memdir.queue: worker w0 stopped" in text
    assert took < 5


def test_an_unknown_database_is_fatal_at_once(own_server, tmp_path):
    log = (tmp_path / "w.log").open("wb")
    worker = _start_cli_worker(own_server.dsn("no_such_db"), log)
    try:
        code = worker.wait(60)
    finally:
        if worker.poll() is None:
            worker.kill()
        log.close()
    assert code == 1
    assert (
        (tmp_path / "w.log")
        .read_text()
        .strip()
        .splitlines()[-1]
        .startswith("memdir: the database:")
    )


# --- a busy worker: SIGTERM within the bound, SIGKILL's scratch removed later --------------


def _busy_worker(dsn: str, scratch: str, started: Any, stop_timeout: float) -> None:
    """A worker whose model never answers (it signals ``started`` first)."""

    async def never(_request: ModelRequest) -> Message | str:
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    model = FunctionModel(never, name="function:never")
    settings = WorkerSettings(
        dsn=dsn,
        models=lambda _name: model,
        config=CONFIG,
        name="busy",
        concurrency=1,
        poll_interval=0.5,
        heartbeat_interval=0.5,
        scratch=Path(scratch),
        stop_timeout=stop_timeout,
    )
    asyncio.run(QueueWorker(settings).run(wait=True))


def _start_busy(dsn: str, scratch: Path, stop_timeout: float = 2.0) -> Any:
    started = _spawn.Event()
    process = _spawn.Process(target=_busy_worker, args=(dsn, str(scratch), started, stop_timeout))
    process.start()
    assert started.wait(60), "the worker never reached the model"
    return process


def _scratch_of(scratch: Path) -> list[str]:
    return sorted(p.name for p in scratch.iterdir() if p.name.startswith(SCRATCH_PREFIX))


def test_sigterm_stops_a_busy_worker_within_its_bound(pg_dsn, tmp_path):
    _record(pg_dsn, "dt", "st", 1)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    process = _start_busy(pg_dsn, scratch, stop_timeout=2.0)
    try:
        assert _scratch_of(scratch), "the run has its checkout"
        began = time.monotonic()
        os.kill(process.pid, signal.SIGTERM)
        process.join(20)
        took = time.monotonic() - began
    finally:
        if process.is_alive():
            process.kill()
            process.join()
    assert process.exitcode == 0
    assert took < 2.0 + 2.0, took  # the bound, and the interpreter's exit
    assert _scratch_of(scratch) == []  # the cancelled run removed its checkout
    with psycopg.connect(pg_dsn) as conn:
        # The turn waits for the next worker; the job ended, not left 'doing'.
        assert one(conn, "SELECT count(*) FROM memdir_pending") == (1,)
        assert one(conn, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'doing'") == (0,)
        assert one(conn, "SELECT count(*) FROM procrastinate_workers") == (0,)


def test_a_killed_workers_scratch_is_removed_by_the_next_worker(pg_dsn, tmp_path):
    _record(pg_dsn, "dk", "sk", 1)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    process = _start_busy(pg_dsn, scratch)
    os.kill(process.pid, signal.SIGKILL)
    process.join()
    left = _scratch_of(scratch)
    assert left
    assert left[0].startswith(scratch_prefix(process.pid))
    mine = scratch / f"{scratch_prefix()}live"  # a live worker's run
    mine.mkdir()
    other = scratch / "memdir-run-unrelated"
    other.mkdir()
    elsewhere = scratch / f"{SCRATCH_PREFIX}{process.pid}@another.host-x"  # not our pids
    elsewhere.mkdir()

    async def next_worker() -> None:
        model = saving_model()
        settings = WorkerSettings(
            dsn=pg_dsn, models=lambda _n: model, config=CONFIG, scratch=scratch
        )
        await QueueWorker(settings).run(wait=False, install_signal_handlers=False)

    asyncio.run(next_worker())
    assert _scratch_of(scratch) == sorted([mine.name, other.name, elsewhere.name])
    assert remove_stale_scratch(scratch) == 0


def test_runs_remove_their_checkouts(pg_dsn, tmp_path):
    for d in ("da", "db"):
        _record(pg_dsn, d, f"{d}.s", 2)
    model = saving_model()
    settings = WorkerSettings(dsn=pg_dsn, models=lambda _n: model, config=CONFIG, scratch=tmp_path)
    asyncio.run(run_until_drained(QueueWorker(settings), pg_dsn))
    assert _scratch_of(tmp_path) == []

    def broken(_name: str | None) -> Any:
        raise RuntimeError("no model here")

    _record(pg_dsn, "dc", "dc.s", 1)
    failing = QueueWorker(
        WorkerSettings(dsn=pg_dsn, models=broken, config=CONFIG, scratch=tmp_path)
    )
    # A session that cannot start fails alone (not the job): its checkout goes too.
    [outcome] = asyncio.run(failing.extract("dc")).sessions
    assert outcome.outcome == "failed"
    assert outcome.error == "RuntimeError: no model here"
    assert _scratch_of(tmp_path) == []


# --- frozen workers --------------------------------------------------------------------------


def _freeze_a_commit(dsn: str) -> psycopg.Connection[Any]:
    """A transaction in the state of a worker stopped (SIGSTOP) inside its commit: the
    directory's generation bumped, a run's audit row written, never committed. The
    server sees a SIGSTOPped worker's session exactly so."""
    _record(dsn, "frozen", "sf", 1)
    conn = psycopg.connect(dsn)
    conn.execute("UPDATE memdir_dirs SET generation = generation + 1 WHERE dir_id = 'frozen'")
    conn.execute(
        "INSERT INTO memdir_runs (dir_id, session, generation, from_seq, to_seq, outcome, "
        "started_at) VALUES ('frozen', 'sf', 1, 1, 2, 'ran', now())"
    )
    return conn


def test_a_worker_starting_beside_a_frozen_one_blocks_no_commit(pg_dsn, tmp_path):
    paths = [tmp_path / "a.log", tmp_path / "b.log"]
    logs = [p.open("wb") for p in paths]
    workers = [_start_cli_worker(pg_dsn, logs[0], "--name", "a")]
    frozen = None
    try:
        _wait_for(lambda: _registered(pg_dsn) == 1, 60, "the first worker registered")
        frozen = _freeze_a_commit(pg_dsn)
        # A worker starting now used to apply the schema: its CREATE INDEX queued
        # behind the frozen transaction, and every commit queued behind it.
        workers.append(_start_cli_worker(pg_dsn, logs[1], "--name", "b"))
        _wait_for(lambda: _registered(pg_dsn) == 2, 60, "the second worker started")
        for d in ("o1", "o2", "o3"):
            _record(pg_dsn, d, f"{d}.s", 1)
        for d in ("o1", "o2", "o3"):
            _wait_for(_covered(pg_dsn, d, f"{d}.s", 1), 10, f"{d} committed")
    finally:
        if frozen is not None:
            frozen.close()
        codes = _stop_all(workers)
        for log in logs:
            log.close()
    assert codes == [0, 0]


def test_a_frozen_worker_transaction_is_ended_by_the_server(pg_dsn):
    _record(pg_dsn, "dz", "sz", 1)
    settings = WorkerSettings(
        dsn=pg_dsn, models=lambda _n: saving_model(), idle_in_transaction_timeout=0.5
    )
    worker = QueueWorker(settings)

    async def freeze() -> int:
        async with worker._connection() as conn:
            await conn.execute("UPDATE memdir_dirs SET generation = 7 WHERE dir_id = 'dz'")
            row = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
            assert row is not None
            pid = int(row[0])
            # Stopped here, as under SIGSTOP: nothing more is sent.
            await asyncio.to_thread(
                _wait_for,
                lambda: (
                    _query(pg_dsn, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
                    == (0,)
                ),
                10,
                "the server ended the idle transaction",
            )
            with pytest.raises(psycopg.Error, match="idle-in-transaction timeout"):
                await conn.execute("SELECT 1")
            return pid

    asyncio.run(freeze())
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("SET lock_timeout = '1s'")
        # Its lock is gone, its change undone.
        assert one(conn, "SELECT generation FROM memdir_dirs WHERE dir_id = 'dz' FOR UPDATE") == (
            0,
        )


# --- the sweep ahead of a backlog --------------------------------------------------------------


def test_the_sweep_is_fetched_before_a_backlog_of_extract_jobs(pg_dsn):
    for k in range(5):
        _record(pg_dsn, f"b{k}", f"b{k}.s", 1)
    settings = WorkerSettings(dsn=pg_dsn, models=lambda _n: saving_model(), config=CONFIG)
    worker = QueueWorker(settings)

    async def fetch_first() -> str:
        async with worker.app.open_async():
            await worker.app.configure_task(SWEEP_TASK).defer_async(timestamp=0)
            worker_id = await worker.app.job_manager.register_worker()
            job = await worker.app.job_manager.fetch_job(queues=None, worker_id=worker_id)
            assert job is not None
            return job.task_name

    # Deferred last, behind five extract jobs, fetched first.
    assert asyncio.run(fetch_first()) == SWEEP_TASK
    assert worker.app.tasks[EXTRACT_TASK].priority < worker.app.tasks[SWEEP_TASK].priority


def test_what_the_sweep_defers_again_goes_ahead_of_the_backlog(pg_dsn):
    for k in range(3):
        _record(pg_dsn, f"b{k}", f"b{k}.s", 1)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        # b1's wake-up lost (its worker killed, its job failed by an earlier sweep).
        conn.execute("DELETE FROM procrastinate_jobs WHERE lock = 'b1'")
    worker = QueueWorker(
        WorkerSettings(dsn=pg_dsn, models=lambda _n: saving_model(), config=CONFIG)
    )

    async def heal() -> tuple[int, int]:
        async with worker.app.open_async():
            return await sweep(worker.app, pg_dsn, priority=worker.settings.redefer_priority)

    assert asyncio.run(heal()) == (0, 1)
    with psycopg.connect(pg_dsn) as conn:
        rows: dict[str, int] = dict(
            conn.execute("SELECT lock, priority FROM procrastinate_jobs").fetchall()
        )
    assert rows == {"b0": 0, "b1": 50, "b2": 0}


# --- jobs cut off by an outage; what is fatal; procrastinate's own command line -------------


def _first_run_hangs_worker(dsn: str, started: Any, log: str) -> None:
    """A worker whose first model call never answers (the run the outage cuts off); the
    later ones save memory."""
    calls = 0
    saver = saving_model()

    async def answer(request: ModelRequest) -> Message | str:
        nonlocal calls
        calls += 1
        if calls == 1:
            started.set()
            await asyncio.Event().wait()
        saved = saver.function(request)
        answer = await saved if inspect.isawaitable(saved) else saved
        assert not isinstance(answer, ModelResponse)
        return answer

    model = FunctionModel(answer, name="function:first-hangs")
    settings = WorkerSettings(
        dsn=dsn,
        models=lambda _name: model,
        config=CONFIG,
        name="cut",
        concurrency=1,
        poll_interval=0.5,
        heartbeat_interval=0.5,
        stop_timeout=2.0,
        sweep_cron=None,  # only the worker's own release can free the directory
    )
    logging.basicConfig(level=logging.INFO, filename=log)
    asyncio.run(QueueWorker(settings).run(wait=True))


def test_a_run_cut_off_by_an_outage_is_run_again_on_return(own_server, tmp_path):
    dsn = own_server.dsn()
    _record(dsn, "dc", "dc.s", 1)
    started = _spawn.Event()
    log = tmp_path / "cut.log"
    process = _spawn.Process(target=_first_run_hangs_worker, args=(dsn, started, str(log)))
    process.start()
    try:
        assert started.wait(60), "the run never reached the model"
        own_server.halt()
        # Down until the worker has given up on this life: its run cancelled, its job
        # left 'doing' in the database under the worker's old id (it could not say
        # otherwise), which nothing but the worker's own release frees here.
        _wait_for(lambda: "run cancelled" in log.read_text(), 30, "the run cancelled")
        own_server.resume()
        _wait_for(_covered(dsn, "dc", "dc.s", 1), 30, "the cut-off run run again")
        assert process.is_alive()
        assert "released 1 job(s) cut off by the lost database: dc" in log.read_text()

        def none_doing() -> bool:
            # The run again commits its memory before its job is marked done: wait for
            # the job's end, then no job of the old life may still say 'doing'.
            with psycopg.connect(dsn) as conn:
                rows = conn.execute("SELECT status FROM procrastinate_jobs").fetchall()
            return all(status != "doing" for (status,) in rows)

        _wait_for(none_doing, 30, "every job ended")
        with psycopg.connect(dsn) as conn:
            assert one(conn, "SELECT count(*) FROM procrastinate_workers") == (1,)
    finally:
        if process.is_alive() and process.pid is not None:
            os.kill(process.pid, signal.SIGTERM)
        process.join(20)
        if process.is_alive():
            process.kill()
            process.join()
    assert process.exitcode == 0


def test_what_waiting_cannot_mend_is_fatal():
    from procrastinate.exceptions import ConnectorException

    from memdir.queue import SchemaError
    from memdir.queue._lifecycle import is_fatal

    def wrapped(cause: BaseException) -> BaseException:
        try:
            raise ConnectorException() from cause
        except ConnectorException as exc:
            return exc

    refused = psycopg.OperationalError("connection failed: Connection refused")
    password = psycopg.OperationalError(
        'connection failed: FATAL:  password authentication failed for user "x"'
    )
    missing = psycopg.OperationalError('FATAL:  database "nope" does not exist')
    starting = psycopg.OperationalError("FATAL:  the database system is starting up")
    assert not is_fatal(refused)
    assert not is_fatal(wrapped(refused))
    assert not is_fatal(starting)
    assert is_fatal(password)
    assert is_fatal(wrapped(password))
    assert is_fatal(missing)
    assert is_fatal(psycopg.ProgrammingError("invalid connection option 'nope'"))
    assert is_fatal(SchemaError("run `memdir queue migrate`"))


def test_procrastinates_command_line_runs_on_the_module_app(pg_dsn):
    env = {**os.environ, "MEMDIR_DB": pg_dsn, "PYTHONPATH": source_path()}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from procrastinate.cli import main; main()",
            "--app=memdir.queue.app",
            "healthchecks",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "OK" in done.stdout


def _plain_worker(dsn: str, name: str, idle_timeout: float) -> None:
    """A worker that saves memory, its transactions ended by the server after
    ``idle_timeout`` seconds idle."""
    model = saving_model()
    settings = WorkerSettings(
        dsn=dsn,
        models=lambda _name: model,
        config=CONFIG,
        name=name,
        concurrency=1,
        poll_interval=0.5,
        heartbeat_interval=0.5,
        idle_in_transaction_timeout=idle_timeout,
    )
    asyncio.run(QueueWorker(settings).run(wait=True))


def test_a_worker_sigstopped_in_its_commit_holds_nothing_for_long(pg_dsn, tmp_path):
    _record(pg_dsn, "fx", "fx.s", 1)
    # Hold the session's row so the worker's commit stops on it, mid-transaction.
    holder = psycopg.connect(pg_dsn)
    holder.execute("SELECT 1 FROM memdir_sessions WHERE dir_id = 'fx' FOR UPDATE")
    frozen = _spawn.Process(target=_plain_worker, args=(pg_dsn, "frozen", 2.0))
    frozen.start()
    log = (tmp_path / "b.log").open("wb")
    other = None
    try:
        _wait_for(
            lambda: (
                _query(
                    pg_dsn,
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND query LIKE 'UPDATE memdir_sessions%%'",
                )
                == (1,)
            ),
            60,
            "the worker's commit waits on the session's row",
        )
        assert frozen.pid is not None
        os.kill(frozen.pid, signal.SIGSTOP)
        holder.commit()  # its UPDATE goes through; the frozen client sends nothing more
        other = _start_cli_worker(pg_dsn, log, "--name", "b")
        _wait_for(lambda: _registered(pg_dsn) == 2, 60, "a worker started beside it")
        for d in ("o1", "o2"):
            _record(pg_dsn, d, f"{d}.s", 1)
        for d in ("o1", "o2"):
            _wait_for(_covered(pg_dsn, d, f"{d}.s", 1), 10, f"{d} committed")
        # The server ends the frozen transaction: fx's row is free again.
        holder.execute("SET lock_timeout = '500ms'")
        holder.commit()

        def fx_free() -> bool:
            try:
                holder.execute("SELECT 1 FROM memdir_dirs WHERE dir_id = 'fx' FOR UPDATE")
            except psycopg.errors.LockNotAvailable:
                holder.rollback()
                return False
            holder.rollback()
            return True

        _wait_for(fx_free, 15, "the frozen worker's locks released")
        os.kill(frozen.pid, signal.SIGCONT)
        # Its commit fails on the ended session; the turn is pending still, and runs.
        _wait_for(
            lambda: (
                _query(pg_dsn, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'doing'")
                == (0,)
            ),
            30,
            "the thawed worker's job ended",
        )
        _record(pg_dsn, "fx", "fx.s", 2)
        _wait_for(_covered(pg_dsn, "fx", "fx.s", 2), 15, "fx's turns covered after the thaw")
    finally:
        holder.close()
        if frozen.is_alive() and frozen.pid is not None:
            os.kill(frozen.pid, signal.SIGCONT)
            os.kill(frozen.pid, signal.SIGTERM)
        frozen.join(20)
        if frozen.is_alive():
            frozen.kill()
            frozen.join()
        codes = _stop_all([other] if other is not None else [])
        log.close()
    assert codes in ([0], [])
