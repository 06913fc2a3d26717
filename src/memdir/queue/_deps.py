"""The optional dependencies of the queue backend, imported only when it is used.

The core of memdir runs on one machine without PostgreSQL; only ``memdir.queue`` needs
procrastinate and psycopg, so a missing one is reported here, naming the extra that
brings both, instead of failing deep inside an import.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from memdir.errors import UsageError

__all__ = ["require"]

_EXTRA_HINT = "install the PostgreSQL backend with: pip install 'memdir[postgres]'"


def require(name: str) -> ModuleType:
    """Import ``name`` (``procrastinate`` or ``psycopg``), or raise a :class:`UsageError`
    that names the ``[postgres]`` extra."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise UsageError(f"memdir's queue backend needs {name}; {_EXTRA_HINT}") from exc
