"""Feedback memories' rules as a pydantic-ai toolset wrapper.

:class:`RulesToolset` wraps the agent's tools and checks each call before it runs: a call
that a rule denies is not run, and the model is given the memory's own words instead
(raised as ``ModelRetry``), so it corrects itself in the same run; a rule that warns lets it
run::

    from pydantic_ai import Agent, FunctionToolset
    from memdir.integrations.pydantic_ai_rules import RulesToolset

    tools = FunctionToolset([shell])
    agent = Agent(model, toolsets=[RulesToolset(tools, "./memory", shell_tools={"shell": "cmd"})])

Each firing is recorded in the memory directory's ``.memdir/rule_firings.jsonl``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memdir.errors import MissingExtraError, one_line

try:
    from pydantic_ai import ModelRetry, RunContext
    from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise MissingExtraError(
        "memdir.integrations.pydantic_ai_rules", "pydantic-ai", one_line(exc)
    ) from exc

from memdir.rules._guard import RuleGuard

__all__ = ["RulesToolset"]


@dataclass(init=False)
class RulesToolset(WrapperToolset[Any]):
    """The wrapped toolset, with each call checked against a memory directory's rules."""

    guard: RuleGuard = field(repr=False)
    """What checks the calls."""

    def __init__(
        self,
        wrapped: AbstractToolset[Any],
        memory_dir: str | os.PathLike[str],
        *,
        shell_tools: Mapping[str, str] | None = None,
        file_tools: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> None:
        """``shell_tools`` maps a tool's name to the argument holding the command it runs,
        ``file_tools`` to the one holding the path it writes (defaults: Claude Code's
        ``Bash``, ``Edit`` and ``Write``)."""
        super().__init__(wrapped)
        self.guard = RuleGuard(
            memory_dir=memory_dir,
            shell_tools=shell_tools if shell_tools is not None else {"Bash": "command"},
            file_tools=file_tools
            if file_tools is not None
            else {"Edit": "file_path", "Write": "file_path"},
            cwd=cwd,
        )

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Refuse the call when a rule denies it (the model retries); else run it."""
        verdict = self.guard.check(name, tool_args)
        if verdict is not None and verdict.action == "deny":
            raise ModelRetry(verdict.message)
        return await super().call_tool(name, tool_args, ctx, tool)
