"""What the fake Anthropic server sends: message bodies, stream events and error bodies.

Shapes follow the Messages API as the official ``anthropic`` SDK parses them; the stream
is checked against ``client.messages.stream(...).get_final_message()`` in the tests.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from memdir.messages import Message, message_to_anthropic
from memdir.testing._cache import AnthropicUsage, wire_json

__all__ = [
    "error_body",
    "message_body",
    "reply_content",
    "stop_reason",
    "stream_events",
    "truncated_events",
]

Event = tuple[str, dict[str, Any]]

# Error types by status, as the Messages API documents them.
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def error_body(status: int, message: str, request_id: str) -> dict[str, Any]:
    """The JSON body Anthropic sends with an error ``status``."""
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}


def _signature(thinking: str) -> str:
    # The SDK types a thinking block's signature as a string, so one is always sent.
    return "fake-signature-" + hashlib.sha256(thinking.encode()).hexdigest()[:24]


def reply_content(message: Message) -> list[dict[str, Any]]:
    """The response ``content`` blocks for an assistant ``message``."""
    content = message_to_anthropic(message)["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    out: list[dict[str, Any]] = []
    for block in blocks:
        item = {"type": "text", "text": block} if isinstance(block, str) else dict(block)
        item.pop("cache_control", None)  # a request-side marker, never part of a response
        if item.get("type") == "thinking" and not isinstance(item.get("signature"), str):
            item["signature"] = _signature(str(item.get("thinking", "")))
        out.append(item)
    return out


def stop_reason(message: Message, content: list[dict[str, Any]]) -> str:
    """``tool_use`` when the reply calls a tool, else ``end_turn``; ``extra`` may override."""
    override = message.extra.get("stop_reason")
    if isinstance(override, str):
        return override
    return "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"


def output_tokens(content: list[dict[str, Any]]) -> int:
    """Tokens the reply would have cost to generate: its characters / 4, at least 1."""
    chars = 0
    for block in content:
        kind = block.get("type")
        if kind == "text":
            chars += len(str(block.get("text", "")))
        elif kind == "thinking":
            chars += len(str(block.get("thinking", "")))
        elif kind == "tool_use":
            chars += len(str(block.get("name", ""))) + len(wire_json(block.get("input", {})))
        else:
            chars += len(wire_json(block))
    return max(1, math.ceil(chars / 4))


def _usage(usage: AnthropicUsage, output: int) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        # The writes by lifetime; the two always add up to cache_creation_input_tokens.
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.cache_creation_5m_input_tokens,
            "ephemeral_1h_input_tokens": usage.cache_creation_1h_input_tokens,
        },
        "output_tokens": output,
    }


def message_body(
    message: Message, *, message_id: str, model: str, usage: AnthropicUsage
) -> dict[str, Any]:
    """The full non-streaming response body for ``message``."""
    content = reply_content(message)
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(message, content),
        "stop_sequence": None,
        "usage": _usage(usage, output_tokens(content)),
    }


def _halves(text: str) -> list[str]:
    """``text`` in two pieces, so that clients must join deltas to get it back."""
    if len(text) < 2:
        return [text]
    middle = len(text) // 2
    return [text[:middle], text[middle:]]


def _block_events(index: int, block: Mapping[str, Any]) -> list[Event]:
    kind = block.get("type")
    deltas: list[dict[str, Any]] = []
    if kind == "text":
        start: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": t} for t in _halves(str(block["text"]))]
    elif kind == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        pieces = _halves(str(block["thinking"]))
        deltas = [{"type": "thinking_delta", "thinking": t} for t in pieces]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "tool_use":
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        arguments = json.dumps(block["input"], ensure_ascii=False, separators=(",", ":"))
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _halves(arguments)]
    else:
        start = dict(block)  # redacted thinking and the like arrive whole
    events: list[Event] = [
        (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
    ]
    events += [
        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
        for d in deltas
    ]
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def stream_events(body: Mapping[str, Any]) -> list[Event]:
    """The Server-Sent Events that stream the response ``body`` of :func:`message_body`."""
    usage = dict(body["usage"])
    # message_start carries the input side; the output count comes with message_delta,
    # whose usage has the cumulative counters but no cache_creation breakdown.
    start = {**body, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    delta_usage = {k: v for k, v in usage.items() if k != "cache_creation"}
    events: list[Event] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(body["content"]):
        events += _block_events(index, block)
    delta = {"stop_reason": body["stop_reason"], "stop_sequence": None}
    events.append(
        ("message_delta", {"type": "message_delta", "delta": delta, "usage": delta_usage})
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def truncated_events(*, message_id: str, model: str) -> list[Event]:
    """The first events of a stream that the server then cuts off."""
    usage = AnthropicUsage(input_tokens=1, cache_read_input_tokens=0, cache_creation_input_tokens=0)
    body = message_body(
        Message.assistant("This answer is cut off mid-stream."),
        message_id=message_id,
        model=model,
        usage=usage,
    )
    # message_start, ping, the text block's start and its first delta.
    return stream_events(body)[:4]
