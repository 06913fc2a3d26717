"""Decide whether a shell command can only read.

The memory agent may look around with Bash (``ls``, ``grep``, ``git log``), but everything it
writes has to go through Write and Edit, which stay inside the memory directory. This gate is
what stops Bash from being a way around them: it says yes only when no part of the command can
create, change or delete a file, or start a program we have not vetted.

The command is parsed with tree-sitter-bash rather than matched against patterns, so quoting,
separators, substitutions and redirections are seen the way the shell sees them. The tree is then
walked against allowlists: of node types, of commands, and of flags for each command. The check
fails closed: a parse error, a node type it does not know, a non-string, a NUL byte or an
exception while checking all mean "not read-only".

For simplicity it also refuses some things that are harmless, because a memory agent does not
need them: ``if``/``for``/``while``/``case``, functions, heredocs and herestrings, background
jobs, comments, line continuations, ``$'...'`` quoting, ``sed`` and ``awk`` (their scripts can
write files), ``tail -f`` (it never ends), and ``git -C`` or ``cd`` together with ``git``.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from tree_sitter import Node

from memdir._bash import bash_parser

__all__ = ["is_read_only_command"]

_Check = Callable[[list[str]], bool]
"""Takes the arguments after the command name (unquoted), says whether they only read."""


# Characters that mean nothing to bash in an unquoted word. Left out on purpose: $ ` \ and
# quotes (expansion, escaping), * ? [ ] (globs), { } (brace expansion), ! and #, and every
# operator character. A ~ only ever expands to a directory name, which is harmless.
_PLAIN_WORD = re.compile(r"[\w./:@%+,=^~-]+")

# The gaps between the tokens we accepted may hold nothing else: a carriage return is part of
# a word to bash, and a backslash-newline would be skipped by tree-sitter but not by us.
_BLANKS = b" \t\n"

# (operator, file descriptor, target) of the only output redirections allowed.
_SAFE_REDIRECTS = {(">", fd, "/dev/null") for fd in (None, "1", "2")} | {
    ("&>", None, "/dev/null"),
    (">&", "2", "1"),
}

# The separator tokens each kind of statement list may contain, beside its statements.
# `|&` and `&` are missing on purpose: the agent needs neither, so neither is checked.
_SEPARATORS = {
    "program": frozenset({";"}),
    "list": frozenset({"&&", "||"}),
    "pipeline": frozenset({"|"}),
    "subshell": frozenset({"(", ")", ";"}),
    "compound_statement": frozenset({"{", "}", ";"}),
    "redirected_statement": frozenset(),  # a body, then its redirections
}


@dataclass
class _Scan:
    """What a walk over the tree found."""

    spans: list[tuple[int, int]] = field(default_factory=list)
    """Byte ranges of the tokens accepted, to prove nothing lies between them."""
    commands: list[list[str]] = field(default_factory=list)
    """Each simple command as argv, name first, quotes removed."""


def is_read_only_command(command: object) -> bool:
    """Say whether a Bash command line can only read.

    True only when every command in it, across ``;``, ``&&``, ``||``, newlines, pipes,
    subshells and ``{ ...; }`` groups, is a plain word on the allowlist with flags that do not
    write, and every redirection is to ``/dev/null``, from a file (``<``), or ``2>&1``.
    Anything else, including input that is not a string or does not parse, gives False.
    """
    try:
        return _check(command)
    except Exception:  # a checker that breaks must not let the command through
        return False


def _check(command: object) -> bool:
    if not isinstance(command, str) or "\x00" in command:
        return False
    source = command.encode("utf-8")
    root = bash_parser().parse(source).root_node
    if root.has_error or _has_broken_node(root):
        return False
    scan = _Scan()
    if root.type != "program" or not _statements(root, scan) or not scan.commands:
        return False
    if not _only_blanks_between(source, scan.spans):
        return False
    names = {argv[0] for argv in scan.commands}
    # Claude Code refuses this pair too: after `cd` into a directory the agent wrote, shaped
    # like a bare repository, git would obey that repository's config and run its programs.
    if {"cd", "git"} <= names:
        return False
    return all(_COMMANDS[argv[0]](argv[1:]) for argv in scan.commands)


def _has_broken_node(node: Node) -> bool:
    # has_error should already cover these; looking costs little and does not trust it.
    return node.is_error or node.is_missing or any(map(_has_broken_node, node.children))


def _only_blanks_between(source: bytes, spans: list[tuple[int, int]]) -> bool:
    position = 0
    for start, end in sorted(spans):
        if start < position or source[position:start].strip(_BLANKS):
            return False
        position = end
    return not source[position:].strip(_BLANKS)


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8")


def _span(node: Node) -> tuple[int, int]:
    return (node.start_byte, node.end_byte)


def _statements(node: Node, scan: _Scan) -> bool:
    if node.type == "command":
        return _command(node, scan)
    separators = _SEPARATORS.get(node.type)
    if separators is None:
        return False
    for index, child in enumerate(node.children):
        if node.field_name_for_child(index) == "redirect":
            ok = child.type == "file_redirect" and _redirect(child, scan)
        elif child.is_named:
            ok = _statements(child, scan)
        else:
            ok = child.type in separators
            scan.spans.append(_span(child))
        if not ok:
            return False
    return True


def _command(node: Node, scan: _Scan) -> bool:
    argv: list[str] = []
    for index, child in enumerate(node.children):
        role = node.field_name_for_child(index)
        if role == "redirect":
            ok = child.type == "file_redirect" and _redirect(child, scan)
        elif role == "name" and child.type == "command_name" and not argv:
            # `'rm'`, `"rm"`, `\rm`, `$CMD` and `l""s` all fail here: only a bare word may name
            # the command, so what we look up is what bash will run.
            plain = [part.type for part in child.children] == ["word"]
            ok = plain and _text(child) in _COMMANDS
            argv.append(_text(child))
            scan.spans.append(_span(child))
        elif role == "argument" and argv:
            value = _literal(child)
            ok = value is not None
            argv.append(value or "")
            scan.spans.append(_span(child))
        else:  # variable assignments, herestrings, anything unforeseen
            return False
        if not ok:
            return False
    if argv:
        scan.commands.append(argv)
    return bool(argv)


def _redirect(node: Node, scan: _Scan) -> bool:
    parts = node.children
    fd = parts[0] if parts and parts[0].type == "file_descriptor" else None
    rest = parts[1:] if fd is not None else parts
    # One operator, then one target: tree-sitter hangs any words after the target on the
    # redirect, where bash sees them as arguments.
    if len(rest) != 2 or rest[0].is_named:
        return False
    if fd is not None and fd.end_byte != rest[0].start_byte:
        return False
    operator, target = rest[0].type, _literal(rest[1])
    descriptor = None if fd is None else _text(fd)
    # bash opens a socket for /dev/tcp/HOST/PORT and /dev/udp/...: the host name alone
    # carries data out, so those are not reads.
    if target is None:
        return False
    reads = operator == "<" and descriptor is None and not _socket_path(target)
    if not (reads or (operator, descriptor, target) in _SAFE_REDIRECTS):
        return False
    scan.spans.extend(_span(part) for part in parts)
    return True


def _socket_path(target: str) -> bool:
    normal = posixpath.normpath(target)
    return normal.startswith(("/dev/tcp", "/dev/udp", "//dev/tcp", "//dev/udp"))


def _literal(node: Node) -> str | None:
    """The argument as the command will receive it, or None unless it is a plain literal."""
    text = _text(node)
    if node.type in ("word", "number"):
        return text if _PLAIN_WORD.fullmatch(text) else None
    if node.type == "raw_string":
        inner = text[1:-1]
        single_quoted = len(text) >= 2 and text[0] == text[-1] == "'" and "'" not in inner
        return inner if single_quoted else None
    if node.type == "string":
        return _unquote_double(text)
    if node.type == "concatenation":
        parts: list[str] = []
        position = node.start_byte
        for child in node.children:
            # Pieces must touch: a gap would be something tree-sitter skipped.
            part = None if child.type == "concatenation" else _literal(child)
            if part is None or child.start_byte != position:
                return None
            parts.append(part)
            position = child.end_byte
        return "".join(parts) if position == node.end_byte else None
    return None


def _unquote_double(text: str) -> str | None:
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        return None
    out: list[str] = []
    chars = iter(text[1:-1])
    for char in chars:
        if char in '$`"':  # an expansion, or a quote where tree-sitter saw none
            return None
        if char != "\\":
            out.append(char)
            continue
        escaped = next(chars, None)
        if escaped is None:
            return None
        # Inside double quotes a backslash escapes only these; before anything else it stays.
        if escaped in '$`"\\':
            out.append(escaped)
        elif escaped != "\n":
            out.append("\\" + escaped)
    return "".join(out)


def _flags(
    short: str = "", long: tuple[str, ...] = (), words: frozenset[str] = frozenset()
) -> _Check:
    """Refuse short option letters (alone or in a cluster), long options and exact words.

    A long option given is refused when it is a prefix of one listed, because GNU getopt and
    git both accept any unambiguous abbreviation (`sort --out=f` is `sort --output=f`).
    Values are not told apart from options, so a value that looks like one is refused too.
    """

    def check(args: list[str]) -> bool:
        for arg in args:
            if arg in words:
                return False
            if arg == "--":
                continue
            if arg.startswith("--"):
                given = arg.partition("=")[0]
                if any(option.startswith(given) for option in long):
                    return False
            elif arg.startswith("-") and any(letter in short for letter in arg[1:]):
                return False
        return True

    return check


_ANY = _flags()


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _uniq(args: list[str]) -> bool:
    # A second operand is the file uniq writes to, so at most one may be given. An option's
    # value must be attached (`-f2`): a separate one counts as an operand, to keep this simple.
    operands = [arg for arg in args if arg == "-" or not arg.startswith("-")]
    return len(operands) <= 1 and "--" not in args


# An operand of digits (GNU MMDDhhmm[[CC]YY][.ss], BSD [[[mm]dd]HH]MM[[cc]yy][.ss],
# BusyBox hh:mm or YYYY-MM-DD hh:mm) sets the system clock. Refusing every such argument
# also refuses a harmless ``date -d 2024-01-01``; the model can quote a format instead.
_DATE_SETTING = re.compile(r"@?[\d.:\- ]*\d[\d.:\- ]*")
_date_flags = _flags(short="s", long=("--set",))


def _date(args: list[str]) -> bool:
    return _date_flags(args) and not any(_DATE_SETTING.fullmatch(arg) for arg in args)


def _git_lister(letters: str, longs: frozenset[str]) -> _Check:
    """`git branch` / `git tag` that only list.

    A bare name would create a branch or tag, so names are allowed only after -l/--list,
    which makes them patterns. Option values must be attached (`--contains=HEAD`).
    """

    def check(args: list[str]) -> bool:
        listing = False
        names = 0
        for arg in args:
            if arg.startswith("--"):
                if arg.partition("=")[0] not in longs:
                    return False
                listing = listing or arg == "--list"
            elif arg.startswith("-") and len(arg) > 1:
                if not set(arg[1:]) <= set(letters):
                    return False
                listing = listing or "l" in arg
            else:
                names += 1
        return names == 0 or listing

    return check


def _git_config(args: list[str]) -> bool:
    actions = [arg for arg in args if arg in _GIT_CONFIG_READS]
    others = [arg for arg in args if arg.startswith("-")]
    names = len(args) - len(others)
    if len(actions) != 1 or not set(others) <= _GIT_CONFIG_READS | _GIT_CONFIG_MODIFIERS:
        return False
    return names == 0 if actions[0] in ("--list", "-l") else 1 <= names <= 2


def _git(args: list[str]) -> bool:
    # Global options other than --no-pager are refused: -c, --exec-path, --config-env,
    # --git-dir and --work-tree change what runs, and -C is the bare-repository risk above.
    while args[:1] in (["--no-pager"], ["-P"]):
        args = args[1:]
    check = _GIT_READERS.get(args[0]) if args else None
    return check is not None and _GIT_RISKY(args[1:]) and check(args[1:])


_GIT_REF_FILTERS = _words("--contains --no-contains --merged --no-merged --points-at")
_GIT_CONFIG_READS = _words("--get --get-all --list -l")
_GIT_CONFIG_MODIFIERS = _words(
    "--global --local --system --show-origin --show-scope --name-only --null -z"
)
_LISTER_LONGS = _GIT_REF_FILTERS | _words("--list --sort --format --color --no-color --column")

# Options that, on any subcommand, write a file or run a program taken from configuration.
_GIT_RISKY = _flags(
    long=("--output", "--ext-diff", "--textconv", "--filters", "--open-files-in-pager")
)

_GIT_READERS: dict[str, _Check] = {
    **dict.fromkeys(
        _words(
            "status log show diff blame ls-files rev-parse rev-list describe shortlog"
            " cat-file for-each-ref merge-base"
        ),
        _ANY,
    ),
    "grep": _flags(short="O"),  # -O<program> opens the matches in that program
    "reflog": lambda args: not {"expire", "delete", "drop", "write"} & set(args),
    # No -l for branch: before git 2.20 it meant --create-reflog, so `-l name` created one.
    "branch": _git_lister(
        "arv", _LISTER_LONGS | _words("--all --remotes --verbose --show-current")
    ),
    "tag": _git_lister("lni0123456789", _LISTER_LONGS | {"--ignore-case"}),
    "remote": lambda args: (
        set(args) <= {"-v", "--verbose"}
        or (args[:1] == ["show"] and all(a == "-n" or a[:1] != "-" for a in args[1:]))
    ),
    "stash": lambda args: args[:1] in (["list"], ["show"]),  # bare `git stash` pushes
    "worktree": lambda args: (
        args[:1] == ["list"] and set(args[1:]) <= {"--porcelain", "-v", "--verbose", "-z"}
    ),
    "config": _git_config,
}

_COMMANDS: dict[str, _Check] = {
    **dict.fromkeys(
        _words(
            "ls cat head wc stat strings hexdump od nl cut paste tr column tac rev fold expand"
            " unexpand fmt comm cmp grep egrep fgrep pwd echo basename dirname realpath"
            " readlink true false whoami id uname which type du df nproc jq md5sum sha1sum"
            " sha256sum cd test seq expr"
        ),
        _ANY,
    ),
    "tail": _flags(short="fF", long=("--follow",)),
    "sort": _flags(short="o", long=("--output", "--compress-program")),
    "uniq": _uniq,
    "diff": _flags(long=("--output",)),
    "file": _flags(short="C", long=("--compile",)),  # -C writes magic.mgc
    "date": _date,
    "base64": _flags(short="o", long=("--output",)),  # BSD base64 -o writes a file
    "tree": _flags(short="oR"),  # -R runs tree again in each directory with -o 00Tree.html
    "rg": _flags(long=("--pre", "--pre-glob", "--hostname-bin")),  # these run programs
    "printf": _flags(short="v"),
    "find": _flags(
        words=_words("-exec -execdir -ok -okdir -delete -fprint -fprint0 -fprintf -fls")
    ),
    "hostname": lambda args: not args,  # with an argument it sets the host name
    "git": _git,
}
