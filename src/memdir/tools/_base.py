"""What a tool is, what it is given and what it returns."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeAlias, runtime_checkable

__all__ = ["FileStamp", "Tool", "ToolContext", "ToolError", "ToolOutput", "WriteGuard"]

WriteGuard: TypeAlias = Callable[[Path, str], str | None]
"""Judges a write from its real target and full new text: ``None`` allows it, a message
refuses it."""


class ToolError(Exception):
    """A tool call that cannot be carried out; the message goes back to the model as-is.

    It is not a :class:`~memdir.errors.MemdirError`: it never leaves the agent loop, it
    becomes an error tool result the model can act on.
    """


@dataclass(frozen=True, kw_only=True)
class FileStamp:
    """What a file looked like when it was read, to tell later whether it changed."""

    mtime_ns: int
    size: int


@dataclass(kw_only=True)
class ToolContext:
    """State shared by the tool calls of one agent run (a fork gets a fresh one)."""

    read_files: dict[str, FileStamp] = field(default_factory=dict)
    """Files Read in this run, by real path, with their state at that moment. Edit and
    Write of an existing file require an entry, and refuse when the file changed since."""
    write_guard: WriteGuard | None = None
    """Asked by Write and Edit, just before writing, with the real target path and the
    file's complete new text; a message refuses the write (see
    :func:`memdir.permissions.memory_write_guard`)."""


@dataclass(frozen=True, kw_only=True)
class ToolOutput:
    """A tool's result, as the model will see it."""

    content: str
    """The text returned to the model."""
    is_error: bool = False
    """Whether the call failed."""
    written: Path | None = None
    """The file a successful Write or Edit changed."""


@runtime_checkable
class Tool(Protocol):
    """A tool the agent can call.

    ``definition()`` is what the model is shown (Anthropic's shape: ``name``,
    ``description``, ``input_schema``). ``run`` carries out one call; it raises
    :class:`ToolError` for a call that cannot be done (bad input, missing file, …).
    """

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        ...

    def definition(self) -> dict[str, Any]:
        """The tool as the model sees it: name, description and input JSON schema."""
        ...

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        """Carry out one call."""
        ...
