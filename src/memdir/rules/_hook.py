"""``memdir hook pre-tool-use``: a Claude Code PreToolUse hook that applies the rules.

Claude Code runs it before each tool call with a JSON object on stdin (``hook_event_name``
``"PreToolUse"``, ``tool_name``, ``tool_input``, ``cwd``, ``session_id``, …) and reads its
answer from stdout. A rule that denies answers

    {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                            "permissionDecisionReason": "<the memory's words>"}}

which Claude Code returns to the model as the tool's result, so the model corrects itself
in the same turn; a rule that warns answers with ``additionalContext`` instead and the call
runs. Nothing matched: no output. The hook never blocks a call because it broke itself — a
guard that fails closed on its own bug would stop every tool — it says why on stderr and
lets the call through.

Claude Code waits for it before every tool call, so this path skips click, the models and
the store (read only when a memory changed since the last call).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from memdir.rules._book import load_rules, record_firings
from memdir.rules._match import Hit, check_tool_call
from memdir.rules._rule import Rule

__all__ = ["answer", "check_payload", "hook_main", "message_for"]

_STDIN_MAX = 4 * 1024 * 1024
"""A tool input (a Write's content) can be long; more than this is not a hook's input."""


def message_for(hits: Sequence[Hit]) -> str:
    """What the model is told: each rule's memory, in its own words, and what to do."""
    lines = []
    for hit in hits:
        rule = hit.rule
        verb = "forbids" if rule.action == "deny" else "warns against"
        line = f"A saved memory ({rule.memory}) {verb} this: {rule.reason}"
        if rule.require:
            line += f" Give it: {rule.require}"
        if rule.instead:
            line += f" Instead: {rule.instead}"
        lines.append(f"{line} [memdir rule {rule.id}]")
    return "\n".join(lines)


def answer(hits: Sequence[Hit]) -> dict[str, Any] | None:
    """The hook's answer for these hits: deny when any rule denies, else a warning, else
    None (nothing to say)."""
    if not hits:
        return None
    denying = [hit for hit in hits if hit.rule.action == "deny"]
    if denying:
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": message_for(denying),
            }
        }
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "additionalContext": message_for(hits),
        }
    }


def _memory_roots(payload: Mapping[str, Any], chosen: Sequence[str]) -> list[Path]:
    if chosen:
        return [Path(c).expanduser() for c in chosen]
    from memdir._claude_settings import memory_switched_off

    cwd = payload.get("cwd")
    project = cwd if isinstance(cwd, str) and cwd else os.getcwd()
    # Rules are memories: where Claude Code loads no memory (autoMemoryEnabled false,
    # CLAUDE_CODE_DISABLE_AUTO_MEMORY), none of them applies either.
    if memory_switched_off(project) is not None:
        return []
    from memdir._claude_user_layer import user_layer_on
    from memdir.store import default_memory_dir

    # The user layer's rules too, where it is on: "never npm" said in one project
    # holds in the next. The project's folder comes first, as its memory wins.
    roots = [default_memory_dir(project)]
    layer = user_layer_on()
    if layer is not None:
        roots.append(layer.root)
    return roots


def check_payload(
    payload: Mapping[str, Any], memory_dirs: Sequence[str] = ()
) -> dict[str, Any] | None:
    """Check one PreToolUse input against the rules of each memory folder (the project's
    by default; its ``team/`` folder included), record what fired, and return the answer."""
    if payload.get("hook_event_name", "PreToolUse") != "PreToolUse":
        return None
    tool_name = payload.get("tool_name")
    tool_input = payload.get("tool_input")
    if not isinstance(tool_name, str) or not isinstance(tool_input, Mapping):
        return None
    cwd = payload.get("cwd")
    cwd = cwd if isinstance(cwd, str) and cwd else None
    session = payload.get("session_id")
    all_hits: list[Hit] = []
    for root in _memory_roots(payload, memory_dirs):
        rules: list[Rule] = load_rules(root)
        hits = check_tool_call(rules, tool_name, tool_input, cwd)
        if hits:
            record_firings(
                root,
                hits,
                tool_name=tool_name,
                session_id=session if isinstance(session, str) else None,
            )
        all_hits.extend(hits)
    return answer(all_hits)


def _options(argv: Sequence[str]) -> list[str] | None:
    chosen: list[str] = []
    words = iter(argv)
    for word in words:
        if word == "--memory-dir":
            value = next(words, None)
            if value is None:
                return None
            chosen.append(value)
        elif word.startswith("--memory-dir="):
            chosen.append(word.partition("=")[2])
        else:
            return None
    return chosen


def hook_main(
    argv: Sequence[str], stdin: TextIO | None = None, stdout: TextIO | None = None
) -> bool:
    """Run the hook; False when ``argv`` holds something this fast path does not know
    (``--help``), for the full command line to handle."""
    chosen = _options(argv)
    if chosen is None:
        return False
    source = stdin if stdin is not None else sys.stdin
    out = stdout if stdout is not None else sys.stdout
    try:
        text = source.read(_STDIN_MAX + 1)
        if len(text) > _STDIN_MAX:
            raise ValueError("the hook's input is larger than a tool call's")
        payload = json.loads(text)
        if not isinstance(payload, dict):
            raise ValueError("the hook's input is not a JSON object")
        result = check_payload(payload, chosen)
    except Exception as exc:
        sys.stderr.write(f"memdir rules: not checked: {type(exc).__name__}: {exc}\n")
        return True
    if result is not None:
        out.write(json.dumps(result, ensure_ascii=False))
        out.flush()
    return True
