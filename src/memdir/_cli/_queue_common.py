"""What the PostgreSQL commands share: the ``--db`` option and one-line database errors."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import click

from memdir._cli._common import EXIT_FAILED, fail, guarded

__all__ = ["DB_ENV", "db_option", "one_line_errors"]

DB_ENV = "MEMDIR_DB"

P = ParamSpec("P")
R = TypeVar("R")


def one_line_errors(callback: Callable[P, R]) -> Callable[P, R]:
    """``callback`` with memdir's errors (the missing extra among them) and the
    database's (unreachable, refused, no such database) reported in one line: exit 1
    for the database, which may come back, 2 for the rest, as the other commands do."""
    callback = guarded(callback)

    @functools.wraps(callback)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return callback(*args, **kwargs)
        except Exception as exc:
            if type(exc).__module__.split(".")[0] != "psycopg":
                raise
            fail(f"the database: {exc}", EXIT_FAILED, kind="database")

    return run


db_option = click.option(
    "--db",
    "dsn",
    envvar=DB_ENV,
    required=True,
    help=f"The PostgreSQL database (a libpq URL or key=value string; default: ${DB_ENV}).",
)
