"""The effects of tool calls known only by name and input, such as a host's in a transcript.

memdir's own tools declare their effects (``tool.effects(tool_input)``). A call the host
made, read back from its conversation, has no tool object behind it: it is judged here
by the one table of tool shapes memdir knows — Claude Code's ``Read``, ``Grep``,
``Glob``, ``Bash``, ``Write`` and ``Edit`` (the names and input fields memdir's own tools
share) and Anthropic's client-side ``memory`` tool. ``NotebookEdit`` is left out on
purpose: Claude Code's own check for memory its agent saved itself counts only Write and
Edit, and a notebook is no memory file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import TypeAlias

from memdir.messages import Message
from memdir.store import MemoryDir
from memdir.tools._bash import bash_effects
from memdir.tools._effects import DeclaresEffects, Effect, WritesPath
from memdir.tools._files import edit_effects, read_effects, write_effects
from memdir.tools._memory import memory_tool_effects
from memdir.tools._search import search_effects

__all__ = ["effects_of", "host_wrote_memory", "tool_call_effects", "writes_into"]

_Cwd: TypeAlias = str | os.PathLike[str] | None
_Shape: TypeAlias = Callable[[object, _Cwd, MemoryDir | None], tuple[Effect, ...]]

_SHAPES: Mapping[str, _Shape] = {
    "Read": lambda tool_input, cwd, _: read_effects(tool_input, cwd),
    "Grep": lambda tool_input, cwd, _: search_effects("Grep", tool_input, cwd),
    "Glob": lambda tool_input, cwd, _: search_effects("Glob", tool_input, cwd),
    "Bash": lambda tool_input, _, __: bash_effects(tool_input),
    "Write": lambda tool_input, cwd, _: write_effects(tool_input, cwd),
    "Edit": lambda tool_input, cwd, _: edit_effects(tool_input, cwd),
    "memory": lambda tool_input, _, memory_dir: memory_tool_effects(tool_input, memory_dir),
}


def _as_memory_dir(memory_dir: MemoryDir | str | os.PathLike[str] | None) -> MemoryDir | None:
    if memory_dir is None or isinstance(memory_dir, MemoryDir):
        return memory_dir
    return MemoryDir(memory_dir)


def tool_call_effects(
    name: str,
    tool_input: object,
    *,
    cwd: str | os.PathLike[str] | None = None,
    memory_dir: MemoryDir | str | os.PathLike[str] | None = None,
) -> tuple[Effect, ...] | None:
    """The effects of a call of the tool named ``name``, or ``None`` for a tool not known.

    Relative paths are taken against ``cwd`` (``~`` expanded); without it they are kept
    as given, for the caller to place. ``memory_dir`` is where the ``memory`` tool's
    ``/memories`` lives; without it that tool's effects carry no path.
    """
    shape = _SHAPES.get(name)
    return None if shape is None else shape(tool_input, cwd, _as_memory_dir(memory_dir))


def effects_of(
    tool: object,
    tool_input: object,
    *,
    cwd: str | os.PathLike[str] | None = None,
    memory_dir: MemoryDir | str | os.PathLike[str] | None = None,
) -> tuple[Effect, ...] | None:
    """The effects of calling ``tool`` (a tool, or a tool's name) with ``tool_input``.

    A tool that declares its effects is asked, and knows its own working directory and
    memory directory; any other is known by its ``name`` (:func:`tool_call_effects`).
    ``None``: a tool whose effects cannot be told.
    """
    if isinstance(tool, DeclaresEffects):
        return tool.effects(tool_input)
    name = tool if isinstance(tool, str) else getattr(tool, "name", None)
    if not isinstance(name, str):
        return None
    return tool_call_effects(name, tool_input, cwd=cwd, memory_dir=memory_dir)


def writes_into(
    messages: Iterable[Message],
    inside: Callable[[str], bool],
    *,
    cwd: str | os.PathLike[str] | None = None,
    memory_dir: MemoryDir | str | os.PathLike[str] | None = None,
) -> bool:
    """Whether a tool call of an assistant message among ``messages`` writes a path that
    ``inside`` accepts.

    Calls are judged by their effects (:func:`tool_call_effects`, with ``cwd`` and
    ``memory_dir``): a Write or Edit of a file, a ``memory`` command that changes one
    (``view`` only reads), whichever tool made it. Calls of unknown tools and calls the
    tool would refuse outright write nothing. ``inside`` gets each written path as
    :func:`tool_call_effects` gives it: absolute when ``cwd`` was given, else as the
    host wrote it — so a caller on another machine can compare the host's paths as text.
    """
    md = _as_memory_dir(memory_dir)
    for message in messages:
        if message.role != "assistant":
            continue
        for use in message.tool_uses:
            for effect in tool_call_effects(use.name, use.input, cwd=cwd, memory_dir=md) or ():
                written = effect.path if isinstance(effect, WritesPath) else None
                if written is not None and inside(written):
                    return True
    return False


def host_wrote_memory(
    messages: Iterable[Message],
    memory_dir: MemoryDir | str | os.PathLike[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
) -> bool:
    """Whether the host saved memory itself: a tool call of an assistant message among
    ``messages`` writes inside ``memory_dir`` (symlink-safe containment, relative paths
    against ``cwd``, default the process's working directory)."""
    md = _as_memory_dir(memory_dir)
    assert md is not None
    return writes_into(messages, md.is_memory_path, cwd=cwd, memory_dir=md)
