"""What a fork of the host's request would send, and how much of it the provider's cache
still holds: the planner's view of the fork.

A fork re-sends the host's last request (tools, system prompt, the conversation) with the
memory agent's prompt after it. How much of that is read from the cache depends on the
host: how long ago it sent the request, whether its prefix reached the provider's
minimum, which of its parts it asked to keep for an hour or a day, and whether its model
drops the turn's thinking once a plain user message follows.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from memdir.cost import ModelFamily, provider_of
from memdir.extract._planner import LONG_TTL_SECONDS, RequestShape
from memdir.extract._prompts import has_memory_section
from memdir.extract._standalone import RenderedConversation, estimate_tokens
from memdir.fork import CacheSafeParams
from memdir.messages import Message, ThinkingBlock

__all__ = [
    "EXTENDED_RETENTION_SECONDS",
    "fork_request_shape",
    "host_has_memory_section",
]

EXTENDED_RETENTION_SECONDS = 86_400.0
"""How long OpenAI keeps a prompt sent with ``prompt_cache_retention: "24h"``."""


def fork_request_shape(
    params: CacheSafeParams,
    family: ModelFamily,
    conversation: RenderedConversation,
    messages: Sequence[Message],
    prompt_tokens: int,
    age: float,
    *,
    runnable: Collection[str],
) -> RequestShape:
    """The fork's first request: the host's ``params`` and ``messages`` (``conversation``
    holds their token counts), then a prompt of ``prompt_tokens``, sent ``age`` seconds
    after the host's own request. ``runnable``: the tools a fork can save memories with."""
    length = len(messages)
    static, long_lived = _host_static_tokens(params)
    if params.wire_messages:
        # A recorded prefix stands for the conversation's first messages.
        replaced = min(params.wire_replaces, length)
        sent = estimate_tokens(
            json.dumps(list(params.wire_messages), ensure_ascii=False, default=str)
        )
        sent += conversation.raw_tokens_between(replaced, length)
    else:
        sent = conversation.raw_tokens_between(0, length)
    last = conversation.raw_tokens_between(length - 1, length) if length else 0
    dropped = _dropped_thinking(messages) if not family.keeps_thinking else None
    # The thinking a plain user message drops from the context is not sent, nor billed.
    unsent = _thinking_tokens(messages[dropped:]) if dropped is not None else 0
    if static + sent < family.min_cache_tokens:
        # The host's own request was too short for the provider to cache any of it:
        # there is nothing to read, however recent it is.
        warm, note = 0, "host request below the cache minimum"
    elif age < _host_lifetime(params, family):
        warm, note = static + sent - last, "host cache warm"
        if dropped is not None:
            # The fork's prompt, a plain user message, drops the turn's thinking: the
            # request differs from the host's from that turn on, and only what comes
            # before it is read (the host wrote it when the turn began).
            warm = static + sent - conversation.raw_tokens_between(dropped, length)
            note = "host cache warm up to the turn its thinking is dropped from"
    elif long_lived and age < LONG_TTL_SECONDS:
        warm, note = long_lived, "host cache expired but for its one-hour part"
    else:
        warm, note = 0, "host cache expired"
    return RequestShape(
        family=family,
        model=params.model.name,
        prompt_tokens=static + sent - unsent + prompt_tokens,
        warm_tokens=warm,
        note=note,
        priced=provider_of(params.model.name) is not None,
        can_write=_can_write(params, runnable),
    )


def host_has_memory_section(params: CacheSafeParams, messages: Sequence[Message]) -> bool:
    """Whether the host's system prompt tells its agent about memory: in the request's
    ``system``, or (OpenAI's way) in a system or developer message."""
    if has_memory_section(params.system):
        return True
    return any(m.role in ("system", "developer") and has_memory_section(m.text) for m in messages)


def _host_static_tokens(params: CacheSafeParams) -> tuple[int, int]:
    """Estimated tokens of the host's tools and system prompt, and of those of them that
    the host caches for an hour (up to its last ``ttl: "1h"`` marker)."""
    total = 0
    long_lived = 0
    for tool in params.tools:
        total += estimate_tokens(json.dumps(dict(tool), ensure_ascii=False, default=str))
        if _one_hour(tool):
            long_lived = total
    system = params.system
    blocks: Sequence[Mapping[str, Any]] = (
        [{"text": system}] if isinstance(system, str) else list(system or ())
    )
    for block in blocks:
        total += estimate_tokens(str(block.get("text", ""))) + 4
        if _one_hour(block):
            long_lived = total
    return total, long_lived


def _host_lifetime(params: CacheSafeParams, family: ModelFamily) -> float:
    """How long the host's own prompt stays cached unused: a day where the host asks OpenAI
    for its 24-hour retention on a model that takes it, else the provider's default."""
    retention = params.params.get("prompt_cache_retention")
    if retention == "24h" and family.provider == "openai" and family.extended_cache_retention:
        return EXTENDED_RETENTION_SECONDS
    return float(family.cache_ttl_seconds)


def _one_hour(item: Mapping[str, Any]) -> bool:
    marker = item.get("cache_control")
    return isinstance(marker, Mapping) and marker.get("ttl") == "1h"


def _dropped_thinking(messages: Sequence[Message]) -> int | None:
    """Where the turn under way starts (the index after its plain user message), when it
    holds thinking that a following plain user message drops from the context (on the
    models that keep only the last turn's); else None."""
    start = len(messages)
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "user" and not message.is_tool_result:
            break
        start = index
    if not any(isinstance(b, ThinkingBlock) for m in messages[start:] for b in m.content):
        return None
    return start


def _thinking_tokens(messages: Sequence[Message]) -> int:
    """Estimated tokens of the thinking blocks in ``messages``, as the host sent them."""
    chars = sum(
        len(block.thinking) + len(block.signature or "") + _THINKING_OVERHEAD
        for message in messages
        for block in message.content
        if isinstance(block, ThinkingBlock)
    )
    return chars // 4


# Characters a thinking block costs on the wire beyond its text and signature.
_THINKING_OVERHEAD = 40


def _can_write(params: CacheSafeParams, runnable: Collection[str]) -> bool:
    """Whether the host's tools include one a fork can save memories with."""
    for tool in params.tools:
        if tool.get("name") in runnable:
            return True
        function = tool.get("function")  # OpenAI's shape
        if isinstance(function, Mapping) and function.get("name") in runnable:
            return True
    return False
