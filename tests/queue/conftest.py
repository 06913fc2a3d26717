"""A throwaway PostgreSQL for the queue backend's tests.

One server per test session (:class:`memdir.queue.TemporaryPostgres`: ``initdb`` into
a temporary directory, a free port on 127.0.0.1, run as ``postgres`` under root,
stopped at the end), and for each test a fresh database cloned from a template that
already holds procrastinate's and memdir's schema: a clone takes milliseconds where
applying the schema takes a second.

Without the ``[postgres]`` extra the modules that need it skip themselves (each calls
``pytest.importorskip``), and ``test_optional.py`` still runs: it is about that case.
Without PostgreSQL's binaries these tests are skipped, except under CI (``$CI`` set),
where a skip would pass for a run that never happened: there they fail.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from memdir.queue import TemporaryPostgres

_TEMPLATE = "memdir_template"
_numbers = itertools.count()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[TemporaryPostgres]:
    pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
    psycopg = pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")
    from memdir.queue import PostgresNotFoundError, TemporaryPostgres, apply_schema

    server = TemporaryPostgres()
    try:
        server.start()
    except PostgresNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the PostgreSQL tests: {exc}")
        pytest.skip(str(exc))
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {_TEMPLATE}")
        apply_schema(server.dsn(_TEMPLATE))
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_dsn(pg_cluster: TemporaryPostgres) -> Iterator[str]:
    """A fresh database with the schema applied, dropped after the test."""
    import psycopg

    name = f"memdir_test_{os.getpid()}_{next(_numbers)}"
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {_TEMPLATE}")
    yield pg_cluster.dsn(name)
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
