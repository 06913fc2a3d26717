"""The permission gate that confines the memory agent.

The memory agent is the user's own agent, forked: same model, same tools, same context.
What keeps it from doing anything but saving memories is this gate, asked before every
tool call. It judges what the call would do — the effects its tool declares
(:mod:`memdir.tools`), never the tool's name: reading is allowed anywhere, a shell
command only when it provably changes nothing, and a write only inside the memory
directory — resolved the way the operating system would, so ``..``, ``~``, relative
paths and symlinks cannot lead a write out. A write whose result would hold a credential
is refused: always under the shared ``team/`` folder, and in private memory unless the
caller allows it. Every refusal says what is allowed, so the model can correct course,
and is reported as a ``permission.denied`` event.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias

from memdir.store import MemoryDir
from memdir.telemetry import Sink, emit
from memdir.tools import (
    Effect,
    Invalid,
    ReadsPath,
    RunsCommand,
    WritesPath,
    effects_of,
    is_read_only_command,
    memory_tool_effects,
    memory_write_guard,
)
from memdir.tools._guard import reach_refusal, secret_refusal

__all__ = [
    "CanUseTool",
    "PermissionDecision",
    "auto_mem_can_use_tool",
    "memory_tool_decision",
    "memory_write_guard",
]


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


def _deny(reason: str, message: str) -> PermissionDecision:
    return PermissionDecision(behavior="deny", message=message, reason=reason)


def _command_words(command: str) -> list[str]:
    """The words of a shell command that could name a file: each word, and the value of
    each ``--option=value``; ``[]`` when the command cannot be split (the read-only check
    has judged its shape already)."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return []
    return [part for word in words for part in (word, word.partition("=")[2]) if part]


def _command_reach(
    md: MemoryDir, command: str, cwd: str | os.PathLike[str] | None
) -> tuple[str, str] | None:
    """Why a read-only command may not run for a file it names (:func:`reach_refusal`):
    memdir's state, a link planted in the memory directory, a shared file. Each word is
    taken as a path against ``cwd`` (a read-only command has no wildcards for the shell
    to expand: :func:`is_read_only_command` refuses them). A command that reads the
    files it finds by itself (``grep -r``, ``rg --hidden``) may not walk the memory
    directory, where it would read memdir's state too."""
    base = os.fspath(cwd) if cwd is not None else os.getcwd()
    words = _command_words(command)
    for word in words:
        reached = reach_refusal(md, word, cwd=base)
        if reached is not None:
            return reached
    if _reads_what_it_finds(words) and _walks_memory(md, words[1:], base):
        return (
            "bookkeeping",
            "a recursive search of the memory directory would read memdir's own state; "
            "use Grep or Glob, which leave it out, or name the files",
        )
    return None


_GREPS = frozenset({"grep", "egrep", "fgrep"})


def _reads_what_it_finds(words: Sequence[str]) -> bool:
    """Whether a command reads the contents of files it finds under a folder: a
    recursive grep, or ripgrep told to search hidden folders (it skips them, and so
    ``.memdir``, by default)."""
    if not words:
        return False
    program = os.path.basename(words[0])
    options = [w for w in words[1:] if w.startswith("-")]
    if program in _GREPS:
        return any(
            o in ("--recursive", "--dereference-recursive", "--directories=recurse")
            or (not o.startswith("--") and ("r" in o or "R" in o))
            for o in options
        ) or ("-d" in options and "recurse" in words)
    if program == "rg":
        return any(
            o in ("--hidden", "--unrestricted", "-.")
            or (not o.startswith("--") and o.count("u") >= 2)
            or (not o.startswith("--") and "." in o[1:])
            for o in options
        )
    return False


def _walks_memory(md: MemoryDir, words: Sequence[str], base: str) -> bool:
    """Whether a search with arguments ``words`` walks into the memory directory: from
    each folder it names after its pattern, or from ``base`` when it names none."""
    root = os.path.realpath(md.root)
    positional = [w for w in words if not w.startswith("-")]
    given_pattern = any(w in ("-e", "-f", "--regexp", "--file") for w in words)
    paths = positional if given_pattern else positional[1:]
    if paths:
        named = (os.path.join(base, os.path.expanduser(p)) for p in paths)
        folders = [os.path.realpath(p) for p in named if os.path.isdir(p)]
    else:
        folders = [os.path.realpath(base)]
    for folder in folders:
        inside = folder == root or folder.startswith(root + os.sep)
        above = root.startswith(folder.rstrip(os.sep) + os.sep)
        if inside or above:
            return True
    return False


def _judge(
    md: MemoryDir,
    name: str,
    effects: Sequence[Effect],
    allow_private_secrets: bool,
    cwd: str | os.PathLike[str] | None = None,
    user_dir: MemoryDir | None = None,
) -> PermissionDecision:
    """The gate's answer for a call of ``name`` that would have ``effects``: allowed only
    when each of them is."""
    where = str(md.root)
    if user_dir is not None:  # the refusal names every place a memory may go
        where += f" (or the user layer {user_dir.root})"
    for effect in effects:
        if isinstance(effect, Invalid):
            return _deny(effect.reason, effect.message)
        if isinstance(effect, ReadsPath):
            # Reading anywhere is what recalling context needs, but not memdir's own
            # state, nor through a link planted in the memory directory.
            reached = reach_refusal(md, effect.path) if effect.path is not None else None
            if reached is not None:
                return _deny(reached[0], f"{name}: {reached[1]}")
            continue
        if isinstance(effect, RunsCommand):
            if effect.command is not None and is_read_only_command(effect.command):
                reached = _command_reach(md, effect.command, cwd)
                if reached is not None:
                    return _deny(reached[0], f"{name}: {reached[1]}")
                continue
            return _deny(
                "not_read_only",
                f"{name} is limited to read-only commands here (ls, cat, head, tail, wc, grep, "
                "rg, find, stat, git log/show/diff/status, …) with no redirection, "
                "substitution or wrappers. Use Write or Edit to change memory files.",
            )
        if (
            user_dir is not None
            and effect.path is not None
            and user_dir.is_memory_path(effect.path)
        ):
            # The user layer: read in every project, so never a credential.
            refusal = _write_refusal(user_dir, name, effect, str(user_dir.root), False)
        else:
            refusal = _write_refusal(md, name, effect, where, allow_private_secrets)
        if refusal is not None:
            return refusal
    return _ALLOW


def _write_refusal(
    md: MemoryDir, name: str, effect: WritesPath, where: str, allow_private_secrets: bool
) -> PermissionDecision | None:
    path = effect.path
    if path is None or not md.is_memory_path(path):
        shown = path if path is not None else "the path given"
        return _deny(
            "outside_memory_dir",
            f"{name} is only allowed for files inside the memory directory {where}; "
            f"{shown} is not inside it. Save memories as files in that directory.",
        )
    reached = reach_refusal(md, path)
    if reached is not None:
        return _deny(reached[0], f"{name} may not change {path}: {reached[1]}")
    # The new text alone, for an answer before anything runs; the complete file is
    # judged again at write time by the tools' write guard.
    refusal = secret_refusal(md, path, effect.text or "", allow_private_secrets)
    if refusal is not None:
        return _deny("secret", f"{name} {refusal}")
    return None


def memory_tool_decision(
    tool_input: object,
    memory_dir: MemoryDir | str | os.PathLike[str],
    *,
    allow_private_secrets: bool = False,
) -> PermissionDecision:
    """The permission gate's answer for one ``memory`` tool call, before it runs.

    ``view`` reads, so any path under ``/memories`` is allowed; the other commands write,
    and are allowed only when every path they name maps inside the memory directory (the
    root itself excluded) and the new text holds no credential that may not be stored
    there. The tool checks all of this again, on the final text, when it writes.
    """
    md = memory_dir if isinstance(memory_dir, MemoryDir) else MemoryDir(memory_dir)
    effects = memory_tool_effects(tool_input, md)
    return _judge(md, "memory", effects, allow_private_secrets)


def auto_mem_can_use_tool(
    memory_dir: MemoryDir | str | os.PathLike[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    always_allow_tools: Iterable[str] = (),
    allow_private_secrets: bool = False,
    sink: Sink | None = None,
    user_dir: MemoryDir | None = None,
) -> CanUseTool:
    """The gate for an agent that may only save memories in ``memory_dir``.

    Tools named in ``always_allow_tools`` are allowed (for a wrapper that checks the calls
    it makes itself; nothing is allowed this way by default). Every other call is judged
    by its effects: those its tool declares (memdir's tools all do, relative paths taken
    against the tool's own working directory), or, for a tool given by name only or one
    that declares none, those :func:`memdir.tools.tool_call_effects` knows for its name
    (relative paths against ``cwd``, default the working directory at call time; the
    ``memory`` tool's ``/memories`` in ``memory_dir``). So:

    - reading (``Read``, ``Grep``, ``Glob``, the memory tool's ``view``) is allowed,
      except in a ``.memdir/`` bookkeeping folder of the memory directory at any depth,
      through a symlink planted in it that leads out of it, and of a file there with
      more than one name (:func:`memdir.tools._guard.reach_refusal`);
    - a command (``Bash``) is allowed only when read-only (:func:`is_read_only_command`)
      and naming no path that reading refuses;
    - a write (``Write``, ``Edit``, the memory tool's other commands) is allowed only
      inside the memory directory but outside any ``.memdir/`` folder in it (nor through
      a link, nor to a file with two names), and not when the text written would hold a
      credential: never under ``team/``, and in private memory only if
      ``allow_private_secrets``;
    - a call its tool would refuse outright, or of a tool whose effects are not known,
      is denied; one that declares no effect at all does nothing, and is allowed.

    With ``user_dir`` (the user layer) a write there is allowed as one in the memory
    directory is, except that a credential is never allowed in it.

    Denials are sent to ``sink`` as ``permission.denied`` events (tool_name, reason).
    """
    md = memory_dir if isinstance(memory_dir, MemoryDir) else MemoryDir(memory_dir)
    allowed_names = frozenset(always_allow_tools)
    where = str(md.root) + (f" or {user_dir.root}" if user_dir is not None else "")

    async def can_use_tool(tool: ToolRef, tool_input: object) -> PermissionDecision:
        # ``object``: the input comes from a model and is checked here, not trusted.
        name = tool if isinstance(tool, str) else tool.name
        if name in allowed_names:
            return _ALLOW
        effects = effects_of(tool, tool_input, cwd=cwd, memory_dir=md)
        if effects is None:
            decision = _deny(
                "tool_not_allowed",
                f"{name} is not available to the memory agent. It may use Read, Grep and "
                f"Glob, read-only Bash, and Write/Edit for files inside {where}.",
            )
        else:
            decision = _judge(md, name, effects, allow_private_secrets, cwd, user_dir)
        if not decision.allowed:
            emit(sink, "permission.denied", tool_name=name, reason=decision.reason)
        return decision

    return can_use_tool
