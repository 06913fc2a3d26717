"""Anthropic's client-side ``memory`` tool, backed by a memdir memory directory.

The model is trained on this tool: it sees a virtual ``/memories`` folder and sends
``view``, ``create``, ``str_replace``, ``insert``, ``delete`` and ``rename`` commands (the
shapes are those of the SDK's ``BetaMemoryTool20250818*Command`` types). The answers use
the wording the SDK's own tool and Anthropic's documentation give (``Here's the content of
… with line numbers:``, ``File created successfully at: …``, the ``No replacement was
performed`` and ``Invalid `insert_line` parameter`` errors, …), because that is the text
the model was trained to read; an out-of-range ``view_range`` is clamped to the file, as
the SDK does, rather than refused.

Where ``/memories`` lives: ``/memories/x`` is ``<memory_dir>/x``. The SDK's local tool
instead stores it at ``<base_path>/memories/x``, a ``memories`` folder inside a folder of
its own. For a Claude-Code-compatible directory the first is the right one: Claude Code's
memory directory *is* the memories folder — it holds ``MEMORY.md`` (the index Claude Code
loads into every session) and the topic files beside it at its root, and it is named
``memory``, not ``memories``, so no ``base_path`` could make the SDK's mapping land there.
With the SDK's mapping the model's ``/memories/MEMORY.md`` would become
``<dir>/memories/MEMORY.md``, a file Claude Code never loads and memdir's recall never
reads. With this one, ``/memories/MEMORY.md`` is the index Claude Code reads, and an agent
built on this tool shares its memories with Claude Code and memdir's own agent.

A virtual path is checked twice: lexically (it must be ``/memories`` or below it, with no
``..``, hidden names, backslashes, percent-escapes, NUL or control characters), then the
mapped real path must resolve inside the directory the way the operating system would
(:meth:`~memdir.store.MemoryDir.is_memory_path`: symlinks followed, failing closed). Hidden
names being refused keeps memdir's ``.memdir/`` bookkeeping out of reach by name, and every
command, ``view``, ``delete`` and ``rename`` (both paths) included, refuses a path that
reaches it through a planted symlink, a symlink that leads out, or a file with two names
(:func:`~memdir.tools._guard.reach_refusal`); the write guard refuses them again. Writes
are atomic, made under the file's lock, and judged on their final text by
:func:`~memdir.tools.memory_write_guard`, so no credential reaches ``team/``. A Markdown
file with frontmatter is stored as Claude Code stores it (see
:class:`~memdir.tools.MemoryFiles`), so a memory is the same whichever tool saved it.

This module does not import the ``anthropic`` SDK. For the SDK's tool runner
(``client.beta.messages.tool_runner``), wrap the tool with
:class:`memdir.integrations.anthropic_memory.MemdirMemoryTool` (or its async twin).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import os
import posixpath
import re
import shutil
import stat
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from memdir._private import make_private_dirs
from memdir.errors import StoreError
from memdir.store import MemoryDir, MemoryFormat, atomic_write, file_lock, index_memory_file
from memdir.store._atomic import STATE_DIR_NAME
from memdir.tools._base import MemoryFiles, ToolContext, ToolError, ToolOutput
from memdir.tools._effects import Effect, Invalid, ReadsPath, WritesPath, input_object
from memdir.tools._guard import memory_write_guard, reach_refusal

__all__ = [
    "MEMORY_COMMANDS",
    "MEMORY_TOOL_TYPE",
    "VIRTUAL_ROOT",
    "MemoryTool",
    "memory_tool_effects",
]

# The tool type the Messages API knows (anthropic SDK: ``BetaMemoryTool20250818Param``).
MEMORY_TOOL_TYPE = "memory_20250818"
VIRTUAL_ROOT = "/memories"
"""The folder the model sees; ``/memories/x.md`` is ``<memory_dir>/x.md`` (the memory
directory itself, as Claude Code lays it out: see the module's notes)."""

MEMORY_COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
"""The commands the model sends (the SDK's ``BetaMemoryTool20250818*Command`` types);
``view`` reads, every other one writes."""
_PATH_KEYS = {"rename": ("old_path", "new_path")}
# What each writing command says it will write; a delete or a rename says nothing.
_TEXT_KEYS = {"create": "file_text", "str_replace": "new_str", "insert": "insert_text"}
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# 6 digits and a tab: the numbering of the SDK's own view and of Claude Code's Read.
_NUMBER_WIDTH = 6
# The SDK refuses to number a file longer than its 6 digits can count.
_MAX_LINES = 999_999
_SNIPPET_CONTEXT = 2
_SIZE_UNITS = ("B", "K", "M", "G")
_NOT_A_FILE = "The path {} is not a file."


def _root_refusal(command: str, key: str) -> str | None:
    """Why ``command`` may not name ``/memories`` itself as ``key``; None: it may (view).

    The wording is what the SDK's tool answers where it has an answer; creating the root
    has none there, so it says what to do instead.
    """
    if command == "view":
        return None
    if command == "create":
        return (
            f"{VIRTUAL_ROOT} is the memory directory itself; "
            f"create a file inside it, like {VIRTUAL_ROOT}/notes.md"
        )
    if command in ("str_replace", "insert"):
        return _NOT_A_FILE.format(VIRTUAL_ROOT)
    if command == "rename" and key == "new_path":
        return f"The destination {VIRTUAL_ROOT} already exists"
    return f"Cannot {command} the {VIRTUAL_ROOT} directory itself"


def _missing(virtual: str) -> ToolError:
    return ToolError(f"The path {virtual} does not exist. Please provide a valid path.")


def _as_memory_dir(memory_dir: MemoryDir | str | os.PathLike[str]) -> MemoryDir:
    return memory_dir if isinstance(memory_dir, MemoryDir) else MemoryDir(memory_dir)


def _virtual_parts(path: object) -> list[str]:
    """The components below ``/memories`` of a virtual path; ``[]`` is the root itself."""
    if path is None:
        raise ToolError("missing required parameter 'path'")
    if not isinstance(path, str):
        raise ToolError(f"a path must be a string like '{VIRTUAL_ROOT}/notes.md'")
    shown = repr(path)
    if _CONTROL.search(path):
        raise ToolError(f"{shown}: NUL and control characters are not allowed in paths")
    if "\\" in path:
        raise ToolError(f"{shown}: use '/' to separate path parts, not backslashes")
    if _PERCENT_ESCAPE.search(path):
        raise ToolError(f"{shown}: percent-escapes are not decoded; write the name plainly")
    if path != VIRTUAL_ROOT and not path.startswith(VIRTUAL_ROOT + "/"):
        # Safe to echo: control characters were refused above.
        raise ToolError(f"Path must start with {VIRTUAL_ROOT}, got: {path}")
    parts = [p for p in path[len(VIRTUAL_ROOT) :].split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ToolError(f"{shown}: '..' is not allowed in memory paths")
    if any(p.startswith(".") for p in parts):
        raise ToolError(f"{shown}: hidden names (starting with '.') are not used for memories")
    return parts


def _map_path(md: MemoryDir, path: object, command: str, key: str = "path") -> tuple[str, Path]:
    """The normalised virtual path and the real path it stands for; raises ToolError."""
    parts = _virtual_parts(path)
    virtual = posixpath.join(VIRTUAL_ROOT, *parts)
    if not parts:
        refusal = _root_refusal(command, key)
        if refusal is not None:
            raise ToolError(refusal)
        return virtual, md.root
    real = md.root.joinpath(*parts)
    if not md.is_memory_path(real):
        raise ToolError(f"{virtual} resolves outside {VIRTUAL_ROOT} (through a symlink)")
    # Every command, view, delete and rename included: a link planted in the folder
    # (``x -> .memdir``) must not reach memdir's state, nor a hard link an outside file.
    reached = reach_refusal(md, real)
    if reached is not None:
        # Told in the model's own terms: /memories, not the folder's real place.
        said = reached[1].replace(str(real), virtual).replace(str(md.root), VIRTUAL_ROOT)
        raise ToolError(said)
    return virtual, real


def _arg(tool_input: Mapping[str, Any], key: str, kind: type, default: Any = None) -> Any:
    value = tool_input.get(key, default)
    if value is None:
        raise ToolError(f"missing required parameter '{key}'")
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ToolError(f"'{key}' must be a {kind.__name__}, got {type(value).__name__}")
    return value


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _numbered(lines: list[str], first: int) -> str:
    return "\n".join(f"{n:{_NUMBER_WIDTH}}\t{line}" for n, line in enumerate(lines, first))


def _clamped_range(view_range: object, count: int) -> tuple[int, int]:
    """The first and last line numbers to show of a file of ``count`` lines.

    Like the SDK, an out-of-range ``view_range`` is clamped rather than refused: a start
    below 1 is 1, an end past the file is its last line, ``-1`` is the end, and a range
    that ends before it starts shows no lines. Only a malformed one is an error.
    """
    if view_range is None:
        return 1, count
    if (
        not isinstance(view_range, list | tuple)
        or len(view_range) != 2
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in view_range)
    ):
        raise ToolError("'view_range' must be two line numbers: [start, end]")
    start, end = view_range
    first = max(start, 1)
    last = count if end == -1 else min(end, count)
    # Never below first - 1: a negative end must not count from the end as slices do.
    return first, max(last, first - 1)


def _human_size(size: int) -> str:
    """A size as the SDK's listing writes it: ``17B``, ``2K``, ``1.5K``, ``3.2M``."""
    unit = 0
    while unit < len(_SIZE_UNITS) - 1 and size >= 1024 ** (unit + 1):
        unit += 1
    value = size / 1024**unit
    shown = f"{int(value)}" if value.is_integer() else f"{value:.1f}"
    return f"{shown}{_SIZE_UNITS[unit]}"


def _read_text(real: Path, virtual: str) -> str:
    try:
        return real.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _missing(virtual) from None
    except UnicodeDecodeError:
        raise ToolError(f"{virtual} is not UTF-8 text") from None


def _header_lines(text: str) -> int:
    """How many lines the frontmatter (fences included) takes; 0 without one."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return 0
    for number, line in enumerate(lines[1:], 2):
        if line.rstrip() == "---":
            return number
    return 0


def _require_file(real: Path, virtual: str) -> None:
    if not os.path.lexists(real):
        raise _missing(virtual)
    if not real.is_file():
        raise ToolError(_NOT_A_FILE.format(virtual))


class MemoryTool:
    """Anthropic's client-side ``memory`` tool, storing its files in ``memory_dir``.

    ``allow_private_secrets`` lets a credential be written outside ``team/``; under
    ``team/``, shared with collaborators, one is always refused.

    Memory files are stored the way the run's :class:`~memdir.tools.ToolContext` says
    (its ``memory_files``), the same rule Write and Edit follow. Without one, ``format``
    decides: ``"current"`` stores them in Claude Code's current layout, stamped with the
    time (``clock``) and ``session_id`` when known; ``"2.1.88"`` or ``None`` (the
    default) stores them exactly as written.

    memdir's agent loop calls :meth:`run`; the Anthropic SDK's tool runner needs the
    wrappers of :mod:`memdir.integrations.anthropic_memory`, which call :meth:`run_sync`.
    """

    name = "memory"

    def __init__(
        self,
        memory_dir: MemoryDir | str | os.PathLike[str],
        *,
        allow_private_secrets: bool = False,
        format: MemoryFormat | None = None,
        session_id: str | None = None,
        clock: Callable[[], datetime.datetime] | None = None,
    ) -> None:
        self.memory_dir = _as_memory_dir(memory_dir)
        """Where the ``/memories`` files really live."""
        self._guard = memory_write_guard(
            self.memory_dir, allow_private_secrets=allow_private_secrets
        )
        self._files: MemoryFiles | None = None
        if format is not None:
            files = MemoryFiles(memory_dir=self.memory_dir, format=format, session_id=session_id)
            self._files = files if clock is None else dataclasses.replace(files, clock=clock)

    def definition(self) -> dict[str, Any]:
        """The tool entry for ``tools=[...]``: the API supplies its schema and description."""
        return {"type": MEMORY_TOOL_TYPE, "name": self.name}

    def effects(self, tool_input: object) -> tuple[Effect, ...]:
        """What a command does, ``/memories/x`` being ``<memory_dir>/x``
        (:func:`memory_tool_effects`)."""
        return memory_tool_effects(tool_input, self.memory_dir)

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        """Carry out one command; a command that cannot be done raises :class:`ToolError`."""
        # A worker thread: the filesystem calls block.
        return await asyncio.to_thread(self.run_sync, tool_input, context)

    def run_sync(self, tool_input: object, context: ToolContext | None = None) -> ToolOutput:
        """:meth:`run`, in the calling thread, for callers that are not on an event loop.

        ``tool_input`` is the command as the model sent it, checked here rather than
        trusted; ``context`` defaults to a fresh one (no extra write guard, and memory
        files stored as this tool's ``format`` says).
        """
        if not isinstance(tool_input, Mapping):
            raise ToolError(f"input must be a JSON object, got {type(tool_input).__name__}")
        command = tool_input.get("command")
        if command not in MEMORY_COMMANDS:
            raise ToolError(
                f"unknown command {command!r}; expected one of: {', '.join(MEMORY_COMMANDS)}"
            )
        handler = getattr(self, f"_{command}")
        try:
            result: ToolOutput = handler(tool_input, context or ToolContext())
        except StoreError as exc:
            raise ToolError(str(exc)) from exc
        except OSError as exc:
            raise ToolError(f"{command} failed: {exc.strerror or exc}") from exc
        except ValueError as exc:  # e.g. a name that the filesystem cannot encode
            raise ToolError(f"{command} failed: {exc}") from exc
        return result

    def _prepare(self, real: Path, text: str, context: ToolContext) -> str:
        """The text to store at ``real``: a memory file stamped as Claude Code does."""
        files = context.memory_files if context.memory_files is not None else self._files
        return text if files is None else files.prepare(real, text)

    def _index(self, real: Path, previous: str | None, context: ToolContext) -> None:
        """Keep the index line of the memory just written (or removed) in step, where the
        run's :class:`MemoryFiles` says memdir keeps the index (``index``). Called once
        the file's own lock is let go; an index locked for long is left to the repair."""
        files = context.memory_files
        if files is not None and files.index:
            with contextlib.suppress(StoreError):
                index_memory_file(files.memory_dir, real, previous=previous)

    def _check(self, real: Path, text: str, context: ToolContext) -> None:
        """Refuse a write whose final text may not be stored at ``real``."""
        for guard in (self._guard, context.write_guard):
            refusal = guard(real, text) if guard is not None else None
            if refusal is not None:
                raise ToolError(refusal)

    def _view(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        virtual, real = _map_path(self.memory_dir, tool_input.get("path"), "view")
        if real == self.memory_dir.root and not real.exists():
            # Not created by a look: an empty listing, as for an empty folder.
            return ToolOutput(content=self._listing(virtual, real))
        if not os.path.lexists(real):
            raise _missing(virtual)
        if real.is_dir():
            return ToolOutput(content=self._listing(virtual, real))
        if not real.is_file():
            raise ToolError(f"Unsupported file type for {virtual}")
        lines = _lines(_read_text(real, virtual))
        if len(lines) > _MAX_LINES:
            raise ToolError(f"File {virtual} exceeds maximum line limit of 999,999 lines.")
        first, last = _clamped_range(tool_input.get("view_range"), len(lines))
        body = _numbered(lines[first - 1 : last], first)
        return ToolOutput(content=f"Here's the content of {virtual} with line numbers:\n{body}")

    def _listing(self, virtual: str, real: Path) -> str:
        size = real.stat().st_size if real.exists() else 0
        rows = [f"{_human_size(size)}\t{virtual}"]
        for rel, entry_size, is_dir in self._walk(real, "", 1):
            suffix = "/" if is_dir else ""
            rows.append(f"{_human_size(entry_size)}\t{virtual.rstrip('/')}/{rel}{suffix}")
        header = (
            f"Here're the files and directories up to 2 levels deep in {virtual}, "
            "excluding hidden items:"
        )
        return "\n".join([header, *rows])

    def _walk(self, directory: Path, prefix: str, depth: int) -> Iterator[tuple[str, int, bool]]:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            return
        for name in names:
            entry = directory / name
            # Entries whose link leads out (or loops) are not shown: not even their names.
            if (
                name.startswith(".")
                or not self.memory_dir.is_memory_path(entry)
                or reach_refusal(self.memory_dir, entry) is not None
            ):
                continue
            try:
                st = entry.stat()
            except OSError:
                continue
            is_dir = stat.S_ISDIR(st.st_mode)
            if not is_dir and not stat.S_ISREG(st.st_mode):
                continue  # a socket or FIFO is no memory, and cannot be viewed
            yield f"{prefix}{name}", st.st_size, is_dir
            if is_dir and depth < 2 and not entry.is_symlink():
                yield from self._walk(entry, f"{prefix}{name}/", depth + 1)

    def _create(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        virtual, real = _map_path(self.memory_dir, tool_input.get("path"), "create")
        text = self._prepare(real, _arg(tool_input, "file_text", str), context)
        # Checked before the lock, which creates the parent folders: a refusal leaves none.
        self._check(real, text, context)
        exists = f"File {virtual} already exists"
        if os.path.lexists(real):
            raise ToolError(exists)
        with file_lock(real):
            if os.path.lexists(real):
                raise ToolError(exists)
            atomic_write(real, text)
        self._index(real, None, context)
        return ToolOutput(content=f"File created successfully at: {virtual}", written=real)

    def _str_replace(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        virtual, real = _map_path(self.memory_dir, tool_input.get("path"), "str_replace")
        old = _arg(tool_input, "old_str", str)
        new = _arg(tool_input, "new_str", str, default="")
        if not old:
            raise ToolError("'old_str' must not be empty")
        _require_file(real, virtual)
        with file_lock(real):
            text = _read_text(real, virtual)
            starts = [m.start() for m in re.finditer(re.escape(old), text)]
            if not starts:
                raise ToolError(
                    f"No replacement was performed, old_str `{old}` did not appear verbatim "
                    f"in {virtual}."
                )
            if len(starts) > 1:
                lines = ", ".join(str(text.count("\n", 0, s) + 1) for s in starts)
                raise ToolError(
                    f"No replacement was performed. Multiple occurrences of old_str `{old}` "
                    f"in lines: {lines}. Please ensure it is unique"
                )
            replaced = text.replace(old, new, 1)
            updated = self._prepare(real, replaced, context)
            self._check(real, updated, context)
            atomic_write(real, updated)
        self._index(real, text, context)
        line = text.count("\n", 0, starts[0])
        if updated != replaced and line >= _header_lines(replaced):
            # Stamping rewrote the frontmatter above the edit: follow it down (or up).
            line += len(_lines(updated)) - len(_lines(replaced))
        lines_now = _lines(updated)
        start = max(0, line - _SNIPPET_CONTEXT)
        end = line + new.count("\n") + 1 + _SNIPPET_CONTEXT
        snippet = _numbered(lines_now[start:end], start + 1)
        return ToolOutput(
            content=(
                "The memory file has been edited. Here is the snippet showing the change "
                f"(with line numbers):\n{snippet}"
            ),
            written=real,
        )

    def _insert(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        virtual, real = _map_path(self.memory_dir, tool_input.get("path"), "insert")
        after = _arg(tool_input, "insert_line", int)
        added = _lines(_arg(tool_input, "insert_text", str)) or [""]
        _require_file(real, virtual)
        with file_lock(real):
            before = _read_text(real, virtual)
            lines = _lines(before)
            if not 0 <= after <= len(lines):
                raise ToolError(
                    f"Invalid `insert_line` parameter: {after}. "
                    f"It should be within the range [0, {len(lines)}]."
                )
            updated = "\n".join([*lines[:after], *added, *lines[after:]]) + "\n"
            updated = self._prepare(real, updated, context)
            self._check(real, updated, context)
            atomic_write(real, updated)
        self._index(real, before, context)
        return ToolOutput(content=f"The file {virtual} has been edited.", written=real)

    def _delete(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        virtual, real = _map_path(self.memory_dir, tool_input.get("path"), "delete")
        try:
            st = os.lstat(real)
        except FileNotFoundError:
            raise ToolError(f"The path {virtual} does not exist") from None
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(real)  # never follows the symlinks inside it
        else:
            with file_lock(real):
                real.unlink()  # a symlink itself, not what it points at
            self._index(real, None, context)  # gone: its line goes too
        return ToolOutput(content=f"Successfully deleted {virtual}")

    def _rename(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        md = self.memory_dir
        old_virtual, old = _map_path(md, tool_input.get("old_path"), "rename", "old_path")
        new_virtual, new = _map_path(md, tool_input.get("new_path"), "rename", "new_path")
        if not os.path.lexists(old):
            raise ToolError(f"The path {old_virtual} does not exist")
        with contextlib.ExitStack() as locks:
            for target in sorted({old, new}):
                locks.enter_context(file_lock(target))
            if os.path.lexists(new):
                raise ToolError(f"The destination {new_virtual} already exists")
            # A file moved into team/ must pass the credential rule there too.
            for src, dst in self._moved_files(old, new):
                self._check(dst, src.read_text(encoding="utf-8", errors="replace"), context)
            make_private_dirs(new.parent)
            os.rename(old, new)
        if new.is_file():  # a moved memory: its old line out, a line for where it is now
            self._index(old, None, context)
            self._index(new, None, context)
        return ToolOutput(
            content=f"Successfully renamed {old_virtual} to {new_virtual}", written=new
        )

    @staticmethod
    def _moved_files(old: Path, new: Path) -> Iterator[tuple[Path, Path]]:
        if not old.is_dir() or old.is_symlink():
            if old.is_file():
                yield old, new
            return
        for folder, dirs, files in os.walk(old):
            # A folder's own bookkeeping (its locks) moves with it and is not a memory.
            dirs[:] = [d for d in dirs if d != STATE_DIR_NAME]
            for name in files:
                src = Path(folder, name)
                if src.is_file() and not src.is_symlink():
                    yield src, new / src.relative_to(old)


def memory_tool_effects(
    tool_input: object, memory_dir: MemoryDir | str | os.PathLike[str] | None
) -> tuple[Effect, ...]:
    """What one ``memory`` command does, before it runs.

    ``view`` reads its path; the other commands write theirs (``rename`` both of them),
    with the text the command carries, if any. Each virtual path is mapped as the tool
    maps it, ``/memories/x`` to ``<memory_dir>/x``: one the tool would refuse (outside
    ``/memories``, ``..``, a hidden name, a link that leads out, the root itself for a
    change) makes the call :class:`~memdir.tools.Invalid`, as does an unknown command.
    Without ``memory_dir`` (a call in a transcript whose memory directory is not known),
    the effects say only what kind they are, with no path.
    """
    given = input_object("memory", tool_input)
    if not isinstance(given, Mapping):
        return (given,)
    command = given.get("command")
    if command not in MEMORY_COMMANDS:
        return (
            Invalid(
                "invalid_input",
                f"memory: unknown command {command!r}; use one of {', '.join(MEMORY_COMMANDS)}.",
            ),
        )
    keys = _PATH_KEYS.get(command, ("path",))
    paths: list[str | None] = [None] * len(keys)
    if memory_dir is not None:
        md = _as_memory_dir(memory_dir)
        try:
            paths = [str(_map_path(md, given.get(key), command, key)[1]) for key in keys]
        except ToolError as exc:
            message = f"memory {command}: {exc}. Only paths inside {VIRTUAL_ROOT} can be used."
            return (Invalid("outside_memory_dir", message),)
    if command == "view":
        return (ReadsPath(paths[0]),)
    text = given.get(_TEXT_KEYS.get(command, ""))
    return tuple(WritesPath(path, text if isinstance(text, str) else None) for path in paths)
