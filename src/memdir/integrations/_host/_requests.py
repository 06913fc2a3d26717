"""A host's request as its client sent it, turned into a fork's parameters: one builder
per wire format (Anthropic Messages, OpenAI Chat Completions), and one answer to "has this
request a cache breakpoint"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from memdir.fork import CacheSafeParams
from memdir.integrations._wire import chat_fork_params
from memdir.models import Model

__all__ = [
    "SentRequest",
    "anthropic_fork_params",
    "chat_fork_params",
    "fork_params",
    "has_cache_breakpoint",
]

Wire = Literal["anthropic", "chat"]


@dataclass(frozen=True, kw_only=True)
class SentRequest:
    """The host's last model request of a turn, as its client sent it."""

    wire: Wire
    """``anthropic`` (``POST /v1/messages``) or ``chat`` (``POST /chat/completions``)."""
    body: Mapping[str, Any]
    """The JSON body as sent."""
    replaces: int
    """How many of the conversation's first messages (as the adapter reports them) the
    request's messages stand for; the final answer and anything after it follow them."""
    messages: Sequence[Mapping[str, Any]] | None = None
    """The wire messages to send in their place, when not ``body["messages"]`` as sent
    (a Chat Completions adapter adds the final answer as the host's next request will
    send it)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Headers of the request that belong to its prompt (``anthropic-beta``)."""
    sent_at: float | None = None
    """When it was sent, on ``time.time``."""


def has_cache_breakpoint(body: Mapping[str, Any]) -> bool:
    """Whether an Anthropic request wrote anything to the cache: a top-level (automatic)
    ``cache_control``, or one on a tool, a system block, a message's block or a block
    inside a tool result."""
    if body.get("cache_control") is not None:
        return True
    system = body.get("system")
    places: list[Any] = [*(body.get("tools") or ()), *(system if isinstance(system, list) else ())]
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            continue
        places += content
        places += [
            item
            for block in content
            if isinstance(block, Mapping) and isinstance(block.get("content"), list)
            for item in block["content"]
        ]
    return any(isinstance(p, Mapping) and p.get("cache_control") is not None for p in places)


# Body keys CacheSafeParams holds in fields of its own, or that memdir sends its own way:
# ``betas`` travel in the ``anthropic-beta`` header; streaming is how the answer comes
# back, not the prompt; a top-level (automatic) ``cache_control`` is left to memdir's own
# breakpoint on the last message — markers are no part of the prefix, and memdir's
# 5-minute marker beside an automatic one of an hour would be refused.
_ANTHROPIC_OWN_FIELDS = frozenset(
    {"model", "messages", "system", "tools", "stream", "betas", "cache_control"}
)


def anthropic_fork_params(
    model: Model,
    body: Mapping[str, Any],
    replaces: int,
    *,
    headers: Mapping[str, str] | None = None,
) -> CacheSafeParams:
    """A host's Messages request ``body`` as a fork's: its system, tools, parameters and
    messages as sent (standing for the conversation's first ``replaces`` messages), its
    ``betas`` and prompt ``headers`` as request headers."""
    params = {k: v for k, v in body.items() if k not in _ANTHROPIC_OWN_FIELDS}
    extra = dict(headers or {})
    betas = body.get("betas")
    if isinstance(betas, list) and betas:
        extra["anthropic-beta"] = ",".join(str(b) for b in betas)
    if extra:
        params["extra_headers"] = {**extra, **dict(params.get("extra_headers") or {})}
    system = body.get("system")
    return CacheSafeParams(
        model=model,
        system=system if isinstance(system, str | list) else None,
        tools=list(body.get("tools") or ()),
        params=params,
        wire_messages=list(body.get("messages") or ()),
        wire_replaces=replaces,
    )


def fork_params(model: Model, sent: SentRequest) -> tuple[CacheSafeParams | None, str | None]:
    """The fork's parameters for ``sent`` on ``model``, or why it cannot be forked.

    Refused: a request that forces ``tool_choice`` (the memory agent must choose its own
    tools), and an Anthropic request without any cache breakpoint (its cache holds
    nothing a fork could read)."""
    body = sent.body
    choice = body.get("tool_choice")
    forced = choice not in (None, "auto") and not (
        isinstance(choice, Mapping) and choice.get("type") == "auto"
    )
    if forced:
        return None, (
            f"the last request forces tool_choice={choice!r}: the memory agent must "
            "choose its own tools"
        )
    if sent.wire == "chat":
        messages = sent.messages if sent.messages is not None else body.get("messages")
        if not isinstance(messages, Sequence):
            return None, "the last request has no messages"
        return chat_fork_params(model, body, messages, sent.replaces), None
    if not has_cache_breakpoint(body):
        return None, "the last request has no cache_control: nothing of it is cached"
    return anthropic_fork_params(model, body, sent.replaces, headers=sent.headers), None
