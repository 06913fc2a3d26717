"""Shared pieces for the command-line tests: sessions on disk and a clean environment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.transcripts.test_claude_code import Session


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No provider keys, no memdir settings, and a private Claude config home."""
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "MEMDIR_ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "MEMDIR_MODEL",
        "MEMDIR_DIR",
        "CLAUDE_COWORK_MEMORY_PATH_OVERRIDE",
        "CLAUDE_CODE_REMOTE_MEMORY_DIR",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))


# The commands that run a model when given one (recall runs none unless asked).
_MODEL_COMMANDS = ("extract", "watch", "dream")


def offline(args: list[str] | tuple[str, ...]) -> list[str]:
    """``args`` with ``--model offline`` after a command that runs a model, unless they
    name a model: these tests mean the rule-based engine, which runs only when asked."""
    out = list(args)
    if out and out[0] in _MODEL_COMMANDS and not any(a == "--model" for a in out):
        out[1:1] = ["--model", "offline"]
    return out


TURNS = [
    "I'm Ana, I lead the data platform team.",
    "Always use polars, never pandas, because our cluster images only ship polars.",
    "What does the ingest job do?",
    "I prefer small commits with conventional-commit messages.",
    "The latency dashboard is https://grafana.example.com/d/ingest-latency",
    "thanks!",
]


def write_session(path: Path, turns: list[str], *, cwd: str = "/home/ana/work/ingest") -> Path:
    """A Claude Code session with one user message and one answer per turn."""
    session = Session()
    parent: str | None = None
    for i, text in enumerate(turns):
        user, answer = f"u{i}", f"a{i}"
        session.user(user, parent, text, cwd=cwd)
        session.assistant(
            answer, user, f"msg_{i}", [{"type": "text", "text": f"Noted ({i})."}], cwd=cwd
        )
        parent = answer
    return session.write(path)


def append_turns(
    path: Path, start: int, turns: list[str], *, cwd: str = "/home/ana/work/ingest"
) -> None:
    """Append turns to a session written by :func:`write_session`."""
    session = Session()
    parent: str | None = f"a{start - 1}"
    for i, text in enumerate(turns, start=start):
        user, answer = f"u{i}", f"a{i}"
        session.user(user, parent, text, cwd=cwd)
        session.assistant(
            answer, user, f"msg_{i}", [{"type": "text", "text": f"Noted ({i})."}], cwd=cwd
        )
        parent = answer
    with path.open("a", encoding="utf-8") as handle:
        handle.write("\n".join(session.lines) + "\n")


def report(output: str) -> dict[str, Any]:
    """The first transcript's report from ``extract --json`` output."""
    data = json.loads(output)
    first: dict[str, Any] = data["transcripts"][0]
    return first
