"""The optional dependencies of the queue backend, imported only when it is used.

The core of memdir runs on one machine without PostgreSQL; only ``memdir.queue`` needs
procrastinate and psycopg, so a missing one is reported here, naming the extra that
brings both, instead of failing deep inside an import.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from memdir.errors import MissingExtraError, one_line

__all__ = ["require"]


def require(name: str) -> ModuleType:
    """Import ``name`` (``procrastinate`` or ``psycopg``), or raise the
    :class:`~memdir.errors.MissingExtraError` that names the ``[postgres]`` extra."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise MissingExtraError("memdir's queue backend", "postgres", one_line(exc)) from exc
