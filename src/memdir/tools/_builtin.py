"""The tools the memory agent is given, in the order Claude Code lists them."""

from __future__ import annotations

import os

from memdir.tools._base import Tool
from memdir.tools._bash import BashTool
from memdir.tools._files import EditTool, ReadTool, WriteTool
from memdir.tools._search import GlobTool, GrepTool

__all__ = ["builtin_tools"]


def builtin_tools(cwd: str | os.PathLike[str]) -> list[Tool]:
    """``Read``, ``Write``, ``Edit``, ``Grep``, ``Glob`` and ``Bash``, bound to ``cwd``.

    Relative paths in the tools' inputs resolve against ``cwd`` and Bash runs there. Grep
    uses ripgrep when an ``rg`` binary is found, its pure-Python engine otherwise.
    """
    return [
        ReadTool(cwd),
        WriteTool(cwd),
        EditTool(cwd),
        GrepTool(cwd),
        GlobTool(cwd),
        BashTool(cwd),
    ]
