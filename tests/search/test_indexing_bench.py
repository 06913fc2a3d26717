"""bench/search_indexing.py runs and reports what it promises (no timing is asserted)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "search_indexing.py"


def test_the_bench_reads_only_what_was_added(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = importlib.util.spec_from_file_location("search_indexing_bench", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    monkeypatch.setattr(bench, "SESSION_TURNS", 20)
    monkeypatch.setattr(sys, "argv", ["search_indexing.py", "--sizes", "10,50", "--rounds", "2"])

    bench.main()

    report = json.loads(capsys.readouterr().out)
    assert set(report["sizes"]) == {"10", "50"}
    assert report["sizes"]["50"]["sessions"] == 3
    for figures in report["sizes"].values():
        assert figures["bytes_read_per_byte_added"] == 1.0
    assert report["ratio_named"] > 0
    assert report["ratio_folder"] > 0
