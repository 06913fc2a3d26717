"""Feedback memories' rules as a LangChain agent middleware (``create_agent``).

:class:`RulesMiddleware` wraps each tool call: a call that a rule denies is not run, and
the agent gets an error ``ToolMessage`` with the memory's own words instead, so the model
corrects itself in the same turn; a rule that warns lets it run::

    from langchain.agents import create_agent
    from memdir.integrations.langchain_rules import RulesMiddleware

    rules = RulesMiddleware("./memory", shell_tools={"shell": "command"})
    agent = create_agent(model, tools, middleware=[rules])

Each firing is recorded in the memory directory's ``.memdir/rule_firings.jsonl``.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from memdir.errors import MissingExtraError, one_line

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState
    from langchain.agents.middleware.types import ToolCallRequest
    from langchain_core.messages import ToolMessage
    from langgraph.types import Command
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise MissingExtraError(
        "memdir.integrations.langchain_rules", "langchain", one_line(exc)
    ) from exc

from memdir.rules._guard import RuleGuard

__all__ = ["RulesMiddleware"]


class RulesMiddleware(AgentMiddleware[AgentState[Any], Any]):
    """Applies the rules of a memory directory to an agent's tool calls."""

    def __init__(
        self,
        memory_dir: str | os.PathLike[str],
        *,
        shell_tools: Mapping[str, str] | None = None,
        file_tools: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> None:
        """``shell_tools`` maps a tool's name to the argument holding the command it runs,
        ``file_tools`` to the one holding the path it writes (defaults: Claude Code's
        ``Bash``, ``Edit`` and ``Write``)."""
        super().__init__()
        self.guard = RuleGuard(
            memory_dir=memory_dir,
            shell_tools=shell_tools if shell_tools is not None else {"Bash": "command"},
            file_tools=file_tools
            if file_tools is not None
            else {"Edit": "file_path", "Write": "file_path"},
            cwd=cwd,
        )

    def _refusal(self, request: ToolCallRequest) -> ToolMessage | None:
        call = request.tool_call
        arguments = call.get("args")
        verdict = self.guard.check(
            str(call.get("name")), arguments if isinstance(arguments, dict) else {}
        )
        if verdict is None or verdict.action != "deny":
            return None
        return ToolMessage(
            content=verdict.message,
            tool_call_id=str(call.get("id")),
            name=str(call.get("name")),
            status="error",
        )

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Refuse the call when a rule denies it; else run it."""
        refusal = self._refusal(request)
        return refusal if refusal is not None else handler(request)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Refuse the call when a rule denies it; else run it."""
        refusal = self._refusal(request)
        return refusal if refusal is not None else await handler(request)
