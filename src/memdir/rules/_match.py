"""Which rules a tool call breaks.

A Bash rule's ``match`` is a program and the words it must be given: ``npm`` matches every
npm command, ``npm install`` one that is given ``install``, with options and their values
allowed in between (``npm --silent install``). The program is compared by name, so
``/usr/bin/npm`` is ``npm``; the command is taken apart by :mod:`memdir.rules._shell`, so
quoting, chains, pipelines, substitutions and wrappers do not hide it. A file rule's
``match`` is a glob over the path relative to the project: ``*`` stays within a folder,
``**`` crosses folders, and a glob without ``/`` matches a file name in any folder. A Bash
rule with ``require`` fires on a matching command that lacks one of its words.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import posixpath
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memdir.rules._rule import FILE_TOOLS, Rule
from memdir.rules._shell import Glob, Word, invocations, program_name

__all__ = ["Hit", "carries", "check_tool_call", "command_matches", "path_matches"]


@dataclass(frozen=True, kw_only=True)
class Hit:
    """A rule that a tool call breaks, and what in the call broke it."""

    rule: Rule
    """The rule."""
    stopped: str
    """The command or path it matched (for the record and the message)."""


@functools.lru_cache(maxsize=1024)
def _pattern(match: str) -> tuple[str, ...]:
    return tuple(shlex.split(match))


def _word_is(word: Word, wanted: str) -> bool:
    if word is None:
        return False
    if isinstance(word, Glob):
        return fnmatch.fnmatchcase(wanted, word)
    return word == wanted


def _program_is(word: Word, wanted: str) -> bool:
    if word is None:
        return False
    name = program_name(word)
    return _word_is(Glob(name) if isinstance(word, Glob) else name, wanted)


def command_matches(match: str, argv: Sequence[Word]) -> bool:
    """Whether the command ``argv`` is one ``match`` names: same program, and the pattern's
    words in order among its arguments."""
    pattern = _pattern(match)
    if not pattern or not argv or not _program_is(argv[0], pattern[0]):
        return False
    wanted = iter(pattern[1:])
    need = next(wanted, None)
    for word in argv[1:]:
        if need is None:
            break
        if _word_is(word, need):
            need = next(wanted, None)
    return need is None


def carries(argv: Sequence[Word], require: str) -> bool:
    """Whether the command ``argv`` carries every word of ``require``: a long option as
    itself or with its value (``--maxfail=1``), a one-letter option alone or among
    others (``-x`` in ``-xvs``), anything else as itself."""
    given = [w for w in argv[1:] if w is not None]
    for wanted in _pattern(require):
        if wanted.startswith("--"):
            found = any(w == wanted or w.startswith(wanted + "=") for w in given)
        elif len(wanted) == 2 and wanted[0] == "-" and wanted[1].isalnum():
            found = any(
                w == wanted or (w.startswith("-") and not w.startswith("--") and wanted[1] in w[1:])
                for w in given
            )
        else:
            found = wanted in given
        if not found:
            return False
    return True


@functools.lru_cache(maxsize=1024)
def _glob_regex(glob: str) -> re.Pattern[str]:
    out: list[str] = []
    index = 0
    while index < len(glob):
        char = glob[index]
        if glob.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
            continue
        if glob.startswith("**", index):
            out.append(".*")
            index += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        else:
            out.append(re.escape(char))
        index += 1
    return re.compile("".join(out), re.DOTALL)


def path_matches(glob: str, path: str, cwd: str | None) -> bool:
    """Whether the file ``path`` (absolute, or relative to ``cwd``) is one ``glob`` names."""
    base = cwd or os.getcwd()
    full = posixpath.normpath(posixpath.join(base, path))
    candidates = [full]
    relative = posixpath.relpath(full, base) if full.startswith(base.rstrip("/") + "/") else None
    if relative is not None:
        candidates.append(relative)
    pattern = glob.strip()
    if pattern.startswith("./"):
        pattern = pattern[2:]
    if pattern.endswith("/"):
        pattern += "**"
    if "/" not in pattern:
        return _glob_regex(pattern).fullmatch(posixpath.basename(full)) is not None
    regex = _glob_regex(pattern.lstrip("/") if not pattern.startswith("/") else pattern)
    return any(regex.fullmatch(c) for c in candidates)


def _file_paths(tool_input: Mapping[str, Any]) -> list[str]:
    paths = [tool_input.get(key) for key in ("file_path", "notebook_path", "path")]
    return [p for p in paths if isinstance(p, str) and p]


def check_tool_call(
    rules: Iterable[Rule], tool_name: str, tool_input: Mapping[str, Any], cwd: str | None
) -> list[Hit]:
    """The switched-on rules that the call ``tool_name(tool_input)`` breaks, in order."""
    hits: list[Hit] = []
    commands: list[list[Word]] | None = None
    command = tool_input.get("command")
    for rule in rules:
        if not rule.enabled:
            continue
        if rule.tool == "Bash" and tool_name == "Bash" and isinstance(command, str):
            if commands is None:
                commands = invocations(command)
            if any(
                command_matches(rule.match, argv)
                and (rule.require is None or not carries(argv, rule.require))
                for argv in commands
            ):
                hits.append(Hit(rule=rule, stopped=command))
        elif rule.tool == "Edit" and tool_name in FILE_TOOLS:
            for path in _file_paths(tool_input):
                if path_matches(rule.match, path, cwd):
                    hits.append(Hit(rule=rule, stopped=path))
                    break
    return hits
