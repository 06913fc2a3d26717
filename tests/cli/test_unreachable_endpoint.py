"""``memdir extract`` against an endpoint that cannot be reached: one line, at once; and
against one that may recover: each wait before another attempt said on stderr.

Before, each turn tried five times with growing waits (about nine seconds a turn, over a
hundred for a short session) and said nothing until the end.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir._cli import cli
from memdir.testing import FakeAnthropicServer, Fault
from tests.cli.conftest import TURNS, write_session

# Loaded here so that the timing below is the command's, not the SDKs' first import
# (over a second on a busy machine).
pytest.importorskip("anthropic")
pytest.importorskip("openai")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.mark.parametrize(
    ("spec", "base_url", "line"),
    [
        ("anthropic:claude-test", "http://127.0.0.1:{port}", "connection refused"),
        ("openai:gpt-test", "http://127.0.0.1:{port}", "connection refused"),
        # .invalid never resolves (RFC 6761); the local resolver answers without a query.
        ("anthropic:claude-test", "http://memdir-typo.invalid", "cannot resolve the host name"),
        ("openai:gpt-test", "http://memdir-typo.invalid", "cannot resolve the host name"),
    ],
)
def test_an_unreachable_endpoint_fails_in_well_under_a_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str, base_url: str, line: str
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    session = write_session(tmp_path / "s.jsonl", TURNS)
    url = base_url.format(port=free_port())
    args = ["extract", str(session), "--model", spec, "--base-url", url, "-q"]
    args += ["--memory-dir", str(tmp_path / "m")]
    started = time.monotonic()
    result = CliRunner().invoke(cli, args)
    elapsed = time.monotonic() - started
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert line in result.stderr
    assert "gave up" not in result.stderr
    assert elapsed < 1.0, f"{len(TURNS)} turns took {elapsed:.1f}s"


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_wait_before_another_attempt_is_said_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_json: bool
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    session = write_session(tmp_path / "s.jsonl", TURNS[:1])
    busy = Fault(status=529, headers={"retry-after": "0"})
    with FakeAnthropicServer([busy, "Nothing to save."], min_cache_tokens=0) as server:
        args = ["extract", str(session), "--model", "anthropic:claude-test"]
        args += ["--base-url", server.base_url, "--memory-dir", str(tmp_path / "m")]
        result = CliRunner().invoke(cli, [*args, *(["--json"] if as_json else [])])
        assert len(server.requests) == 2
    assert result.exit_code == 0, result.stderr
    assert "memdir: anthropic:claude-test: HTTP 529" in result.stderr
    assert "trying again in 0.0 s (attempt 2 of 5)" in result.stderr
    if as_json:
        assert json.loads(result.stdout)["transcripts"][0]["runs"] == 1


def test_quiet_keeps_the_waits_to_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    session = write_session(tmp_path / "s.jsonl", TURNS[:1])
    busy = Fault(status=529, headers={"retry-after": "0"})
    with FakeAnthropicServer([busy, "Nothing to save."], min_cache_tokens=0) as server:
        args = ["extract", str(session), "--model", "anthropic:claude-test", "-q"]
        args += ["--base-url", server.base_url, "--memory-dir", str(tmp_path / "m")]
        result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
