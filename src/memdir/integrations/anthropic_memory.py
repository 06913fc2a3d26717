"""memdir's ``memory`` tool in the Anthropic SDK's tool runner.

The SDK runs a client-side memory tool only when it is one of its memory-tool classes:
a plain definition dict is sent to the API but never run (the model gets ``Tool 'memory'
not found``), and any other object cannot even be serialised. These two classes are such
tools, each doing its work through memdir's :class:`~memdir.memory_tool.MemoryTool`, so
the runner's model reads and writes the memory directory itself, with memdir's
containment, credential guard and Claude Code file layout::

    from anthropic import Anthropic
    from memdir.integrations.anthropic_memory import MemdirMemoryTool

    runner = Anthropic().beta.messages.tool_runner(
        model="claude-sonnet-5-5",
        max_tokens=1024,
        tools=[MemdirMemoryTool(memory_dir)],
        messages=[{"role": "user", "content": "Remember that we deploy on Fridays."}],
    )
    message = runner.until_done()

:class:`MemdirMemoryTool` is for ``Anthropic`` clients, :class:`AsyncMemdirMemoryTool`
for ``AsyncAnthropic`` ones: the SDK refuses a tool of the other kind.

``/memories/x`` is ``<memory_dir>/x``, not the SDK's ``<base_path>/memories/x``: Claude
Code's memory directory holds ``MEMORY.md`` and the memory files at its root (see
:mod:`memdir.memory_tool` for the whole reasoning), so pass that directory itself, e.g.
``memdir.default_memory_dir(project_root)``.

This is the one module of memdir that imports ``anthropic`` (and ``anyio``, which the SDK
depends on) at load time; the ``[anthropic]`` extra installs both.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable

from memdir.errors import MissingExtraError, one_line

try:
    import anyio.to_thread
    from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool
    from anthropic.lib.tools import ToolError as SDKToolError
    from anthropic.types.beta import (
        BetaCacheControlEphemeralParam,
        BetaMemoryTool20250818CreateCommand,
        BetaMemoryTool20250818DeleteCommand,
        BetaMemoryTool20250818InsertCommand,
        BetaMemoryTool20250818RenameCommand,
        BetaMemoryTool20250818StrReplaceCommand,
        BetaMemoryTool20250818ViewCommand,
    )
    from pydantic import BaseModel
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise MissingExtraError(
        "memdir.integrations.anthropic_memory", "anthropic", one_line(exc)
    ) from exc

from memdir.errors import UsageError
from memdir.store import MemoryDir, MemoryFormat
from memdir.tools import MemoryTool, ToolContext, ToolError

__all__ = ["AsyncMemdirMemoryTool", "MemdirMemoryTool"]


def _memory_tool(
    memory_dir: MemoryTool | MemoryDir | str | os.PathLike[str],
    *,
    allow_private_secrets: bool,
    format: MemoryFormat | None,
    session_id: str | None,
    clock: Callable[[], datetime.datetime] | None,
) -> MemoryTool:
    """The memdir tool doing the work: the one given, or one made on ``memory_dir``."""
    if not isinstance(memory_dir, MemoryTool):
        return MemoryTool(
            memory_dir,
            allow_private_secrets=allow_private_secrets,
            format=format,
            session_id=session_id,
            clock=clock,
        )
    # Silently dropping options that the given tool was made without would store files
    # other than as asked (secrets allowed, frontmatter unstamped).
    if allow_private_secrets or any(o is not None for o in (format, session_id, clock)):
        raise UsageError(
            "pass allow_private_secrets, format, session_id and clock to the MemoryTool "
            "itself, not alongside it"
        )
    return memory_dir


def _run(tool: MemoryTool, tool_input: object, context: ToolContext) -> str:
    """One command, its refusal raised as the SDK's ToolError so the model reads it."""
    try:
        return tool.run_sync(tool_input, context).content
    except ToolError as exc:
        # The runner sends a ToolError's text as an ``is_error`` result, as it is; any
        # other exception would reach the model as its repr().
        raise SDKToolError(str(exc)) from exc


def _wire(command: BaseModel) -> dict[str, object]:
    """A typed command back in the shape the model sent it (fields it set, API names)."""
    return command.model_dump(by_alias=True, exclude_unset=True)


class _Wrapper:
    """What both tools keep: memdir's tool and the context each call gets. First among
    the bases, so that its ``__init__`` hands ``cache_control`` on to the SDK's."""

    def __init__(
        self,
        memory_dir: MemoryTool | MemoryDir | str | os.PathLike[str],
        *,
        allow_private_secrets: bool = False,
        format: MemoryFormat | None = None,
        session_id: str | None = None,
        clock: Callable[[], datetime.datetime] | None = None,
        context: ToolContext | None = None,
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        # The next class in the MRO is the SDK's memory tool, which takes cache_control.
        super().__init__(cache_control=cache_control)  # type: ignore[call-arg]
        self.memory_tool = _memory_tool(
            memory_dir,
            allow_private_secrets=allow_private_secrets,
            format=format,
            session_id=session_id,
            clock=clock,
        )
        """memdir's tool, which carries out every command."""
        self.context = context if context is not None else ToolContext()
        """Given to every call (write guard, how memory files are stored)."""


class MemdirMemoryTool(_Wrapper, BetaAbstractMemoryTool):
    """The SDK's memory tool over a memdir memory directory, for ``Anthropic`` clients.

    ``memory_dir`` is the directory ``/memories`` stands for, or a ready
    :class:`~memdir.memory_tool.MemoryTool` (then leave its options out here).
    ``allow_private_secrets``, ``format``, ``session_id`` and ``clock`` are those of
    :class:`~memdir.memory_tool.MemoryTool`. ``context`` is handed to every call: its
    ``write_guard`` is asked before each write and its ``memory_files`` say how memory
    files are stored; by default, a fresh one. ``cache_control`` goes into the tool's
    definition, as on the SDK's own memory tools.

    A call from the runner goes to memdir as the model sent it, checked there, rather than
    through the SDK's unchecked parse of it into a command (which, for one, turns
    ``insert_line: true`` into ``1``), so overriding :meth:`view` and the other commands
    changes only direct :meth:`execute` calls. ``clear_all_memory`` is left unimplemented
    on purpose: the directory is shared with Claude Code, and emptying it is not the
    model's call.
    """

    def call(self, input: object) -> str:
        """What the tool runner calls with the model's input: run it in memdir."""
        return _run(self.memory_tool, input, self.context)

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        """List a folder two levels deep, or show a file with line numbers."""
        return _run(self.memory_tool, _wire(command), self.context)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        """Create a new file; an existing one is refused."""
        return _run(self.memory_tool, _wire(command), self.context)

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        """Replace the one occurrence of ``old_str`` in a file."""
        return _run(self.memory_tool, _wire(command), self.context)

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        """Insert text after line ``insert_line`` (0: at the top)."""
        return _run(self.memory_tool, _wire(command), self.context)

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        """Delete a file, or a folder and everything in it."""
        return _run(self.memory_tool, _wire(command), self.context)

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        """Rename or move a file or folder; an existing destination is refused."""
        return _run(self.memory_tool, _wire(command), self.context)


class AsyncMemdirMemoryTool(_Wrapper, BetaAsyncAbstractMemoryTool):
    """:class:`MemdirMemoryTool` for ``AsyncAnthropic`` clients; the same arguments.

    Each command runs in a worker thread (the filesystem calls block) through ``anyio``,
    so it works under any loop the SDK does. A cancelled call waits for its command to
    finish rather than abandon a write half way; the command is short.
    """

    async def _run(self, tool_input: object) -> str:
        return await anyio.to_thread.run_sync(_run, self.memory_tool, tool_input, self.context)

    async def call(self, input: object) -> str:
        """What the tool runner calls with the model's input: run it in memdir."""
        return await self._run(input)

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        """List a folder two levels deep, or show a file with line numbers."""
        return await self._run(_wire(command))

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        """Create a new file; an existing one is refused."""
        return await self._run(_wire(command))

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        """Replace the one occurrence of ``old_str`` in a file."""
        return await self._run(_wire(command))

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        """Insert text after line ``insert_line`` (0: at the top)."""
        return await self._run(_wire(command))

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        """Delete a file, or a folder and everything in it."""
        return await self._run(_wire(command))

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        """Rename or move a file or folder; an existing destination is refused."""
        return await self._run(_wire(command))
