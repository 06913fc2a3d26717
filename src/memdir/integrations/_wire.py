"""What the integrations and the Claude Code hook share about a host's requests on the
wire: a hook on an SDK client's HTTP pool, one fork builder per wire format (a recorded
Chat Completions or Anthropic Messages request as a fork's), and one answer to "has this
request a cache breakpoint"."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memdir.fork import CacheSafeParams
from memdir.models import Model

__all__ = [
    "add_pool_hook",
    "anthropic_fork_params",
    "chat_fork_params",
    "has_cache_breakpoint",
]

# What a Chat Completions fork does not send as parameters: the conversation and tools
# travel on their own, and streaming is how the answer comes back, not part of the prompt.
_CHAT_OWN_FIELDS = frozenset({"model", "messages", "tools", "stream", "stream_options"})


def add_pool_hook(client: object, event: str, hook: Callable[[Any], Any]) -> bool:
    """Add ``hook`` to the ``event`` hooks (``"request"`` or ``"response"``) of the HTTP
    pool an ``anthropic`` or ``openai`` client sends through, once. False when the client
    has no such pool (a custom transport, another SDK)."""
    pool = getattr(client, "_client", None)
    hooks = getattr(pool, "event_hooks", None)
    if pool is None or not isinstance(hooks, Mapping) or not isinstance(hooks.get(event), list):
        return False
    if hook not in hooks[event]:
        pool.event_hooks = {**hooks, event: [*hooks[event], hook]}
    return True


def chat_fork_params(
    model: Model,
    body: Mapping[str, Any],
    messages: Sequence[Mapping[str, Any]],
    replaces: int,
) -> CacheSafeParams:
    """A host's Chat Completions request ``body`` as a fork's: its tools and parameters as
    sent, and ``messages`` (its own, the system message first, and whatever follows them
    as the host's next request will send it) in place of the conversation's first
    ``replaces`` messages. OpenAI caches every prefix on its own: no breakpoints."""
    return CacheSafeParams(
        model=model,
        tools=list(body.get("tools") or ()),
        params={k: v for k, v in body.items() if k not in _CHAT_OWN_FIELDS},
        wire_messages=list(messages),
        wire_replaces=replaces,
    )


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
