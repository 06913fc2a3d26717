"""Extraction as jobs on PostgreSQL, with procrastinate: memdir beyond one machine.

Hosts record each finished turn with :class:`QueueExtractor` (the turn's new messages,
its request, and a wake-up job for the directory, in one transaction); workers
(:class:`QueueWorker`, ``memdir worker``) run one job per directory at a time, on a
working copy checked out of PostgreSQL, and commit files and cursors fenced by the
directory's generation. A host never waits on a worker: a turn whose rows a worker
holds locked (one frozen inside its commit, say) is reported not recorded within the
extractor's ``lock_timeout`` / ``record_timeout`` and shipped with the next turn, a turn
is reported recorded only after its COMMIT succeeded, and a process's extractors share
one connection pool (``pool_size``). The plain memory folder stays the default on one
machine; this package is the ``[postgres]`` extra, and nothing outside it imports
procrastinate or psycopg.

``memdir.queue.app`` is a procrastinate app on ``$MEMDIR_DB``, made on first use, for
``procrastinate --app=memdir.queue.app …`` (see :func:`memdir.queue._app.env_app`).
"""

from memdir.queue._deps import require

require("procrastinate")
require("psycopg")
require("psycopg_pool")

from memdir.queue._app import EXTRACT_TASK, NOTIFY_CHANNEL, QUEUE_NAME, make_app  # noqa: E402
from memdir.queue._producer import DEFAULT_SESSION, QueueExtractor, TurnRecorded  # noqa: E402
from memdir.queue._prune import PruneResult, aprune, prune  # noqa: E402
from memdir.queue._runs import unpark  # noqa: E402
from memdir.queue._schema import (  # noqa: E402
    SCHEMA_SQL,
    SCHEMA_VERSION,
    SchemaError,
    apply_schema,
    check_schema,
    migrate_schema,
)
from memdir.queue._settings import DirRun, SessionOutcome, WorkerSettings  # noqa: E402
from memdir.queue._status import QueueStatus, queue_status  # noqa: E402
from memdir.queue._store import export_dir  # noqa: E402
from memdir.queue._sweep import sweep  # noqa: E402
from memdir.queue._sync import SyncResult, sync_dir  # noqa: E402
from memdir.queue._tempdb import PostgresNotFoundError, TemporaryPostgres  # noqa: E402
from memdir.queue._worker import QueueWorker  # noqa: E402


def __getattr__(name: str) -> object:
    # ``app`` is made when first asked for: importing memdir.queue reads no environment.
    if name == "app":
        from memdir.queue._app import env_app

        made = globals()["app"] = env_app()
        return made
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_SESSION",
    "EXTRACT_TASK",
    "NOTIFY_CHANNEL",
    "QUEUE_NAME",
    "SCHEMA_SQL",
    "SCHEMA_VERSION",
    "DirRun",
    "PostgresNotFoundError",
    "PruneResult",
    "QueueExtractor",
    "QueueStatus",
    "QueueWorker",
    "SchemaError",
    "SessionOutcome",
    "SyncResult",
    "TemporaryPostgres",
    "TurnRecorded",
    "WorkerSettings",
    "apply_schema",
    "aprune",
    "check_schema",
    "export_dir",
    "make_app",
    "migrate_schema",
    "prune",
    "queue_status",
    "sweep",
    "sync_dir",
    "unpark",
]
