"""Schema versions: ``memdir queue init|migrate`` apply them, many at once; a worker only
checks them, and refuses to start, in one line that says what to run, on a schema it
cannot use."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

import psycopg
from click.testing import CliRunner

import memdir
from memdir.queue import (
    SCHEMA_VERSION,
    SchemaError,
    TemporaryPostgres,
    check_schema,
    migrate_schema,
)
from memdir.queue._schema import _procrastinate_migrations
from tests.queue.test_cli import _WORKER, _cli

_numbers = itertools.count()


@pytest.fixture
def empty_dsn(pg_cluster: TemporaryPostgres) -> Iterator[str]:
    """A database with no schema at all."""
    name = f"memdir_empty_{os.getpid()}_{next(_numbers)}"
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield pg_cluster.dsn(name)
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def source_path() -> str:
    """PYTHONPATH for a child process that imports this memdir (not another checkout's
    installed one) and the tests."""
    return os.pathsep.join([str(Path(memdir.__file__).parents[1]), str(Path.cwd())])


def _worker(dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMDIR_DB": dsn, "PYTHONPATH": source_path()}
    return subprocess.run(
        [sys.executable, "-c", _WORKER, "--model", "offline", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("database", ["empty_dsn", "pg_dsn"])
def test_twenty_four_inits_at_once_all_succeed(database, request):
    # What N workers (or N deploy hooks) starting at once do; without the advisory lock
    # most died with "tuple concurrently updated", on a new database and on one that
    # already had the schema (which every init re-applied).
    empty_dsn = request.getfixturevalue(database)
    gate = threading.Barrier(24)
    results: list[BaseException | list[str]] = []

    def init() -> None:
        gate.wait()
        try:
            results.append(migrate_schema(empty_dsn))
        except BaseException as exc:
            results.append(exc)

    threads = [threading.Thread(target=init) for _ in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert errors == []
    assert len(results) == 24
    # One of them did the work (none on a current database); the others found it done.
    assert sum(1 for r in results if r) == (1 if database == "empty_dsn" else 0)
    assert check_schema(empty_dsn).version == SCHEMA_VERSION


def test_init_and_migrate_commands_are_idempotent(empty_dsn):
    runner = CliRunner()
    first = runner.invoke(_cli, ["queue", "init", "--db", empty_dsn])
    assert first.exit_code == 0, first.output
    assert "applied procrastinate" in first.output
    assert f"schema version {SCHEMA_VERSION}" in first.output
    again = runner.invoke(_cli, ["queue", "migrate", "--db", empty_dsn])
    assert again.exit_code == 0, again.output
    assert "applied" not in again.output


def test_a_worker_on_a_missing_schema_exits_with_the_fix(empty_dsn):
    done = _worker(empty_dsn)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("memdir: ")
    assert "memdir queue migrate" in last
    assert "Traceback" not in done.stderr
    # It created nothing: schema work is migrate's.
    with psycopg.connect(empty_dsn) as conn:
        row = conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()
    assert row == (None,)


def test_a_worker_on_an_old_schema_exits_with_the_fix(pg_dsn):
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("UPDATE memdir_schema SET version = 0")
    done = _worker(pg_dsn)
    assert done.returncode == 2
    assert "memdir queue migrate" in done.stderr


def test_versions_checked(pg_dsn):
    assert check_schema(pg_dsn).version == SCHEMA_VERSION
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("UPDATE memdir_schema SET version = %s", (SCHEMA_VERSION + 1,))
        with pytest.raises(SchemaError, match="newer than this memdir"):
            check_schema(pg_dsn)
        with pytest.raises(SchemaError, match="newer than this memdir"):
            migrate_schema(pg_dsn)
        conn.execute("UPDATE memdir_schema SET version = %s", (SCHEMA_VERSION,))
        # procrastinate releases with SQL migrations since the recorded one: refused...
        conn.execute("UPDATE memdir_schema SET procrastinate_version = '3.3.0'")
        with pytest.raises(SchemaError, match="memdir queue migrate"):
            check_schema(pg_dsn)
        # ... releases without any: nothing to do, the worker starts.
        conn.execute("UPDATE memdir_schema SET procrastinate_version = '3.5.0'")
        check_schema(pg_dsn)
        # A database on a procrastinate newer than the installed one, with SQL this
        # one does not know, is never worked on nor downgraded.
        conn.execute("UPDATE memdir_schema SET procrastinate_version = '99.0.0'")
        assert check_schema(pg_dsn)  # no migration files past the installed release
    (path,) = {p.parent for p in _procrastinate_migrations((3, 3, 0), (3, 10, 0))}
    names = [p.name for p in _procrastinate_migrations((3, 3, 0), (3, 10, 0))]
    # Pre before post, in release order; none from releases already applied.
    assert names == sorted(names)
    assert names
    assert all(n.startswith("03.04.00_") for n in names), names
    assert path.is_dir()


def test_a_database_from_before_versions_is_adopted(pg_dsn):
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE memdir_schema")
    with pytest.raises(SchemaError, match="memdir queue migrate"):
        check_schema(pg_dsn)
    applied = migrate_schema(pg_dsn)
    assert applied == [f"memdir {v}" for v in range(1, SCHEMA_VERSION + 1)]
    assert check_schema(pg_dsn).version == SCHEMA_VERSION
