"""Grep and Glob: find text and files, with Claude Code's names and input fields.

The tools check their input and resolve paths here; the searching itself (both Grep
engines, the glob matching and the directory walk) is in :mod:`memdir.tools._grep`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import os
import re
import shutil
import stat
import sysconfig
from collections.abc import Mapping
from typing import Any, Literal

from memdir.errors import UsageError
from memdir.tools._base import ToolContext, ToolError, ToolOutput
from memdir.tools._effects import Effect, ReadsPath, input_object, locate
from memdir.tools._files import absolute_cwd, check_input, object_schema, prop, resolve_path
from memdir.tools._grep import (
    Query,
    Report,
    compile_glob,
    file_filter,
    printable,
    search_python,
    search_rg,
    walk,
)

__all__ = ["FILE_TYPES", "GlobTool", "GrepTool", "search_effects"]

FILE_TYPES: dict[str, tuple[str, ...]] = {
    "md": ("*.md", "*.markdown", "*.mdx", "*.mdown", "*.mdwn", "*.mkd", "*.mkdn"),
    "py": ("*.py", "*.pyi"),
    "js": ("*.js", "*.jsx", "*.mjs", "*.cjs"),
    "ts": ("*.ts", "*.tsx", "*.mts", "*.cts"),
    "json": ("*.json",),
    "yaml": ("*.yaml", "*.yml"),
    "txt": ("*.txt",),
    "toml": ("*.toml",),
}
"""The names Grep's ``type`` accepts, with the file-name globs each stands for."""

# 100 paths: the most Claude Code's Glob returns.
_GLOB_LIMIT = 100
_MODES = ("content", "files_with_matches", "count")
_META = frozenset("*?[{\\")


def find_rg() -> str | None:
    """The ripgrep binary ``GrepTool`` uses by default, or ``None``."""
    return _find_rg(os.environ.get("PATH", os.defpath))


@functools.lru_cache(maxsize=8)
def _find_rg(search_path: str) -> str | None:
    # Looked up once per PATH: the extractor builds its tools on the event loop every run,
    # and the lookup is a dozen blocking stat calls.
    # The `rg` extra installs ripgrep beside the interpreter, which need not be on PATH.
    return shutil.which("rg", path=search_path) or shutil.which(
        "rg", path=sysconfig.get_path("scripts")
    )


def _root(tool: str, raw: str, cwd: str) -> tuple[str, os.stat_result]:
    # Shown as the caller spelled it, tidied; reading is allowed anywhere, so folding a
    # "link/.." as text here cannot let anything out (writes resolve like the kernel).
    root = os.path.normpath(resolve_path(tool, "path", raw, cwd))
    try:
        return root, os.stat(root)
    except FileNotFoundError:
        raise ToolError(f"{tool}: path does not exist: {root}") from None
    except OSError as exc:
        raise ToolError(f"{tool}: cannot access {root}: {exc.strerror or exc}") from None


_GREP_SCHEMA = object_schema(
    {
        "pattern": prop("string", "The regular expression to look for."),
        "path": prop("string", "File or directory to search (default: working dir).", minLength=1),
        "glob": prop(
            "string",
            'Only files whose name matches this glob, e.g. "*.md" or "*.{ts,tsx}"; a glob '
            "with a / is matched against the path below `path`.",
            minLength=1,
        ),
        "output_mode": prop(
            "string",
            '"content": the matching lines; "files_with_matches" (default): the files; '
            '"count": matching lines per file.',
            enum=list(_MODES),
        ),
        "-i": prop("boolean", "Ignore case."),
        "-n": prop("boolean", "Number the lines in content mode (default true)."),
        "-A": prop("integer", "Lines to show after each match (content mode).", minimum=0),
        "-B": prop("integer", "Lines to show before each match (content mode).", minimum=0),
        "-C": prop("integer", "Lines to show before and after each match.", minimum=0),
        "type": prop("string", "Only files of this type.", enum=list(FILE_TYPES)),
        "head_limit": prop("integer", "Show only the first N lines of the output.", minimum=1),
        "multiline": prop("boolean", "Let matches span lines; . then matches newlines too."),
    },
    ["pattern"],
)


_SHORT_GREP_SCHEMA = object_schema(
    {
        "pattern": _GREP_SCHEMA["properties"]["pattern"],
        "path": prop("string", "Folder (default: the working directory).", minLength=1),
        "-i": _GREP_SCHEMA["properties"]["-i"],
    },
    ["pattern"],
)


def search_effects(
    tool: str, tool_input: object, cwd: str | os.PathLike[str] | None
) -> tuple[Effect, ...]:
    """Grep's and Glob's effect: they read below ``path`` (default: the working directory),
    and Glob below the folder its pattern starts with (``notes/*.md``, ``/abs/dir/*``),
    which it walks from instead: that folder is judged like any path read."""
    given = input_object(tool, tool_input)
    if not isinstance(given, Mapping):
        return (given,)
    where = locate(given.get("path", "."), cwd)
    pattern = given.get("pattern")
    if tool != "Glob" or where is None or not isinstance(pattern, str) or "\0" in pattern:
        return (ReadsPath(where),)
    start = _glob_start(where, pattern)
    return (ReadsPath(where),) if start == where else (ReadsPath(where), ReadsPath(start))


def _glob_start(base: str, pattern: str) -> str:
    """The folder a Glob of ``pattern`` below ``base`` walks from: the pattern's leading
    segments without wildcards, so ``notes/*.md`` does not walk all of ``base``."""
    parts = os.path.expanduser(pattern).split("/")
    fixed = next((i for i, part in enumerate(parts) if _META & set(part)), len(parts))
    prefix = "/".join(parts[:fixed]) or ("/" if pattern.startswith("/") else "")
    return os.path.join(base, prefix) if prefix else base


class GrepTool:
    """``Grep``: search file contents with a regular expression.

    ``engine`` picks ripgrep (``"rg"``), the pure-Python search (``"python"``) or ripgrep
    when one is found (``"auto"``); ``rg_path`` names the binary instead of looking on
    ``PATH`` and beside the interpreter. Both engines give the same output.
    """

    name = "Grep"

    def __init__(
        self,
        cwd: str | os.PathLike[str],
        *,
        engine: Literal["auto", "rg", "python"] = "auto",
        rg_path: str | None = None,
    ) -> None:
        if engine not in ("auto", "rg", "python"):
            raise UsageError(f"engine must be 'auto', 'rg' or 'python', got {engine!r}")
        self._cwd = absolute_cwd(cwd)
        self._rg = None if engine == "python" else rg_path or find_rg()
        if engine == "rg" and self._rg is None:
            raise UsageError("engine='rg' needs ripgrep, and no rg binary was found")

    @property
    def engine(self) -> Literal["rg", "python"]:
        """The engine this tool searches with."""
        return "python" if self._rg is None else "rg"

    def definition(self) -> dict[str, Any]:
        """The tool as the model sees it."""
        return {
            "name": self.name,
            "description": (
                "Search file contents with a regular expression (ripgrep syntax). Hidden "
                "files are searched; .git directories and binary files are not. Narrow the "
                "search with path, glob or type; output_mode picks what comes back."
            ),
            "input_schema": copy.deepcopy(_GREP_SCHEMA),
        }

    def short_definition(self) -> dict[str, Any]:
        """The tool as memdir's own memory agent is shown it: a search of the files below
        its working directory (the memory directory) for the files that match. Sent on
        every run of that agent, it costs a sixth of :meth:`definition`; a call is checked
        against the whole schema all the same, so the other inputs still work."""
        return {
            "name": self.name,
            "description": "The files whose text matches, below the working directory or path.",
            "input_schema": copy.deepcopy(_SHORT_GREP_SCHEMA),
        }

    def effects(self, tool_input: object) -> tuple[Effect, ...]:
        """It reads below ``path``, taken against this tool's working directory."""
        return search_effects(self.name, tool_input, self._cwd)

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        """Run the search and return its formatted output."""
        args = check_input(self.name, _GREP_SCHEMA, tool_input)
        q = await asyncio.to_thread(self._query, args)
        context_lines = q.mode == "content" and (q.before > 0 or q.after > 0)
        report = Report(
            q.mode,
            numbers=args.get("-n", True),
            separators=context_lines,
            head_limit=args.get("head_limit"),
        )
        if self._rg is None:
            await asyncio.to_thread(search_python, q, report)
        else:
            await search_rg(self._rg, q, report)
        return ToolOutput(content=report.render())

    def _query(self, args: Mapping[str, Any]) -> Query:
        pattern: str = args["pattern"]
        multiline: bool = args.get("multiline", False)
        ignore_case: bool = args.get("-i", False)
        # ripgrep refuses a newline outside multiline mode; refuse it in both engines.
        if not multiline and ("\n" in pattern or "\\n" in pattern):
            raise ToolError("Grep: the pattern contains a newline; set multiline to true")
        flags = (re.IGNORECASE if ignore_case else 0) | (re.M | re.S if multiline else 0)
        # FutureWarning is raised rather than printed where warnings are errors ("[[a]").
        try:
            regex = re.compile(pattern, flags)
        except (re.error, OverflowError, RecursionError, FutureWarning) as exc:
            raise ToolError(f"Grep: invalid regular expression {pattern!r}: {exc}") from None
        root, st = _root(self.name, args.get("path", "."), self._cwd)
        if not stat.S_ISDIR(st.st_mode) and not stat.S_ISREG(st.st_mode):
            raise ToolError(f"Grep: {root} is neither a regular file nor a directory")
        around: int = args.get("-C", 0)
        type_globs = FILE_TYPES[args["type"]] if "type" in args else ()
        return Query(
            pattern=pattern,
            regex=regex,
            root=root,
            root_is_dir=stat.S_ISDIR(st.st_mode),
            mode=args.get("output_mode", "files_with_matches"),
            ignore_case=ignore_case,
            multiline=multiline,
            before=args.get("-B", around),
            after=args.get("-A", around),
            type_globs=type_globs,
            wanted=file_filter(args.get("glob"), type_globs),
        )


_GLOB_SCHEMA = object_schema(
    {
        "pattern": prop(
            "string",
            "Glob matched against paths below `path`: * and ? stay within a directory, ** "
            'spans directories, {a,b} is either; e.g. "**/*.md".',
            minLength=1,
        ),
        "path": prop("string", "Directory to search (default: working dir).", minLength=1),
    },
    ["pattern"],
)


class GlobTool:
    """``Glob``: find files by path pattern, newest first."""

    name = "Glob"

    def __init__(self, cwd: str | os.PathLike[str]) -> None:
        self._cwd = absolute_cwd(cwd)

    def definition(self) -> dict[str, Any]:
        """The tool as the model sees it."""
        return {
            "name": self.name,
            "description": (
                "Find files whose path matches a glob pattern, hidden files included. "
                f"Returns absolute paths, most recently modified first, at most {_GLOB_LIMIT}."
            ),
            "input_schema": copy.deepcopy(_GLOB_SCHEMA),
        }

    def effects(self, tool_input: object) -> tuple[Effect, ...]:
        """It reads below ``path``, taken against this tool's working directory."""
        return search_effects(self.name, tool_input, self._cwd)

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        """List the matching files."""
        args = check_input(self.name, _GLOB_SCHEMA, tool_input)
        paths, total = await asyncio.to_thread(self._glob, args.get("path", "."), args["pattern"])
        if not paths:
            return ToolOutput(content="No files found")
        text = "\n".join(map(printable, paths))
        if total > len(paths):
            text += (
                f"\n(more results truncated: {total} files match, the newest {len(paths)} shown)"
            )
        return ToolOutput(content=text)

    def _glob(self, raw_path: str, raw_pattern: str) -> tuple[list[str], int]:
        base, st = _root(self.name, raw_path, self._cwd)
        if "\0" in raw_pattern:
            raise ToolError("Glob: 'pattern' must not contain NUL characters")
        pattern = os.path.expanduser(raw_pattern)
        if not stat.S_ISDIR(st.st_mode):
            raise ToolError(f"Glob: path is not a directory: {base}")
        parts = pattern.split("/")
        fixed = next((i for i, part in enumerate(parts) if _META & set(part)), len(parts))
        start = os.path.abspath(_glob_start(base, pattern))
        if fixed == len(parts):
            found = [start] if os.path.isfile(start) else []
        else:
            regex = compile_glob(self.name, "/".join(parts[fixed:]))
            found = [path for path, rel in walk(start) if regex.match(rel)]
        stamped: list[tuple[int, str]] = []
        for path in found:
            with contextlib.suppress(OSError):  # gone since it was listed
                stamped.append((-os.stat(path).st_mtime_ns, path))
        stamped.sort()
        return [path for _, path in stamped[:_GLOB_LIMIT]], len(stamped)
