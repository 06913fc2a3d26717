"""The procrastinate application both sides share: its connector, task and queue names."""

from __future__ import annotations

import procrastinate

__all__ = ["EXTRACT_TASK", "NOTIFY_CHANNEL", "QUEUE_NAME", "SWEEP_TASK", "make_app"]

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
