"""A worker's life around its jobs: start, losing the database and finding it again, stop.

procrastinate's worker stops by itself when its connection breaks (a side task fails,
the worker shuts down, ``run_worker_async`` returns or raises), which left ``memdir
worker`` exiting, sometimes with status 0, on a server restart. :class:`Supervisor` is
the loop around it: a lost database is waited for with backoff and the worker started
again; only what waiting cannot mend (a bad DSN, a refused password, a schema this code
cannot use) ends it, with an error. A stop request (SIGTERM, SIGINT) ends it within a
bound: runs get part of it to finish, then are cancelled; their pending rows stay for
the next worker.

Also here: the connection settings that keep a worker's transactions from holding locks
for long (:func:`configure_connection`), and the scratch folders runs check directories
out into, each holding an flock on a file inside it while in use, so a later worker can
remove what a killed one left and never what a live one uses
(:func:`remove_stale_scratch`).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import re
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import procrastinate
import psycopg
from procrastinate.worker import Worker

from memdir.queue._app import CONNECT_TIMEOUT
from memdir.queue._schema import SchemaError

__all__ = [
    "SCRATCH_PREFIX",
    "LifeWorker",
    "Supervisor",
    "configure_connection",
    "is_fatal",
    "life_connector",
    "logger",
    "make_scratch",
    "remove_scratch",
    "remove_stale_scratch",
    "run_life",
    "scratch_prefix",
    "watch_database",
]

logger = logging.getLogger("memdir.queue")
"""The worker's own log: start, runs, reconnects, stop (INFO), lost connections (WARNING)."""

SCRATCH_PREFIX = "memdir-run-"
_SCRATCH_RE = re.compile(rf"^{re.escape(SCRATCH_PREFIX)}(\d+)@([A-Za-z0-9.]*)-")

# What waiting cannot mend, in libpq's and the server's words (a failed connection
# attempt carries no SQLSTATE in psycopg, only the message).
_FATAL_MESSAGES = (
    "password authentication failed",
    "authentication failed",
    "no password supplied",
    "no pg_hba.conf entry",
    "does not exist",  # database or role
    "invalid connection option",
    "invalid dsn",
    'missing "="',
    "could not translate host name",
    "invalid integer value",
    "invalid sslmode",
)
_FATAL_SQLSTATES = ("28000", "28P01", "3D000", "42501")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process, alive
    return True


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.]", "", socket.gethostname())


def scratch_prefix(pid: int | None = None) -> str:
    """The name a process's scratch folders start with: its pid and its host (a folder
    shared by containers holds other hosts' folders, whose pids mean nothing here)."""
    return f"{SCRATCH_PREFIX}{os.getpid() if pid is None else pid}@{_host()}-"


SCRATCH_LOCK = ".in-use"
"""The file inside a scratch folder its worker holds an flock on while the folder is
in use; the kernel drops the lock when the process ends, however it ends."""

_HELD: dict[Path, int] = {}
"""This process's scratch folders in use, with the descriptor holding each one's lock."""


def make_scratch(base: Path | None) -> Path:
    """A new scratch folder for one run, named after this process, locked until
    :func:`remove_scratch` (see :func:`remove_stale_scratch`)."""
    # Locked under a name no cleaner matches, then renamed: a cleaner never sees the
    # folder without its lock held.
    making = Path(tempfile.mkdtemp(prefix=f".{scratch_prefix()}", dir=base))
    fd = os.open(making / SCRATCH_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        scratch = making.with_name(making.name[1:])
        os.rename(making, scratch)
    except BaseException:
        os.close(fd)
        shutil.rmtree(making, ignore_errors=True)
        raise
    _HELD[scratch] = fd
    return scratch


def remove_scratch(scratch: Path) -> None:
    """Remove a folder :func:`make_scratch` made and release its lock (after removing:
    a cleaner must not find it unlocked while it is still being used)."""
    shutil.rmtree(scratch, ignore_errors=True)
    fd = _HELD.pop(scratch, None)
    if fd is not None:
        os.close(fd)


def _in_use(folder: Path, pid: int) -> bool:
    """Whether a process still uses a scratch folder: its lock file is locked. A pid is
    no proof (containers sharing ``/tmp`` under one hostname each have their own pids);
    only a folder without a lock file (made by a version without locks) falls back on
    the pid."""
    try:
        fd = os.open(folder / SCRATCH_LOCK, os.O_RDWR)
    except FileNotFoundError:
        return _alive(pid)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # releases the probe's own lock
    return False


def remove_stale_scratch(base: Path | None) -> int:
    """Remove the scratch folders of workers that are gone (a SIGKILL runs no cleanup);
    returns how many. Only folders named by :func:`make_scratch` on this host whose lock
    nobody holds: a live worker's runs, another host's, and anything else in the folder
    are left alone."""
    where = base if base is not None else Path(tempfile.gettempdir())
    removed = 0
    host = _host()
    with contextlib.suppress(OSError):
        for entry in where.iterdir():
            found = _SCRATCH_RE.match(entry.name)
            if found is None or found.group(2) != host or not entry.is_dir():
                continue
            if entry in _HELD or _in_use(entry, int(found.group(1))):
                continue
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    if removed:
        logger.info("removed %d scratch folder(s) left by stopped workers in %s", removed, where)
    return removed


def configure_connection(
    idle_in_transaction_timeout: float, lock_timeout: float
) -> Any:  # an async callable the pool runs on each new connection
    """The pool's ``configure``: a transaction left open by a worker that stopped moving
    (SIGSTOP, a paused VM, a partition that keeps the socket open) is ended by the server
    after ``idle_in_transaction_timeout`` seconds, releasing its row locks, instead of
    stalling every host and worker that needs them; and a statement waits at most
    ``lock_timeout`` seconds for a lock (the job then fails, its pending rows intact,
    and is deferred again). 0 leaves the server's setting."""

    async def configure(conn: psycopg.AsyncConnection[Any]) -> None:
        settings = [
            (name, f"{int(seconds * 1000)}ms")
            for name, seconds in (
                ("idle_in_transaction_session_timeout", idle_in_transaction_timeout),
                ("lock_timeout", lock_timeout),
            )
            if seconds > 0
        ]
        if not settings:
            return
        await conn.set_autocommit(True)
        for name, value in settings:
            await conn.execute("SELECT set_config(%s, %s, false)", (name, value))
        await conn.set_autocommit(False)

    return configure


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def is_fatal(exc: BaseException) -> bool:
    """Whether ``exc`` is one a worker cannot wait out: a schema it cannot use, a DSN
    that does not parse, credentials or a database the server refuses. A refused or
    dropped connection, a server starting or shutting down, is not."""
    for cause in _causes(exc):
        if isinstance(cause, SchemaError):
            return True
        if isinstance(cause, psycopg.Error):
            if isinstance(cause, psycopg.ProgrammingError) and cause.sqlstate is None:
                return True  # the DSN itself
            if cause.sqlstate in _FATAL_SQLSTATES:
                return True
            text = str(cause).lower()
            if isinstance(cause, psycopg.OperationalError) and any(
                m in text for m in _FATAL_MESSAGES
            ):
                return True
    return False


STEADY_SECONDS = 10.0
"""How long a worker's life must last for its loss to start the reconnect backoff afresh."""


class Supervisor:
    """The stop request and the reconnect backoff of one :meth:`QueueWorker.run`."""

    def __init__(self, *, stop_timeout: float, backoff_base: float, backoff_max: float) -> None:
        self.stop_timeout = stop_timeout
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.stopping = asyncio.Event()
        self._failures = 0
        self._up_since: float | None = None

    @property
    def graceful_timeout(self) -> float:
        """How long running jobs may take to finish after a stop request before they are
        cancelled: half the bound, the rest for cancelling them and leaving cleanly."""
        return self.stop_timeout / 2

    def stop(self, reason: str = "asked to stop") -> None:
        if not self.stopping.is_set():
            logger.info("stopping (%s): runs get %.1f s to finish", reason, self.graceful_timeout)
            self.stopping.set()

    @contextlib.contextmanager
    def signals(self, install: bool) -> Iterator[None]:
        """SIGTERM and SIGINT ask for a stop (a second one is no harder: the bound holds)."""
        if not install:
            yield
            return
        loop = asyncio.get_running_loop()
        installed: list[signal.Signals] = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self.stop, sig.name)
                installed.append(sig)
        try:
            yield
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    def succeeded(self) -> None:
        """The worker got going. The backoff starts again from the beginning only once
        this life has lasted (see :meth:`wait_before_retry`): a life that fails right
        after it starts (a pooler that refuses LISTEN) must not reconnect at the
        shortest delay forever."""
        self._up_since = time.monotonic()

    async def wait_before_retry(self, why: str) -> None:
        """Log the loss and wait (doubling, up to the cap) or until a stop request. A
        life that lasted past :data:`STEADY_SECONDS` starts the doubling afresh."""
        up, self._up_since = self._up_since, None
        if up is not None and time.monotonic() - up >= max(STEADY_SECONDS, self.backoff_max):
            self._failures = 0
        delay = min(self.backoff_base * 2**self._failures, self.backoff_max)
        self._failures += 1
        logger.warning("lost the database (%s); trying again in %.1f s", why, delay)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), delay)


class LifeWorker(Worker):
    """procrastinate's worker, telling when it stops, whoever asked: it stops by itself
    when one of its side tasks fails (its listener or heartbeat lost the database)."""

    def __init__(self, app: procrastinate.App, *, on_stop: Callable[[], None], **options: Any):
        super().__init__(app, **options)
        self._on_stop = on_stop

    def stop(self) -> None:
        super().stop()  # type: ignore[no-untyped-call]
        self._on_stop()


def life_connector(dsn: str, concurrency: int) -> procrastinate.PsycopgConnector:
    """procrastinate's connector for one life of a worker. Its queries are short, so a
    connection not had within seconds means the database is gone: waiting on, as the
    pool's 30 s default would, only delays the reconnect."""
    return procrastinate.PsycopgConnector(
        conninfo=dsn,
        min_size=1,
        max_size=concurrency + 4,
        timeout=3.0,
        kwargs={"connect_timeout": CONNECT_TIMEOUT},
    )


async def _ask(conn: psycopg.AsyncConnection[Any]) -> None:
    await conn.execute("SELECT 1")


async def watch_database(dsn: str, interval: float, on_lost: Callable[[], None]) -> None:
    """Ask the database a trivial question every ``interval`` seconds on a connection of
    its own; call ``on_lost`` at the first that fails or goes unanswered for 5 s.
    procrastinate's worker notices a lost database only through its listener (which
    reconnects by itself while it can) and its heartbeat (whose failures it may not
    surface while a job runs): a busy worker could go on for a long time with runs that
    can never commit."""
    conn: psycopg.AsyncConnection[Any] | None = None
    try:
        while True:
            try:
                if conn is None:
                    conn = await asyncio.wait_for(
                        psycopg.AsyncConnection.connect(dsn, autocommit=True, connect_timeout=5),
                        6.0,
                    )
                assert conn is not None
                await asyncio.wait_for(_ask(conn), 5.0)
            except (psycopg.Error, OSError, TimeoutError) as exc:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                logger.warning("the database does not answer: %s", first)
                on_lost()
                return
            await asyncio.sleep(interval)
    finally:
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()


async def run_life(
    worker: LifeWorker,
    supervisor: Supervisor,
    lost: asyncio.Event,
    connector: procrastinate.PsycopgConnector,
    watch: Coroutine[Any, Any, None] | None = None,
) -> bool:
    """Run ``worker`` until it stops; returns whether on a stop request.

    On a stop request its runs get ``supervisor.graceful_timeout`` to finish, are then
    cancelled by procrastinate, and the whole is cut at ``supervisor.stop_timeout``.
    When it stops by itself (the database lost), what it still waits on the database
    for is cut short by closing its connector: a worker that cannot reach the database
    has nothing to wait for, and the next life starts sooner.
    """
    running = asyncio.create_task(worker.run(), name="memdir worker")  # type: ignore[no-untyped-call]
    waits: list[asyncio.Task[Any]] = [
        asyncio.create_task(supervisor.stopping.wait()),
        asyncio.create_task(lost.wait()),
    ]
    if watch is not None:
        waits.append(asyncio.create_task(watch, name="memdir database watch"))
    try:
        try:
            await asyncio.wait({running, *waits}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # Cancelled (an embedding application ending its loop): stop as on SIGTERM,
            # within the bound, then let the cancellation go on.
            if not running.done():
                supervisor.stop("cancelled")
                worker.stop()
                await asyncio.wait({running}, timeout=supervisor.stop_timeout)
            raise
        if not running.done():
            if supervisor.stopping.is_set() or not lost.is_set():
                worker.stop()
                # Runs have the first half, procrastinate then cancels them and
                # records them aborted; what is left of the bound ends the rest.
                first, then = 0.8 * supervisor.stop_timeout, 0.2 * supervisor.stop_timeout
            else:
                first, then = 1.0, supervisor.graceful_timeout + 1.0
            done, _ = await asyncio.wait({running}, timeout=first)
            if not done:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(connector.close_async(), 1.0)
                done, _ = await asyncio.wait({running}, timeout=then)
            if not done:
                logger.warning("the worker did not stop in time; leaving it")
                running.cancel()
                await asyncio.wait({running}, timeout=1.0)
                # A life left behind on a lost database is no stop request: the caller
                # reconnects (a stopped worker exiting 0 would not be restarted).
                return supervisor.stopping.is_set()
        running.result()
        return supervisor.stopping.is_set()
    finally:
        for task in waits:
            task.cancel()
        if not running.done():
            running.cancel()
        elif not running.cancelled():
            running.exception()  # seen: the caller has what it needs
