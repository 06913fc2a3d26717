"""What a model's tokens cost, and how its provider caches prompts: the facts a cost is made of.

A :class:`ModelFamily` holds what memdir needs to know about one family of models to say
what a request will cost: the :class:`Prices` of each kind of token, the shortest prefix
the provider caches, how long an unused cache entry lives, how big a prompt may be, and
(Anthropic) whether earlier thinking blocks stay in the context. :func:`model_family`
finds the family of a model name; the table is :data:`MODEL_FAMILIES`, and a caller's own
prices take precedence (``ExtractConfig.prices``).

Prices are relative: each family's input token costs 1.0 and the other kinds are multiples
of it, so a cost is in *input-token equivalents* of that model. That is enough to choose
between two ways of running the same model, and it stays true when list prices change
together. Give absolute prices (say, dollars per million tokens) to get absolute costs.

Sources: Anthropic's and OpenAI's prompt-caching pages (minimums, TTLs, write and read
multipliers) and their price lists (output and cached-input ratios).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias

from memdir.models import Usage

__all__ = [
    "MODEL_FAMILIES",
    "CostEstimate",
    "ModelFamily",
    "Prices",
    "Provider",
    "bill",
    "model_family",
    "provider_of",
]

Provider: TypeAlias = Literal["anthropic", "openai"]


@dataclass(frozen=True, kw_only=True)
class Prices:
    """What one token costs, by the way it is billed, in any unit (the same for all five)."""

    input: float = 1.0
    """An input token neither read from nor written to the cache."""
    cache_write: float = 1.0
    """An input token written to the cache with the default lifetime (Anthropic: 5 min)."""
    cache_write_1h: float = 1.0
    """An input token written with the long lifetime (Anthropic ``ttl: "1h"``)."""
    cache_read: float = 1.0
    """An input token read from the cache."""
    output: float = 1.0
    """A generated token."""


@dataclass(frozen=True, kw_only=True)
class ModelFamily:
    """The cost-relevant facts of the models whose name starts with :attr:`prefix`."""

    provider: Provider
    """Whose API serves them."""
    prefix: str
    """Model names starting with this belong here (the longest matching prefix wins)."""
    prices: Prices
    """Relative prices (input = 1.0)."""
    min_cache_tokens: int
    """The shortest prefix the provider caches; a shorter one is silently not cached."""
    cache_ttl_seconds: float = 300.0
    """How long an unused cache entry lives. Anthropic: 5 minutes, refreshed on each hit.
    OpenAI: evicted after 5 to 10 minutes idle; the low end is assumed."""
    cache_max_seconds: float | None = None
    """The longest any entry lives, used or not (OpenAI: one hour); None for no bound."""
    context_tokens: int = 200_000
    """The largest prompt a request may carry."""
    keeps_thinking: bool = True
    """Anthropic: whether thinking blocks of earlier turns stay in the context. Models that
    drop them process a conversation as if they were never there once a plain user message
    follows, so the cached prefix after the first of them is lost."""


_ANTHROPIC = Prices(input=1.0, cache_write=1.25, cache_write_1h=2.0, cache_read=0.1, output=5.0)


def _claude(prefix: str, min_tokens: int, *, keeps_thinking: bool) -> ModelFamily:
    return ModelFamily(
        provider="anthropic",
        prefix=prefix,
        prices=_ANTHROPIC,
        min_cache_tokens=min_tokens,
        keeps_thinking=keeps_thinking,
    )


def _gpt(
    prefix: str, *, read: float, output: float, context: int, write: float = 1.0
) -> ModelFamily:
    # OpenAI bills no cache write before GPT-5.6: a written token costs what any input does.
    prices = Prices(cache_write=write, cache_write_1h=write, cache_read=read, output=output)
    return ModelFamily(
        provider="openai",
        prefix=prefix,
        prices=prices,
        min_cache_tokens=1024,
        cache_max_seconds=3600.0,
        context_tokens=context,
    )


MODEL_FAMILIES: tuple[ModelFamily, ...] = (
    # Anthropic: an empty prefix is the fallback for Claude models not listed here.
    _claude("", 1024, keeps_thinking=True),
    _claude("claude-opus-5", 512, keeps_thinking=True),
    _claude("claude-fable-5", 512, keeps_thinking=True),
    _claude("claude-mythos-5", 512, keeps_thinking=True),
    _claude("claude-mythos", 4096, keeps_thinking=True),
    _claude("claude-opus-4-8", 1024, keeps_thinking=True),
    _claude("claude-opus-4-7", 2048, keeps_thinking=True),
    _claude("claude-opus-4-6", 4096, keeps_thinking=True),
    _claude("claude-opus-4-5", 4096, keeps_thinking=True),
    _claude("claude-opus-4-1", 1024, keeps_thinking=False),
    _claude("claude-opus-4-0", 1024, keeps_thinking=False),
    _claude("claude-opus-4-2025", 1024, keeps_thinking=False),
    _claude("claude-sonnet-5", 1024, keeps_thinking=True),
    _claude("claude-sonnet-4-6", 2048, keeps_thinking=True),
    _claude("claude-sonnet-4-5", 1024, keeps_thinking=False),
    _claude("claude-sonnet-4-0", 1024, keeps_thinking=False),
    _claude("claude-sonnet-4-2025", 1024, keeps_thinking=False),
    _claude("claude-3-7-sonnet", 1024, keeps_thinking=False),
    _claude("claude-haiku-4-5", 4096, keeps_thinking=False),
    _claude("claude-3-5-haiku", 2048, keeps_thinking=False),
    _claude("claude-3-haiku", 2048, keeps_thinking=False),
    # OpenAI and OpenAI-compatible servers: the fallback is the gpt-4o ratios.
    _gpt("", read=0.5, output=4.0, context=128_000),
    _gpt("gpt-4o", read=0.5, output=4.0, context=128_000),
    _gpt("gpt-4.1", read=0.25, output=4.0, context=1_000_000),
    _gpt("o3", read=0.25, output=4.0, context=200_000),
    _gpt("o4-mini", read=0.25, output=4.0, context=200_000),
    _gpt("gpt-5", read=0.1, output=8.0, context=400_000),
    _gpt("gpt-5.6", read=0.1, output=8.0, context=400_000, write=1.25),
    _gpt("gpt-5.7", read=0.1, output=8.0, context=400_000, write=1.25),
)
"""Every family memdir knows, by provider; :func:`model_family` picks from it."""


def provider_of(model_name: str) -> Provider | None:
    """The provider a model spec names (``anthropic:…``, ``openai:…``), or guessed from a
    bare model name (``claude-…`` is Anthropic's); None when neither tells."""
    head, _, rest = model_name.partition(":")
    if rest and head in ("anthropic", "openai"):
        return "anthropic" if head == "anthropic" else "openai"
    if model_name.startswith("claude"):
        return "anthropic"
    if model_name.startswith(("gpt-", "o1", "o3", "o4", "chatgpt")):
        return "openai"
    return None


def _bare(model_name: str) -> str:
    head, _, rest = model_name.partition(":")
    return rest if rest and head in ("anthropic", "openai") else model_name


def model_family(
    model_name: str,
    provider: Provider | None = None,
    *,
    families: Iterable[ModelFamily] = MODEL_FAMILIES,
    prices: Mapping[str, Prices] | None = None,
) -> ModelFamily:
    """The family of ``model_name`` (a bare name or a spec such as ``openai:gpt-4o``).

    ``provider`` settles the provider when the name does not (an OpenAI-compatible server
    with a model of its own name); it defaults to what :func:`provider_of` says, else
    OpenAI, the protocol of most other servers. ``prices`` overrides the family's prices:
    its keys are model names, specs or their prefixes, and the longest that matches wins.
    """
    who = provider or provider_of(model_name) or "openai"
    name = _bare(model_name)
    best: ModelFamily | None = None
    for family in families:
        if family.provider != who or not name.startswith(family.prefix):
            continue
        if best is None or len(family.prefix) > len(best.prefix):
            best = family
    if best is None:  # a table without a fallback for this provider
        best = ModelFamily(provider=who, prefix="", prices=Prices(), min_cache_tokens=1024)
    if prices:
        override = _override(prices, who, name)
        if override is not None:
            best = ModelFamily(
                provider=best.provider,
                prefix=best.prefix,
                prices=override,
                min_cache_tokens=best.min_cache_tokens,
                cache_ttl_seconds=best.cache_ttl_seconds,
                cache_max_seconds=best.cache_max_seconds,
                context_tokens=best.context_tokens,
                keeps_thinking=best.keeps_thinking,
            )
    return best


def _override(prices: Mapping[str, Prices], provider: Provider, name: str) -> Prices | None:
    spec = f"{provider}:{name}"
    found: tuple[int, Prices] | None = None
    for key, value in prices.items():
        matches = spec.startswith(key) or name.startswith(key)
        if matches and (found is None or len(key) > found[0]):
            found = (len(key), value)
    return found[1] if found is not None else None


def bill(usage: Usage, prices: Prices) -> float:
    """What ``usage`` costs at ``prices``: each kind of token at its own price."""
    long_writes = usage.cache_creation_1h_input_tokens
    short_writes = usage.cache_creation_input_tokens - long_writes
    return (
        usage.input_tokens * prices.input
        + short_writes * prices.cache_write
        + long_writes * prices.cache_write_1h
        + usage.cache_read_input_tokens * prices.cache_read
        + usage.output_tokens * prices.output
    )


@dataclass(frozen=True, kw_only=True)
class CostEstimate:
    """What one way of running the memory agent is expected to cost, before it runs."""

    mode: Literal["fork", "standalone"]
    """The way it would run: inside the host's cache, or as memdir's own request."""
    model: str
    """The model it would call (its spec)."""
    requests: float
    """Model requests expected."""
    input_tokens: float
    """Input tokens expected at the full price."""
    cache_read_tokens: float
    """Input tokens expected to be read from the cache."""
    cache_write_tokens: float
    """Input tokens expected to be written to the cache."""
    output_tokens: float
    """Tokens expected to be generated."""
    cost: float
    """All of it at the model's prices."""
    note: str = ""
    """Why it costs what it does, in a few words (``host cache expired``, …)."""

    @property
    def prompt_tokens(self) -> float:
        """Every input token, however it is billed."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
