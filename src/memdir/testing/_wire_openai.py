"""What the fake OpenAI server sends: chat completions, stream chunks and error bodies.

Shapes follow the Chat Completions API as the official ``openai`` SDK parses them; the
stream is checked against ``client.chat.completions.stream(...)`` in the tests. Thinking
goes out as ``reasoning_content``, the field OpenAI-compatible servers (vLLM, DeepSeek)
use and memdir reads back into a :class:`~memdir.messages.ThinkingBlock`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from memdir.messages import Message, messages_to_openai
from memdir.testing._cache import OpenAIUsage

__all__ = ["chunks", "completion_body", "error_body", "reply_message", "truncated_chunks"]

# (type, code) by status, as OpenAI sends them.
_ERRORS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "unknown_url"),
    429: ("requests", "rate_limit_exceeded"),
}

# Anthropic stop reasons a scripted Message may name in extra["stop_reason"].
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}


def error_body(
    status: int, message: str, *, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """The JSON body OpenAI sends with an error ``status``; ``code`` and ``param`` name the
    error and the parameter at fault where OpenAI does (``context_length_exceeded``,
    ``messages``)."""
    kind, usual = _ERRORS.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    return {"error": {"message": message, "type": kind, "param": param, "code": code or usual}}


def reply_message(message: Message) -> dict[str, Any]:
    """The response ``message`` object for an assistant ``message``."""
    wire = messages_to_openai([message])[0]
    content = wire.get("content")
    if isinstance(content, list):  # a parts list read from a request; responses carry text
        content = "\n".join(str(p.get("text", "")) for p in content if p.get("type") == "text")
    out: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "refusal": None,
        "annotations": [],
    }
    reasoning = wire.get("reasoning_content")
    if isinstance(reasoning, str):
        out["reasoning_content"] = reasoning
    calls = []
    for call in wire.get("tool_calls") or ():
        function = call["function"]
        arguments = function["arguments"]
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
        calls.append(
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": function["name"], "arguments": arguments},
            }
        )
    if calls:
        out["tool_calls"] = calls
    return out


def _finish_reason(message: Message, reply: Mapping[str, Any]) -> str:
    override = message.extra.get("stop_reason")
    if isinstance(override, str):
        return _FINISH.get(override, override)
    return "tool_calls" if reply.get("tool_calls") else "stop"


def _tokens(chars: int) -> int:
    return math.ceil(chars / 4)


def _usage(reply: Mapping[str, Any], usage: OpenAIUsage, hidden_reasoning: int) -> dict[str, Any]:
    # Reasoning shown as text is counted from it; otherwise the model reasoned unseen.
    shown = reply.get("reasoning_content")
    reasoning = _tokens(len(shown)) if isinstance(shown, str) else hidden_reasoning
    chars = len(reply.get("content") or "")
    for call in reply.get("tool_calls") or ():
        chars += len(call["function"]["name"]) + len(call["function"]["arguments"])
    completion = max(1, reasoning + _tokens(chars))
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": usage.prompt_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def completion_body(
    message: Message,
    *,
    completion_id: str,
    created: int,
    model: str,
    usage: OpenAIUsage,
    reasoning_tokens: int = 0,
) -> dict[str, Any]:
    """The full non-streaming ``chat.completion`` body for ``message``; a reasoning model's
    unseen ``reasoning_tokens`` count in ``completion_tokens``, as OpenAI bills them."""
    reply = reply_message(message)
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": reply,
                "logprobs": None,
                "finish_reason": _finish_reason(message, reply),
            }
        ],
        "usage": _usage(reply, usage, reasoning_tokens),
        "service_tier": "default",
        "system_fingerprint": None,
    }


def _halves(text: str) -> list[str]:
    """``text`` in two pieces, so that clients must join deltas to get it back."""
    if len(text) < 2:
        return [text]
    middle = len(text) // 2
    return [text[:middle], text[middle:]]


def _deltas(reply: Mapping[str, Any]) -> list[dict[str, Any]]:
    # OpenAI opens with content "" for a text answer and null for a tool-calls-only one.
    opening = "" if reply.get("content") is not None else None
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": opening, "refusal": None}]
    if isinstance(reply.get("reasoning_content"), str):
        deltas += [{"reasoning_content": t} for t in _halves(reply["reasoning_content"])]
    if reply.get("content"):  # an empty answer is the opening "" alone
        deltas += [{"content": t} for t in _halves(reply["content"])]
    for index, call in enumerate(reply.get("tool_calls") or ()):
        function = call["function"]
        first = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": function["name"], "arguments": ""},
        }
        deltas.append({"tool_calls": [first]})
        deltas += [
            {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
            for piece in _halves(function["arguments"])
        ]
    return deltas


def chunks(body: Mapping[str, Any], *, include_usage: bool) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects that stream ``body`` of :func:`completion_body`.

    With ``include_usage`` every chunk has ``usage: null`` and a last chunk with no choices
    carries the usage, as ``stream_options.include_usage`` asks.
    """
    head = {
        "id": body["id"],
        "object": "chat.completion.chunk",
        "created": body["created"],
        "model": body["model"],
        "service_tier": "default",
        "system_fingerprint": None,
    }
    choice = body["choices"][0]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        out = {
            **head,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            out["usage"] = None
        return out

    out = [chunk(delta) for delta in _deltas(choice["message"])]
    out.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        out.append({**head, "choices": [], "usage": body["usage"]})
    return out


def truncated_chunks(*, completion_id: str, created: int, model: str) -> list[dict[str, Any]]:
    """The first chunks of a stream that the server then cuts off."""
    body = completion_body(
        Message.assistant("This answer is cut off mid-stream."),
        completion_id=completion_id,
        created=created,
        model=model,
        usage=OpenAIUsage(prompt_tokens=1, cached_tokens=0),
    )
    return chunks(body, include_usage=False)[:2]
