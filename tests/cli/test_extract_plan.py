"""``memdir extract --dry-run``, and the question before a large backfill.

Before, the only way to learn what a 2,000-turn backfill would send was to send it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memdir._cli import cli
from memdir.testing import FakeAnthropicServer
from tests.cli.conftest import TURNS, append_turns, write_session

MODEL = "anthropic:claude-sonnet-4-6"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")


def extract(server: FakeAnthropicServer, *args: str, input: str | None = None) -> Result:
    command = ["extract", *args, "--model", MODEL, "--base-url", server.base_url]
    return CliRunner().invoke(cli, command, input=input)


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
        for p in sorted(root.rglob("*"))
    }


def test_dry_run_prints_the_runs_tokens_and_cost_and_sends_and_writes_nothing(
    tmp_path: Path,
) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS)
    memory = tmp_path / "memory"
    before = snapshot(tmp_path)
    with FakeAnthropicServer(handler=lambda body: "Nothing to save.") as server:
        result = extract(server, str(session), "--memory-dir", str(memory), "--dry-run")
        assert result.exit_code == 0, result.stderr
        assert server.requests == []
        as_json = extract(server, str(session), "--memory-dir", str(memory), "--dry-run", "--json")
        assert server.requests == []
    assert snapshot(tmp_path) == before  # no memory folder, no state, no cursor
    out = result.stdout
    assert out.startswith("dry run: nothing was sent or written\n")
    assert f"turns {len(TURNS)} · runs {len(TURNS)} (standalone {len(TURNS)})" in out
    assert "input-token equivalents at anthropic:claude-sonnet-4-6" in out
    assert out.count("  run at turn ") == len(TURNS)
    plan = json.loads(as_json.stdout)
    assert plan["dry_run"] is True
    first = plan["transcripts"][0]
    assert first["turns"] == len(TURNS)
    assert [r["turn"] for r in first["runs"]] == list(range(1, len(TURNS) + 1))
    assert first["input_tokens"] == sum(r["input_tokens"] for r in first["runs"]) > 0
    assert first["estimated_cost"] > 0
    assert first["cost_unit"] == "input-token equivalents"
    # Sonnet's list price: $3 per million uncached input tokens.
    assert first["estimated_usd"] == round(first["estimated_cost"] * 3 / 1_000_000, 4)
    assert f"(~${first['estimated_usd']:,.2f} at list prices)" in out


def test_the_planned_runs_are_the_ones_extract_then_makes(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS[:3])
    memory = tmp_path / "memory"
    with FakeAnthropicServer(handler=lambda body: "Nothing to save.") as server:
        dry = extract(server, str(session), "--memory-dir", str(memory), "--dry-run", "--json")
        planned = json.loads(dry.stdout)["transcripts"][0]
        real = extract(server, str(session), "--memory-dir", str(memory), "--json")
        assert real.exit_code == 0, real.stderr
        done = json.loads(real.stdout)["transcripts"][0]
        sent = server.requests
    assert len(planned["runs"]) == done["runs"] == len(sent) == 3
    # The fake counts tokens as the plan does (characters / 4), on the wire as sent.
    for run, request in zip(planned["runs"], sent, strict=True):
        on_wire = len(request.raw) / 4
        assert 0.7 * on_wire < run["input_tokens"] < 1.3 * on_wire


def test_dry_run_covers_only_the_turns_past_the_cursor(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS[:2])
    memory = tmp_path / "memory"
    with FakeAnthropicServer(handler=lambda body: "Nothing to save.") as server:
        assert extract(server, str(session), "--memory-dir", str(memory)).exit_code == 0
        append_turns(session, 2, TURNS[2:5])
        before = snapshot(memory)
        sent = len(server.requests)
        dry = extract(server, str(session), "--memory-dir", str(memory), "--dry-run", "--json")
        assert len(server.requests) == sent
    assert snapshot(memory) == before
    planned = json.loads(dry.stdout)["transcripts"][0]
    assert planned["turns"] == 3
    assert len(planned["runs"]) == 3


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Someone at a terminal, and a backfill limit the short session goes over."""
    monkeypatch.setattr("memdir._cli._extract._interactive", lambda: True)
    monkeypatch.setattr("memdir._cli._extract.LARGE_BACKFILL_TURNS", 4)


@pytest.mark.usefixtures("terminal")
def test_a_large_backfill_at_a_terminal_asks_and_no_sends_nothing(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS)
    memory = tmp_path / "memory"
    with FakeAnthropicServer(handler=lambda body: "Nothing to save.") as server:
        result = extract(server, str(session), "--memory-dir", str(memory), input="n\n")
        assert server.requests == []
    assert result.exit_code == 2
    assert f"turns {len(TURNS)} · runs {len(TURNS)}" in result.stderr
    assert f"Send {len(TURNS)} run(s)" in result.stderr
    assert "not extracting: nothing was sent" in result.stderr
    assert not memory.exists()


@pytest.mark.usefixtures("terminal")
def test_a_large_backfill_goes_ahead_when_the_user_agrees(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS)
    memory = tmp_path / "memory"
    with FakeAnthropicServer(handler=lambda body: "Nothing to save.") as server:
        result = extract(server, str(session), "--memory-dir", str(memory), input="y\n")
        assert len(server.requests) == len(TURNS)
    assert result.exit_code == 0, result.stderr


@pytest.mark.usefixtures("terminal")
def test_yes_skips_the_question_and_a_small_backfill_is_not_asked_about(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS)
    small = write_session(tmp_path / "small.jsonl", TURNS[:2])
    with FakeAnthropicServer(handler=lambda body: "Nothing to save.") as server:
        result = extract(server, str(session), "--memory-dir", str(tmp_path / "a"), "--yes")
        assert result.exit_code == 0, result.stderr
        assert "Send " not in result.stderr
        result = extract(server, str(small), "--memory-dir", str(tmp_path / "b"))
        assert result.exit_code == 0, result.stderr
        assert "Send " not in result.stderr
        assert len(server.requests) == len(TURNS) + 2


def test_without_a_terminal_a_large_backfill_goes_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("memdir._cli._extract.LARGE_BACKFILL_TURNS", 4)
    session = write_session(tmp_path / "s.jsonl", TURNS)
    with FakeAnthropicServer(handler=lambda body: "Nothing to save.") as server:
        result = extract(server, str(session), "--memory-dir", str(tmp_path / "m"))
        assert result.exit_code == 0, result.stderr
        assert len(server.requests) == len(TURNS)
    assert "Send " not in result.stderr


def test_dry_run_with_the_offline_model_has_no_cost(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS[:2])
    args = ["extract", str(session), "--memory-dir", str(tmp_path / "m"), "--dry-run"]
    result = CliRunner().invoke(cli, [*args, "--model", "offline"])
    assert result.exit_code == 0, result.stderr
    assert "no cost (the offline model calls no provider)" in result.stdout
    assert not (tmp_path / "m").exists()
