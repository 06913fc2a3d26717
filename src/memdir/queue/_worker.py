"""The worker's side: one job runs one directory — snapshot, extract, fenced commits.

A job reads the directory's pending rows (one per session with an unprocessed turn,
and of each session only the messages after its cursor and the context a run needs,
see :mod:`memdir.queue._runs`) at generation *G*. Each session gets its own working copy
of the directory in a scratch folder, and memdir's own :class:`~memdir.MemoryExtractor`
runs there for each session at once, restored to the session's cursor, as one machine
would (fork with the host's shipped request, or the standalone request). As each
session's run ends, one transaction compares-and-swaps the generation (*G*, then what
the job's previous commit left), writes the files *that session* changed (rebased onto
the job's earlier commits: the index merged by lines, another file changed by both a
clash that re-runs the later session), moves that session's cursor, and deletes its
pending row only if its version is the one read and the run covered it to the end
(a run cut short keeps the rest pending, with a retry): a turn that arrived
during the run keeps its row, and the job that turn deferred (allowed, since this one
is ``doing``, not ``todo``) runs it next. The commits of one job take turns; the
directory's lock keeps other jobs out, so while a run goes on, turns arriving for the
directory's other sessions are taken up by this job too (when a run ends, and every
``poll_interval``), not left waiting behind it. A session whose run hangs holds back no
other session: it is cancelled at ``run_timeout``, retried, and parked after
``max_attempts``. The events one machine would emit (``extract.run``,
``extract.throttled``, …, tagged with the directory and session) go out after their
session's commit, so a run reported is a run committed.

Two rules keep a directory from being blocked for good (both from procrastinate's open
issues, see the scale-out note): the extract task has no ``RetryStrategy`` — a failed
session is retried by deferring a new job with a backoff — and stalled jobs are failed
by :func:`sweep`, never retried.

This module holds :class:`QueueWorker`, the worker's life and its runs; the settings and
results are in :mod:`memdir.queue._settings`, the working copies and their rebase in
:mod:`memdir.queue._copies`, reading the pending sessions and running one in
:mod:`memdir.queue._sessions`, a session's commit and its retries in
:mod:`memdir.queue._commit`, the sweeper in :mod:`memdir.queue._sweep` (the public names
re-exported here, where they were first defined).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import procrastinate
import psycopg
import psycopg_pool

from memdir.queue._app import CONNECT_TIMEOUT, EXTRACT_TASK, SWEEP_TASK, make_app
from memdir.queue._commit import commit
from memdir.queue._copies import (
    Commits,
    Copy,
    Pending,
    check_out,
    setup_failed,
)
from memdir.queue._lifecycle import (
    LifeWorker,
    Supervisor,
    configure_connection,
    is_fatal,
    life_connector,
    logger,
    make_scratch,
    remove_scratch,
    remove_stale_scratch,
    run_life,
    watch_database,
)
from memdir.queue._prune import register_prune
from memdir.queue._runs import SessionsParkedError
from memdir.queue._schema import check_schema
from memdir.queue._sessions import more_pendings, report, run_session, take_snapshot
from memdir.queue._settings import DirRun, SessionOutcome, WorkerSettings
from memdir.queue._store import Checkout
from memdir.queue._sweep import RECORD_FAILURE, sweep
from memdir.telemetry import emit

__all__ = ["DirRun", "QueueWorker", "SessionOutcome", "WorkerSettings", "sweep"]


class QueueWorker:
    """Runs ``memdir.extract`` jobs; :meth:`run` is the worker loop, :meth:`extract` one
    job (callable directly, as the tests do to play a zombie)."""

    def __init__(self, settings: WorkerSettings) -> None:
        self.settings = settings
        self.app: procrastinate.App = make_app(settings.dsn)
        self._pool: psycopg_pool.AsyncConnectionPool[Any] | None = None
        self._orphan: int | None = None
        """This process's id in the queue from a life that lost the database."""
        worker = self

        # No retry= here, on purpose (module docstring): a failed session is retried by
        # a new job, and a job that raises (the database gone mid-run) ends failed with
        # its pending rows intact, for the sweeper to defer again. ``attempt`` only
        # shows in the job's arguments, for whoever reads the queue.
        @self.app.task(name=EXTRACT_TASK, pass_context=True, queue=settings.queue)
        async def extract_task(
            context: procrastinate.JobContext, dir_id: str, attempt: int = 0
        ) -> None:
            job_id = context.job.id
            began = time.monotonic()
            logger.info("run started: dir %s, job %s, attempt %d", dir_id, job_id, attempt)
            try:
                run = await worker.extract(dir_id, job_id=job_id)
                if run.parked:  # the job ends failed, with why, once its commits are in
                    raise SessionsParkedError("; ".join(run.parked))
            except asyncio.CancelledError:
                logger.info(
                    "run cancelled: dir %s, job %s, after %.2f s (its turns stay pending)",
                    dir_id,
                    job_id,
                    time.monotonic() - began,
                )
                raise
            except Exception as exc:
                logger.warning(
                    "run failed: dir %s, job %s, after %.2f s: %s: %s",
                    dir_id,
                    job_id,
                    time.monotonic() - began,
                    type(exc).__name__,
                    exc,
                )
                await worker._record_failure(job_id, dir_id, exc)
                raise
            logger.info(
                "run ended: dir %s, job %s, %s, in %.2f s%s",
                dir_id,
                job_id,
                "conflict (discarded)"
                if run.conflict
                else ("committed" if run.committed else "nothing pending"),
                time.monotonic() - began,
                "".join(f"; session {o.session}: {o.outcome}" for o in run.sessions),
            )

        async def sweep_task(timestamp: int) -> None:
            await sweep(
                worker.app,
                settings.dsn,
                queue=settings.queue,
                stalled_after=settings.stalled_after,
                sink=settings.sink,
                priority=settings.redefer_priority,
            )

        task = self.app.task(
            name=SWEEP_TASK, queue=settings.queue, priority=settings.sweep_priority
        )(sweep_task)
        if settings.sweep_cron is not None:
            # Its own queueing lock: however many workers defer it, one sweep waits; and
            # ahead of the extract jobs, which fetch in priority order.
            self.app.periodic(
                cron=settings.sweep_cron,
                periodic_id="memdir",
                queueing_lock=SWEEP_TASK,
                priority=settings.sweep_priority,
            )(task)
        register_prune(self.app, settings)

    async def run(self, *, wait: bool = True, install_signal_handlers: bool = True) -> None:
        """Work until stopped (``wait``) or until no job is left to start (not ``wait``).

        The database lost (a restart, a network cut) is waited for with backoff, and the
        worker starts again, listening again; only what waiting cannot mend raises (a
        refused DSN or password, a schema this code cannot use: :class:`SchemaError`,
        which says to run ``memdir queue migrate``). A stop request (SIGTERM or SIGINT
        with ``install_signal_handlers``, or cancelling this coroutine) returns within
        ``settings.stop_timeout``; cancelled runs leave their pending rows.
        """
        settings = self.settings
        supervisor = Supervisor(
            stop_timeout=settings.stop_timeout,
            backoff_base=settings.reconnect_base_seconds,
            backoff_max=settings.reconnect_max_seconds,
        )
        await asyncio.to_thread(remove_stale_scratch, settings.scratch)
        logger.info(
            "worker %s starting: queue %s, %d at once",
            settings.name,
            settings.queue,
            settings.concurrency,
        )
        with supervisor.signals(install_signal_handlers):
            while not supervisor.stopping.is_set():
                try:
                    # Cheap and lock-free: schema work is `memdir queue migrate`'s.
                    await asyncio.to_thread(check_schema, settings.dsn)
                    stopped = await self._work(wait, supervisor)
                except asyncio.CancelledError:
                    supervisor.stop("cancelled")
                    raise
                except Exception as exc:
                    if is_fatal(exc):
                        logger.error("cannot work: %s: %s", type(exc).__name__, exc)
                        raise
                    first = (str(exc).strip().splitlines() or [""])[0]
                    why = f"{type(exc).__name__}: {first}"
                else:
                    if stopped or not wait:
                        break
                    why = "the worker stopped by itself"
                if supervisor.stopping.is_set():
                    break
                await supervisor.wait_before_retry(why)
        logger.info("worker %s stopped", settings.name)

    async def _work(self, wait: bool, supervisor: Supervisor) -> bool:
        """One life of procrastinate's worker, on fresh connections; returns whether it
        ended on a stop request. When it could not unregister (the database was gone),
        its id in the queue is kept for the next life to release its jobs."""
        settings = self.settings
        # Two connections per job (snapshot, commit), never both at once; a connection
        # the server dropped is replaced when taken, not handed to a job.
        pool: psycopg_pool.AsyncConnectionPool[Any] = psycopg_pool.AsyncConnectionPool(
            settings.dsn,
            min_size=1,
            max_size=settings.concurrency + 1,
            open=False,
            check=psycopg_pool.AsyncConnectionPool.check_connection,
            kwargs={"connect_timeout": CONNECT_TIMEOUT},
            configure=configure_connection(
                settings.idle_in_transaction_timeout, settings.lock_timeout
            ),
        )
        lost = asyncio.Event()
        worker = LifeWorker(
            self.app,
            on_stop=lambda: None if supervisor.stopping.is_set() else lost.set(),
            queues=[settings.queue],
            wait=wait,
            concurrency=settings.concurrency,
            name=settings.name,
            fetch_job_polling_interval=settings.poll_interval,
            update_heartbeat_interval=settings.heartbeat_interval,
            stalled_worker_timeout=settings.stalled_after,
            shutdown_graceful_timeout=supervisor.graceful_timeout,
            install_signal_handlers=False,
            delete_jobs="never" if settings.keep_jobs else "successful",
        )
        # A connector of this life's own: closing it is how a life whose database went
        # away is ended (what waits on its pool fails at once), and the next life's
        # pool starts clean.
        connector = life_connector(settings.dsn, settings.concurrency)
        with self.app.replace_connector(connector):
            try:
                await connector.open_async()
                await pool.open(wait=True, timeout=10.0)
                self._pool = pool
                supervisor.succeeded()
                if self._orphan is not None:
                    await self._release_orphans(self._orphan)
                    self._orphan = None
                watch = watch_database(
                    settings.dsn, min(settings.heartbeat_interval, 2.0), worker.stop
                )
                return await run_life(worker, supervisor, lost, connector, watch)
            finally:
                if worker.worker_id is not None:
                    self._orphan = worker.worker_id
                self._pool = None
                with contextlib.suppress(Exception):
                    await pool.close(timeout=1.0)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(connector.close_async(), 2.0)

    async def _release_orphans(self, worker_id: int) -> None:
        """This process's previous life lost the database with jobs running: they were
        cancelled, but their rows still say 'doing' under its old id. End them as
        aborted (their pending rows stay), so their directories run again now, not
        after the sweeper finds them stalled."""
        async with self._connection() as conn:
            await conn.set_autocommit(True)
            try:
                rows = await (
                    await conn.execute(
                        "SELECT id, lock FROM procrastinate_jobs "
                        "WHERE worker_id = %s AND status = 'doing'",
                        (worker_id,),
                    )
                ).fetchall()
                for job_id, _ in rows:
                    await conn.execute(
                        "SELECT procrastinate_finish_job_v1(%s, 'aborted', false)", (job_id,)
                    )
                await conn.execute("DELETE FROM procrastinate_workers WHERE id = %s", (worker_id,))
            finally:
                await conn.set_autocommit(False)
        if rows:
            logger.info(
                "released %d job(s) cut off by the lost database: %s",
                len(rows),
                ", ".join(str(lock) for _, lock in rows),
            )
        settings = self.settings
        await sweep(
            self.app,
            settings.dsn,
            queue=settings.queue,
            stalled_after=settings.stalled_after,
            sink=settings.sink,
            priority=settings.redefer_priority,
        )

    # --- one job --------------------------------------------------------------------------

    async def extract(self, dir_id: str, *, job_id: int | None = None) -> DirRun:
        """Run the directory's pending turns and commit them, fenced by the generation.

        The directory's sessions run at once, each in its own working copy of what the
        database held when it started; each commits as soon as its run ends, only what
        it changed itself, so a session whose run hangs holds back none of the others
        (it is cancelled at ``run_timeout``), and a session refused or re-run later
        never finds its memories committed already by another's commit."""
        settings = self.settings
        started = time.monotonic()
        scratch = make_scratch(settings.scratch)
        tasks: list[asyncio.Task[DirRun]] = []
        announced: int | None = None  # the generation extract.started went out with
        try:
            generation, rows, pendings, started_at = await take_snapshot(
                dir_id, config=self.settings.config, connection=self._connection
            )
            snapshot = Checkout(
                dir_id=dir_id, generation=generation, files={r[0]: r[2] for r in rows}
            )
            read_seconds = time.monotonic() - started
            if not pendings:
                return DirRun(
                    dir_id=dir_id,
                    generation=snapshot.generation,
                    committed=False,
                    db_seconds=read_seconds,
                )
            emit(
                settings.sink,
                "extract.started",
                dir_id=dir_id,
                generation=snapshot.generation,
                sessions=len(pendings),
                worker=settings.name,
            )
            announced = snapshot.generation
            state = Commits(
                generation=snapshot.generation,
                files=dict(snapshot.files),
                contents={path: (content, mtime) for path, content, _, mtime in rows},
            )
            state.db_seconds = read_seconds
            running: set[str] = set()
            failed: set[str] = set()
            ended = asyncio.Event()

            async def one(pending: Pending, where: Path) -> DirRun:
                try:
                    copy: Copy | None = None
                    try:
                        current = [
                            (path, state.contents[path][0], digest, state.contents[path][1])
                            for path, digest in state.files.items()
                        ]
                        copy = await asyncio.to_thread(check_out, where, dir_id, current)
                        outcome, events = await run_session(
                            copy.root, pending, settings=self.settings
                        )
                    except Exception as exc:
                        # A session that cannot even start (its model, its stored
                        # parameters) fails alone, counted as an attempt so it parks
                        # after max_attempts; the directory's other sessions go on.
                        logger.warning("session %s of %s failed: %r", pending.session, dir_id, exc)
                        outcome, events = setup_failed(pending, exc), []
                    async with state.lock:
                        begun = time.monotonic()
                        run = await commit(
                            state,
                            copy,
                            pending,
                            outcome,
                            started_at,
                            job_id,
                            settings=self.settings,
                            app=self.app,
                            connection=self._connection,
                        )
                        state.db_seconds += time.monotonic() - begun
                    done = run.sessions[0]
                    if done.error is not None or not (run.committed or run.conflict):
                        # Failed, cut short or clashed: its retry job takes it up after
                        # the backoff, not this job at once.
                        failed.add(pending.session)
                    report(run, [(outcome, events)], started, settings=self.settings)
                    return run
                finally:
                    running.discard(pending.session)
                    ended.set()

            try:
                async with asyncio.TaskGroup() as group:

                    def start(pending: Pending) -> None:
                        running.add(pending.session)
                        where = scratch / f"s{len(tasks)}"
                        tasks.append(group.create_task(one(pending, where)))

                    for pending in pendings:
                        start(pending)
                    # While runs go on (one may hang until run_timeout), turns arriving
                    # for the other sessions are taken up here, not left waiting behind
                    # this job: looked for when a run ends, and every poll_interval.
                    until = started + settings.run_timeout
                    while running and not state.conflict and time.monotonic() < until:
                        wait = min(settings.poll_interval, until - time.monotonic())
                        with contextlib.suppress(TimeoutError):
                            async with asyncio.timeout(max(wait, 0.0)):
                                await ended.wait()
                        ended.clear()  # a run ending from here on wakes the next wait
                        if not running or state.conflict:
                            break
                        begun = time.monotonic()
                        more = await more_pendings(
                            dir_id,
                            state.generation,
                            running | failed,
                            config=self.settings.config,
                            connection=self._connection,
                        )
                        state.db_seconds += time.monotonic() - begun
                        for pending in more:
                            start(pending)
            except BaseExceptionGroup as group_failed:
                # A commit that raised (the database gone) cancelled the other runs: say
                # why in the job's own terms, not the group's.
                raise group_failed.exceptions[0] from None
        except asyncio.CancelledError:
            if announced is not None:
                # Stopped (SIGTERM, the database lost, the job's deadline): the job ends
                # here all the same, for whoever pairs extract.started with its end.
                done = [
                    t.result()
                    for t in tasks
                    if t.done() and not t.cancelled() and t.exception() is None
                ]
                emit(
                    settings.sink,
                    "extract.finished",
                    dir_id=dir_id,
                    generation=announced,
                    commits=sum(r.commits for r in done),
                    conflict=any(r.conflict for r in done),
                    cancelled=True,
                    duration_ms=int((time.monotonic() - started) * 1000),
                    worker=settings.name,
                )
            raise
        finally:
            # Off the event loop: a large checkout takes a while to remove, and the
            # worker's other jobs and heartbeats go on meanwhile. Shielded so a cancelled
            # job still removes its folder (and releases its lock) before it ends.
            await asyncio.shield(asyncio.to_thread(remove_scratch, scratch))
        runs = [task.result() for task in tasks]
        # The job's end: its runs ran side by side, each committed on its own
        # (extract.committed, one per session); between extract.started and this, no
        # other job ran the directory.
        emit(
            settings.sink,
            "extract.finished",
            dir_id=dir_id,
            generation=snapshot.generation,
            commits=sum(r.commits for r in runs),
            conflict=any(r.conflict for r in runs),
            duration_ms=int((time.monotonic() - started) * 1000),
            worker=settings.name,
        )
        return DirRun(
            dir_id=dir_id,
            generation=snapshot.generation,
            committed=any(r.committed for r in runs),
            conflict=any(r.conflict for r in runs),
            sessions=tuple(o for r in runs for o in r.sessions),
            files_changed=sum(r.files_changed for r in runs),
            memories=tuple(m for r in runs for m in r.memories),
            commits=sum(r.commits for r in runs),
            parked=tuple(p for r in runs for p in r.parked),
            db_seconds=state.db_seconds,
        )

    async def _record_failure(self, job_id: int | None, dir_id: str, exc: Exception) -> None:
        """Keep why a job raised, for ``memdir queue status`` (best effort: the database
        may be what failed; the job ends failed either way, its pending rows intact)."""
        reason = f"{type(exc).__name__}: {exc}"[:500]
        emit(
            self.settings.sink,
            "queue.job_failed",
            job_id=job_id,
            dir_id=dir_id,
            error_type=type(exc).__name__,
            reason=reason,
        )
        if job_id is None:
            return
        with contextlib.suppress(psycopg.Error):
            async with await psycopg.AsyncConnection.connect(
                self.settings.dsn, autocommit=True
            ) as conn:
                await conn.execute(RECORD_FAILURE, (job_id, reason))

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A connection from the worker's pool while :meth:`run` runs; a fresh one for
        a direct call (a new backend per job costs the database a process each). Either
        way with the worker's timeouts (:func:`configure_connection`)."""
        if self._pool is not None:
            async with self._pool.connection() as conn:
                yield conn
        else:
            settings = self.settings
            async with await psycopg.AsyncConnection.connect(settings.dsn) as conn:
                await configure_connection(
                    settings.idle_in_transaction_timeout, settings.lock_timeout
                )(conn)
                yield conn
