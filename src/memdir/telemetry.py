"""Events memdir reports about its own work, and where they go.

Every event is an :class:`Event` with a dotted name (``extract.run``,
``permission.denied``, …) and a flat mapping of fields. A sink is any callable that takes
one; memdir never lets a failing sink disturb the work it reports on.

Ready-made sinks: :class:`LoggingSink` (the standard ``logging`` module),
:class:`JsonlSink` (one JSON object per line in a file), :class:`OpenTelemetrySink`
(spans and metrics; needs the ``otel`` extra) and :class:`CollectingSink` (a list, for
tests). :func:`fan_out` sends each event to several of them.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeAlias

from memdir._private import make_private_dirs, open_private
from memdir.errors import MissingExtraError, one_line

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

__all__ = [
    "CollectingSink",
    "Event",
    "JsonlSink",
    "LoggingSink",
    "OpenTelemetrySink",
    "Sink",
    "emit",
    "fan_out",
]

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
    """Send an event to ``sink``; a sink that raises is logged and ignored.

    Without a sink, failures (``*.error``, ``*.failed``) still go to the ``memdir``
    logger at WARNING, as :class:`LoggingSink` writes them, so that a failed run is never
    silent: with no logging configured, Python prints them on stderr. Other events are
    dropped.
    """
    if sink is None:
        if _is_failure(name):
            LoggingSink()(Event(name=name, fields=fields))
        return
    try:
        sink(Event(name=name, fields=fields))
    except Exception:  # a broken sink must never break the agent it observes
        _log.exception("telemetry sink failed on %s", name)


def _is_failure(name: str) -> bool:
    """Whether the event named ``name`` reports a failure (``*.error``, ``*.failed``)."""
    return name.endswith((".error", ".failed"))


def fan_out(*sinks: Sink | None) -> Sink | None:
    """One sink that sends each event to every non-None sink in ``sinks``, in order.

    A sink that raises is logged and the rest still get the event. Returns None when no
    sink is given, and the sink itself when there is only one.
    """
    present = tuple(sink for sink in sinks if sink is not None)
    if not present:
        return None
    if len(present) == 1:
        return present[0]

    def send(event: Event) -> None:
        for sink in present:
            try:
                sink(event)
            except Exception:  # one broken sink must not starve the others
                _log.exception("telemetry sink %r failed on %s", sink, event.name)

    return send


class CollectingSink:
    """Keeps every event it receives, in order; meant for tests (memdir's and yours).

    Safe to share between threads.
    """

    def __init__(self) -> None:
        self.events: list[Event] = []
        """The events received so far, oldest first."""
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)

    def names(self) -> list[str]:
        """The names of the events received so far, in order."""
        with self._lock:
            return [event.name for event in self.events]

    def named(self, name: str) -> list[Event]:
        """The events received so far that are called ``name``, in order."""
        with self._lock:
            return [event for event in self.events if event.name == name]


class LoggingSink:
    """Logs each event as one line: its name, then ``key=value`` per field in order.

    A value that is not a string is written with ``str()``; the text is then quoted
    (``repr``) when it is empty or holds whitespace, so the line stays one line and splits
    cleanly on spaces. The record also carries the event as
    ``extra={"memdir_event": name, "memdir_fields": {...}}`` for structured handlers.

    ``*.error`` and ``*.failed`` events are logged at WARNING and ``permission.denied``
    at INFO, whatever ``level`` says; every other event at ``level``.
    """

    def __init__(self, logger: logging.Logger | None = None, level: int = logging.INFO) -> None:
        self.logger = logger if logger is not None else _log
        """Where the lines go; the ``memdir`` logger unless one was given."""
        self.level = level
        """The level of events that are neither failures nor permission denials."""

    def __call__(self, event: Event) -> None:
        level = self._level_for(event.name)
        if not self.logger.isEnabledFor(level):  # spare the formatting nobody will read
            return
        fields = dict(event.fields)
        line = " ".join(
            [event.name, *(f"{key}={_log_value(value)}" for key, value in fields.items())]
        )
        self.logger.log(
            level, "%s", line, extra={"memdir_event": event.name, "memdir_fields": fields}
        )

    def _level_for(self, name: str) -> int:
        if _is_failure(name):
            return logging.WARNING
        if name == "permission.denied":
            # A denial is the gate doing its job, not a fault, but worth seeing by default.
            return logging.INFO
        return self.level


def _log_value(value: object) -> str:
    text = value if isinstance(value, str) else str(value)
    if not text or any(char.isspace() for char in text):
        return repr(text)
    return text


# O_APPEND makes the kernel seek to the end and write under the file's lock, so one
# os.write of a whole line cannot interleave with another process's; O_BINARY stops
# Windows from rewriting the newline.
_APPEND_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_BINARY", 0)


class JsonlSink:
    """Appends each event to a file as one line of JSON.

    Each line is ``{"ts": "2025-01-31T12:34:56.789Z", "event": "extract.run",
    "fields": {...}}``: ``ts`` is the UTC time the sink received the event, to the
    millisecond. The fields always sit under ``"fields"``, so no field name can clobber
    ``ts`` or ``event``. A value JSON cannot hold (an object, NaN, …) is written as its
    ``str()``.

    The file and its parent directories are created on the first event. Each line goes
    out in a single ``os.write`` on a file opened with ``O_APPEND``, so several threads
    and processes can share one file without tearing lines. A failure to write is logged
    once per sink and otherwise ignored: telemetry must never break the agent.

    Call :meth:`close` (or use the sink as a context manager) to release the file;
    events sent after that are dropped.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        """The file the lines are appended to."""
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._closed = False
        self._reported = False

    def __call__(self, event: Event) -> None:
        line = _json_line(event)
        # The lock keeps close() from freeing the descriptor under a write in flight.
        with self._lock:
            if self._closed:
                return
            try:
                if self._fd is None:
                    make_private_dirs(self.path.parent)
                    self._fd = open_private(self.path, _APPEND_FLAGS)
                written = os.write(self._fd, line)
                if written != len(line):
                    raise OSError(f"short write: {written} of {len(line)} bytes")
            except OSError as exc:
                if not self._reported:
                    self._reported = True
                    _log.warning("telemetry: cannot write events to %s: %s", self.path, exc)

    def close(self) -> None:
        """Close the file; later events are dropped. Closing twice is harmless."""
        with self._lock:
            self._closed = True
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __enter__(self) -> JsonlSink:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _json_line(event: Event) -> bytes:
    now = datetime.now(UTC).isoformat(timespec="milliseconds").removesuffix("+00:00")
    record: dict[str, Any] = {"ts": f"{now}Z", "event": event.name, "fields": dict(event.fields)}
    try:
        text = _dumps(record)
    except (TypeError, ValueError):  # NaN, a circular list, a dict with tuple keys, …
        record["fields"] = {str(key): _json_safe(value) for key, value in event.fields.items()}
        text = _dumps(record)
    # ASCII-only JSON, so no string (not even a lone surrogate) can fail to encode.
    return (text + "\n").encode("ascii")


def _dumps(value: object) -> str:
    return json.dumps(value, allow_nan=False, default=str, separators=(",", ":"))


def _json_safe(value: object) -> object:
    try:
        _dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


class OpenTelemetrySink:
    """Reports each event as an OpenTelemetry span and metric points.

    Needs ``opentelemetry-api`` (the ``[otel]`` extra); memdir only uses the API, so
    spans and metrics go wherever the host's SDK sends them. Pass providers to use other
    than the global ones.

    Each event becomes a span ``memdir.<event name>`` with attributes ``memdir.<field>``
    (values other than bool, int, float or str as their ``str()``; None fields left out),
    started and ended at once, except that an event with ``duration_ms`` starts that long
    before it ends. ``*.error`` and ``*.failed`` spans get status ERROR. Metrics: counter
    ``memdir.events`` (attribute ``event``); for ``extract.run`` also counters
    ``memdir.extract.tokens`` (attribute ``kind``: input, output, cache_read,
    cache_creation) and ``memdir.memories.saved``, and histogram
    ``memdir.extract.duration`` in milliseconds.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        try:
            from memdir._otel import OtelRecorder  # here: opentelemetry is an optional extra
        except ImportError as exc:
            if not (exc.name or "").startswith("opentelemetry"):
                raise
            raise MissingExtraError("OpenTelemetrySink", "otel", one_line(exc)) from exc
        self._recorder = OtelRecorder(tracer_provider, meter_provider)

    def __call__(self, event: Event) -> None:
        self._recorder.record(event.name, event.fields, failed=_is_failure(event.name))
