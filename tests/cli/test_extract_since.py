"""``memdir extract --since``, and the backlog policy of extraction from transcripts.

Before, a first ``extract`` over a long session read and billed all of it; the only way
to leave its old turns out was to edit the transcript.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memdir._cli import cli
from memdir._cli._extract import parse_since
from memdir._cli._run import extract_transcript
from memdir.models import OfflineModel
from memdir.state import StateFile
from memdir.store import MemoryDir
from memdir.testing import FakeAnthropicServer
from memdir.transcripts import load_transcript
from tests.cli.conftest import TURNS, write_session

MODEL = "anthropic:claude-sonnet-4-6"
# The sessions' clock: turn i's question is stamped 10:00:(2i+1), its answer a second on.
THIRD_TURN = "2026-11-30T10:00:05Z"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")


def extract(server: FakeAnthropicServer, *args: str, input: str | None = None) -> Result:
    command = ["extract", *args, "--model", MODEL, "--base-url", server.base_url]
    return CliRunner().invoke(cli, command, input=input)


def test_since_reads_only_newer_turns_and_moves_the_cursor_past_the_rest(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS)
    memory = tmp_path / "memory"
    with FakeAnthropicServer(handler=lambda body: "Nothing to save.") as server:
        result = extract(server, str(session), "--memory-dir", str(memory), "--since", THIRD_TURN)
        assert result.exit_code == 0, result.stderr
        sent = [json.dumps(r.body) for r in server.requests]
        again = extract(server, str(session), "--memory-dir", str(memory), "--json")
        assert len(server.requests) == len(sent)  # the skipped turns are not read later
    assert len(sent) == len(TURNS) - 2
    assert TURNS[2] in sent[0]  # the first run covers the first turn since
    assert "turns 4 · runs 4" in result.stdout
    assert "skipped 4 message(s), 2 turn(s), older than --since 2026-11-30T10:00+00:00" in (
        result.stdout
    )
    assert json.loads(again.stdout)["transcripts"][0]["turns"] == 0


def test_since_in_a_dry_run_shows_what_is_skipped_and_prices_the_rest(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS)
    memory = tmp_path / "memory"
    with FakeAnthropicServer(handler=lambda body: "Nothing to save.") as server:
        whole = extract(server, str(session), "--memory-dir", str(memory), "--dry-run", "--json")
        dry = extract(
            server, str(session), "--memory-dir", str(memory), "--dry-run", "--since", THIRD_TURN
        )
        as_json = extract(
            server,
            *(str(session), "--memory-dir", str(memory), "--dry-run", "--json"),
            *("--since", THIRD_TURN),
        )
        assert server.requests == []
    assert not memory.exists()  # the cursor is moved in the dry run's copy only
    assert "turns 4 · runs 4" in dry.stdout
    assert "skipped 4 message(s), 2 turn(s), older than --since" in dry.stdout
    planned = json.loads(as_json.stdout)["transcripts"][0]
    assert (planned["turns"], planned["skipped_messages"], planned["skipped_turns"]) == (4, 4, 2)
    assert planned["input_tokens"] < json.loads(whole.stdout)["transcripts"][0]["input_tokens"]


def test_the_backfill_question_prices_the_turns_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("memdir._cli._extract._interactive", lambda: True)
    monkeypatch.setattr("memdir._cli._extract.LARGE_BACKFILL_TURNS", 4)
    session = write_session(tmp_path / "s.jsonl", TURNS)
    memory = tmp_path / "memory"
    with FakeAnthropicServer(handler=lambda body: "Nothing to save.") as server:
        asked = extract(
            server,
            *(str(session), "--memory-dir", str(memory)),
            *("--since", "2026-11-30T10:00:03Z"),
            input="n\n",
        )
        assert server.requests == []
        # Four turns left: under the question's threshold, so not asked.
        small = extract(server, str(session), "--memory-dir", str(memory), "--since", THIRD_TURN)
        assert small.exit_code == 0, small.stderr
        assert len(server.requests) == 4
    assert asked.exit_code == 2
    assert "skipped 2 message(s), 1 turn(s)" in asked.stderr
    assert "Send 5 run(s)" in asked.stderr
    assert "Send " not in small.stderr


def test_since_takes_a_duration_or_a_date() -> None:
    now = datetime.datetime(2026, 12, 4, 12, 0, tzinfo=datetime.UTC)
    assert parse_since("7d", now) == now - datetime.timedelta(days=7)
    assert parse_since("90m", now) == now - datetime.timedelta(minutes=90)
    assert parse_since("2w", now) == now - datetime.timedelta(weeks=2)
    assert parse_since("2026-12-01T09:30Z") == datetime.datetime(
        2026, 12, 1, 9, 30, tzinfo=datetime.UTC
    )
    local = parse_since("2026-12-01")
    assert local.tzinfo is not None
    assert local == datetime.datetime(2026, 12, 1).astimezone()
    with pytest.raises(ValueError, match="neither a duration"):
        parse_since("last week")


def test_a_bad_since_is_a_usage_error(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS[:1])
    result = CliRunner().invoke(
        cli, ["extract", str(session), "--model", "offline", "--since", "yesterday"]
    )
    assert result.exit_code == 2
    assert "neither a duration" in result.stderr


def test_a_run_without_a_person_reads_only_the_recent_part_of_a_long_backlog(
    tmp_path: Path,
) -> None:
    """The hook's and watch's path (no one was shown a cost) follows the extractor's
    backlog policy: past ``backlog_tokens``, the older turns are skipped."""
    transcript = load_transcript(write_session(tmp_path / "s.jsonl", TURNS))
    bounded = MemoryDir(tmp_path / "bounded")
    report = asyncio.run(extract_transcript(transcript, bounded, OfflineModel(), backlog_tokens=40))
    assert report.skipped_turns >= 3
    assert report.turns + report.skipped_turns == len(TURNS)
    assert report.skipped_messages == 2 * report.skipped_turns
    assert "beyond the most recent ~40 tokens" in report.skipped_why
    state = StateFile(bounded).get(report.session_id)
    assert state.cursor == transcript.messages[-1].uuid
    whole = asyncio.run(extract_transcript(transcript, MemoryDir(tmp_path / "w"), OfflineModel()))
    assert (whole.turns, whole.skipped_messages) == (len(TURNS), 0)
