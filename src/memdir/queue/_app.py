"""The procrastinate application both sides share: its connector, task and queue names."""

from __future__ import annotations

import os

import procrastinate

__all__ = [
    "CONNECT_TIMEOUT",
    "DSN_ENV",
    "EXTRACT_TASK",
    "NOTIFY_CHANNEL",
    "QUEUE_NAME",
    "SWEEP_TASK",
    "env_app",
    "make_app",
]

DSN_ENV = "MEMDIR_DB"
"""The database of ``memdir.queue.app`` (and of the CLI's ``--db`` when not given)."""

CONNECT_TIMEOUT = 5
"""Seconds a worker's or an operator command's connection attempt may take: a server
that does not answer (a partition, not a refusal) fails it in time for the reconnect
backoff, the stop bound and a one-line error, not after the kernel's minutes of retries."""

EXTRACT_TASK = "memdir.extract"
"""One job per directory run; deferred with ``lock`` = ``queueing_lock`` = the directory."""
SWEEP_TASK = "memdir.sweep"
QUEUE_NAME = "memdir"
NOTIFY_CHANNEL = "memdir_commit"
"""Every commit notifies it with the directory id, for whoever waits on progress."""


def make_app(dsn: str) -> procrastinate.App:
    """An app on ``dsn``. The host side never opens it: its defers run on the host's own
    connection, inside the transaction that records the turn."""
    return procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))


def env_app() -> procrastinate.App:
    """The app behind ``memdir.queue.app``, on ``$MEMDIR_DB`` (libpq's own ``PG*``
    variables when it is unset), for procrastinate's command line::

        MEMDIR_DB=postgresql://… procrastinate --app=memdir.queue.app shell

    It knows memdir's task names, not how to run them: inspect, cancel and retry jobs
    with it (``shell``, ``healthchecks``), but run jobs with ``memdir worker``, which
    a ``procrastinate worker`` on this app would fail. Schema work is ``memdir queue
    migrate``'s (it also records the version the workers check).
    """
    app = make_app(os.environ.get(DSN_ENV, ""))

    def _not_here(*args: object, **kwargs: object) -> None:
        raise RuntimeError("memdir's jobs run in `memdir worker`, not in this app's worker")

    for name in (EXTRACT_TASK, SWEEP_TASK):
        app.task(name=name, queue=QUEUE_NAME)(_not_here)
    return app
