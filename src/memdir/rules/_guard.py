"""The rules as a guard for any agent framework's tool calls, not only Claude Code's.

A framework's tools have their own names and arguments: ``RuleGuard`` is told which tools
run shell commands (and in which argument) and which write files, turns each call into the
Claude Code shape the rules are written for, and answers what the PreToolUse hook would:
deny with the memory's words, warn, or nothing. The framework modules
(:mod:`memdir.integrations.openai_agents_rules`) wrap it in the framework's own check.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from memdir.rules._book import load_rules, record_firings
from memdir.rules._hook import message_for
from memdir.rules._match import Hit, check_tool_call

__all__ = ["RuleGuard", "Verdict"]


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """What the rules say about one tool call that broke at least one of them."""

    action: Literal["deny", "warn"]
    """``deny`` when any rule that fired denies."""
    message: str
    """For the model: each rule's memory, in its own words, and what to do instead."""
    hits: tuple[Hit, ...]
    """The rules that fired."""


@dataclass(frozen=True, kw_only=True)
class RuleGuard:
    """Checks a framework's tool calls against the rules of a memory directory."""

    memory_dir: str | os.PathLike[str]
    """The memory directory whose feedback memories state the rules."""
    shell_tools: Mapping[str, str] = field(default_factory=lambda: {"Bash": "command"})
    """Tool name to the argument that holds the command line it runs."""
    file_tools: Mapping[str, str] = field(
        default_factory=lambda: {"Edit": "file_path", "Write": "file_path"}
    )
    """Tool name to the argument that holds the path of the file it writes."""
    cwd: str | None = None
    """The project folder relative paths and path globs are taken in (default: the
    process's working directory at each check)."""

    def check(self, tool_name: str, arguments: Mapping[str, Any]) -> Verdict | None:
        """The verdict on one call, recorded in the firings log; None when no rule fires."""
        if tool_name in self.shell_tools:
            value = arguments.get(self.shell_tools[tool_name])
            name, tool_input = "Bash", {"command": value}
        elif tool_name in self.file_tools:
            value = arguments.get(self.file_tools[tool_name])
            name, tool_input = "Write", {"file_path": value}
        else:
            return None
        if not isinstance(value, str):
            return None
        cwd = self.cwd or os.getcwd()
        hits = check_tool_call(load_rules(self.memory_dir), name, tool_input, cwd)
        if not hits:
            return None
        record_firings(self.memory_dir, hits, tool_name=tool_name)
        denying = [hit for hit in hits if hit.rule.action == "deny"]
        return Verdict(
            action="deny" if denying else "warn",
            message=message_for(denying or hits),
            hits=tuple(hits),
        )
