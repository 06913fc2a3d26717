"""The PreToolUse entry that ``memdir install claude-code --rules`` puts in Claude Code's
settings, beside memdir's Stop hook (edited the same way: :mod:`memdir._claude_setup`)."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from memdir._claude_setup import _load_for_edit, _write_settings, memdir_command
from memdir.errors import UsageError

__all__ = ["RULES_HOOK_ARGS", "RULES_MATCHER", "install_rules_hook", "rules_hook_command"]

RULES_HOOK_ARGS = "hook pre-tool-use"
RULES_MATCHER = "Bash|Edit|Write|MultiEdit|NotebookEdit"
"""Only the tools a rule can be about: Claude Code starts no hook for a Read or a Grep."""

_RULES_HOOK = re.compile(r"(?:^|[\s/'\"])memdir['\"]?\s+hook\s+pre-tool-use(?:\s|$)")


def rules_hook_command(executable: str | None = None) -> str:
    """``<absolute memdir> hook pre-tool-use``."""
    return f"{memdir_command(executable)} {RULES_HOOK_ARGS}"


def _is_ours(group: object) -> bool:
    entries = group.get("hooks") if isinstance(group, dict) else None
    return isinstance(entries, list) and any(
        isinstance(e, dict) and _RULES_HOOK.search(str(e.get("command", ""))) for e in entries
    )


def install_rules_hook(
    path: Path, command: str | None, *, dry_run: bool = False
) -> tuple[bool, dict[str, Any] | None]:
    """Put memdir's PreToolUse hook running ``command`` in the settings file ``path`` (in
    place of an earlier one, never beside it), or with ``command`` None take it out.
    Returns whether the settings change, and the settings after."""
    before = _load_for_edit(path)
    if before is None and command is None:
        return False, None
    after = copy.deepcopy(before) if before is not None else {}
    hooks = after.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise UsageError(f'"hooks" in {path} is not an object; nothing changed')
    groups = hooks.setdefault("PreToolUse", [])
    if not isinstance(groups, list):
        raise UsageError(f'"hooks.PreToolUse" in {path} is not a list; nothing changed')
    groups[:] = [g for g in groups if not _is_ours(g)]
    if command is not None:
        entry = {"type": "command", "command": command}
        groups.append({"matcher": RULES_MATCHER, "hooks": [entry]})
    if not groups:
        del hooks["PreToolUse"]
    if not hooks:
        del after["hooks"]
    changed = after != (before or {})
    if changed and not dry_run:
        _write_settings(path, after)
    return changed, after
