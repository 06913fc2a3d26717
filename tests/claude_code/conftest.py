"""Fixtures that run the real Claude Code CLI (bundled with claude-agent-sdk) offline.

``claude_cli`` gives each test a :class:`~tests.claude_code._cli.ClaudeCli` with its own
HOME and project directory; ``claude_cli.run(prompt, replies=...)`` runs ``claude -p``
against memdir's fake Anthropic server and returns a :class:`~tests.claude_code._cli.CliRun`.
Tests skip only where the binary cannot run here (missing, not executable, another
platform); a binary that runs and misbehaves fails them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.claude_code._cli import ClaudeCli, CliUnavailableError, find_claude_binary


@pytest.fixture(scope="session")
def claude_binary() -> tuple[Path, str]:
    """The bundled CLI and its version line; skips when it cannot run on this machine."""
    try:
        return find_claude_binary()
    except CliUnavailableError as reason:
        pytest.skip(str(reason))


@pytest.fixture
def claude_cli(claude_binary: tuple[Path, str], tmp_path: Path) -> ClaudeCli:
    """The real CLI with a fresh HOME (``tmp_path/home``) and project (``tmp_path/project``)."""
    binary, version = claude_binary
    return ClaudeCli(binary, version, tmp_path)
