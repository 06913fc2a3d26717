"""What a tool call would do, as values: read a path, write a path, run a command.

The permission gate and the check for memory the host saved itself ask what a call
*does*, not what its tool is called: a tool declares the effects of an input
(``effects(tool_input)``), and a call known only by its name and input, such as one in a
transcript, is looked up in one table of known tool shapes
(:func:`memdir.tools.tool_call_effects`). So a new tool that writes files is judged as a
write the day it is added, and no list of tool names has to be kept in step elsewhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, runtime_checkable

__all__ = [
    "DeclaresEffects",
    "Effect",
    "Invalid",
    "ReadsPath",
    "RunsCommand",
    "WritesPath",
    "input_object",
    "locate",
]


@dataclass(frozen=True)
class ReadsPath:
    """The call reads the file or folder at ``path``."""

    path: str | None
    """Where, absolute when the working directory was known (``~`` expanded, not
    resolved: symlinks and ``..`` are left for the containment check); ``None`` when the
    input names no usable path."""


@dataclass(frozen=True)
class WritesPath:
    """The call creates, changes, deletes or moves the file or folder at ``path``."""

    path: str | None
    """Where, as for :class:`ReadsPath`; ``None`` when the input names no usable path,
    which every check takes as outside whatever it guards."""
    text: str | None = None
    """What the input says will be written, when it says: Write's ``content``, Edit's
    ``new_string``, the memory tool's ``file_text``, ``new_str`` or ``insert_text``.
    ``None`` for a delete, either end of a rename, or an input without it. It may be only
    part of the file's final text (an edit); the write guard judges the whole text when
    the write happens."""


@dataclass(frozen=True)
class RunsCommand:
    """The call runs a shell command."""

    command: str | None
    """The command line; ``None`` when the input holds none as text."""


@dataclass(frozen=True)
class Invalid:
    """The input cannot be carried out as given (not an object, an unknown command, a
    path the tool refuses): the call would do nothing but fail."""

    reason: str
    """Short and machine-readable (``invalid_input``, ``outside_memory_dir``), as the
    permission gate reports it."""
    message: str
    """What the model is told, saying what it may do instead."""


Effect: TypeAlias = ReadsPath | WritesPath | RunsCommand | Invalid
"""One thing a tool call would do."""


@runtime_checkable
class DeclaresEffects(Protocol):
    """A tool that says what a call would do before it runs.

    Every tool memdir ships declares its effects. A tool that does not (one a user
    passes) is judged by its name, as :func:`~memdir.tools.tool_call_effects` knows it.
    """

    def effects(self, tool_input: object) -> tuple[Effect, ...]:
        """The effects of calling the tool with ``tool_input`` (from a model: not trusted)."""
        ...


def input_object(tool: str, tool_input: object) -> Mapping[str, Any] | Invalid:
    """``tool_input`` if it is a JSON object; otherwise the :class:`Invalid` it makes."""
    if isinstance(tool_input, Mapping):
        return tool_input
    return Invalid("invalid_input", f"{tool} needs its input as a JSON object.")


def locate(raw: object, cwd: str | os.PathLike[str] | None) -> str | None:
    """The path a tool would use for ``raw``: ``~`` expanded, taken against ``cwd``.

    Without ``cwd`` the path is kept as given (a relative one is then judged against the
    process's working directory, or by a caller that knows the host's). Nothing is
    resolved or normalised here: ``link/..`` must go where the operating system takes it,
    which only the containment check works out. A value that is not usable text (not a
    string, empty, holding NUL) gives ``None``.
    """
    if not isinstance(raw, str) or not raw or "\0" in raw:
        return None
    if cwd is None:
        return raw
    try:
        base = os.path.abspath(os.path.expanduser(os.fspath(cwd)))
        return os.path.join(base, os.path.expanduser(raw))
    except ValueError:  # a name the platform cannot encode
        return None
