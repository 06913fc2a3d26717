"""The tools the memory agent can call, with Claude Code's names and input schemas.

``Read``, ``Write``, ``Edit``, ``Grep``, ``Glob`` and ``Bash``; :func:`builtin_tools`
returns all six bound to a working directory. :class:`MemoryTool` is Anthropic's
client-side ``memory`` tool over a memory directory. Tools do not police themselves: each
declares what a call would do (``tool.effects(tool_input)``: :class:`ReadsPath`,
:class:`WritesPath`, :class:`RunsCommand`, or :class:`Invalid`), and the permission gate
(:func:`memdir.permissions.auto_mem_can_use_tool`) judges those effects before the call
runs, using :func:`is_read_only_command` for a command. A host's calls, known only by
name and input, get their effects from :func:`tool_call_effects`; :func:`host_wrote_memory`
tells whether any of them wrote into the memory directory.
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
from memdir.tools._calls import effects_of, host_wrote_memory, tool_call_effects, writes_into
from memdir.tools._effects import (
    DeclaresEffects,
    Effect,
    Invalid,
    ReadsPath,
    RunsCommand,
    WritesPath,
)
from memdir.tools._files import EditTool, ReadTool, WriteTool
from memdir.tools._guard import memory_write_guard
from memdir.tools._memory import (
    MEMORY_COMMANDS,
    MEMORY_TOOL_TYPE,
    VIRTUAL_ROOT,
    MemoryTool,
    memory_tool_effects,
)
from memdir.tools._readonly import is_read_only_command
from memdir.tools._search import GlobTool, GrepTool

__all__ = [
    "MEMORY_COMMANDS",
    "MEMORY_TOOL_TYPE",
    "VIRTUAL_ROOT",
    "BashTool",
    "DeclaresEffects",
    "EditTool",
    "Effect",
    "FileStamp",
    "GlobTool",
    "GrepTool",
    "Invalid",
    "MemoryFiles",
    "MemoryTool",
    "ReadTool",
    "ReadsPath",
    "RunsCommand",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutput",
    "WriteGuard",
    "WriteTool",
    "WritesPath",
    "builtin_tools",
    "effects_of",
    "host_wrote_memory",
    "is_read_only_command",
    "memory_tool_effects",
    "memory_write_guard",
    "tool_call_effects",
    "writes_into",
]
