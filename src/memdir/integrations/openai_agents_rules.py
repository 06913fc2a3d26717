"""Feedback memories' rules as an OpenAI Agents SDK tool input guardrail.

The SDK checks a function tool's arguments before it runs it with the tool's
``tool_input_guardrails``; this one refuses a call that a rule denies, and the model is
given the memory's own words as the tool's result, so it corrects itself in the same
turn::

    from agents import function_tool
    from memdir.integrations.openai_agents_rules import rules_guardrail

    guard = rules_guardrail("./memory", shell_tools={"run_shell": "cmd"})

    @function_tool(tool_input_guardrails=[guard])
    def run_shell(cmd: str) -> str: ...

A rule that warns lets the call run. Each firing is recorded in the memory directory's
``.memdir/rule_firings.jsonl``, as the Claude Code hook records its own.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from memdir.errors import MissingExtraError, one_line

try:
    from agents import ToolGuardrailFunctionOutput, ToolInputGuardrail, ToolInputGuardrailData
except ImportError as exc:
    raise MissingExtraError(
        "memdir.integrations.openai_agents_rules", "openai-agents", one_line(exc)
    ) from exc

from memdir.rules._guard import RuleGuard

__all__ = ["rules_guardrail"]


def rules_guardrail(
    memory_dir: str | os.PathLike[str],
    *,
    shell_tools: Mapping[str, str] | None = None,
    file_tools: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> ToolInputGuardrail[Any]:
    """A tool input guardrail applying the rules of ``memory_dir``. ``shell_tools`` maps
    a tool's name to the argument holding the command it runs, ``file_tools`` to the one
    holding the path it writes (defaults: Claude Code's ``Bash``, ``Edit`` and ``Write``)."""
    guard = RuleGuard(
        memory_dir=memory_dir,
        shell_tools=shell_tools if shell_tools is not None else {"Bash": "command"},
        file_tools=file_tools
        if file_tools is not None
        else {"Edit": "file_path", "Write": "file_path"},
        cwd=cwd,
    )

    def check(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        try:
            arguments = json.loads(context.tool_arguments or "{}")
        except ValueError:
            return ToolGuardrailFunctionOutput.allow()
        if not isinstance(arguments, dict):
            return ToolGuardrailFunctionOutput.allow()
        verdict = guard.check(context.tool_name, arguments)
        if verdict is not None and verdict.action == "deny":
            return ToolGuardrailFunctionOutput.reject_content(verdict.message)
        return ToolGuardrailFunctionOutput.allow(
            output_info=verdict.message if verdict is not None else None
        )

    return ToolInputGuardrail(guardrail_function=check, name="memdir_rules")
