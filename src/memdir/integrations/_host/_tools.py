"""The memory tool as a function tool, for a model that does not know Anthropic's own:
one description and one schema of its commands for every framework."""

from __future__ import annotations

from typing import Any

from memdir.tools import MEMORY_COMMANDS

__all__ = ["MEMORY_FUNCTION_DESCRIPTION", "MEMORY_FUNCTION_SCHEMA"]

MEMORY_FUNCTION_DESCRIPTION = (
    "Your long-term memory: Markdown files under /memories that outlast this conversation. "
    "view a file or a directory, create a file, str_replace or insert text in one, delete "
    "or rename one. Look in /memories/MEMORY.md, the index, before relying on what you "
    "remember; keep one line per memory there."
)
"""What a model is told of the tool (Claude is trained on it, and brings its own)."""

MEMORY_FUNCTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "enum": list(MEMORY_COMMANDS)},
        "path": {"type": "string", "description": "A path under /memories."},
        "view_range": {
            "type": "array",
            "items": {"type": "integer"},
            "description": "view: the first and last line to show (-1: to the end).",
        },
        "file_text": {"type": "string", "description": "create: the file's whole text."},
        "old_str": {"type": "string", "description": "str_replace: the text to replace, once."},
        "new_str": {"type": "string", "description": "str_replace: what replaces it."},
        "insert_line": {"type": "integer", "description": "insert: the line to insert after."},
        "insert_text": {"type": "string", "description": "insert: the text to insert."},
        "old_path": {"type": "string", "description": "rename: the file's path now."},
        "new_path": {"type": "string", "description": "rename: its new path."},
    },
    "required": ["command"],
}
"""The commands' input schema, as Anthropic's memory tool takes them."""
