"""Anthropic's client-side ``memory`` tool, backed by a memdir memory directory.

The model is trained on this tool: it sees a virtual ``/memories`` folder and sends
``view``, ``create``, ``str_replace``, ``insert``, ``delete`` and ``rename`` commands (the
shapes are those of the SDK's ``BetaMemoryTool20250818*Command`` types). Here each
virtual path is mapped onto the memory directory, so an agent built on that tool shares
memdir's storage with Claude Code and memdir's own agent.

A virtual path is checked twice: lexically (it must be ``/memories`` or below it, with no
``..``, hidden names, backslashes, percent-escapes, NUL or control characters), then the
mapped real path must resolve inside the directory the way the operating system would
(:meth:`~memdir.store.MemoryDir.is_memory_path`: symlinks followed, failing closed). Writes
are atomic, made under the file's lock, and judged on their final text by
:func:`~memdir.permissions.memory_write_guard`, so no credential reaches ``team/``. A
Markdown file with frontmatter is stored as Claude Code stores it (see
:class:`~memdir.tools.MemoryFiles`), so a memory is the same whichever tool saved it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import posixpath
import re
import shutil
import stat
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from memdir.errors import StoreError
from memdir.permissions import PermissionDecision, memory_write_guard
from memdir.store import MemoryDir, MemoryFormat, atomic_write, file_lock
from memdir.tools._base import MemoryFiles, ToolContext, ToolError, ToolOutput

__all__ = ["MEMORY_TOOL_TYPE", "VIRTUAL_ROOT", "MemoryTool", "memory_tool_decision"]

# The tool type the Messages API knows (anthropic SDK: ``BetaMemoryTool20250818Param``).
MEMORY_TOOL_TYPE = "memory_20250818"
VIRTUAL_ROOT = "/memories"
"""The folder the model sees; ``/memories/x.md`` is ``<memory_dir>/x.md``."""

_COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
_PATH_KEYS = {"rename": ("old_path", "new_path")}
_TEXT_KEYS = {"create": "file_text", "str_replace": "new_str", "insert": "insert_text"}
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# 6 digits and a tab: the numbering of the SDK's own view and of Claude Code's Read.
_NUMBER_WIDTH = 6
_SNIPPET_CONTEXT = 2


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
        raise ToolError(f"{shown}: memory paths start with '{VIRTUAL_ROOT}/'")
    parts = [p for p in path[len(VIRTUAL_ROOT) :].split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ToolError(f"{shown}: '..' is not allowed in memory paths")
    if any(p.startswith(".") for p in parts):
        raise ToolError(f"{shown}: hidden names (starting with '.') are not used for memories")
    return parts


def _map_path(md: MemoryDir, path: object, *, allow_root: bool) -> tuple[str, Path]:
    """The normalised virtual path and the real path it stands for; raises ToolError."""
    parts = _virtual_parts(path)
    virtual = posixpath.join(VIRTUAL_ROOT, *parts)
    if not parts:
        if not allow_root:
            raise ToolError(
                f"{VIRTUAL_ROOT} itself cannot be created, changed, deleted or renamed; "
                "name a path inside it"
            )
        return virtual, md.root
    real = md.root.joinpath(*parts)
    if not md.is_memory_path(real):
        raise ToolError(f"{virtual} resolves outside {VIRTUAL_ROOT} (through a symlink)")
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


def _human_size(size: int) -> str:
    if size < 1024:
        return f"{size}B"
    value = float(size)
    for unit in ("K", "M"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f}{unit}"
    return f"{value / 1024:.1f}G"


def _read_text(real: Path, virtual: str) -> str:
    try:
        return real.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ToolError(f"{virtual} does not exist") from None
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
        raise ToolError(f"{virtual} does not exist")
    if not real.is_file():
        raise ToolError(f"{virtual} is not a file")


class MemoryTool:
    """Anthropic's client-side ``memory`` tool, storing its files in ``memory_dir``.

    ``allow_private_secrets`` lets a credential be written outside ``team/``; under
    ``team/``, shared with collaborators, one is always refused.

    Memory files are stored the way the run's :class:`~memdir.tools.ToolContext` says
    (its ``memory_files``), the same rule Write and Edit follow. Without one, ``format``
    decides: ``"current"`` stores them in Claude Code's current layout, stamped with the
    time (``clock``) and ``session_id`` when known; ``"2.1.88"`` or ``None`` (the
    default) stores them exactly as written.
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
            timing = {} if clock is None else {"clock": clock}
            self._files = MemoryFiles(
                memory_dir=self.memory_dir, format=format, session_id=session_id, **timing
            )

    def definition(self) -> dict[str, Any]:
        """The tool entry for ``tools=[...]``: the API supplies its schema and description."""
        return {"type": MEMORY_TOOL_TYPE, "name": self.name}

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        """Carry out one command; a command that cannot be done raises :class:`ToolError`."""
        if not isinstance(tool_input, Mapping):
            raise ToolError(f"input must be a JSON object, got {type(tool_input).__name__}")
        command = tool_input.get("command")
        if command not in _COMMANDS:
            raise ToolError(f"unknown command {command!r}; expected one of: {', '.join(_COMMANDS)}")
        handler = getattr(self, f"_{command}")
        try:
            result: ToolOutput = await asyncio.to_thread(handler, tool_input, context)
        except StoreError as exc:
            raise ToolError(str(exc)) from exc
        except OSError as exc:
            raise ToolError(f"{command} failed: {exc.strerror or exc}") from exc
        except ValueError as exc:  # e.g. a name that the filesystem cannot encode
            raise ToolError(f"{command} failed: {exc}") from exc
        return result

    # Each command runs in a worker thread: the filesystem calls below block.

    def _prepare(self, real: Path, text: str, context: ToolContext) -> str:
        """The text to store at ``real``: a memory file stamped as Claude Code does."""
        files = context.memory_files if context.memory_files is not None else self._files
        return text if files is None else files.prepare(real, text)

    def _check(self, real: Path, text: str, context: ToolContext) -> None:
        """Refuse a write whose final text may not be stored at ``real``."""
        for guard in (self._guard, context.write_guard):
            refusal = guard(real, text) if guard is not None else None
            if refusal is not None:
                raise ToolError(refusal)

    def _view(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        virtual, real = _map_path(self.memory_dir, tool_input.get("path"), allow_root=True)
        if real == self.memory_dir.root and not real.exists():
            return ToolOutput(content=f"{VIRTUAL_ROOT} is empty")
        if real.is_dir():
            return ToolOutput(content=self._listing(virtual, real))
        _require_file(real, virtual)
        lines = _lines(_read_text(real, virtual))
        view_range = tool_input.get("view_range")
        first, last = 1, len(lines)
        if view_range is not None:
            if (
                not isinstance(view_range, list)
                or len(view_range) != 2
                or not all(isinstance(n, int) and not isinstance(n, bool) for n in view_range)
            ):
                raise ToolError("'view_range' must be two line numbers: [start, end]")
            first, end = view_range
            if not 1 <= first <= max(len(lines), 1):
                raise ToolError(f"view_range start {first} is not a line of {virtual} (1-{last})")
            if end != -1 and end < first:
                raise ToolError(f"view_range end {end} is before its start {first}")
            last = last if end == -1 else min(end, last)
        if not lines:
            return ToolOutput(content=f"{virtual} is empty")
        body = _numbered(lines[first - 1 : last], first)
        return ToolOutput(content=f"{virtual}, lines {first}-{last} of {len(lines)}:\n{body}")

    def _listing(self, virtual: str, real: Path) -> str:
        rows = [f"{_human_size(real.stat().st_size)}\t{virtual}"]
        for rel, size, is_dir in self._walk(real, "", 1):
            rows.append(f"{_human_size(size)}\t{virtual.rstrip('/')}/{rel}{'/' if is_dir else ''}")
        header = f"{virtual}: files and folders two levels deep, hidden ones left out"
        return "\n".join([header, *rows])

    def _walk(self, directory: Path, prefix: str, depth: int) -> Iterator[tuple[str, int, bool]]:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            return
        for name in names:
            entry = directory / name
            # Entries whose link leads out (or loops) are not shown: not even their names.
            if name.startswith(".") or not self.memory_dir.is_memory_path(entry):
                continue
            try:
                st = entry.stat()
            except OSError:
                continue
            is_dir = stat.S_ISDIR(st.st_mode)
            yield f"{prefix}{name}", st.st_size, is_dir
            if is_dir and depth < 2 and not entry.is_symlink():
                yield from self._walk(entry, f"{prefix}{name}/", depth + 1)

    def _create(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        virtual, real = _map_path(self.memory_dir, tool_input.get("path"), allow_root=False)
        text = self._prepare(real, _arg(tool_input, "file_text", str), context)
        # Checked before the lock, which creates the parent folders: a refusal leaves none.
        self._check(real, text, context)
        exists = (
            f"{virtual} already exists; change it with str_replace or insert, or delete it first"
        )
        if os.path.lexists(real):
            raise ToolError(exists)
        with file_lock(real):
            if os.path.lexists(real):
                raise ToolError(exists)
            atomic_write(real, text)
        return ToolOutput(content=f"Created {virtual}", written=real)

    def _str_replace(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        virtual, real = _map_path(self.memory_dir, tool_input.get("path"), allow_root=False)
        old = _arg(tool_input, "old_str", str)
        new = _arg(tool_input, "new_str", str, default="")
        if not old:
            raise ToolError("'old_str' must not be empty")
        _require_file(real, virtual)
        with file_lock(real):
            text = _read_text(real, virtual)
            count = text.count(old)
            if count != 1:
                where = ""
                if count:
                    starts = [m.start() for m in re.finditer(re.escape(old), text)]
                    where = " (lines " + ", ".join(str(text.count("\n", 0, s) + 1) for s in starts)
                    where += "); include more context to make it unique"
                raise ToolError(f"old_str occurs {count} times in {virtual}, not once{where}")
            replaced = text.replace(old, new, 1)
            updated = self._prepare(real, replaced, context)
            self._check(real, updated, context)
            atomic_write(real, updated)
        line = text.count("\n", 0, text.index(old))
        if updated != replaced and line >= _header_lines(replaced):
            # Stamping rewrote the frontmatter above the edit: follow it down (or up).
            line += len(_lines(updated)) - len(_lines(replaced))
        lines = _lines(updated)
        start = max(0, line - _SNIPPET_CONTEXT)
        end = line + new.count("\n") + 1 + _SNIPPET_CONTEXT
        snippet = _numbered(lines[start:end], start + 1)
        return ToolOutput(content=f"Edited {virtual}; it now reads:\n{snippet}", written=real)

    def _insert(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        virtual, real = _map_path(self.memory_dir, tool_input.get("path"), allow_root=False)
        after = _arg(tool_input, "insert_line", int)
        added = _lines(_arg(tool_input, "insert_text", str)) or [""]
        _require_file(real, virtual)
        with file_lock(real):
            lines = _lines(_read_text(real, virtual))
            if not 0 <= after <= len(lines):
                raise ToolError(
                    f"insert_line {after} is out of range for {virtual}: use 0 (the top) "
                    f"to {len(lines)} (after the last line)"
                )
            updated = "\n".join([*lines[:after], *added, *lines[after:]]) + "\n"
            updated = self._prepare(real, updated, context)
            self._check(real, updated, context)
            atomic_write(real, updated)
        where = "at the top" if after == 0 else f"after line {after}"
        return ToolOutput(
            content=f"Inserted {len(added)} line(s) into {virtual} {where}", written=real
        )

    def _delete(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        virtual, real = _map_path(self.memory_dir, tool_input.get("path"), allow_root=False)
        try:
            st = os.lstat(real)
        except FileNotFoundError:
            raise ToolError(f"{virtual} does not exist") from None
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(real)  # never follows the symlinks inside it
            return ToolOutput(content=f"Deleted the folder {virtual} and everything in it")
        with file_lock(real):
            real.unlink()  # a symlink itself, not what it points at
        return ToolOutput(content=f"Deleted {virtual}")

    def _rename(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        old_virtual, old = _map_path(self.memory_dir, tool_input.get("old_path"), allow_root=False)
        new_virtual, new = _map_path(self.memory_dir, tool_input.get("new_path"), allow_root=False)
        if not os.path.lexists(old):
            raise ToolError(f"{old_virtual} does not exist")
        with contextlib.ExitStack() as locks:
            for target in sorted({old, new}):
                locks.enter_context(file_lock(target))
            if os.path.lexists(new):
                raise ToolError(f"{new_virtual} already exists; choose another name")
            # A file moved into team/ must pass the credential rule there too.
            for src, dst in self._moved_files(old, new):
                self._check(dst, src.read_text(encoding="utf-8", errors="replace"), context)
            new.parent.mkdir(parents=True, exist_ok=True)
            os.rename(old, new)
        return ToolOutput(content=f"Renamed {old_virtual} to {new_virtual}", written=new)

    @staticmethod
    def _moved_files(old: Path, new: Path) -> Iterator[tuple[Path, Path]]:
        if not old.is_dir() or old.is_symlink():
            if old.is_file():
                yield old, new
            return
        for folder, _dirs, files in os.walk(old):
            for name in files:
                src = Path(folder, name)
                if src.is_file() and not src.is_symlink():
                    yield src, new / src.relative_to(old)


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
    md = _as_memory_dir(memory_dir)
    if not isinstance(tool_input, Mapping):
        return PermissionDecision(
            behavior="deny", reason="invalid_input", message="memory needs a JSON object input."
        )
    command = tool_input.get("command")
    if command not in _COMMANDS:
        return PermissionDecision(
            behavior="deny",
            reason="invalid_input",
            message=f"memory: unknown command {command!r}; use one of {', '.join(_COMMANDS)}.",
        )
    keys = _PATH_KEYS.get(command, ("path",))
    try:
        reals = [_map_path(md, tool_input.get(key), allow_root=command == "view") for key in keys]
    except ToolError as exc:
        return PermissionDecision(
            behavior="deny",
            reason="outside_memory_dir",
            message=f"memory {command}: {exc}. Only paths inside {VIRTUAL_ROOT} can be used.",
        )
    text = tool_input.get(_TEXT_KEYS.get(command, ""))
    if isinstance(text, str):
        refusal = memory_write_guard(md, allow_private_secrets=allow_private_secrets)(
            reals[0][1], text
        )
        if refusal is not None:
            return PermissionDecision(
                behavior="deny", reason="secret", message=f"memory {command} {refusal}"
            )
    return PermissionDecision(behavior="allow")
