"""What a tool is, what it is given and what it returns."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeAlias, runtime_checkable

from memdir.store import MemoryDir, MemoryFormat, stamp_memory_file, type_of_file_name

__all__ = [
    "FileStamp",
    "MemoryFiles",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "WriteGuard",
]

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


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True, kw_only=True)
class MemoryFiles:
    """How the file tools store memory files: as Claude Code stores them, or as written.

    With ``format="current"``, a ``*.md`` file inside ``memory_dir`` whose text starts
    with frontmatter is stored by :func:`~memdir.store.stamp_memory_file`: its
    frontmatter rewritten in Claude Code's current layout (slug ``name``, ``metadata``
    with ``node_type``, ``type``, ``originSessionId`` and ``modified``), the body kept
    byte for byte, or only its ``modified:`` line updated when it is stamped already
    (and always so under ``team/``, as Claude Code does). Files outside ``memory_dir``,
    other files and text without frontmatter are stored exactly as given, and so is
    everything with ``format="2.1.88"``.
    """

    memory_dir: MemoryDir
    """The memory directory whose files are stamped (symlink-safe containment)."""
    format: MemoryFormat = "current"
    """``current``: stamp as Claude Code 2.1.332 does; ``2.1.88``: store as written."""
    session_id: str | None = None
    """The session the memories come from, written as ``originSessionId`` into a file
    that has none; ``None`` (unknown) writes no ``originSessionId``."""
    clock: Callable[[], datetime.datetime] = _utc_now
    """The time written as ``modified`` (UTC)."""
    index: bool = False
    """Whether memdir keeps each memory's line in its ``MEMORY.md`` as Write and Edit
    store the file (:func:`~memdir.store.index_memory_file`): added for a new memory,
    brought up to date when its name or description changes, removed when it is
    emptied. The memory agent then never spends output on the index."""
    user_dir: MemoryDir | None = None
    """The user layer, when the memory agent may save there too: its files are stamped and
    indexed (in its own ``MEMORY.md``) as those of ``memory_dir`` are."""

    def home_of(self, path: Path) -> MemoryDir | None:
        """The memory directory ``path`` is in: ``memory_dir``, the user layer, or none."""
        if self.memory_dir.is_memory_path(path):
            return self.memory_dir
        if self.user_dir is not None and self.user_dir.is_memory_path(path):
            return self.user_dir
        return None

    def prepare(self, path: Path, text: str) -> str:
        """The text to store at ``path`` (a real, resolved path) for a write of ``text``."""
        if self.format != "current" or not path.name.endswith(".md"):
            return text
        home = self.home_of(path)
        if home is None:
            return text
        return stamp_memory_file(
            text,
            session_id=self.session_id,
            now=self.clock(),
            team=home.is_team_path(path),
            # Claude Code's names are kebab-case; file names, snake_case.
            default_name=path.stem.replace("_", "-"),
            default_type=type_of_file_name(path.name),
        )


@dataclass(kw_only=True)
class ToolContext:
    """State shared by the tool calls of one agent run (a fork gets a fresh one)."""

    read_files: dict[str, FileStamp] = field(default_factory=dict)
    """Files Read in this run, by real path, with their state at that moment. Edit and
    Write of an existing file require an entry, and refuse when the file changed since."""
    write_guard: WriteGuard | None = None
    """Asked by Write and Edit, just before writing, with the real target path and the
    file's complete new text; a message refuses the write (see
    :func:`memdir.tools.memory_write_guard`)."""
    memory_files: MemoryFiles | None = None
    """How Write, Edit and the ``memory`` tool store memory files; ``None`` stores every
    file exactly as written."""
    created: set[str] = field(default_factory=set)
    """Real paths of the files a Write in this run created (not there before), so the
    run's provenance can tell a new memory from a changed one."""


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

    A tool should also say what a call would do, ``effects(tool_input)``
    (:class:`~memdir.tools.DeclaresEffects`): the permission gate judges a call by those
    effects. It is not required here, so that a tool written before it keeps working;
    such a tool is judged by its name, as :func:`~memdir.tools.tool_call_effects` knows
    it, and a name it does not know is refused unless allowed by name.
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
