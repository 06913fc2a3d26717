"""Conversations saved as Anthropic Messages or OpenAI Chat Completions JSON."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memdir.errors import TranscriptError, UsageError
from memdir.messages import messages_from_anthropic, messages_from_openai
from memdir.transcripts._types import Transcript, TranscriptFormat

__all__ = ["load_chat"]

_OPENAI_ROLES = frozenset({"system", "developer", "tool", "function"})
_OPENAI_KEYS = frozenset({"tool_calls", "tool_call_id", "function_call", "refusal"})
_OPENAI_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})
_ANTHROPIC_BLOCKS = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"}
)


def _looks_openai(items: Sequence[Any]) -> bool | None:
    """True for OpenAI markers, False for Anthropic ones, None when nothing tells."""
    for item in items:
        if not isinstance(item, Mapping):
            continue
        role = item.get("role")
        if (isinstance(role, str) and role in _OPENAI_ROLES) or _OPENAI_KEYS & item.keys():
            return True
        content = item.get("content")
        if isinstance(content, list):
            for part in content:
                kind = part.get("type") if isinstance(part, Mapping) else None
                if not isinstance(kind, str):
                    continue
                if kind in _OPENAI_PARTS:
                    return True
                if kind in _ANTHROPIC_BLOCKS:
                    return False
    return None


def _system_text(system: Any) -> str | None:
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        parts = [b.get("text") for b in system if isinstance(b, Mapping)]
        return "\n".join(p for p in parts if isinstance(p, str)) or None
    return None


def load_chat(path: Path, payload: Any) -> Transcript:
    """Read a decoded JSON payload: a list of messages, or an object with ``messages``.

    Whether it is Anthropic or OpenAI is told from the messages themselves (roles, tool
    calls, block types); a conversation of plain text reads the same either way. Message
    ids are derived from the conversation, so re-reading the file — or a longer version
    of it — gives the same ids for the same messages.
    """
    system: Any = None
    if isinstance(payload, Mapping):
        items = payload.get("messages")
        if not isinstance(items, list):
            raise TranscriptError(path, "a JSON object without a 'messages' list")
        system = payload.get("system")
    elif isinstance(payload, list):
        items = payload
    else:
        raise TranscriptError(path, "JSON that is neither a list of messages nor an object")

    verdict = _looks_openai(items)
    kind: TranscriptFormat = "anthropic" if verdict is False or system is not None else "openai"
    if verdict is True:
        kind = "openai"
    try:
        if kind == "openai":
            messages = messages_from_openai(items)
        else:
            messages = messages_from_anthropic(items)
    except UsageError as exc:
        raise TranscriptError(path, str(exc)) from exc
    return Transcript(
        path=path,
        format=kind,
        messages=tuple(messages),
        system=_system_text(system),
        session_id=_session_id(payload),
    )


def _session_id(payload: Any) -> str | None:
    value = payload.get("session_id") if isinstance(payload, Mapping) else None
    return value if isinstance(value, str) and value else None
