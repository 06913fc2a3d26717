"""One connection pool per host process and database, shared by its directories.

A host serves many memory directories; a connection each (the old way) made 60 to 85
server connections for five hosts. Every :class:`~memdir.queue.QueueExtractor` of a
process on the same DSN and time limits borrows from one ``psycopg_pool`` pool instead,
for the few milliseconds a turn takes to record. The pool is thread-safe; async hosts
record on a thread too (see ``aon_turn_end``), so one pool serves both and is tied to no
event loop.

Pools are counted: the last extractor to close its share closes the pool; extractors
never closed keep it until the interpreter exits.
"""

from __future__ import annotations

import atexit
import threading
from dataclasses import dataclass

from psycopg_pool import ConnectionPool

__all__ = ["HostLimits", "acquire_pool", "open_pools", "release_pool"]


@dataclass(frozen=True, kw_only=True)
class HostLimits:
    """How long a host's connection may wait on the database (seconds)."""

    lock_timeout: float
    statement_timeout: float
    connect_timeout: float
    pool_size: int

    def options(self) -> str:
        """The server settings of every pooled connection. An idle transaction is ended
        by the server too: a host frozen mid-turn must not hold its rows for long."""
        idle = max(10_000, int(self.statement_timeout * 1000) * 10)
        return (
            f"-c lock_timeout={_ms(self.lock_timeout)} "
            f"-c statement_timeout={_ms(self.statement_timeout)} "
            f"-c idle_in_transaction_session_timeout={idle}"
        )


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


_pools: dict[tuple[str, HostLimits], tuple[ConnectionPool, int]] = {}
_guard = threading.Lock()


def acquire_pool(dsn: str, limits: HostLimits) -> ConnectionPool:
    """The process's pool for ``dsn`` under ``limits``, opened on first use; pair each
    call with :func:`release_pool`."""
    key = (dsn, limits)
    with _guard:
        entry = _pools.get(key)
        if entry is None:
            pool = ConnectionPool(
                dsn,
                # No connection held while no turn is being recorded: an idle host costs
                # the server nothing, and a restarted server leaves nothing stale behind.
                min_size=0,
                max_size=limits.pool_size,
                kwargs={
                    "autocommit": True,
                    "options": limits.options(),
                    # A server gone silent (a partition): the kernel drops the connection
                    # once what was sent stays unacknowledged this long, so a statement
                    # cannot hang on it past the time limits the server would enforce.
                    "tcp_user_timeout": max(1000, _ms(2 * limits.statement_timeout)),
                },
                timeout=limits.connect_timeout,
                # A connection the server dropped (restart, terminate) is replaced before
                # it is lent, not discovered halfway through a turn.
                check=ConnectionPool.check_connection,
                max_idle=60.0,
                name=f"memdir-host-{len(_pools)}",
                open=True,
            )
            entry = (pool, 0)
        _pools[key] = (entry[0], entry[1] + 1)
        return entry[0]


def release_pool(dsn: str, limits: HostLimits) -> None:
    """Give back one share of a pool; the last share closes it."""
    key = (dsn, limits)
    with _guard:
        entry = _pools.get(key)
        if entry is None:
            return
        pool, users = entry
        if users > 1:
            _pools[key] = (pool, users - 1)
            return
        del _pools[key]
    pool.close()


def open_pools() -> dict[str, int]:
    """The pools open in this process: a name each, and its connections to the server."""
    with _guard:
        entries = list(_pools.values())
    return {pool.name: pool.get_stats().get("pool_size", 0) for pool, _ in entries}


@atexit.register
def _close_all() -> None:
    with _guard:
        entries = list(_pools.values())
        _pools.clear()
    for pool, _ in entries:
        pool.close()
