"""The bash parser both readers of shell commands share: the read-only gate
(:mod:`memdir.tools._readonly`, "does this command only read?") and the rule matcher
(:mod:`memdir.rules._shell`, "does it run ``npm install`` anywhere?"). One grammar, so a
command is split, quoted and unquoted the same way for both; kept apart from either so the
PreToolUse hook loads the parser without loading the tools."""

from __future__ import annotations

import threading

import tree_sitter_bash
from tree_sitter import Language, Parser

__all__ = ["bash_parser"]

_local = threading.local()


def bash_parser() -> Parser:
    """A tree-sitter parser for bash, one per thread (a Parser keeps state while it
    parses)."""
    parser: Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = Parser(Language(tree_sitter_bash.language()))
        _local.parser = parser
    return parser
