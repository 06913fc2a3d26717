"""What a queue worker is told and what it reports: :class:`WorkerSettings`, and the
:class:`DirRun` / :class:`SessionOutcome` a job returns.

Kept apart from the worker itself so the CLI, the prune and the tests can read the
settings and results without the job machinery, and so the worker module holds
behaviour only.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memdir.extract import ExtractConfig
from memdir.models import Model
from memdir.queue._app import QUEUE_NAME
from memdir.queue._prune import DAY
from memdir.telemetry import Sink

__all__ = ["DirRun", "ModelFactory", "SessionOutcome", "WorkerSettings"]

ModelFactory = Callable[[str | None], Model]
"""The worker's model for a shipped request's model name (None: no request was shipped,
the standalone request uses the worker's default)."""


@dataclass(frozen=True, kw_only=True)
class WorkerSettings:
    """How a worker runs jobs."""

    dsn: str
    models: ModelFactory
    config: ExtractConfig = field(default_factory=ExtractConfig)
    name: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    queue: str = QUEUE_NAME
    concurrency: int = 4
    """Jobs (directories) one worker process runs at once."""
    backoff_base_seconds: float = 1.0
    """The wait before a failed session's first retry; it doubles with each attempt."""
    backoff_max_seconds: float = 60.0
    """The longest wait before a failed session is tried again."""
    sweep_cron: str | None = "* * * * *"
    """When the sweeper runs (procrastinate's cron syntax, a sixth field for seconds);
    None: this worker defers no sweeps (another one, or an operator, does)."""
    stalled_after: float = 30.0
    """Seconds without a heartbeat after which a worker's jobs count as stalled."""
    scratch: Path | None = None
    """Where working copies are checked out (default: the system's temporary folder)."""
    run_timeout: float = 900.0
    """The most one session's extraction may take; past it the run is cancelled and
    counts as a failed attempt."""
    max_attempts: int = 3
    """Failed attempts (errors, timeouts) after which a session is parked: its turn kept,
    no more retries until a newer turn or ``memdir queue retry``, the job failed with why."""
    poll_interval: float = 5.0
    """How often idle workers look for scheduled jobs (retries); new ones come by NOTIFY.
    Also how often a job whose runs go on looks for turns of its directory's other
    sessions."""
    heartbeat_interval: float = 10.0
    prune_cron: str | None = "17 * * * *"
    """When consumed messages, old runs and finished jobs are pruned (cron syntax, as
    ``sweep_cron``); None: this worker defers no prunes."""
    keep_runs_seconds: float | None = 7 * DAY
    """How long committed runs' audit rows are kept (None: for good)."""
    keep_finished_seconds: float | None = DAY
    """How long finished (succeeded, cancelled) jobs are kept when ``keep_jobs``."""
    keep_failed_seconds: float | None = 7 * DAY
    """How long failed jobs, and why they failed, are kept for ``memdir queue status``."""
    keep_jobs: bool = False
    """Keep succeeded jobs (and their ``procrastinate_events``) for inspection, for
    ``keep_finished_seconds``; by default they are deleted at once, failed ones kept for
    ``memdir queue status`` (``keep_failed_seconds``)."""
    stop_timeout: float = 10.0
    """After SIGTERM/SIGINT, the most :meth:`QueueWorker.run` takes to return: runs get
    half of it to finish, then are cancelled (their pending rows stay for another
    worker)."""
    reconnect_base_seconds: float = 0.2
    """The wait before reconnecting after the database was lost; it doubles each try."""
    reconnect_max_seconds: float = 2.0
    """The longest wait between reconnection attempts (a down server costs one refused
    connection per try; a short cap picks work up soon after it is back)."""
    idle_in_transaction_timeout: float = 15.0
    """The server ends a worker transaction idle this long (a frozen worker), releasing
    its locks; a worker's transactions never wait on anything but the database."""
    lock_timeout: float = 30.0
    """The longest one of a worker's statements waits for a lock (0: no limit)."""
    sweep_priority: int = 100
    """The sweeper's priority over extract jobs: at the next free slot it runs first,
    never behind a backlog (a killed worker's directories wait on it)."""
    redefer_priority: int = 50
    """The priority of the jobs the sweeper defers again (a killed worker's directories,
    which have waited already): ahead of the backlog, behind the sweeper."""
    sink: Sink | None = None


@dataclass(frozen=True, kw_only=True)
class SessionOutcome:
    """What a run did for one session."""

    session: str
    outcome: str
    """``ran``, ``skipped`` (the host wrote memory itself), ``throttled``, ``failed``."""
    from_seq: int
    to_seq: int
    error: str | None = None
    covered_at: float | None = None
    """When the run ended (epoch seconds): memdir's own writes of this run are older."""
    rows_read: int = 0
    """Message rows the run read from the database: its new messages and the context
    before the cursor it needs, whatever the conversation's length."""


@dataclass(frozen=True, kw_only=True)
class DirRun:
    """What one job did to one directory."""

    dir_id: str
    generation: int
    """The generation it started from."""
    committed: bool
    """False: nothing was pending, or the generation had moved (a conflict)."""
    conflict: bool = False
    sessions: tuple[SessionOutcome, ...] = ()
    files_changed: int = 0
    memories: tuple[str, ...] = ()
    """The memory files the commit wrote (relative paths, indexes left out): what the
    worker reports saved, one ``queue.memory_saved`` event each."""
    commits: int = 0
    """Commits made: each session's run commits on its own as soon as it ends."""
    parked: tuple[str, ...] = ()
    """Why sessions were parked (their ``max_attempts``-th failure), one line each."""
    db_seconds: float = 0.0
    """Time spent reading and committing in the database (the runs left out)."""
