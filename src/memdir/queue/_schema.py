"""memdir's tables beside procrastinate's, their versions, and how a database gets both.

The pending rows are the truth about what is left to extract; procrastinate's jobs are
only the wake-ups for them (a lost job is re-deferred by the sweeper, a lost pending row
would be a lost turn). A directory's files and cursors live here too, under one
generation number that every commit compares and bumps.

Schema work is an operator's step (``memdir queue init`` / ``memdir queue migrate``),
never a worker's: DDL takes locks that queue behind any open transaction on the table
(a frozen worker's commit), and every later commit then queues behind the DDL. A worker
only reads the version row (:func:`check_schema`) and refuses to start on a schema that
is missing or older than its code. The version lives in ``memdir_schema``: memdir's own
number (one per entry of :data:`MIGRATIONS`) and the procrastinate release whose SQL the
database holds. Migrations run one at a time under an advisory lock, so any number of
``init`` at once is safe, and one that finds the schema current changes nothing.

procrastinate ships its schema changes as SQL files per release (``sql/migrations``,
``MM.mm.pp_NN_*.sql``, "pre" ones to apply before deploying the release, "post" ones
after). ``migrate`` applies every file between the recorded release and the installed
one, in order, pre and post together: stop the workers for such an upgrade (they refuse
to start until it is done anyway). A database whose procrastinate SQL is newer than the
installed procrastinate is refused, never downgraded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import procrastinate
import psycopg

from memdir.errors import MemdirError
from memdir.queue._app import CONNECT_TIMEOUT

__all__ = [
    "MIGRATIONS",
    "SCHEMA_SQL",
    "SCHEMA_VERSION",
    "SchemaError",
    "SchemaState",
    "apply_schema",
    "check_schema",
    "migrate_schema",
]

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS memdir_dirs (
    dir_id      text PRIMARY KEY,
    generation  bigint NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- The memory directory's files: the system of record; workers check them out.
CREATE TABLE IF NOT EXISTS memdir_files (
    dir_id   text NOT NULL REFERENCES memdir_dirs ON DELETE CASCADE,
    path     text NOT NULL,
    content  bytea NOT NULL,
    sha256   text NOT NULL,
    -- The file's modification time, restored on checkout: scans order by it, and the
    -- extractor tells another agent's recent writes by it.
    mtime    double precision NOT NULL,
    PRIMARY KEY (dir_id, path)
);

-- One row per (directory, session): where extraction stands in that conversation.
CREATE TABLE IF NOT EXISTS memdir_sessions (
    dir_id           text NOT NULL REFERENCES memdir_dirs ON DELETE CASCADE,
    session          text NOT NULL,
    cursor_uuid      text,
    cursor_seq       bigint NOT NULL DEFAULT 0,
    turns_since_run  integer NOT NULL DEFAULT 0,
    covered_at       double precision,
    shipped_seq      bigint NOT NULL DEFAULT 0,
    shipped_uuid     text,
    PRIMARY KEY (dir_id, session)
);

-- The conversation as hosts shipped it, one row per message, in order (seq from 1).
CREATE TABLE IF NOT EXISTS memdir_messages (
    dir_id   text NOT NULL,
    session  text NOT NULL,
    seq      bigint NOT NULL,
    uuid     text NOT NULL,
    body     jsonb NOT NULL,
    PRIMARY KEY (dir_id, session, seq),
    FOREIGN KEY (dir_id, session) REFERENCES memdir_sessions ON DELETE CASCADE
);

-- A session's latest unprocessed turn; a newer turn replaces it and bumps version, so
-- a run deletes it only when nothing arrived while it ran.
CREATE TABLE IF NOT EXISTS memdir_pending (
    dir_id           text NOT NULL,
    session          text NOT NULL,
    upto_seq         bigint NOT NULL,
    upto_uuid        text,
    params           jsonb,
    cwd              text,
    -- Where the host agent sees this memory directory: a Write there in the new
    -- messages is the host saving memory itself (the worker's copy is elsewhere).
    host_memory_root text,
    last_request_at  double precision,
    turns            integer NOT NULL DEFAULT 1,
    version          bigint NOT NULL DEFAULT 1,
    attempts         integer NOT NULL DEFAULT 0,
    last_error       text,
    recorded_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (dir_id, session),
    FOREIGN KEY (dir_id, session) REFERENCES memdir_sessions ON DELETE CASCADE
);

-- Every committed run, one row per session it covered: the audit of exactly-once
-- coverage (messages from_seq..to_seq) and of runs never overlapping in a directory.
CREATE TABLE IF NOT EXISTS memdir_runs (
    id          bigserial PRIMARY KEY,
    dir_id      text NOT NULL,
    session     text NOT NULL,
    generation  bigint NOT NULL,
    from_seq    bigint NOT NULL,
    to_seq      bigint NOT NULL,
    outcome     text NOT NULL,
    worker      text,
    job_id      bigint,
    started_at  timestamptz NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS memdir_runs_dir_idx ON memdir_runs (dir_id, started_at);

-- Why an extract job failed (procrastinate keeps only that it did): its worker stalled,
-- or the job raised. For `memdir queue status`; gone with the job.
CREATE TABLE IF NOT EXISTS memdir_job_failures (
    job_id     bigint PRIMARY KEY REFERENCES procrastinate_jobs ON DELETE CASCADE,
    reason     text NOT NULL,
    failed_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- procrastinate wakes workers when a job is inserted, not when a lock frees: a trailing
-- job, queued while its directory ran, would wait for the next poll (5 s by default,
-- per run, which adds up and eats into the provider's 5-minute cache). When a directory's
-- job stops being 'doing' and another waits on its lock, tell the workers as
-- procrastinate itself does for a new job (its v1 channel and payload).
CREATE OR REPLACE FUNCTION memdir_wake_on_unlock() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    waiting bigint;
BEGIN
    SELECT id INTO waiting FROM procrastinate_jobs
    WHERE lock = OLD.lock AND status = 'todo' AND id <> OLD.id
      AND (scheduled_at IS NULL OR scheduled_at <= now())
    LIMIT 1;
    IF waiting IS NOT NULL THEN
        PERFORM pg_notify('procrastinate_queue_v1#' || OLD.queue_name,
            json_build_object('type', 'job_inserted', 'job_id', waiting)::text);
        PERFORM pg_notify('procrastinate_any_queue_v1',
            json_build_object('type', 'job_inserted', 'job_id', waiting)::text);
    END IF;
    RETURN NULL;
END;
$$;
DROP TRIGGER IF EXISTS memdir_wake_on_unlock_update ON procrastinate_jobs;
CREATE TRIGGER memdir_wake_on_unlock_update
    AFTER UPDATE OF status ON procrastinate_jobs
    FOR EACH ROW WHEN (old.status = 'doing' AND new.status <> 'doing'
                       AND old.lock IS NOT NULL AND old.task_name = 'memdir.extract')
    EXECUTE FUNCTION memdir_wake_on_unlock();
DROP TRIGGER IF EXISTS memdir_wake_on_unlock_delete ON procrastinate_jobs;
CREATE TRIGGER memdir_wake_on_unlock_delete
    AFTER DELETE ON procrastinate_jobs
    FOR EACH ROW WHEN (old.status = 'doing' AND old.lock IS NOT NULL
                       AND old.task_name = 'memdir.extract')
    EXECUTE FUNCTION memdir_wake_on_unlock();

"""


_BOUNDED_RUNS = """-- A session that failed max_attempts times is parked at the
-- version it failed on: no job retries it until a newer turn (or `memdir queue retry`).
ALTER TABLE memdir_pending ADD COLUMN IF NOT EXISTS parked_version bigint;
ALTER TABLE memdir_pending ADD COLUMN IF NOT EXISTS parked_at timestamptz;
-- The first message the session's last run read before its cursor: what a later run can
-- still need begins there, the messages before it may be pruned.
ALTER TABLE memdir_sessions ADD COLUMN IF NOT EXISTS keep_from_seq bigint NOT NULL DEFAULT 0;
-- A run reads the host's system and developer messages wherever they are; pruning
-- keeps them.
CREATE INDEX IF NOT EXISTS memdir_messages_pinned_idx ON memdir_messages (dir_id, session, seq)
    WHERE body->>'role' IN ('system', 'developer');
CREATE INDEX IF NOT EXISTS memdir_runs_committed_idx ON memdir_runs (committed_at);
"""
"""Version 2: sessions parked after their last attempt, and what pruning keeps."""

MIGRATIONS: tuple[str, ...] = (SCHEMA_SQL, _BOUNDED_RUNS)
"""memdir's schema, one entry per version (the first is the schema as it was when
versions began; each later one changes the previous). Append, never edit: a database at
version *n* gets entries *n+1*… applied in order."""
SCHEMA_VERSION = len(MIGRATIONS)
"""The version this code needs."""

_VERSION_SQL = """
CREATE TABLE IF NOT EXISTS memdir_schema (
    singleton              boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    version                integer NOT NULL,
    procrastinate_version  text NOT NULL,
    migrated_at            timestamptz NOT NULL DEFAULT now()
)
"""
_ADVISORY_KEY = 0x6D656D646972  # "memdir": one migration at a time per database
_MIGRATE = "run `memdir queue migrate`"
_FILE_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)_(\d+)_.*\.sql$")

Release = tuple[int, int, int]


class SchemaError(MemdirError):
    """The database's schema is missing, older than this code, or newer than it."""


@dataclass(frozen=True)
class SchemaState:
    """What a database holds: memdir's version (0: none) and procrastinate's release."""

    version: int
    procrastinate_version: str | None


def _release(text: str) -> Release:
    parts = [int(p) for p in re.findall(r"\d+", text)[:3]]
    parts += [0] * (3 - len(parts))
    return parts[0], parts[1], parts[2]


def _installed_release() -> str:
    return str(procrastinate.__version__)


def _procrastinate_migrations(after: Release, upto: Release) -> list[Path]:
    """procrastinate's SQL files for the releases in (after, upto], in order."""
    from procrastinate.schema import SchemaManager

    found: list[tuple[Release, int, Path]] = []
    for path in Path(SchemaManager.get_migrations_path()).iterdir():
        match = _FILE_RE.match(path.name)
        if match is None:
            continue
        release = (int(match[1]), int(match[2]), int(match[3]))
        if after < release <= upto:
            found.append((release, int(match[4]), path))
    return [path for *_, path in sorted(found)]


def _read_state(conn: psycopg.Connection[tuple[object, ...]]) -> SchemaState | None:
    """The version row, or None when the database has no ``memdir_schema``."""
    row = conn.execute("SELECT to_regclass('memdir_schema') IS NOT NULL").fetchone()
    if not (row and row[0]):
        return None
    got = conn.execute("SELECT version, procrastinate_version FROM memdir_schema").fetchone()
    if got is None:
        return SchemaState(0, None)
    return SchemaState(int(str(got[0])), str(got[1]))


def _problem(state: SchemaState | None) -> str | None:
    """Why a worker of this code cannot run on ``state`` (None: it can)."""
    if state is None or state.version == 0:
        return f"the queue's tables are missing or predate schema versions: {_MIGRATE}"
    if state.version < SCHEMA_VERSION:
        return (
            f"the queue's schema is at version {state.version}, this memdir needs "
            f"{SCHEMA_VERSION}: {_MIGRATE}"
        )
    if state.version > SCHEMA_VERSION:
        return (
            f"the queue's schema is at version {state.version}, newer than this memdir "
            f"knows ({SCHEMA_VERSION}): upgrade memdir here"
        )
    recorded, installed = (
        _release(state.procrastinate_version or "0"),
        _release(_installed_release()),
    )
    if recorded < installed and _procrastinate_migrations(recorded, installed):
        return (
            f"the database holds procrastinate {state.procrastinate_version}'s tables, "
            f"procrastinate {_installed_release()} is installed: {_MIGRATE}"
        )
    if recorded > installed and _procrastinate_migrations(installed, recorded):
        return (
            f"the database holds procrastinate {state.procrastinate_version}'s tables, newer "
            f"than the installed procrastinate {_installed_release()}: upgrade it here"
        )
    return None


def check_schema(dsn: str, *, lock_timeout: float = 5.0) -> SchemaState:
    """Read the schema's version (one small SELECT, no DDL, no lock that a frozen
    worker's transaction could hold) and raise :class:`SchemaError`, in one line that
    says what to run, when this code cannot work on it."""
    with psycopg.connect(dsn, connect_timeout=CONNECT_TIMEOUT, autocommit=True) as conn:
        conn.execute(
            "SELECT set_config('lock_timeout', %s, false)", (f"{int(lock_timeout * 1000)}ms",)
        )
        state = _read_state(conn)
    problem = _problem(state)
    if problem is not None:
        raise SchemaError(problem)
    assert state is not None
    return state


def migrate_schema(dsn: str) -> list[str]:
    """Bring the database to this code's schema; returns what it applied (empty: it
    was current). Safe to run from many processes at once: an advisory lock makes them
    take turns, and each one after the first finds nothing to do."""
    installed = _installed_release()
    applied: list[str] = []
    with psycopg.connect(dsn, connect_timeout=CONNECT_TIMEOUT, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_ADVISORY_KEY,))
        try:
            state = _read_state(conn)
            if state is None or state.version == 0:
                has_jobs = conn.execute(
                    "SELECT to_regclass('procrastinate_jobs') IS NOT NULL"
                ).fetchone()
                if not (has_jobs and has_jobs[0]):
                    from procrastinate.schema import SchemaManager

                    # Applied as it ships, so the partial unique indexes behind
                    # ``lock`` and ``queueing_lock`` are exactly procrastinate's.
                    conn.execute(SchemaManager.get_schema())
                    applied.append(f"procrastinate {installed}")
                # A database from before versions has the installed release's tables
                # (the only ones ``init`` ever created); it is recorded as such.
                with conn.transaction():
                    conn.execute(_VERSION_SQL)
                    conn.execute(
                        "INSERT INTO memdir_schema (version, procrastinate_version) "
                        "VALUES (0, %s) ON CONFLICT (singleton) DO NOTHING",
                        (installed,),
                    )
                state = SchemaState(0, installed)
            recorded = _release(state.procrastinate_version or installed)
            if recorded > _release(installed):
                problem = _problem(SchemaState(SCHEMA_VERSION, state.procrastinate_version))
                if problem is not None:
                    raise SchemaError(problem)
            for path in _procrastinate_migrations(recorded, _release(installed)):
                with conn.transaction():
                    conn.execute(path.read_text())
                applied.append(f"procrastinate {path.name}")
            if state.version > SCHEMA_VERSION:
                raise SchemaError(_problem(state) or "the schema is newer than this memdir")
            for version in range(state.version + 1, SCHEMA_VERSION + 1):
                with conn.transaction():
                    conn.execute(MIGRATIONS[version - 1])
                    conn.execute("UPDATE memdir_schema SET version = %s", (version,))
                applied.append(f"memdir {version}")
            if recorded < _release(installed):
                conn.execute(
                    "UPDATE memdir_schema SET procrastinate_version = %s, migrated_at = now()",
                    (installed,),
                )
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_ADVISORY_KEY,))
    return applied


def apply_schema(dsn: str) -> None:
    """Create (or bring up to date) procrastinate's schema and memdir's tables: what
    ``memdir queue init`` and ``memdir queue migrate`` run (see :func:`migrate_schema`)."""
    migrate_schema(dsn)
