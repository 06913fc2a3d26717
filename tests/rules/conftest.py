"""The real-CLI fixtures of tests/claude_code, for the tests here."""

from tests.claude_code.conftest import claude_binary, claude_cli

__all__ = ["claude_binary", "claude_cli"]
