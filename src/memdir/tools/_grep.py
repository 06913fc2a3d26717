"""Grep's two engines, and the path matching Grep and Glob share.

The engines give the same output byte for byte: ripgrep when an ``rg`` binary is
available, a pure-Python search otherwise. Each only *finds* the matching lines, in the
same files and the same order; filtering by ``glob``/``type``, skipping binary files and
formatting are done once, here, for both. ripgrep runs with ``--json`` so its answer is
data to parse rather than text whose layout depends on its flags.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import contextlib
import json
import os
import re
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from memdir.store._atomic import STATE_DIR_NAME
from memdir.tools._base import ToolError
from memdir.tools._files import MAX_LINE_CHARS

__all__ = [
    "Mode",
    "Query",
    "Report",
    "compile_glob",
    "file_filter",
    "printable",
    "search_python",
    "search_rg",
    "walk",
]

_OUTPUT_CAP = 20_000
# A NUL byte in the first 8 KiB marks a binary file (git looks at the first 8,000 bytes).
_BINARY_PROBE = 8192

Mode = Literal["content", "files_with_matches", "count"]
Line = tuple[int, str, bool]  # 1-based number, text, whether it matched (else context)


def _glob_regex(pattern: str) -> str:
    """``pattern`` as a regex source: ``*``/``?``/``[…]`` stay within one path segment,
    ``**`` spans segments, ``{a,b}`` is either, ``\\x`` is a literal ``x``."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        at_segment_start = i == 0 or pattern[i - 1] == "/"
        if pattern.startswith("**/", i) and at_segment_start:
            out.append("(?:.+/)?")
            i += 3
        elif pattern.startswith("**", i) and at_segment_start and i + 2 == n:
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            negate = body[0] in "!^"
            body = body[1:] if negate else body
            # Escaped so that "[", "&&", "--", "||", "~~" stay literal rather than being
            # read as (or warned about as) Python's possible future set syntax.
            body = "".join("\\" + ch if ch in "\\[&~|" else ch for ch in body)
            out.append("[" + ("^" if negate else "") + body.replace("--", "-\\-") + "]")
            i = end + 1
        elif c == "{" and (end := _closing_brace(pattern, i)) != -1:
            parts = _split_top_level(pattern[i + 1 : end])
            out.append("(?:" + "|".join(_glob_regex(p) for p in parts) + ")")
            i = end + 1
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


def _closing_brace(pattern: str, start: int) -> int:
    depth = 0
    for j in range(start, len(pattern)):
        depth += {"{": 1, "}": -1}.get(pattern[j], 0)
        if depth == 0:
            return j
    return -1


def _split_top_level(body: str) -> list[str]:
    parts, depth, last = [], 0, 0
    for j, c in enumerate(body):
        depth += {"{": 1, "}": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(body[last:j])
            last = j + 1
    return [*parts, body[last:]]


def compile_glob(tool: str, pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled to match a whole path; :class:`ToolError` if it cannot be."""
    try:
        return re.compile(_glob_regex(pattern) + r"\Z", re.DOTALL)
    except re.error as exc:
        raise ToolError(f"{tool}: invalid glob pattern {pattern!r}: {exc}") from None


def walk(root: str) -> Iterator[tuple[str, str]]:
    """Regular files below ``root`` as ``(path, relative posix path)``, depth first, each
    directory's entries in byte order of their names (ripgrep's ``--sort path``).
    ``.git`` entries, memdir's own ``.memdir`` state folders (cursors, locks, the trash: no
    memory) and symlinks are skipped; an unreadable directory is left out."""
    stack: list[tuple[Iterator[os.DirEntry[str]], str]] = [(_entries(root), "")]
    while stack:
        entries, prefix = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        if entry.name in (".git", STATE_DIR_NAME):
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                stack.append((_entries(entry.path), f"{prefix}{entry.name}/"))
            elif entry.is_file(follow_symlinks=False):
                yield entry.path, prefix + entry.name
        except OSError:
            continue


def _entries(directory: str) -> Iterator[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as it:
            listed = list(it)
    except OSError:
        return iter(())
    return iter(sorted(listed, key=lambda e: os.fsencode(e.name)))


def printable(text: str) -> str:
    """``text`` with undecodable file-name bytes shown as U+FFFD."""
    # File names that are not UTF-8 decode to lone surrogates, which no request can carry.
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _is_binary(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return b"\0" in handle.read(_BINARY_PROBE)
    except OSError:
        return True  # unreadable now: leave it out, as if it had never matched


@dataclass(frozen=True, kw_only=True)
class Query:
    """One Grep call, checked and resolved."""

    pattern: str
    regex: re.Pattern[str]
    root: str
    root_is_dir: bool
    mode: Mode
    ignore_case: bool
    multiline: bool
    before: int
    after: int
    type_globs: tuple[str, ...]
    wanted: Callable[[str], bool]
    """Whether a file found below a directory root (relative posix path) is searched."""


class Report:
    """The formatted output, built one file at a time in search order."""

    def __init__(self, mode: Mode, *, numbers: bool, separators: bool, head_limit: int | None):
        self._mode, self._numbers, self._separators = mode, numbers, separators
        self._head_limit = head_limit
        self._lines: list[str] = []
        self._size = 0
        self._cut: str | None = None

    def add(self, path: str, lines: Sequence[Line]) -> bool:
        """Add one file's lines; ``True`` once the output is full and the search can stop."""
        if self._mode == "files_with_matches":
            self._emit(path)
        elif self._mode == "count":
            self._emit(f"{path}:{sum(1 for _, _, matched in lines if matched)}")
        else:
            previous = -1
            for number, text, matched in lines:
                # "--" between groups that are not adjacent, as grep and ripgrep print it.
                if self._separators and self._lines and number != previous + 1:
                    self._emit("--")
                mark = ":" if matched else "-"
                shown = text.removesuffix("\r")
                if len(shown) > MAX_LINE_CHARS:
                    shown = shown[:MAX_LINE_CHARS] + " … (line cut)"
                where = f"{path}{mark}{number}" if self._numbers else path
                self._emit(f"{where}{mark}{shown}")
                previous = number
        return self._cut is not None

    def _emit(self, line: str) -> None:
        if self._cut is not None:
            return
        if self._head_limit is not None and len(self._lines) == self._head_limit:
            self._cut = f"(head_limit {self._head_limit} reached; more results not shown)"
        elif self._size + len(line) + 1 > _OUTPUT_CAP:
            self._cut = f"(output cut at {_OUTPUT_CAP:,} characters; narrow the search)"
        else:
            self._lines.append(line)
            self._size += len(line) + 1

    def render(self) -> str:
        """The text the model sees."""
        if not self._lines:
            return "No matches found"
        text = "\n".join(self._lines)
        return printable(text if self._cut is None else f"{text}\n\n{self._cut}")


def _matching_lines(text: str, q: Query, *, first_only: bool) -> list[Line]:
    # A final newline ends the last line; it does not start a new one.
    lines = text.removesuffix("\n").split("\n") if text else []
    matched: set[int] = set()
    if q.multiline:
        newlines = [m.start() for m in re.finditer("\n", text)]
        for m in q.regex.finditer(text):
            first = bisect.bisect_left(newlines, m.start())
            if first >= len(lines):
                continue  # an empty match after the final newline, on no line
            last = bisect.bisect_left(newlines, max(m.start(), m.end() - 1))
            matched.update(range(first, min(last, len(lines) - 1) + 1))
            if first_only:
                break
    else:
        for index, line in enumerate(lines):
            if q.regex.search(line):
                matched.add(index)
                if first_only:
                    break
    shown = set(matched)
    for index in matched:
        shown.update(range(max(0, index - q.before), min(len(lines), index + q.after + 1)))
    return [(i + 1, lines[i], i in matched) for i in sorted(shown)]


def search_python(q: Query, report: Report) -> None:
    """Search with Python's ``re``, adding each file's lines to ``report`` in order."""
    found = walk(q.root) if q.root_is_dir else iter([(q.root, "")])
    for path, rel in found:
        if q.root_is_dir and not q.wanted(rel):
            continue
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        if b"\0" in data[:_BINARY_PROBE]:
            continue
        text = data.decode("utf-8", errors="replace")
        lines = _matching_lines(text, q, first_only=q.mode == "files_with_matches")
        if lines and report.add(path, lines):
            return


def _rg_args(rg: str, q: Query) -> list[str]:
    # Every behaviour that a config file, an ignore file or a default could change is
    # pinned; binary detection is off (--text) because it is done in Python for both.
    args = [rg, "--json", "--no-config", "--hidden", "--no-ignore", "--no-follow"]
    args += [
        "--glob",
        "!.git",
        "--glob",
        f"!{STATE_DIR_NAME}",
        "--sort",
        "path",
        "--text",
        "--encoding",
        "none",
    ]
    args += ["--no-messages", "--engine", "default"]
    args.append("--ignore-case" if q.ignore_case else "--case-sensitive")
    if q.multiline:
        args += ["--multiline", "--multiline-dotall"]
    if q.mode == "files_with_matches":
        args += ["--max-count", "1"]
    elif q.mode == "content":
        args += ["--before-context", str(q.before), "--after-context", str(q.after)]
    if q.root_is_dir and q.type_globs:
        # Only a pre-filter to spare ripgrep the reading; q.wanted decides.
        args += [a for g in q.type_globs for a in ("--type-add", f"memdir:{g}")]
        args += ["--type", "memdir"]
    return [*args, "--regexp", q.pattern, "--", q.root]


def _json_text(value: Mapping[str, str], *, path: bool = False) -> str:
    if "text" in value:
        return value["text"]
    raw = base64.b64decode(value["bytes"])  # ripgrep's form for what is not UTF-8
    return os.fsdecode(raw) if path else raw.decode("utf-8", errors="replace")


async def search_rg(rg: str, q: Query, report: Report) -> None:
    """Search with the ripgrep binary ``rg``, adding each file's lines to ``report`` in order.

    ripgrep is stopped as soon as the report is full. Raises :class:`ToolError` when
    ripgrep refuses the search (a pattern its regex syntax does not accept).
    """
    try:
        proc = await asyncio.create_subprocess_exec(
            *_rg_args(rg, q),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise ToolError(f"Grep: cannot run ripgrep ({rg}): {exc}") from None
    assert proc.stdout is not None
    done = summary = ended = False
    lines: dict[int, tuple[str, bool]] = {}
    pending = bytearray()
    try:
        while not done:
            chunk = await proc.stdout.read(1 << 16)
            if not chunk:
                ended = True
                break
            pending += chunk
            cut = pending.rfind(b"\n")
            complete = pending[:cut].split(b"\n") if cut >= 0 else []
            del pending[: cut + 1]
            for raw in complete:
                event = json.loads(raw)
                kind, data = event["type"], event["data"]
                if kind in ("match", "context"):
                    pieces = _json_text(data["lines"]).removesuffix("\n").split("\n")
                    for k, piece in enumerate(pieces):
                        number = data["line_number"] + k
                        was_match = lines.get(number, ("", False))[1]
                        lines[number] = (piece, was_match or kind == "match")
                elif kind == "end":
                    path = _json_text(data["path"], path=True)
                    found, lines = _near_matches(lines, q.before, q.after), {}
                    rel = path[len(q.root) + 1 :]
                    if (q.root_is_dir and not q.wanted(rel)) or not found:
                        continue
                    if not await asyncio.to_thread(_is_binary, path) and report.add(path, found):
                        done = True
                        break
                elif kind == "summary":
                    summary = True
    finally:
        if not ended:
            # Stopped early or cancelled. os.kill, not proc.kill(): that one polls, and
            # reaping the child there races asyncio's child watcher doing the same.
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        # Reads what is left in both pipes and reaps ripgrep, so no transport is left open.
        _, err = await proc.communicate()
    if not done and not summary and proc.returncode not in (0, 1):
        message = " ".join(err.decode("utf-8", errors="replace").split()) or "no reason given"
        raise ToolError(f"Grep: ripgrep rejected the search: {message}")


def _near_matches(lines: Mapping[int, tuple[str, bool]], before: int, after: int) -> list[Line]:
    # ripgrep prints the leading context of an empty match after the final newline, a
    # match it then does not report; keep only context that belongs to a reported match.
    matches = sorted(n for n, (_, matched) in lines.items() if matched)
    kept: list[Line] = []
    for number in sorted(lines):
        text, matched = lines[number]
        i = bisect.bisect_left(matches, number - after)
        if matched or (i < len(matches) and matches[i] <= number + before):
            kept.append((number, text, matched))
    return kept


def file_filter(glob: str | None, type_globs: tuple[str, ...]) -> Callable[[str], bool]:
    """Whether a file below the search root (its relative posix path) is to be searched."""
    # Like ripgrep's --glob: a glob with a "/" is matched against the path below the
    # search root, one without against the file name; a leading "!" excludes.
    alternatives = "|".join(map(_glob_regex, type_globs))
    types = re.compile(f"(?:{alternatives})\\Z", re.DOTALL) if type_globs else None
    negate = glob is not None and glob.startswith("!")
    body = (glob or "")[1 if negate else 0 :]
    anchored = "/" in body
    matcher = compile_glob("Grep", body.lstrip("/")) if body else None

    def wanted(rel: str) -> bool:
        name = rel.rsplit("/", 1)[-1]
        if types is not None and not types.match(name):
            return False
        return matcher is None or bool(matcher.match(rel if anchored else name)) != negate

    return wanted
