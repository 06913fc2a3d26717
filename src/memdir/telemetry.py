"""Events memdir reports about its own work, and where they go.

Every event is an :class:`Event` with a dotted name (``extract.run``,
``permission.denied``, …) and a flat mapping of fields. A sink is any callable that takes
one; memdir never lets a failing sink disturb the work it reports on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = ["Event", "Sink", "emit"]

_log = logging.getLogger("memdir")


@dataclass(frozen=True, kw_only=True)
class Event:
    """Something that happened, with its measurements."""

    name: str
    """Dotted event name, e.g. ``permission.denied``."""
    fields: Mapping[str, Any] = field(default_factory=dict)
    """Flat field values: numbers, strings, booleans."""


Sink: TypeAlias = Callable[[Event], object]
"""Receives events. Its return value is ignored."""


def emit(sink: Sink | None, name: str, **fields: Any) -> None:
    """Send an event to ``sink``, if any; a sink that raises is logged and ignored."""
    if sink is None:
        return
    try:
        sink(Event(name=name, fields=fields))
    except Exception:  # a broken sink must never break the agent it observes
        _log.exception("telemetry sink failed on %s", name)
