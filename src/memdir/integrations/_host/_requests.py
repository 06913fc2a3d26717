"""A host's request as its client sent it, turned into a fork's parameters (the builders,
one per wire format, are in :mod:`memdir.integrations._wire`, light enough for the Claude
Code hook to share)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from memdir.fork import CacheSafeParams
from memdir.integrations._wire import (
    anthropic_fork_params,
    chat_fork_params,
    has_cache_breakpoint,
)
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
    cached: bool = False
    """The host's answer reported reading or writing the prompt cache: an Anthropic
    request is forked even where its body shows no breakpoint (one added after the
    adapter saw it)."""


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
    if not (sent.cached or has_cache_breakpoint(body)):
        return None, "the last request has no cache_control: nothing of it is cached"
    return anthropic_fork_params(model, body, sent.replaces, headers=sent.headers), None
