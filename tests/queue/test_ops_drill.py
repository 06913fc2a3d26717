"""The fault drill (``bench/queue_drill.py``) in small: busy workers SIGKILLed under load
lose no acknowledged turn, leave no gap, overlap or duplicate, no stuck directory, and a
synced folder equal to the database. The pause and the server restart are the full
drill's (run ``python bench/queue_drill.py``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "queue_drill.py"


def _drill_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("queue_drill", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


def test_kills_under_load_lose_nothing(pg_dsn: str, tmp_path: Path) -> None:
    drill = _drill_module()
    options = drill.DrillOptions(
        dirs=3,
        sessions=2,
        turns=8,
        hosts=2,
        workers=2,
        kills=2,
        pause=0.0,
        restart=False,
        latency_ms=300,
        interval_ms=400,
        drain_timeout=90.0,
    )
    report = drill.drill(options, dsn=pg_dsn, work=tmp_path)
    assert report.kills == 2
    assert report.turns_acknowledged == 3 * 2 * 8
    assert report.runs > 0
    assert report.problems() == dict.fromkeys(report.problems(), 0), report.as_dict()
