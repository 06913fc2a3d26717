"""A throwaway PostgreSQL for the queue backend's tests.

One server per test session (:class:`memdir.queue.TemporaryPostgres`: ``initdb`` into
a temporary directory, a free port on 127.0.0.1, run as ``postgres`` under root,
stopped at the end), and for each test a fresh database cloned from a template that
already holds procrastinate's and memdir's schema: a clone takes milliseconds where
applying the schema takes a second. Where no PostgreSQL binary exists, or the
``[postgres]`` extra is not installed, these tests are skipped, not failed.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
psycopg = pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

from memdir.queue import PostgresNotFoundError, TemporaryPostgres, apply_schema  # noqa: E402

_TEMPLATE = "memdir_template"
_numbers = itertools.count()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[TemporaryPostgres]:
    server = TemporaryPostgres()
    try:
        server.start()
    except PostgresNotFoundError as exc:
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
    name = f"memdir_test_{os.getpid()}_{next(_numbers)}"
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {_TEMPLATE}")
    yield pg_cluster.dsn(name)
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
