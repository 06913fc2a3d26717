"""What the framework integrations share about a host's requests on the wire: a hook on
an SDK client's HTTP pool, and a recorded Chat Completions request as a fork's."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memdir.fork import CacheSafeParams
from memdir.models import Model

__all__ = ["add_pool_hook", "chat_fork_params"]

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
