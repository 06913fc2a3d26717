"""The OpenTelemetry side of :class:`memdir.telemetry.OpenTelemetrySink`.

Kept apart so that ``opentelemetry`` (an optional extra) is imported only when someone
builds that sink; importing this module without it raises ``ImportError``. It is told
each event's name, fields and whether it reports a failure, and imports nothing of
:mod:`memdir.telemetry`, which imports it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import Status, StatusCode
from opentelemetry.util.types import AttributeValue

from memdir import __version__

__all__ = ["OtelRecorder"]

# (metric attribute `kind`, extract.run field): the four token counts DESIGN.md §3 reports.
_TOKEN_FIELDS = (
    ("input", "input_tokens"),
    ("output", "output_tokens"),
    ("cache_read", "cache_read_input_tokens"),
    ("cache_creation", "cache_creation_input_tokens"),
)


class OtelRecorder:
    """Turns memdir events into spans and metric points on the given (or global) providers."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None,
        meter_provider: metrics.MeterProvider | None,
    ) -> None:
        self._tracer = trace.get_tracer("memdir", __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter("memdir", __version__, meter_provider=meter_provider)
        self._events = meter.create_counter(
            "memdir.events", unit="{event}", description="Telemetry events memdir reported."
        )
        self._tokens = meter.create_counter(
            "memdir.extract.tokens",
            unit="{token}",
            description="Tokens the memory extractor's forked agent used, by kind.",
        )
        self._saved = meter.create_counter(
            "memdir.memories.saved",
            unit="{memory}",
            description="Memory files the extractor wrote (MEMORY.md not counted).",
        )
        self._duration = meter.create_histogram(
            "memdir.extract.duration",
            unit="ms",
            description="Wall time of one successful extraction run.",
        )

    def record(self, name: str, fields: Mapping[str, Any], *, failed: bool) -> None:
        """Report the event ``name`` as one span and its metric points; ``failed``: with
        status ERROR."""
        end = time.time_ns()
        duration_ms = _amount(fields.get("duration_ms"))
        # The event is sent when the work is over, so a span that started "now" would show
        # zero length; moving its start back shows how long the run really took.
        start = end - round(duration_ms * 1_000_000) if duration_ms is not None else end
        span = self._tracer.start_span(
            f"memdir.{name}", start_time=start, attributes=_attributes(fields)
        )
        if failed:
            error_type = fields.get("error_type")
            description = None if error_type is None else str(error_type)
            span.set_status(Status(StatusCode.ERROR, description))
        span.end(end_time=end)

        self._events.add(1, {"event": name})
        if name != "extract.run":
            return
        for kind, key in _TOKEN_FIELDS:
            tokens = _amount(fields.get(key))
            if tokens is not None:
                self._tokens.add(tokens, {"kind": kind})
        saved = _amount(fields.get("memories_saved"))
        if saved is not None:
            self._saved.add(saved)
        if duration_ms is not None:
            self._duration.record(duration_ms)


def _amount(value: object) -> int | float | None:
    """``value`` if it can be added to a counter (a finite number ≥ 0), else None."""
    # bool is an int, but True tokens or True milliseconds would be a caller's mistake.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return value


def _attributes(fields: Mapping[str, Any]) -> dict[str, AttributeValue]:
    """Span attributes ``memdir.<field>``; values OpenTelemetry cannot hold become text."""
    attributes: dict[str, AttributeValue] = {}
    for key, value in fields.items():
        if value is None:  # OpenTelemetry rejects null attributes; an absent one says the same
            continue
        attributes[f"memdir.{key}"] = (
            value if isinstance(value, bool | int | float | str) else str(value)
        )
    return attributes
