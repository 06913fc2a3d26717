"""Telemetry sinks: what each writes, and that none of them can break the agent."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memdir.errors import UsageError
from memdir.telemetry import (
    CollectingSink,
    Event,
    JsonlSink,
    LoggingSink,
    OpenTelemetrySink,
    emit,
    fan_out,
)

RUN_FIELDS: dict[str, Any] = {
    "input_tokens": 1200,
    "output_tokens": 300,
    "cache_read_input_tokens": 9000,
    "cache_creation_input_tokens": 40,
    "message_count": 6,
    "turn_count": 2,
    "files_written": 2,
    "memories_saved": 1,
    "team_memories_saved": 0,
    "duration_ms": 1234.5,
}


def _boom(event: Event) -> None:
    raise RuntimeError(f"sink broke on {event.name}")


# --- LoggingSink ----------------------------------------------------------------------------


def test_logging_sink_writes_name_then_fields_in_order(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="memdir")
    sink = LoggingSink()

    emit(sink, "extract.throttled", turns_since_last=1, every_n_turns=3)
    emit(sink, "permission.denied", tool_name="Bash", reason="writes outside the memory dir")
    emit(sink, "extract.coalesced")
    emit(sink, "extract.run", message_count=4, note="", ok=True)

    assert [r.name for r in caplog.records] == ["memdir"] * 4
    assert [r.getMessage() for r in caplog.records] == [
        "extract.throttled turns_since_last=1 every_n_turns=3",
        "permission.denied tool_name=Bash reason='writes outside the memory dir'",
        "extract.coalesced",
        "extract.run message_count=4 note='' ok=True",
    ]


def test_logging_sink_passes_the_event_as_extra(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="memdir")

    LoggingSink()(Event(name="extract.skipped_direct_write", fields={"message_count": 3}))

    (record,) = caplog.records
    assert record.__dict__["memdir_event"] == "extract.skipped_direct_write"
    assert record.__dict__["memdir_fields"] == {"message_count": 3}


def test_logging_sink_uses_the_given_logger(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("host.telemetry")
    caplog.set_level(logging.DEBUG, logger="host.telemetry")

    LoggingSink(logger, level=logging.DEBUG)(Event(name="dream.fired"))

    (record,) = caplog.records
    assert (record.name, record.levelno, record.getMessage()) == (
        "host.telemetry",
        logging.DEBUG,
        "dream.fired",
    )


@dataclass(frozen=True)
class LevelCase:
    event: str
    configured: int
    expected: int


@pytest.mark.parametrize(
    "case",
    [
        LevelCase("extract.run", logging.INFO, logging.INFO),
        LevelCase("extract.run", logging.DEBUG, logging.DEBUG),
        LevelCase("extract.error", logging.DEBUG, logging.WARNING),
        LevelCase("dream.failed", logging.INFO, logging.WARNING),
        LevelCase("permission.denied", logging.DEBUG, logging.INFO),
        LevelCase("permission.denied", logging.ERROR, logging.INFO),
        LevelCase("dream.completed", logging.ERROR, logging.ERROR),
    ],
    ids=lambda case: f"{case.event}@{logging.getLevelName(case.configured)}",
)
def test_logging_sink_level_per_event_kind(
    case: LevelCase, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="memdir")

    LoggingSink(level=case.configured)(Event(name=case.event))

    assert [r.levelno for r in caplog.records] == [case.expected]


def test_logging_sink_skips_levels_the_logger_drops(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="memdir")

    LoggingSink(level=logging.DEBUG)(Event(name="extract.run", fields=RUN_FIELDS))

    assert caplog.records == []


# --- JsonlSink ------------------------------------------------------------------------------

TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def _lines(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def test_jsonl_sink_writes_one_object_per_event(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "events.jsonl"  # parents are created
    before = datetime.now(UTC).replace(microsecond=0)
    with JsonlSink(path) as sink:
        emit(sink, "extract.run", **RUN_FIELDS)
        emit(sink, "extract.coalesced")
        emit(sink, "permission.denied", tool_name="Bash", reason="not read-only")
    after = datetime.now(UTC)

    records = _lines(path)
    assert [(r["event"], r["fields"]) for r in records] == [
        ("extract.run", RUN_FIELDS),
        ("extract.coalesced", {}),
        ("permission.denied", {"tool_name": "Bash", "reason": "not read-only"}),
    ]
    assert all(list(r) == ["ts", "event", "fields"] for r in records)
    for record in records:
        assert TS.fullmatch(record["ts"]), record["ts"]
        assert before <= datetime.fromisoformat(record["ts"]) <= after


def test_jsonl_sink_appends_to_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"earlier": true}\n', encoding="utf-8")

    with JsonlSink(path) as sink:
        emit(sink, "dream.fired")

    assert [r.get("event") for r in _lines(path)] == [None, "dream.fired"]


def test_jsonl_sink_fields_cannot_clobber_ts_or_event(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with JsonlSink(path) as sink:
        sink(Event(name="extract.error", fields={"ts": "then", "event": "other"}))

    (record,) = _lines(path)
    assert record["event"] == "extract.error"
    assert TS.fullmatch(record["ts"])
    assert record["fields"] == {"ts": "then", "event": "other"}


class Opaque:
    def __str__(self) -> str:
        return "<opaque thing>"


def test_jsonl_sink_writes_what_json_cannot_hold_as_str(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with JsonlSink(path) as sink:
        emit(sink, "extract.error", error_type=Opaque(), at=Path("/x"), count=3)
        emit(sink, "extract.run", duration_ms=float("nan"), paths=["a.md"], turn_count=1)

    assert [r["fields"] for r in _lines(path)] == [
        {"error_type": "<opaque thing>", "at": "/x", "count": 3},
        {"duration_ms": "nan", "paths": ["a.md"], "turn_count": 1},
    ]


def test_jsonl_sink_threads_never_tear_lines(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    filler = "x" * 500  # lines longer than a small buffer would be, to invite tearing

    with JsonlSink(path) as sink:

        def send(worker: int) -> None:
            for i in range(200):
                emit(sink, "extract.run", worker=worker, i=i, filler=filler)

        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(send, range(8)))

    records = _lines(path)
    assert len(records) == 1600
    assert {(r["fields"]["worker"], r["fields"]["i"]) for r in records} == {
        (w, i) for w in range(8) for i in range(200)
    }


WRITER = textwrap.dedent(
    """
    import sys
    from memdir.telemetry import JsonlSink, emit

    print("ready", flush=True)
    sys.stdin.read()  # the parent closes stdin once both writers are ready: start together
    with JsonlSink(sys.argv[1]) as sink:
        for i in range(300):
            emit(sink, "extract.run", writer=sys.argv[2], i=i, filler="y" * 2000)
    """
)


def test_jsonl_sink_processes_never_tear_lines(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    for writer in writers:  # both imported memdir and wait: their writes will overlap
        assert writer.stdout is not None
        assert writer.stdout.readline() == "ready\n"
    for writer in writers:
        assert writer.stdin is not None
        writer.stdin.close()
    assert [writer.wait(timeout=60) for writer in writers] == [0, 0]
    for writer in writers:
        assert writer.stdout is not None
        writer.stdout.close()

    records = _lines(path)  # json.loads fails on any torn or merged line
    assert len(records) == 600
    assert {(r["fields"]["writer"], r["fields"]["i"]) for r in records} == {
        (w, i) for w in ("a", "b") for i in range(300)
    }


def test_jsonl_sink_unwritable_path_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="memdir")
    path = tmp_path / "events.jsonl"
    path.mkdir()  # a directory where the file should be

    sink = JsonlSink(path)
    for _ in range(3):
        sink(Event(name="extract.run", fields=RUN_FIELDS))
    sink.close()

    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert str(path) in record.getMessage()


def test_jsonl_sink_drops_events_after_close(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(path)
    emit(sink, "dream.fired")
    sink.close()
    sink.close()
    emit(sink, "dream.completed")

    assert [r["event"] for r in _lines(path)] == ["dream.fired"]


# --- OpenTelemetrySink ----------------------------------------------------------------------


@dataclass
class Otel:
    sink: OpenTelemetrySink
    exporter: Any
    reader: Any

    def spans(self) -> list[Any]:
        return list(self.exporter.get_finished_spans())

    def points(self) -> dict[tuple[str, tuple[tuple[str, Any], ...]], Any]:
        """Metric values by (name, sorted attributes); histograms give their data point."""
        data = self.reader.get_metrics_data()
        found: dict[tuple[str, tuple[tuple[str, Any], ...]], Any] = {}
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                assert scope.scope.name == "memdir"
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        key = (metric.name, tuple(sorted(point.attributes.items())))
                        found[key] = getattr(point, "value", point)
        return found


@pytest.fixture
def otel() -> Iterator[Otel]:
    """An OpenTelemetrySink on private SDK providers that keep everything in memory."""
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider(shutdown_on_exit=False)
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    sink = OpenTelemetrySink(tracer_provider=tracer_provider, meter_provider=meter_provider)
    yield Otel(sink=sink, exporter=exporter, reader=reader)
    tracer_provider.shutdown()
    meter_provider.shutdown()


def test_otel_sink_one_span_per_event_with_attributes(otel: Otel) -> None:
    from opentelemetry.trace import StatusCode

    emit(otel.sink, "permission.denied", tool_name="Bash", reason="not read-only")
    emit(otel.sink, "extract.throttled", turns_since_last=1, every_n_turns=2.5, forced=False)
    emit(otel.sink, "dream.fired", path=Path("/m"), note=None)

    spans = otel.spans()
    assert [s.name for s in spans] == [
        "memdir.permission.denied",
        "memdir.extract.throttled",
        "memdir.dream.fired",
    ]
    assert [dict(s.attributes) for s in spans] == [
        {"memdir.tool_name": "Bash", "memdir.reason": "not read-only"},
        {"memdir.turns_since_last": 1, "memdir.every_n_turns": 2.5, "memdir.forced": False},
        {"memdir.path": "/m"},  # str()'d; None left out
    ]
    assert all(s.start_time == s.end_time for s in spans)  # no duration_ms: an instant
    assert all(s.status.status_code is StatusCode.UNSET for s in spans)
    assert spans[0].instrumentation_scope.name == "memdir"


def test_otel_sink_span_starts_duration_ms_before_it_ends(otel: Otel) -> None:
    emit(otel.sink, "extract.run", **RUN_FIELDS)

    (span,) = otel.spans()
    assert span.name == "memdir.extract.run"
    assert span.attributes["memdir.cache_read_input_tokens"] == 9000
    assert abs((span.end_time - span.start_time) - 1234.5 * 1_000_000) < 1_000_000


@pytest.mark.parametrize("name", ["extract.error", "dream.failed"])
def test_otel_sink_failures_get_error_status(otel: Otel, name: str) -> None:
    from opentelemetry.trace import StatusCode

    emit(otel.sink, name, duration_ms=20, error_type="ModelError")

    (span,) = otel.spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "ModelError"
    assert span.end_time - span.start_time == 20 * 1_000_000


def test_otel_sink_metrics_after_three_runs(otel: Otel) -> None:
    for _ in range(3):
        emit(otel.sink, "extract.run", **RUN_FIELDS)
    emit(otel.sink, "extract.coalesced")

    points = otel.points()
    duration = points.pop(("memdir.extract.duration", ()))
    assert (duration.count, duration.sum) == (3, 3 * 1234.5)
    assert points == {
        ("memdir.events", (("event", "extract.run"),)): 3,
        ("memdir.events", (("event", "extract.coalesced"),)): 1,
        ("memdir.extract.tokens", (("kind", "input"),)): 3 * 1200,
        ("memdir.extract.tokens", (("kind", "output"),)): 3 * 300,
        ("memdir.extract.tokens", (("kind", "cache_read"),)): 3 * 9000,
        ("memdir.extract.tokens", (("kind", "cache_creation"),)): 3 * 40,
        ("memdir.memories.saved", ()): 3,
    }


def test_otel_sink_needs_opentelemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes any import of the package fail, as if it were not installed;
    # dropping memdir._otel forces the sink to import it (and so opentelemetry) afresh.
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.delitem(sys.modules, "memdir._otel", raising=False)

    with pytest.raises(UsageError, match=r"\[otel\] extra"):
        OpenTelemetrySink()


# --- fan_out, CollectingSink, emit ----------------------------------------------------------


def test_fan_out_sends_to_each_sink_in_order(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []
    first, last = CollectingSink(), CollectingSink()

    def middle(event: Event) -> None:
        calls.append(f"middle saw {event.name} after {first.names()}")
        _boom(event)

    sink = fan_out(first, None, middle, last)
    assert sink is not None
    sink(Event(name="dream.fired"))

    assert calls == ["middle saw dream.fired after ['dream.fired']"]
    assert last.names() == ["dream.fired"]
    (record,) = caplog.records
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None


def test_fan_out_with_none_or_one_sink() -> None:
    only = CollectingSink()

    assert fan_out() is None
    assert fan_out(None, None) is None
    assert fan_out(None, only) is only


def test_collecting_sink_names_and_named() -> None:
    sink = CollectingSink()
    emit(sink, "extract.throttled", turns_since_last=1, every_n_turns=2)
    emit(sink, "extract.run", memories_saved=1)
    emit(sink, "extract.throttled", turns_since_last=1, every_n_turns=3)

    assert sink.names() == ["extract.throttled", "extract.run", "extract.throttled"]
    assert [e.fields["every_n_turns"] for e in sink.named("extract.throttled")] == [2, 3]
    assert sink.named("dream.fired") == []
    assert sink.events[1] == Event(name="extract.run", fields={"memories_saved": 1})


def test_emit_swallows_a_raising_sink(caplog: pytest.LogCaptureFixture) -> None:
    emit(_boom, "extract.run", memories_saved=1)
    emit(None, "extract.run")

    (record,) = caplog.records
    assert "extract.run" in record.getMessage()
    assert record.exc_info is not None


def test_a_failed_run_is_logged_when_no_sink_was_given(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A user who passed no sink still learns that, and why, a run failed.
    from memdir.errors import ModelError
    from memdir.extract import MemoryExtractor, TurnContext
    from memdir.messages import Message
    from memdir.testing import FunctionModel

    def refuse(request: object) -> str:
        raise ModelError("anthropic:claude-sonnet-4-5: HTTP 401: invalid x-api-key")

    extractor = MemoryExtractor(tmp_path / "memory", FunctionModel(refuse))

    async def main() -> None:
        extractor.on_turn_end(
            TurnContext(messages=(Message.user("I'm Ana."), Message.assistant("Hi Ana.")))
        )
        await extractor.drain()

    with caplog.at_level(logging.WARNING, logger="memdir"):
        asyncio.run(main())
    (record,) = [r for r in caplog.records if r.name == "memdir"]
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith("extract.error ")
    assert "HTTP 401: invalid x-api-key" in record.getMessage()


def test_other_events_without_a_sink_stay_quiet(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="memdir"):
        emit(None, "extract.run", message_count=2)
    assert caplog.records == []
