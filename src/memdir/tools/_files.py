"""Read, Write and Edit: the file tools, with Claude Code's names and input fields.

Write and Edit of an existing file follow Claude Code's rule: the file must have been Read
in this run and be unchanged on disk since, so the model never overwrites text it has not
seen; a file Read and deleted since is not written back. A ``MEMORY.md`` is checked and
written while its cross-process lock is held, the lock ``memdir forget`` and the other
writers of the index take. Every write goes through :func:`~memdir.store.atomic_write`.
A memory file is stored the way the run's :class:`~memdir.tools.MemoryFiles` says (by
default for a memory directory: its frontmatter in Claude Code's current layout, stamped).

The input checking and path resolution shared by all the builtin tools live here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import stat
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from memdir.errors import StoreError
from memdir.store import (
    ENTRYPOINT_NAME,
    MemoryDir,
    atomic_write,
    file_lock,
    index_memory_file,
    without_duplicate_lines,
)
from memdir.store._atomic import STATE_DIR_NAME
from memdir.tools._base import FileStamp, ToolContext, ToolError, ToolOutput
from memdir.tools._effects import Effect, ReadsPath, WritesPath, input_object, locate

__all__ = [
    "EditTool",
    "ReadTool",
    "WriteTool",
    "absolute_cwd",
    "check_input",
    "edit_effects",
    "object_schema",
    "prop",
    "read_effects",
    "resolve_path",
    "write_effects",
]

# 2,000 lines / 2,000 characters a line: the window Claude Code's Read returns by default.
READ_DEFAULT_LIMIT = 2000
MAX_LINE_CHARS = 2000
# UTF-8 spends at most 4 bytes a character, so this many bytes always hold more than
# MAX_LINE_CHARS characters: enough to show a line's head without reading all of it.
_LINE_READ_BYTES = 4 * (MAX_LINE_CHARS + 1)

# Calls of one assistant message run concurrently; holding this across check-and-write
# makes two Edits of one file apply one after the other instead of losing one of them.
_WRITE_LOCK = threading.Lock()

_JSON_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "boolean": (bool,)}


def object_schema(properties: dict[str, dict[str, Any]], required: Sequence[str]) -> dict[str, Any]:
    """A JSON schema for a tool input: an object with these properties and no others."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


def check_input(tool: str, schema: Mapping[str, Any], tool_input: object) -> dict[str, Any]:
    """Check ``tool_input`` against ``schema`` (as built by :func:`object_schema`).

    Returns the input as a plain dict without the optional keys whose value is ``None``
    (models often send ``null`` for "not given"). Raises :class:`ToolError` with a one-line
    message naming the offending parameter.
    """
    if not isinstance(tool_input, Mapping):
        raise ToolError(f"{tool}: input must be a JSON object, got {type(tool_input).__name__}")
    properties: Mapping[str, Mapping[str, Any]] = schema["properties"]
    unknown = sorted(repr(key) for key in tool_input if key not in properties)
    if unknown:
        expected = ", ".join(properties)
        raise ToolError(f"{tool}: unknown parameter {unknown[0]}; expected: {expected}")
    checked = {key: value for key, value in tool_input.items() if value is not None}
    for key in schema["required"]:
        if key not in checked:
            raise ToolError(f"{tool}: missing required parameter '{key}'")
    for key, value in checked.items():
        _check_value(tool, key, properties[key], value)
    return checked


def _check_value(tool: str, key: str, spec: Mapping[str, Any], value: object) -> None:
    kind = spec["type"]
    # bool is an int subclass; True is no line number.
    if not isinstance(value, _JSON_TYPES[kind]) or (kind == "integer" and isinstance(value, bool)):
        article = "an" if kind == "integer" else "a"
        raise ToolError(f"{tool}: '{key}' must be {article} {kind}")
    if "enum" in spec and value not in spec["enum"]:
        raise ToolError(f"{tool}: '{key}' must be one of: {', '.join(spec['enum'])}")
    if isinstance(value, str) and len(value) < spec.get("minLength", 0):
        raise ToolError(f"{tool}: '{key}' must not be empty")
    if isinstance(value, int) and "minimum" in spec and value < spec["minimum"]:
        raise ToolError(f"{tool}: '{key}' must be at least {spec['minimum']}")
    if isinstance(value, int) and "maximum" in spec and value > spec["maximum"]:
        raise ToolError(f"{tool}: '{key}' must be at most {spec['maximum']}")


def resolve_path(tool: str, key: str, raw: str, cwd: str) -> str:
    """``raw`` made absolute: ``~`` expanded, relative to ``cwd``.

    It is not normalised: ``link/..`` must go where the operating system takes it
    (through the link, then up), which is also where the permission gate looked. Folding
    ``..`` away as text first would land somewhere else.
    """
    if "\0" in raw:
        raise ToolError(f"{tool}: '{key}' must not contain NUL characters")
    return os.path.join(cwd, os.path.expanduser(raw))


def prop(kind: str, description: str, **constraints: Any) -> dict[str, Any]:
    """One property of an input schema: its JSON type, description and constraints."""
    return {"type": kind, "description": description, **constraints}


def absolute_cwd(cwd: str | os.PathLike[str]) -> str:
    """A tool's working directory as an absolute path, ``~`` expanded."""
    return os.path.abspath(os.path.expanduser(os.fspath(cwd)))


def read_effects(tool_input: object, cwd: str | os.PathLike[str] | None) -> tuple[Effect, ...]:
    """Read's effect: it reads ``file_path``."""
    given = input_object("Read", tool_input)
    if not isinstance(given, Mapping):
        return (given,)
    return (ReadsPath(locate(given.get("file_path"), cwd)),)


def _write_effects(
    tool: str, text_key: str, tool_input: object, cwd: str | os.PathLike[str] | None
) -> tuple[Effect, ...]:
    given = input_object(tool, tool_input)
    if not isinstance(given, Mapping):
        return (given,)
    text = given.get(text_key)
    path = locate(given.get("file_path"), cwd)
    return (WritesPath(path, text if isinstance(text, str) else None),)


def write_effects(tool_input: object, cwd: str | os.PathLike[str] | None) -> tuple[Effect, ...]:
    """Write's effect: it writes ``content`` at ``file_path``."""
    return _write_effects("Write", "content", tool_input, cwd)


def edit_effects(tool_input: object, cwd: str | os.PathLike[str] | None) -> tuple[Effect, ...]:
    """Edit's effect: it writes ``new_string`` into the file at ``file_path``."""
    return _write_effects("Edit", "new_string", tool_input, cwd)


def _stamp(st: os.stat_result) -> FileStamp:
    return FileStamp(mtime_ns=st.st_mtime_ns, size=st.st_size)


# Terse on purpose: every memory run sends these definitions. A relative path is taken
# against the tool's working directory: the memory directory, for memdir's memory agent.
_FILE_PATH = prop("string", "Absolute, or relative to the working directory.", minLength=1)


_READ_SCHEMA = object_schema(
    {
        "file_path": _FILE_PATH,
        "offset": prop("integer", "First line, from 1.", minimum=1),
        "limit": prop("integer", "Line count.", minimum=1),
    },
    ["file_path"],
)
_WRITE_SCHEMA = object_schema(
    {
        "file_path": _FILE_PATH,
        "content": prop("string", "The whole new text."),
    },
    ["file_path", "content"],
)
_EDIT_SCHEMA = object_schema(
    {
        "file_path": _FILE_PATH,
        "old_string": prop("string", "Exact text to replace.", minLength=1),
        "new_string": prop("string", "Its replacement."),
        "replace_all": prop("boolean", "Replace every occurrence."),
    },
    ["file_path", "old_string", "new_string"],
)


class ReadTool:
    """``Read``: a window of a text file, numbered like ``cat -n``."""

    name = "Read"

    def __init__(self, cwd: str | os.PathLike[str]) -> None:
        self._cwd = absolute_cwd(cwd)

    def definition(self) -> dict[str, Any]:
        """The tool as the model sees it."""
        return {
            "name": self.name,
            "description": (
                f"Read a text file, lines numbered from 1 (at most {READ_DEFAULT_LIMIT}; page "
                "with offset and limit)."
            ),
            "input_schema": copy.deepcopy(_READ_SCHEMA),
        }

    def effects(self, tool_input: object) -> tuple[Effect, ...]:
        """It reads ``file_path``, taken against this tool's working directory."""
        return read_effects(tool_input, self._cwd)

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        """Read the requested lines and remember the file's state in ``context``."""
        args = check_input(self.name, _READ_SCHEMA, tool_input)
        path = resolve_path(self.name, "file_path", args["file_path"], self._cwd)
        offset: int = args.get("offset", 1)
        limit: int = args.get("limit", READ_DEFAULT_LIMIT)
        try:
            real, stamp, text = await asyncio.to_thread(_read_window, path, offset, limit)
        except ToolError:
            # Seen missing now: a Write may create it again without being taken for one
            # that would bring back a file deleted since an earlier Read.
            context.read_files.pop(await asyncio.to_thread(os.path.realpath, path), None)
            raise
        context.read_files[real] = stamp
        return ToolOutput(content=text)


def _read_window(path: str, offset: int, limit: int) -> tuple[str, FileStamp, str]:
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(f"Read: {path} is a directory; list it with Glob or Bash ls")
        # A FIFO or a device would block the read, or never end.
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"Read: {path} is not a regular file")
        with open(real, "rb") as handle:
            # Stamped from the open file before a byte is read: a change racing with the
            # read makes the stamp look stale (a needless re-Read), never fresh.
            stamp = _stamp(os.fstat(handle.fileno()))
            shown: list[str] = []
            number = 0
            more = False
            while (line := _next_line(handle)) is not None:
                number += 1
                if number < offset:
                    continue
                if len(shown) == limit:
                    more = True
                    break
                shown.append(f"{number:>6}\t{line}")
    except FileNotFoundError:
        raise ToolError(f"Read: file does not exist: {path}") from None
    except OSError as exc:
        raise ToolError(f"Read: cannot read {path}: {exc.strerror or exc}") from None
    if number == 0:
        return real, stamp, f"({path} is empty)"
    if not shown:
        return real, stamp, f"({path} has {number} lines; offset {offset} is past the end)"
    text = "\n".join(shown)
    if more:
        following = offset + len(shown)
        text += f"\n\n(the file continues; Read again with offset={following} to see more)"
    return real, stamp, text


def _next_line(handle: BinaryIO) -> str | None:
    """The next line without its terminator, decoded and cut; ``None`` at the end."""
    chunk = handle.readline(_LINE_READ_BYTES)
    if not chunk:
        return None
    rest = chunk
    while rest and not rest.endswith(b"\n"):
        # The tail of an overlong line is skipped without holding it in memory.
        rest = handle.readline(1 << 16)
    line = chunk.removesuffix(b"\n").removesuffix(b"\r").decode("utf-8", errors="replace")
    if len(line) > MAX_LINE_CHARS:
        return line[:MAX_LINE_CHARS] + " … (line cut)"
    return line


def _check_fresh(
    tool: str, path: str, real: str, st: os.stat_result, read_files: Mapping[str, FileStamp]
) -> None:
    recorded = read_files.get(real)
    if recorded is None:
        raise ToolError(f"{tool}: {path} has not been Read in this session; Read it first")
    if recorded != _stamp(st):
        raise ToolError(f"{tool}: {path} changed on disk since it was Read; Read it again first")


@contextlib.contextmanager
def _index_lock(tool: str, path: str, real: str, context: ToolContext) -> Iterator[None]:
    """Hold the index's cross-process lock while a write of a ``MEMORY.md`` checks and
    replaces it.

    ``memdir forget``, ``--undo``, the repair step and the memory tool rewrite the index
    under this lock, so the check that it is unchanged since the Read and the write
    itself are one step for them: a line another process removed or added in between is
    never written over. Other files have one writer at a time, the memory agent, and go
    without. An index outside any memory directory is locked only where memdir keeps
    state already, so a plain Write leaves no ``.memdir/`` folder behind.
    """
    target = Path(real)
    memory = context.memory_files.home_of(target) if context.memory_files is not None else None
    wanted = target.name == ENTRYPOINT_NAME and (
        memory is not None or (target.parent / STATE_DIR_NAME).is_dir()
    )
    with contextlib.ExitStack() as stack:
        if wanted:
            try:
                stack.enter_context(file_lock(target))
            except StoreError as exc:
                raise ToolError(f"{tool}: {exc}; Read it again and retry") from None
        yield


def _stat_target(tool: str, path: str, real: str) -> os.stat_result | None:
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ToolError(f"{tool}: cannot access {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{tool}: {path} is a directory")
    return st


def _store(
    tool: str, path: str, real: str, text: str, context: ToolContext, previous: str | None = None
) -> None:
    """Write ``text`` at ``real`` (``previous``: what the file held, None for a new one)."""
    read_files = context.read_files
    files = context.memory_files
    if files is not None:
        # Before the guard: what is judged is what will be on disk.
        text = files.prepare(Path(real), text)
        home = files.home_of(Path(real))
        if files.index and home is not None:
            # An agent that adds a line memdir wrote already keeps its own words alone.
            text = without_duplicate_lines(home, Path(real), text)
    if context.write_guard is not None:
        # The final text and the real target, checked while no other write can run: what
        # two calls of one message produce together is judged, not each call alone.
        refusal = context.write_guard(Path(real), text)
        if refusal is not None:
            raise ToolError(f"{tool}: {refusal}")
    try:
        atomic_write(real, text)
        # Recorded so that a further Edit of our own result needs no new Read.
        read_files[real] = _stamp(os.stat(real))
    except (StoreError, OSError) as exc:
        raise ToolError(f"{tool}: {exc}") from None
    if files is not None and files.index:
        home = files.home_of(Path(real))
        if home is not None:
            _index(Path(real), previous, home, read_files)


def _index(
    real: Path, previous: str | None, memory: MemoryDir, read_files: dict[str, FileStamp]
) -> None:
    """Put the just-written memory's line in its index (see :attr:`MemoryFiles.index`).

    An index the run counts as read stays so when only this line changed it: the
    change is memdir's own, not one the model has to see before its next Edit."""
    if real.name == ENTRYPOINT_NAME or real.suffix != ".md" or not memory.is_memory_path(real):
        return
    team = memory.team_dir
    index = (team if memory.is_team_path(real) else memory.root) / ENTRYPOINT_NAME
    index_real = os.path.realpath(index)
    try:
        before = _stamp(os.stat(index_real))
    except OSError:
        before = None
    try:
        changed = index_memory_file(memory, real, previous=previous)
    except StoreError:
        return  # the index is locked for long: the next run's repair step adds the line
    if changed and before is not None and read_files.get(index_real) == before:
        with contextlib.suppress(OSError):
            read_files[index_real] = _stamp(os.stat(index_real))


class WriteTool:
    """``Write``: create a file or replace its whole content."""

    name = "Write"

    def __init__(self, cwd: str | os.PathLike[str]) -> None:
        self._cwd = absolute_cwd(cwd)

    def definition(self) -> dict[str, Any]:
        """The tool as the model sees it."""
        return {
            "name": self.name,
            "description": "Create a file, or replace one Read first. Prefer Edit for a change.",
            "input_schema": copy.deepcopy(_WRITE_SCHEMA),
        }

    def effects(self, tool_input: object) -> tuple[Effect, ...]:
        """It writes ``content`` at ``file_path``, taken against its working directory."""
        return write_effects(tool_input, self._cwd)

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        """Write the file atomically and record its new state in ``context``."""
        args = check_input(self.name, _WRITE_SCHEMA, tool_input)
        path = resolve_path(self.name, "file_path", args["file_path"], self._cwd)
        created, real = await asyncio.to_thread(_write, path, args["content"], context)
        verb = "Created" if created else "Updated"
        return ToolOutput(content=f"{verb} {path}", written=Path(real))


def _write(path: str, content: str, context: ToolContext) -> tuple[bool, str]:
    # Written through symlinks to where they point, the place a permission check that
    # resolves symlinks has approved; replacing the link itself would write elsewhere.
    real = os.path.realpath(path)
    with _WRITE_LOCK, _index_lock("Write", path, real, context):
        st = _stat_target("Write", path, real)
        if st is not None:
            _check_fresh("Write", path, real, st, context.read_files)
        elif real in context.read_files:
            # Read in this run, gone now: another process removed it (``memdir forget``,
            # a consolidation pass). Writing it again would bring back what was removed.
            raise ToolError(
                f"Write: {path} was deleted since it was Read; Read it again first (write it "
                "only if it should exist again)"
            )
        indexing = context.memory_files is not None and context.memory_files.index
        previous = _previous_text(real) if st is not None and indexing else None
        _store("Write", path, real, content, context, previous)
        if st is None:
            context.created.add(real)
    return st is None, real


def _previous_text(real: str) -> str | None:
    """The head of a file's text before a Write replaces it, where memdir keeps the index
    (a memory's changed description updates its line); None where it cannot be read."""
    try:
        with open(real, "rb") as handle:
            return handle.read(64 * 1024).decode("utf-8", errors="replace")
    except OSError:
        return None


class EditTool:
    """``Edit``: replace an exact piece of text in a file that was Read."""

    name = "Edit"

    def __init__(self, cwd: str | os.PathLike[str]) -> None:
        self._cwd = absolute_cwd(cwd)

    def definition(self) -> dict[str, Any]:
        """The tool as the model sees it."""
        return {
            "name": self.name,
            "description": (
                "Replace old_string, found exactly once (or every time: replace_all), in a "
                "file Read first. Text as in the file, without Read's line numbers."
            ),
            "input_schema": copy.deepcopy(_EDIT_SCHEMA),
        }

    def effects(self, tool_input: object) -> tuple[Effect, ...]:
        """It writes ``new_string`` into ``file_path``, taken against its working directory."""
        return edit_effects(tool_input, self._cwd)

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        """Apply the replacement atomically and record the file's new state in ``context``."""
        args = check_input(self.name, _EDIT_SCHEMA, tool_input)
        path = resolve_path(self.name, "file_path", args["file_path"], self._cwd)
        old: str = args["old_string"]
        new: str = args["new_string"]
        if old == new:
            raise ToolError("Edit: 'old_string' and 'new_string' are the same; nothing to change")
        replace_all: bool = args.get("replace_all", False)
        count, real = await asyncio.to_thread(_edit, path, old, new, replace_all, context)
        plural = "" if count == 1 else "s"
        return ToolOutput(
            content=f"Edited {path}: replaced {count} occurrence{plural}", written=Path(real)
        )


def _edit(
    path: str, old: str, new: str, replace_all: bool, context: ToolContext
) -> tuple[int, str]:
    real = os.path.realpath(path)
    with _WRITE_LOCK, _index_lock("Edit", path, real, context):
        st = _stat_target("Edit", path, real)
        if st is None:
            raise ToolError(f"Edit: file does not exist: {path}; create it with Write")
        _check_fresh("Edit", path, real, st, context.read_files)
        try:
            with open(real, "rb") as handle:
                text = handle.read().decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"Edit: {path} is not UTF-8 text; it cannot be edited") from None
        except OSError as exc:
            raise ToolError(f"Edit: cannot read {path}: {exc.strerror or exc}") from None
        # Read shows lines without their "\r", so in a CRLF file the model's multi-line
        # old_string has bare "\n"; match on LF and put the CRLFs back afterwards.
        crlf = "\r\n" in text and "\n" not in text.replace("\r\n", "")
        if crlf:
            text, old, new = (s.replace("\r\n", "\n") for s in (text, old, new))
        count = text.count(old)
        if count == 0:
            raise ToolError(f"Edit: 'old_string' was not found in {path}")
        if count > 1 and not replace_all:
            raise ToolError(
                f"Edit: 'old_string' occurs {count} times in {path}; include more context to "
                "make it unique, or set replace_all to true"
            )
        updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
        if crlf:
            updated = updated.replace("\n", "\r\n")
        _store("Edit", path, real, updated, context, text)
    return (count if replace_all else 1), real
