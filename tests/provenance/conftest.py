"""The real Claude Code CLI, for the tests of provenance against the sessions it writes."""

from __future__ import annotations

from tests.claude_code.conftest import claude_binary, claude_cli  # noqa: F401
