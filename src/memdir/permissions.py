"""The permission gate that confines the memory agent.

The memory agent is the user's own agent, forked: same model, same tools, same context.
What keeps it from doing anything but saving memories is this gate, asked before every
tool call. It allows reading anywhere (``Read``, ``Grep``, ``Glob``), shell commands only
when they provably change nothing, and ``Write``/``Edit`` only inside the memory
directory — resolved the way the operating system would, so ``..``, ``~``, relative
paths and symlinks cannot lead a write out. A write whose result would hold a credential
is refused: always under the shared ``team/`` folder, and in private memory unless the
caller allows it. Every refusal says what is allowed, so the model can correct course,
and is reported as a ``permission.denied`` event.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeAlias

from memdir.store import MemoryDir, scan_secrets
from memdir.store._atomic import STATE_DIR_NAME
from memdir.store._containment import is_within, resolve_candidate
from memdir.telemetry import Sink, emit
from memdir.tools._base import WriteGuard
from memdir.tools._readonly import is_read_only_command

__all__ = [
    "CanUseTool",
    "PermissionDecision",
    "auto_mem_can_use_tool",
    "memory_write_guard",
]

_READ_TOOLS = frozenset({"Read", "Grep", "Glob"})
_WRITE_TOOLS = frozenset({"Write", "Edit"})


@dataclass(frozen=True, kw_only=True)
class PermissionDecision:
    """The gate's answer for one tool call."""

    behavior: Literal["allow", "deny"]
    """Whether the call may run."""
    message: str | None = None
    """For a denial: what the model is told, saying what it may do instead."""
    reason: str | None = None
    """For a denial: a short machine-readable cause (``outside_memory_dir``, ``secret``…)."""

    @property
    def allowed(self) -> bool:
        """``behavior == "allow"``."""
        return self.behavior == "allow"


class _Named(Protocol):
    @property
    def name(self) -> str: ...


ToolRef: TypeAlias = _Named | str
"""A tool, or just its name."""

CanUseTool: TypeAlias = Callable[[ToolRef, Mapping[str, Any]], Awaitable[PermissionDecision]]
"""Asked before each tool call with the tool and its input."""

_ALLOW = PermissionDecision(behavior="allow")


def _secret_refusal(
    md: MemoryDir, path: object, text: str, allow_private: bool, cwd: Any
) -> str | None:
    """Why ``text`` may not be written at ``path`` for holding a credential, or ``None``."""
    findings = scan_secrets(text)
    if not findings:
        return None
    team = md.is_team_path(path, cwd=cwd)
    if not team and allow_private:
        return None
    kinds = ", ".join(sorted({f.rule_id for f in findings}))
    scope = "team memory, which is shared with collaborators" if team else "memory"
    return (
        f"refused: the result would contain a credential ({kinds}). Secrets are never saved "
        f"to {scope}. Write the memory without the value (say where the secret is kept)."
    )


def _is_bookkeeping(md: MemoryDir, path: object, cwd: str | os.PathLike[str] | None) -> bool:
    """Whether ``path`` resolves into the memory directory's ``.memdir/`` folder, where
    cursors and locks live: a memory agent that rewrote them could make extraction skip
    a session."""
    folder = resolve_candidate(md.root / STATE_DIR_NAME)
    found = resolve_candidate(path, cwd=cwd)
    return found is not None and (found == folder or is_within(found, folder))


def memory_write_guard(
    memory_dir: MemoryDir | str | os.PathLike[str], *, allow_private_secrets: bool = False
) -> WriteGuard:
    """The last check before Write or Edit touch the disk, for tools' :class:`ToolContext`.

    The gate judges each call from its input; this judges the write itself — the real
    target and the file's complete new text, while no other write runs — so neither a
    path that only the filesystem resolves out of the directory nor a credential that two
    edits of one message assemble between them can get through.
    """
    md = memory_dir if isinstance(memory_dir, MemoryDir) else MemoryDir(memory_dir)

    def guard(target: Path, text: str) -> str | None:
        if not md.is_memory_path(target):
            return f"refused: {target} is outside the memory directory {md.root}"
        if _is_bookkeeping(md, target, None):
            return f"refused: {target} is memdir's own bookkeeping, not a memory"
        return _secret_refusal(md, target, text, allow_private_secrets, None)

    return guard


def auto_mem_can_use_tool(
    memory_dir: MemoryDir | str | os.PathLike[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    always_allow_tools: Iterable[str] = (),
    allow_private_secrets: bool = False,
    sink: Sink | None = None,
) -> CanUseTool:
    """The gate for an agent that may only save memories in ``memory_dir``.

    - tools named in ``always_allow_tools`` are allowed (for a wrapper that checks the
      calls it makes itself; nothing is allowed this way by default);
    - ``Read``, ``Grep`` and ``Glob`` are allowed;
    - ``Bash`` is allowed only for a read-only command (:func:`is_read_only_command`);
    - ``Write`` and ``Edit`` are allowed only for a ``file_path`` inside the memory
      directory (relative paths are taken against ``cwd``, default the working directory
      at call time) but outside its ``.memdir/`` bookkeeping folder, and not when the
      resulting file would hold a credential: never under ``team/``, and in private
      memory only if ``allow_private_secrets``;
    - Anthropic's client-side ``memory`` tool may view, and write only inside the
      directory (:func:`memdir.memory_tool.memory_tool_decision`);
    - everything else is denied.

    Denials are sent to ``sink`` as ``permission.denied`` events (tool_name, reason).
    """
    md = memory_dir if isinstance(memory_dir, MemoryDir) else MemoryDir(memory_dir)
    allowed_names = frozenset(always_allow_tools)
    where = str(md.root)

    def deny(tool_name: str, reason: str, message: str) -> PermissionDecision:
        emit(sink, "permission.denied", tool_name=tool_name, reason=reason)
        return PermissionDecision(behavior="deny", message=message, reason=reason)

    def check_write(name: str, tool_input: Mapping[str, Any]) -> PermissionDecision:
        file_path = tool_input.get("file_path")
        if not isinstance(file_path, str) or not md.is_memory_path(file_path, cwd=cwd):
            shown = file_path if isinstance(file_path, str) else repr(file_path)
            return deny(
                name,
                "outside_memory_dir",
                f"{name} is only allowed for files inside the memory directory {where}; "
                f"{shown} is not inside it. Save memories as files in that directory.",
            )
        if _is_bookkeeping(md, file_path, cwd):
            return deny(
                name,
                "bookkeeping",
                f"{name} may not change {file_path}: the {STATE_DIR_NAME}/ folder holds "
                "memdir's cursors and locks, not memories.",
            )
        # The new text alone, for an answer before anything runs; the complete file is
        # judged again at write time by the tools' write guard.
        key = "content" if name == "Write" else "new_string"
        text = tool_input.get(key)
        refusal = _secret_refusal(
            md, file_path, text if isinstance(text, str) else "", allow_private_secrets, cwd
        )
        if refusal is not None:
            return deny(name, "secret", f"{name} {refusal}")
        return _ALLOW

    async def can_use_tool(tool: ToolRef, tool_input: object) -> PermissionDecision:
        # ``object``: the input comes from a model and is checked here, not trusted.
        name = tool if isinstance(tool, str) else tool.name
        if name in allowed_names or name in _READ_TOOLS:
            return _ALLOW
        if not isinstance(tool_input, Mapping):
            return deny(name, "invalid_input", f"{name} needs its input as a JSON object.")
        if name == "Bash":
            command = tool_input.get("command")
            if isinstance(command, str) and is_read_only_command(command):
                return _ALLOW
            return deny(
                name,
                "not_read_only",
                "Bash is limited to read-only commands here (ls, cat, head, tail, wc, grep, "
                "rg, find, stat, git log/show/diff/status, …) with no redirection, "
                "substitution or wrappers. Use Write or Edit to change memory files.",
            )
        if name in _WRITE_TOOLS:
            return check_write(name, tool_input)
        if name == "memory":
            # Anthropic's client-side memory tool: views read, the other commands write,
            # and only inside this directory.
            from memdir.memory_tool import memory_tool_decision  # it imports this module

            decision = memory_tool_decision(
                tool_input, md, allow_private_secrets=allow_private_secrets
            )
            if decision.allowed:
                return decision
            return deny(name, decision.reason or "invalid_input", decision.message or "")
        return deny(
            name,
            "tool_not_allowed",
            f"{name} is not available to the memory agent. It may use Read, Grep and Glob, "
            f"read-only Bash, and Write/Edit for files inside {where}.",
        )

    return can_use_tool
