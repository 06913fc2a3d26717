"""Messages and a host's request as JSON, for the trip from the host to a worker.

The worker is on another machine and never sees the host's objects, so what it needs
travels as JSONB: each message whole (every block kind, its wire ``extra`` and flags,
so a fork rebuilds the host's request byte for byte and stays inside its prompt
cache), and the request's parameters with the model reduced to its name, which the
worker turns back into a model of its own.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, cast

from memdir.fork import CacheSafeParams
from memdir.messages import (
    ContentBlock,
    ImageBlock,
    Message,
    OtherBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from memdir.models import Model

__all__ = ["decode_message", "decode_params", "encode_message", "encode_params"]


def _text(block: TextBlock) -> dict[str, Any]:
    return {"t": "text", "text": block.text, "extra": dict(block.extra)}


def _image(block: ImageBlock) -> dict[str, Any]:
    return {
        "t": "image",
        "media_type": block.media_type,
        "data": block.data,
        "url": block.url,
        "extra": dict(block.extra),
    }


def _encode_block(block: ContentBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return _text(block)
    if isinstance(block, ThinkingBlock):
        return {
            "t": "thinking",
            "thinking": block.thinking,
            "signature": block.signature,
            "extra": dict(block.extra),
        }
    if isinstance(block, ImageBlock):
        return _image(block)
    if isinstance(block, ToolUseBlock):
        return {
            "t": "tool_use",
            "id": block.id,
            "name": block.name,
            "input": dict(block.input),
            "raw_input": block.raw_input,
            "extra": dict(block.extra),
        }
    if isinstance(block, ToolResultBlock):
        content: str | list[dict[str, Any]]
        if isinstance(block.content, str):
            content = block.content
        else:
            content = [_text(b) if isinstance(b, TextBlock) else _image(b) for b in block.content]
        return {
            "t": "tool_result",
            "tool_use_id": block.tool_use_id,
            "content": content,
            "is_error": block.is_error,
            "extra": dict(block.extra),
        }
    return {"t": "other", "type": block.type, "data": dict(block.data)}


def _decode_block(raw: Mapping[str, Any]) -> ContentBlock:
    kind = raw["t"]
    extra = dict(raw.get("extra") or {})
    if kind == "text":
        return TextBlock(text=raw["text"], extra=extra)
    if kind == "thinking":
        return ThinkingBlock(thinking=raw["thinking"], signature=raw.get("signature"), extra=extra)
    if kind == "image":
        return ImageBlock(
            media_type=raw.get("media_type"), data=raw.get("data"), url=raw.get("url"), extra=extra
        )
    if kind == "tool_use":
        return ToolUseBlock(
            id=raw["id"],
            name=raw["name"],
            input=dict(raw["input"]),
            raw_input=raw.get("raw_input"),
            extra=extra,
        )
    if kind == "tool_result":
        content = raw["content"]
        decoded: str | tuple[TextBlock | ImageBlock, ...]
        if isinstance(content, str):
            decoded = content
        else:
            decoded = tuple(cast(TextBlock | ImageBlock, _decode_block(part)) for part in content)
        return ToolResultBlock(
            tool_use_id=raw["tool_use_id"], content=decoded, is_error=raw["is_error"], extra=extra
        )
    return OtherBlock(type=raw["type"], data=dict(raw["data"]))


def encode_message(message: Message) -> dict[str, Any]:
    """``message`` as a JSON value that :func:`decode_message` reads back equal."""
    return {
        "role": message.role,
        "content": [_encode_block(b) for b in message.content],
        "uuid": message.uuid,
        "timestamp": message.timestamp.isoformat() if message.timestamp else None,
        "is_meta": message.is_meta,
        "is_compact_summary": message.is_compact_summary,
        "is_sidechain": message.is_sidechain,
        "string_content": message.string_content,
        "extra": dict(message.extra),
    }


def decode_message(raw: Mapping[str, Any]) -> Message:
    """The message :func:`encode_message` wrote."""
    stamp = raw.get("timestamp")
    return Message(
        role=raw["role"],
        content=tuple(_decode_block(b) for b in raw["content"]),
        uuid=raw["uuid"],
        timestamp=datetime.datetime.fromisoformat(stamp) if stamp else None,
        is_meta=bool(raw.get("is_meta")),
        is_compact_summary=bool(raw.get("is_compact_summary")),
        is_sidechain=bool(raw.get("is_sidechain")),
        string_content=bool(raw.get("string_content")),
        extra=dict(raw.get("extra") or {}),
    )


def encode_params(params: CacheSafeParams) -> dict[str, Any]:
    """The host's request as JSON; the model travels as its name."""
    return {
        "model": params.model.name,
        "system": params.system
        if params.system is None or isinstance(params.system, str)
        else [dict(b) for b in params.system],
        "tools": [dict(t) for t in params.tools],
        "params": dict(params.params),
        "wire_messages": [dict(m) for m in params.wire_messages],
        "wire_replaces": params.wire_replaces,
    }


def decode_params(raw: Mapping[str, Any], model: Model) -> CacheSafeParams:
    """The request :func:`encode_params` wrote, calling ``model`` (the worker's own
    client for the model named in it)."""
    return CacheSafeParams(
        model=model,
        system=raw.get("system"),
        tools=list(raw.get("tools") or ()),
        params=dict(raw.get("params") or {}),
        wire_messages=list(raw.get("wire_messages") or ()),
        wire_replaces=int(raw.get("wire_replaces") or 0),
    )


def model_name(raw: Mapping[str, Any]) -> str:
    """The model a shipped request names."""
    return str(raw["model"])
