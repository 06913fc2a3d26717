"""The user layer's tests: a private Claude config home and user layer for each test,
and the real Claude Code CLI (its fixtures, from ``tests/claude_code``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.claude_code.conftest import claude_binary, claude_cli

__all__ = ["claude_binary", "claude_cli"]


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No memdir settings from outside, and a Claude config home of the test's own."""
    for name in ("MEMDIR_DIR", "MEMDIR_USER_DIR", "CLAUDE_COWORK_MEMORY_PATH_OVERRIDE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))
