"""Anthropic's client-side ``memory`` tool, backed by a memdir memory directory.

The tool itself is :class:`memdir.tools.MemoryTool` (its module tells how ``/memories``
maps onto the memory directory and how each path is checked); the permission gate's
answer for one of its calls is :func:`memdir.permissions.memory_tool_decision`. This
module keeps both under the name they have always been imported by. It does not import
the ``anthropic`` SDK.
"""

from memdir.permissions import memory_tool_decision
from memdir.tools import MEMORY_TOOL_TYPE, VIRTUAL_ROOT, MemoryTool

__all__ = ["MEMORY_TOOL_TYPE", "VIRTUAL_ROOT", "MemoryTool", "memory_tool_decision"]
