"""Every program a shell command line would run, as the shell would see it.

The read-only gate (:mod:`memdir.tools._readonly`) asks "does this command only read?" and
may refuse anything it does not understand. A rule asks the opposite question — "does this
command run ``npm install`` anywhere?" — so it has to look everywhere instead: inside
pipelines, ``;``/``&&`` chains, subshells, ``$(…)`` and backquotes, process substitutions,
``if``/``for`` bodies and functions, behind ``env``/``sudo``/``command``/``nice``-style
wrappers (their options together or apart: ``sudo -Eu root``), inside ``bash -c '…'``,
``eval``, ``su -c``, ``trap``, ``find -exec`` and scripts a shell reads from a here-string
or heredoc, in brace lists bash expands (``{npm,install}``), and under any spelling of the
program name that the shell would resolve the same way (``'npm'``, ``\\npm``, ``n""pm``,
``/usr/bin/npm``).

It parses with the gate's own parser (:func:`memdir._bash.bash_parser`), so quoting is
undone the way bash undoes it. A word the shell would only know at run time (``$TOOL``,
``$(which npm)``) has no value here: it is ``None``, and cannot match a rule by itself;
the commands inside a substitution are still found and matched on their own.
"""

from __future__ import annotations

import codecs
import posixpath
import re

from tree_sitter import Node

from memdir._bash import bash_parser

__all__ = ["Glob", "Word", "invocations", "program_name"]


_MAX_DEPTH = 4
"""How many ``bash -c``/``eval`` levels are unwrapped: enough for any real command, and a
bound on work for a hostile one."""


class Glob(str):
    """A word holding unquoted wildcards (``/usr/bin/np?``): bash replaces it with the
    matching file names, so it matches whatever its pattern would."""


Word = str | None
"""One word of a command as the program receives it; ``Glob`` when bash would expand it,
``None`` when only run time knows it."""

_GLOB_CHARS = re.compile(r"[*?\[]")
_ANSI_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|u[0-9a-fA-F]{1,4}|.)", re.DOTALL)
_ANSI_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b"}


def program_name(word: str) -> str:
    """The name a program is known by: ``/usr/bin/npm`` and ``./npm`` are ``npm``."""
    return posixpath.basename(word.rstrip("/")) or word


def invocations(command: str, _depth: int = 0) -> list[list[Word]]:
    """Each simple command that ``command`` would run, as argv (name first), wrappers
    removed: ``sudo -u ci env CI=1 nice -n5 npm i`` gives ``[["npm", "i"]]`` beside the
    wrappers themselves. A parse error does not stop the walk: what bash would still run is
    in the tree, and is found."""
    if _depth > _MAX_DEPTH or "\x00" in command:
        return []
    root = bash_parser().parse(command.encode("utf-8", "surrogatepass")).root_node
    found: list[list[Word]] = []
    for argv, stdin in _simple_commands(root):
        for unwrapped in _unwrap(argv, _depth):
            found.append(unwrapped)
        head = argv[0] if argv else None
        # A shell (or `source`) reading its script from a here-string or heredoc runs it.
        if stdin is not None and head is not None and program_name(head) in _STDIN_READERS:
            found.extend(invocations(stdin, _depth + 1))
    return found


def _simple_commands(root: Node) -> list[tuple[list[Word], str | None]]:
    """Each command in the tree, as argv, with the text a here-string or heredoc gives
    it on stdin. A command the grammar could not place (``{npm,install}`` at the start
    of a line parses as an error holding a command name) is read from its name on."""
    found: list[tuple[list[Word], str | None]] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "command":
            argv = _argv(node)
            before = node.prev_sibling
            if argv and before is not None and before.type == "{" and node.children:
                # `{npm,install} --force`: the grammar took the brace for a group.
                grouped = _expand_braces("{" + _text(node.children[0]))
                if grouped is not None:
                    argv = [*grouped, *argv[1:]]
            if argv:
                found.append((argv, _stdin_text(node)))
        elif node.type == "ERROR":
            children = list(node.children)
            for index, child in enumerate(children):
                if child.type != "command_name":
                    continue
                if index > 0 and children[index - 1].type == "{":
                    # `{npm,install}` as a line's first word: a brace list bash expands
                    # into the command's words, which the grammar splits at the brace.
                    first = "{" + _text(child)
                    rest = [w for c in children[index + 1 :] if c.is_named for w in _words(c)]
                    expanded = _expand_braces(first)
                    head: list[Word] = list(expanded) if expanded is not None else [None]
                    argv = [*head, *rest]
                else:
                    argv = [w for c in children[index:] if c.is_named for w in _words(c)]
                if argv:
                    found.append((argv, None))
                break
        # Substitutions inside a command's words run too: walk into everything.
        stack.extend(reversed(node.children))
    return found


def _stdin_text(node: Node) -> str | None:
    """The text a here-string (on the command) or a heredoc (on its statement) feeds it."""
    holders = [node]
    if node.parent is not None and node.parent.type == "redirected_statement":
        holders.append(node.parent)
    for holder in holders:
        for child in holder.children:
            if child.type == "herestring_redirect":
                values = [_value(c) for c in child.children if c.is_named]
                text = next((v for v in values if v is not None), None)
                if text is not None:
                    return text
            if child.type == "heredoc_redirect":
                body = next((c for c in child.children if c.type == "heredoc_body"), None)
                if body is not None:
                    return _text(body)
    return None


def _argv(node: Node) -> list[Word]:
    argv: list[Word] = []
    for index, child in enumerate(node.children):
        role = node.field_name_for_child(index)
        if role == "name" or (role == "argument" and argv):
            argv.extend(_words(child))
    return argv


_BRACES = re.compile(r"^(?P<head>[^{}\\]*)\{(?P<list>[^{}\\]*,[^{}\\]*)\}(?P<tail>[^\\]*)$")


def _words(node: Node) -> list[Word]:
    """The words ``node`` becomes: one, or several where bash expands an unquoted brace
    list (``{npm,install}`` is ``npm install``)."""
    value = _value(node)
    plain = node.type in ("command_name", "word", "concatenation") and all(
        c.type in ("word", "command_name", "concatenation") or not c.is_named
        for c in ([node, *node.children])
    )
    if isinstance(value, str) and plain:
        expanded = _expand_braces(_text(node))
        if expanded is not None:
            return list(expanded)
    return [value]


def _expand_braces(text: str, depth: int = 0) -> list[str] | None:
    match = _BRACES.match(text)
    if match is None or depth > 4:
        return None
    out: list[str] = []
    for item in match["list"].split(","):
        word = match["head"] + item + match["tail"]
        out.extend(_expand_braces(word, depth + 1) or [word])
    return out


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "surrogatepass")


def _value(node: Node) -> Word:
    """The word as the program receives it (quotes and escapes undone), a :class:`Glob`
    when unquoted wildcards remain, or None when it holds an expansion."""
    if node.type == "command_name":
        if len(node.children) != 1:
            return None
        node = node.children[0]
    pieces = node.children if node.type == "concatenation" else [node]
    parts: list[str] = []
    wild = False
    for piece in pieces:
        part = _piece(piece)
        if part is None:
            return None
        text, globbing = part
        parts.append(text)
        wild = wild or globbing
    joined = "".join(parts)
    return Glob(joined) if wild else joined


def _piece(node: Node) -> tuple[str, bool] | None:
    text = _text(node)
    if node.type in ("word", "number"):
        if "$" in text or "`" in text:
            return None
        unescaped = re.sub(r"\\(.)", r"\1", text, flags=re.DOTALL)
        # Wildcards count only where no backslash quoted them.
        bare = re.sub(r"\\.", "", text, flags=re.DOTALL)
        return unescaped, bool(_GLOB_CHARS.search(bare))
    if node.type == "raw_string":
        return text[1:-1], False
    if node.type == "ansi_c_string":
        return _ansi_c(text[2:-1]), False
    if node.type == "string":
        inner = text[1:-1]
        if any(child.is_named and child.type != "string_content" for child in node.children):
            return None  # "$VAR", "$(cmd)" inside double quotes
        return re.sub(r'\\([$`"\\\n])', r"\1", inner), False
    return None


def _ansi_c(body: str) -> str:
    def one(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] == "x":
            return chr(int(code[1:], 16))
        if code[0] == "u" and len(code) > 1:
            return chr(int(code[1:], 16))
        if code[0] in "01234567":
            return chr(int(code, 8))
        return _ANSI_SIMPLE.get(code, code)

    try:
        return _ANSI_ESCAPE.sub(one, body)
    except ValueError:
        return codecs.decode(body, "unicode_escape", "replace")


# Wrappers that run the rest of their words as a command, and for each, the options that take
# the next word as their value (the command starts after them).
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset(
        [
            "-u",
            "-g",
            "-h",
            "-p",
            "-C",
            "-D",
            "-r",
            "-t",
            "-U",
            "-T",
            "-R",
            "--user",
            "--group",
            "--host",
            "--prompt",
        ]
    ),
    "doas": frozenset(["-u", "-C"]),
    "env": frozenset(["-u", "-C", "-S", "--unset", "--chdir", "--split-string"]),
    "command": frozenset(),
    "builtin": frozenset(),
    "exec": frozenset(["-a"]),
    "nohup": frozenset(),
    "time": frozenset(["-f", "-o", "--format", "--output"]),
    "nice": frozenset(["-n", "--adjustment"]),
    "ionice": frozenset(["-c", "-n", "-p", "-t", "--class", "--classdata"]),
    "setsid": frozenset(),
    "stdbuf": frozenset(["-i", "-o", "-e"]),
    "timeout": frozenset(["-s", "-k", "--signal", "--kill-after"]),
    "xargs": frozenset(
        ["-I", "-n", "-P", "-d", "-E", "-L", "-s", "-a", "--delimiter", "--max-args", "--max-procs"]
    ),
    "chronic": frozenset(),
    "unbuffer": frozenset(),
    "caffeinate": frozenset(),
    "watch": frozenset(["-n", "-d", "--interval", "--differences"]),
    "strace": frozenset(["-o", "-e", "-p", "-s", "-u", "-E", "-P", "-I", "-b", "-a"]),
    "ltrace": frozenset(["-o", "-e", "-p", "-s", "-u"]),
    "flock": frozenset(["-w", "-E", "--timeout", "--conflict-exit-code"]),
    "chroot": frozenset(["--userspec", "--groups"]),
    "unshare": frozenset(),
    "taskset": frozenset(),
    "runuser": frozenset(["-u", "-g", "-G", "--user", "--group"]),
    "busybox": frozenset(),
    "coproc": frozenset(),
    "catchsegv": frozenset(),
    "firejail": frozenset(),
}
# Positional words before the command: timeout's duration, flock's lock file, chroot's new
# root, taskset's CPU mask.
_LEADING_POSITIONALS = {"timeout": 1, "flock": 1, "chroot": 1, "taskset": 1}
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash"})
_STDIN_READERS = _SHELLS | {"source", "."}
# Shell options that take the next word as their value.
_SHELL_VALUED = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
# Programs that run a string they are given as a script: `su -c`, `script -c`, `trap`.
_STRING_RUNNERS = {"su": "-c", "script": "-c", "runuser": "-c"}


def _unwrap(argv: list[Word], depth: int) -> list[list[Word]]:
    """``argv`` itself, and what it runs when it is a wrapper or a shell given a script."""
    found = [argv]
    head = argv[0]
    if head is None:
        return found
    name = program_name(head)
    if name in _SHELLS or name == "eval":
        for script in _scripts(name, argv[1:]):
            found.extend(invocations(script, depth + 1))
        return found
    if name == "trap" and len(argv) > 1 and argv[1] is not None:
        found.extend(invocations(argv[1], depth + 1))
        return found
    flag = _STRING_RUNNERS.get(name)
    if flag is not None:
        for index, word in enumerate(argv[1:-1], start=1):
            given = argv[index + 1]
            clustered = (
                word is not None
                and word.startswith("-")
                and not word.startswith("--")
                and word.endswith(flag[1])
            )
            if (word in (flag, "--command") or clustered) and given is not None:
                found.extend(invocations(given, depth + 1))
    if name == "find":
        found.extend(_find_exec(argv, depth))
        return found
    options = _WRAPPERS.get(name)
    if options is None:
        return found
    rest = argv[1:]
    positionals = _LEADING_POSITIONALS.get(name, 0)
    index = 0
    while index < len(rest):
        word = rest[index]
        if word is None:
            return found  # an option only run time knows: cannot tell where the command starts
        if word == "--":
            index += 1
            break
        if name == "command" and word in ("-v", "-V"):
            return found  # only looks the name up
        if word.startswith("-") and len(word) > 1:
            taken, split = _option(name, word, options, rest[index + 1 : index + 2])
            if split is not None:
                found.extend(invocations(split, depth + 1))
                return found
            index += taken
            continue
        if name == "env" and "=" in word:
            index += 1
            continue
        if positionals:
            positionals -= 1
            index += 1
            continue
        break
    inner = rest[index:]
    if inner:
        found.extend(_unwrap(inner, depth))
    return found


def _find_exec(argv: list[Word], depth: int) -> list[list[Word]]:
    """The commands ``find … -exec CMD … ;`` (and ``-execdir``, ``-ok``) runs."""
    found: list[list[Word]] = []
    index = 1
    while index < len(argv):
        if argv[index] in ("-exec", "-execdir", "-ok", "-okdir"):
            end = index + 1
            while end < len(argv) and argv[end] not in (";", "+"):
                end += 1
            inner = argv[index + 1 : end]
            if inner:
                found.extend(_unwrap(inner, depth))
            index = end
        index += 1
    return found


def _option(
    name: str, word: str, options: frozenset[str], following: list[Word]
) -> tuple[int, str | None]:
    """How many words the option ``word`` of wrapper ``name`` takes (itself, and its value
    when it is the next word), and the script it runs (``env -S``), if any. Short options
    may come together (``sudo -Eu root``: the last one takes the next word; ``-uroot``
    holds its value), a long one may carry its value (``--user=root``)."""
    next_word = following[0] if following else None
    if word.startswith("--"):
        key, has_value, value = word.partition("=")
        if name == "env" and key == "--split-string":
            return 1, value if has_value else (next_word or "")
        return (1 if has_value or key not in options else 2), None
    letters = word[1:]
    for position, letter in enumerate(letters):
        if f"-{letter}" not in options:
            continue
        attached = letters[position + 1 :]
        if name == "env" and letter == "S":
            return 1, attached if attached else (next_word or "")
        return (1 if attached else 2), None
    return 1, None


def _scripts(name: str, args: list[Word]) -> list[str]:
    """The script text a shell runs (``bash -c SCRIPT``, ``bash -lc``) or ``eval`` joins."""
    if name == "eval":
        return [" ".join(a for a in args if a is not None)]
    skip = False
    for index, word in enumerate(args):
        if skip:
            skip = False
            continue
        if word is None:
            return []
        if word in _SHELL_VALUED:
            skip = True  # `bash -o errexit -c …`: the option's value is no script file
            continue
        if word.startswith("-") and not word.startswith("--") and "c" in word[1:]:
            script = next(
                (w for w in args[index + 1 :] if w is None or not w.startswith("-")), None
            )
            return [script] if script is not None else []
        if not word.startswith(("-", "+")):
            return []  # a script file, not a string
    return []
