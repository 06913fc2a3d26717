"""What a model is asked and what it answers, independent of the provider."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, runtime_checkable

from memdir.messages import Message

__all__ = ["Model", "ModelRequest", "ModelResponse", "SystemPrompt", "Usage"]

SystemPrompt: TypeAlias = str | Sequence[Mapping[str, Any]] | None
"""A system prompt: plain text, or Anthropic-style text blocks (``{"type": "text", ...}``)."""


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Tokens one request (or a sum of requests) consumed."""

    input_tokens: int = 0
    """Input tokens billed at the full rate (neither read from nor written to the cache)."""
    output_tokens: int = 0
    """Tokens the model generated, its reasoning included: all of them billed as output."""
    cache_read_input_tokens: int = 0
    """Input tokens served from the prompt cache."""
    cache_creation_input_tokens: int = 0
    """Input tokens written to the prompt cache."""
    cache_creation_1h_input_tokens: int = 0
    """Of :attr:`cache_creation_input_tokens`, those written with the one-hour lifetime
    (Anthropic's ``ttl: "1h"``, billed at twice the input price rather than 1.25 times)."""
    reasoning_tokens: int = 0
    """Of :attr:`output_tokens`, those a reasoning model spent thinking without showing
    them (OpenAI's ``completion_tokens_details.reasoning_tokens``): billed as output like
    the rest, and reported apart so a bill can say where its output went."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            cache_creation_input_tokens=(
                self.cache_creation_input_tokens + other.cache_creation_input_tokens
            ),
            cache_creation_1h_input_tokens=(
                self.cache_creation_1h_input_tokens + other.cache_creation_1h_input_tokens
            ),
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )

    @property
    def total_input_tokens(self) -> int:
        """Every input token, however it was billed."""
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens

    @property
    def cache_hit_rate(self) -> float:
        """The share of input tokens read from the cache (0.0 when there was no input)."""
        total = self.total_input_tokens
        return self.cache_read_input_tokens / total if total else 0.0


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """One request to a model.

    ``tools`` are definitions in Anthropic's shape (``name``, ``description``,
    ``input_schema``, plus any extra keys such as ``cache_control``); a provider adapter
    turns them into its own wire shape the same way every time, so two requests with the
    same definitions send the same bytes. ``params`` holds everything else the provider
    takes (``max_tokens``, ``temperature``, ``thinking``, ``tool_choice``, …) and is
    passed through untouched.
    """

    system: SystemPrompt = None
    """The system prompt."""
    tools: Sequence[Mapping[str, Any]] = ()
    """Tool definitions, in order."""
    messages: Sequence[Message] = ()
    """The conversation so far."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """Other request parameters, passed to the provider as they are."""
    cache_points: tuple[int, ...] = ()
    """Indices of messages whose last block should also end a cached prefix.

    The last message always does; an extra point lets a request whose tail changes
    between calls (a standalone memory run) still share everything before it. Providers
    that cache by prefix on their own ignore it.
    """
    cache_ttl: str | None = None
    """A longer lifetime for the cached prefix (Anthropic's ``ttl``: ``"1h"``), or None for
    the provider's default (five minutes). It goes on the breakpoints that end the stable
    prefix, the system prompt's and those at ``cache_points``; the last message's own
    breakpoint keeps the default, since what follows the stable prefix changes each
    request, and Anthropic wants longer lifetimes before shorter ones. A one-hour write
    costs 2x the input price instead of 1.25x, so it pays only when requests come more
    than five minutes and less than an hour apart. Providers without breakpoints
    ignore it.
    """
    wire_prefix: tuple[Mapping[str, Any], ...] = ()
    """Messages in the provider's own wire shape, sent as they are before ``messages``:
    the start of a conversation that was recorded as sent and holds what
    :class:`~memdir.messages.Message` cannot (Claude Code's ``role: "system"`` messages,
    a framework's own key order). :class:`~memdir.models.AnthropicModel` takes Messages
    API messages (their ``cache_control`` markers left out; ``cache_points`` still index
    ``messages``), :class:`~memdir.models.OpenAIModel` Chat Completions ones, after the
    system message ``system`` gives (none, when the record holds it).
    """


@dataclass(frozen=True, kw_only=True)
class ModelResponse:
    """A model's answer: one assistant message, with what it cost."""

    message: Message
    """The assistant message (text, thinking and tool calls)."""
    usage: Usage = field(default_factory=Usage)
    """Tokens this request consumed."""
    stop_reason: str | None = None
    """Why the model stopped (``end_turn``, ``tool_use``, ``max_tokens``, …)."""
    model: str | None = None
    """The model that answered, as the provider names it."""
    id: str | None = None
    """The provider's id for the response."""


@runtime_checkable
class Model(Protocol):
    """Anything that answers a :class:`ModelRequest`.

    Implementations raise :class:`~memdir.errors.ModelError` when the provider fails or
    answers with something unusable.
    """

    @property
    def name(self) -> str:
        """A spec naming the provider and model, such as ``anthropic:claude-sonnet-5-5``."""
        ...

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` and return the answer."""
        ...
