"""``memdir extract`` and ``memdir dream`` repair what a killed run left, and say so."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

from click.testing import CliRunner

from memdir import _hook_worker
from memdir._cli import cli
from memdir.dream import AutoDream
from memdir.models import OfflineModel
from memdir.store import format_memory_file
from memdir.telemetry import CollectingSink, Event
from tests.cli.conftest import TURNS, offline, write_session


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, offline(args))
    return result.exit_code, result.stdout, result.stderr


def debris(memory: Path) -> None:
    """A memory saved but never indexed and a line whose file is gone."""
    memory.mkdir()
    (memory / "unindexed.md").write_text(
        format_memory_file(
            name="unindexed", description="saved, then killed", type="user", body="x"
        )
    )
    (memory / "MEMORY.md").write_text("- [Gone](gone.md) — its file was removed\n")


def test_extract_repairs_first_and_reports_each_repair(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    debris(memory)
    session = write_session(tmp_path / "s.jsonl", TURNS[:1])
    code, out, err = run("extract", str(session), "--memory-dir", str(memory), "--json")
    assert code == 0, err
    assert json.loads(out)["repaired"] == [
        {"memory_dir": str(memory), "kind": "unlinked_line", "path": "gone.md"},
        {"memory_dir": str(memory), "kind": "indexed", "path": "unindexed.md"},
    ]
    index = (memory / "MEMORY.md").read_text()
    assert "gone.md" not in index
    assert "- [unindexed](unindexed.md) — saved, then killed" in index


def test_extract_prints_a_line_per_repair(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    debris(memory)
    session = write_session(tmp_path / "s.jsonl", TURNS[:1])
    code, out, _ = run("extract", str(session), "--memory-dir", str(memory))
    assert code == 0
    assert out.splitlines()[:2] == [
        f"repaired {memory}: removed the index line of the missing file gone.md",
        f"repaired {memory}: added the missing index line for unindexed.md",
    ]
    # Nothing left to repair the next time.
    code, out, _ = run("extract", str(session), "--memory-dir", str(memory))
    assert "repaired" not in out


def test_a_dry_run_repairs_nothing(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    debris(memory)
    session = write_session(tmp_path / "s.jsonl", TURNS[:1])
    code, _, _ = run("extract", str(session), "--memory-dir", str(memory), "--dry-run")
    assert code == 0
    assert (memory / "MEMORY.md").read_text() == "- [Gone](gone.md) — its file was removed\n"


def test_dream_repairs_first_and_reports_each_repair(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    debris(memory)
    (memory / "retired.md").write_text("")  # emptied by a pass killed before its cleanup
    code, out, err = run("dream", "--force", "--memory-dir", str(memory), "--json")
    assert code == 0, err
    assert json.loads(out)["repaired"] == [
        {"kind": "unlinked_line", "path": "gone.md"},
        {"kind": "empty_removed", "path": "retired.md"},
        {"kind": "indexed", "path": "unindexed.md"},
    ]
    debris_again = tmp_path / "again"
    debris(debris_again)
    code, out, _ = run("dream", "--force", "--memory-dir", str(debris_again))
    assert code == 0
    assert "repaired: removed the index line of the missing file gone.md" in out.splitlines()


def test_dream_reports_repairs_as_telemetry(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    debris(memory)
    events = CollectingSink()
    asyncio.run(AutoDream(memory, OfflineModel(), sink=events).run())
    repaired: list[Event] = events.named("memory.repaired")
    assert [dict(e.fields) for e in repaired] == [
        {"kind": "unlinked_line", "path": "gone.md"},
        {"kind": "indexed", "path": "unindexed.md"},
    ]


def test_the_hook_repairs_first_and_logs_each_repair(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    debris(memory)
    session = write_session(tmp_path / "s.jsonl", TURNS[:1])
    job = {"transcript_path": str(session), "memory_dir": str(memory), "model": "offline"}
    log = io.StringIO()
    assert _hook_worker.run_job(job, stream=log) == 0, log.getvalue()
    said = [line.partition(" ")[2] for line in log.getvalue().splitlines()]
    assert said[1:3] == [
        "repaired: removed the index line of the missing file gone.md",
        "repaired: added the missing index line for unindexed.md",
    ]
    assert "gone.md" not in (memory / "MEMORY.md").read_text()
