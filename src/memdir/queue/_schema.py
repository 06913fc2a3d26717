"""memdir's tables beside procrastinate's, and how a database gets both.

The pending rows are the truth about what is left to extract; procrastinate's jobs are
only the wake-ups for them (a lost job is re-deferred by the sweeper, a lost pending row
would be a lost turn). A directory's files and cursors live here too, under one
generation number that every commit compares and bumps.
"""

from __future__ import annotations

import psycopg

__all__ = ["SCHEMA_SQL", "apply_schema"]

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

-- Runs bounded (issue 26). A session that failed max_attempts times is parked at the
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


def apply_schema(dsn: str) -> None:
    """Create procrastinate's schema and memdir's tables in an empty database.

    procrastinate's own ``schema.sql`` is applied as it ships, so the partial unique
    indexes behind ``lock`` and ``queueing_lock`` are exactly procrastinate's.
    """
    from procrastinate.schema import SchemaManager

    procrastinate_sql = SchemaManager.get_schema()
    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL").fetchone()
        if not (exists and exists[0]):
            conn.execute(procrastinate_sql)
        conn.execute(SCHEMA_SQL)  # idempotent: safe on every start of a worker
