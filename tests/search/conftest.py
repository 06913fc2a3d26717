"""A project folder laid out as Claude Code lays it out: sessions beside ``memory/``."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """``<project>/`` for the sessions, with an empty ``<project>/memory/``."""
    folder = tmp_path / "projects" / "-work-app"
    (folder / "memory").mkdir(parents=True)
    return folder


# The real Claude Code CLI, for the test that searches the transcript it writes.
from tests.claude_code.conftest import claude_binary, claude_cli  # noqa: E402, F401
