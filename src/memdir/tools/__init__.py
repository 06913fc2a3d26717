"""The tools the memory agent can call, with Claude Code's names and input schemas.

``Read``, ``Write``, ``Edit``, ``Grep``, ``Glob`` and ``Bash``; :func:`builtin_tools`
returns all six bound to a working directory. Tools do not police themselves: the
permission gate (:func:`memdir.permissions.auto_mem_can_use_tool`) decides which calls
run, using :func:`is_read_only_command` for ``Bash``.
"""

from memdir.tools._base import (
    FileStamp,
    MemoryFiles,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    WriteGuard,
)
from memdir.tools._bash import BashTool
from memdir.tools._builtin import builtin_tools
from memdir.tools._files import EditTool, ReadTool, WriteTool
from memdir.tools._readonly import is_read_only_command
from memdir.tools._search import GlobTool, GrepTool

__all__ = [
    "BashTool",
    "EditTool",
    "FileStamp",
    "GlobTool",
    "GrepTool",
    "MemoryFiles",
    "ReadTool",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "WriteGuard",
    "WriteTool",
    "builtin_tools",
    "is_read_only_command",
]
