"""Prompt-cache accounting for the fake provider servers.

Both fakes estimate tokens as characters / 4 of canonical JSON, so a test can predict the
numbers without a tokenizer. The rules follow each provider's documented behaviour closely
enough that a client which breaks its cache prefix sees the same symptom it would see in
production: ``cache_read_input_tokens`` (or ``cached_tokens``) drops to zero.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LOOKBACK_BLOCKS",
    "MAX_BREAKPOINTS",
    "OPENAI_CACHE_STEP",
    "AnthropicCache",
    "AnthropicUsage",
    "OpenAICache",
    "OpenAIUsage",
    "canonical",
    "estimate_tokens",
]

LOOKBACK_BLOCKS = 20
"""How far before a breakpoint Anthropic looks for an earlier cache entry (its docs: ~20)."""
MAX_BREAKPOINTS = 4
"""Anthropic refuses a request with more ``cache_control`` blocks than this."""
OPENAI_CACHE_STEP = 128
"""OpenAI caches prompt prefixes in increments of 128 tokens."""


def canonical(value: object) -> str:
    """The canonical JSON text of ``value``: sorted keys, no spaces, unicode kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def estimate_tokens(text: str) -> int:
    """Tokens in ``text``, estimated as characters / 4 rounded up."""
    return math.ceil(len(text) / 4)


@dataclass(frozen=True, kw_only=True)
class AnthropicUsage:
    """The input side of an Anthropic ``usage`` object."""

    input_tokens: int
    """Tokens neither read from nor written to the cache."""
    cache_read_input_tokens: int
    """Tokens of the longest cached prefix this request hit."""
    cache_creation_input_tokens: int
    """Tokens this request wrote to the cache beyond what it read."""


def _strip_marker(block: object) -> tuple[object, bool]:
    """``block`` without its ``cache_control`` key(s), and whether it had one.

    A marker is not part of the cache key: moving a breakpoint must not change the prefix.
    Tool results may carry markers on their inner content items too.
    """
    if not isinstance(block, Mapping):
        return block, False
    marked = "cache_control" in block
    out = {k: v for k, v in block.items() if k != "cache_control"}
    inner = out.get("content")
    if out.get("type") == "tool_result" and isinstance(inner, list):
        items = [_strip_marker(item) for item in inner]
        out["content"] = [item for item, _ in items]
        marked = marked or any(m for _, m in items)
    return out, marked


def _text_block(text: object) -> dict[str, Any]:
    return {"type": "text", "text": text}


@dataclass(frozen=True)
class _Block:
    key: list[object]
    """What identifies the block in the cache: its place in the request and its content."""
    tokens: int
    """The block's own tokens: characters / 4 of its canonical JSON, marker left out."""
    marked: bool
    """Whether the block carries ``cache_control``, i.e. is a breakpoint."""


def _block(where: list[object], block: object) -> _Block:
    stripped, marked = _strip_marker(block)
    text = canonical(stripped)
    return _Block(key=[*where, stripped], tokens=estimate_tokens(text), marked=marked)


def _anthropic_blocks(body: Mapping[str, Any]) -> list[_Block]:
    """The cacheable blocks of a Messages request, in the provider's cache order.

    Tools come first, then system, then each content block of each message. A string
    ``system`` or string message ``content`` counts as one text block, so it matches the
    same text sent as a block list.
    """
    out: list[_Block] = []
    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else ():
        out.append(_block(["tool"], tool))
    system = body.get("system")
    system_blocks = [_text_block(system)] if isinstance(system, str) else system
    for block in system_blocks if isinstance(system_blocks, list) else ():
        out.append(_block(["system"], block))
    messages = body.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else ()):
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        blocks = [_text_block(content)] if isinstance(content, str) else content
        for block in blocks if isinstance(blocks, list) else ():
            # The message index and role make the boundaries between messages part of the key.
            out.append(_block(["message", i, message.get("role")], block))
    return out


class AnthropicCache:
    """Anthropic's prompt cache: prefixes ending at ``cache_control`` breakpoints.

    Not thread-safe; the server calls it under its lock.
    """

    def __init__(self, min_tokens: int) -> None:
        self._min_tokens = min_tokens
        self._written: set[bytes] = set()

    def reset(self) -> None:
        """Forget every cache entry."""
        self._written.clear()

    def breakpoints(self, body: Mapping[str, Any]) -> int:
        """How many blocks of ``body`` carry ``cache_control``."""
        return sum(block.marked for block in _anthropic_blocks(body))

    def account(self, body: Mapping[str, Any]) -> AnthropicUsage:
        """Read from and write to the cache for one request, and report its input usage."""
        # The model and thinking settings head the chain: changing either misses everything.
        head = canonical({"model": body.get("model"), "thinking": body.get("thinking")})
        digest = hashlib.sha256(head.encode()).digest()
        fingerprints: list[bytes] = []
        prefix_tokens: list[int] = []
        breakpoints: list[int] = []
        total = 0
        for index, block in enumerate(_anthropic_blocks(body)):
            digest = hashlib.sha256(digest + canonical(block.key).encode()).digest()
            total += block.tokens
            fingerprints.append(digest)
            prefix_tokens.append(total)
            if block.marked:
                breakpoints.append(index)

        read_end = -1
        for point in breakpoints:
            for end in range(point, max(point - LOOKBACK_BLOCKS, 0) - 1, -1):
                if fingerprints[end] in self._written:
                    read_end = max(read_end, end)
                    break
        read = prefix_tokens[read_end] if read_end >= 0 else 0

        creation = 0
        for point in breakpoints:
            if prefix_tokens[point] >= self._min_tokens:
                self._written.add(fingerprints[point])
                if point > read_end:
                    creation = prefix_tokens[point] - read
        return AnthropicUsage(
            input_tokens=total - read - creation,
            cache_read_input_tokens=read,
            cache_creation_input_tokens=creation,
        )


@dataclass(frozen=True, kw_only=True)
class OpenAIUsage:
    """The input side of an OpenAI ``usage`` object."""

    prompt_tokens: int
    """Every prompt token."""
    cached_tokens: int
    """Prompt tokens served from the cache (``prompt_tokens_details.cached_tokens``)."""


def _openai_prompt_text(body: Mapping[str, Any]) -> str:
    """The text OpenAI's cache compares: canonical ``tools`` then each message."""
    parts: list[str] = []
    tools = body.get("tools")
    if tools:
        parts.append(canonical(tools))
    messages = body.get("messages")
    if isinstance(messages, Sequence) and not isinstance(messages, str):
        parts.extend(canonical(m) for m in messages)
    return "".join(parts)


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    low, high = 0, n  # a[:low] == b[:low] and a[:high] != b[:high]
    while high - low > 1:
        mid = (low + high) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid
    return low


class OpenAICache:
    """OpenAI's automatic prompt cache: any previously seen prefix, in 128-token steps.

    Not thread-safe; the server calls it under its lock.
    """

    def __init__(self, min_tokens: int) -> None:
        self._min_tokens = min_tokens
        self._seen: dict[object, list[str]] = {}

    def reset(self) -> None:
        """Forget every earlier prompt."""
        self._seen.clear()

    def account(self, body: Mapping[str, Any]) -> OpenAIUsage:
        """Compare one request with every earlier one of the same model, then remember it."""
        text = _openai_prompt_text(body)
        model = body.get("model")
        seen = self._seen.setdefault(model if isinstance(model, str) else None, [])
        longest = max((_common_prefix(text, earlier) for earlier in seen), default=0)
        seen.append(text)
        cached = (longest // 4) // OPENAI_CACHE_STEP * OPENAI_CACHE_STEP
        return OpenAIUsage(
            prompt_tokens=estimate_tokens(text),
            cached_tokens=cached if cached >= self._min_tokens else 0,
        )
