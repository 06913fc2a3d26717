"""The models memdir knows, in one table: family, context window, prices, cache rules and
retirement date of each.

A :class:`ModelFamily` holds what memdir needs to know about the models whose name starts
with one prefix: to say what a request will cost (:class:`Prices`, relative and, where
known, in dollars), how its provider caches prompts (the shortest cached prefix, how long
an entry lives, whether earlier thinking stays in the context), how big a prompt may be,
and whether Anthropic still serves it (the day it was or will be retired, and the model
to use instead). :func:`model_family` finds the family of a model name in
:data:`MODEL_FAMILIES`; :func:`retirement` says in one line why a retired model cannot
be used, and :func:`in_service` maps a retired one to its replacement.

Relative prices: each family's input token costs 1.0 and the other kinds are multiples of
it, so a cost is in *input-token equivalents* of that model. That is enough to choose
between two ways of running the same model, and it stays true when list prices change
together. :attr:`ModelFamily.list_prices` gives absolute ones where they are known.

Sources: Claude Code 2.1.332's own model table (its bundled model catalog: context
windows, maximum output, price tiers in dollars per million tokens, the newest model of
each family; and its table of retirement dates, first-party column), Anthropic's and
OpenAI's prompt-caching pages (minimums, TTLs, write and read multipliers) and OpenAI's
price list (output and cached-input ratios).
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias, TypedDict

from memdir.errors import UsageError

__all__ = [
    "DEFAULT_ANTHROPIC_MODEL",
    "DEFAULT_OPENAI_MODEL",
    "LATEST_PER_FAMILY",
    "MODEL_FAMILIES",
    "ModelFamily",
    "Prices",
    "Provider",
    "check_not_retired",
    "in_service",
    "model_family",
    "provider_of",
    "retirement",
    "upcoming_retirement",
]

Provider: TypeAlias = Literal["anthropic", "openai"]

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-5-5"
"""memdir's Anthropic model when neither the user nor the host names one: the model Claude
Code 2.1.332 sends its own side queries to (recall selection), its newest Sonnet."""
DEFAULT_OPENAI_MODEL = "gpt-4.1-mini"
"""memdir's OpenAI model when neither the user nor the host names one."""

LATEST_PER_FAMILY: Mapping[str, str] = {
    # Claude Code 2.1.332's catalog, ``latest_per_family``.
    "opus": "claude-opus-5-5",
    "sonnet": "claude-sonnet-5-5",
    "haiku": "claude-haiku-5-5",
    "fable": "claude-fable-5-2",
}
"""The newest model of each Claude family: what a retired model of the family is replaced by."""


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

    def relative(self) -> Prices:
        """The same prices with an input token at 1.0 (rounded, so that $0.30 against
        $3.00 is 0.1 and not the float just below it)."""
        unit = self.input or 1.0
        return Prices(
            input=1.0,
            cache_write=round(self.cache_write / unit, 9),
            cache_write_1h=round(self.cache_write_1h / unit, 9),
            cache_read=round(self.cache_read / unit, 9),
            output=round(self.output / unit, 9),
        )


@dataclass(frozen=True, kw_only=True)
class ModelFamily:
    """What memdir knows of the models whose name starts with :attr:`prefix`."""

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
    """The model's context window: prompt and answer together (without a long-context
    beta)."""
    max_input_tokens: int | None = None
    """The largest prompt a request may carry, where the provider sets it below
    :attr:`context_tokens` (GPT-5: 272,000 of 400,000, the rest kept for the answer);
    None where the whole window may be prompt."""
    reasoning: bool = False
    """OpenAI: a reasoning model, which thinks in tokens it does not show and bills them as
    output (``completion_tokens_details.reasoning_tokens``, part of ``completion_tokens``)."""
    reasoning_efforts: tuple[str, ...] = ()
    """OpenAI reasoning models: the ``reasoning_effort`` values the model takes, least
    first (gpt-5, -mini, -nano: ``minimal`` to ``high``; gpt-5.1 and later: ``none`` to
    ``high`` and beyond; o3, o4-mini: ``low`` to ``high``). The API refuses any other.
    Empty where they are not known (the codex, pro and chat variants): memdir then
    sends none."""
    default_reasoning_effort: str | None = None
    """The effort a reasoning model spends when a request names none: ``medium`` before
    gpt-5.1, ``none`` from gpt-5.1 on (which then answers without reasoning)."""
    extended_cache_retention: bool = False
    """OpenAI: whether the model takes ``prompt_cache_retention: "24h"`` (its prompt-caching
    page lists the models); elsewhere the in-memory lifetime applies."""
    keeps_thinking: bool = True
    """Anthropic: whether thinking blocks of earlier turns stay in the context. Models that
    drop them process a conversation as if they were never there once a plain user message
    follows, so the cached prefix after the first of them is lost."""
    family: str = ""
    """The line of models it belongs to (``sonnet``, ``opus``, ``haiku``, …); a retired
    model is replaced by the newest of its line (:data:`LATEST_PER_FAMILY`)."""
    label: str = ""
    """Its name for people, as Claude Code writes it (``Claude Sonnet 4.5``)."""
    list_prices: Prices | None = None
    """Dollars per million tokens; None where memdir has no list price."""
    max_output_tokens: int | None = None
    """The most tokens one answer may hold; None where not known."""
    retired_on: datetime.date | None = None
    """The day Anthropic's API stops (or stopped) serving it; None while no date is set."""
    replacement: str | None = None
    """The model to use instead once it is retired."""

    @property
    def prompt_limit(self) -> int:
        """The most prompt tokens a request may carry: the provider refuses a longer one."""
        return self.max_input_tokens if self.max_input_tokens is not None else self.context_tokens


# Anthropic's multipliers of the input price, for models without a list price here.
_ANTHROPIC = Prices(input=1.0, cache_write=1.25, cache_write_1h=2.0, cache_read=0.1, output=5.0)


def _tier(
    input: float, output: float, read: float | None = None, *, write: float | None = None
) -> Prices:
    """A price tier of Claude Code's catalog: dollars per million tokens; a cache write
    costs 1.25x the input (2x for an hour), a read 0.1x unless the tier says otherwise."""
    return Prices(
        input=input,
        cache_write=write if write is not None else input * 1.25,
        cache_write_1h=input * 2,
        cache_read=read if read is not None else input / 10,
        output=output,
    )


# Claude Code 2.1.332's ``pricing_tiers``, by its names.
_T2_10 = _tier(2, 10)
_T2_10_READ_0_10 = _tier(2, 10, 0.1)
_T3_15 = _tier(3, 15)
_T4_20_READ_0_20 = _tier(4, 20, 0.2)
_T5_25 = _tier(5, 25)
_T8_40_READ_0_20 = _tier(8, 40, 0.2)
_T10_50 = _tier(10, 50)
_T10_50_READ_0_25 = _tier(10, 50, 0.25)
_T15_75 = _tier(15, 75)
_HAIKU_35 = _tier(0.8, 4, write=1.0)
_HAIKU_45 = _tier(1, 5)
# Below 100,000 prompt tokens; above, the catalog bills five times as much.
_HAIKU_55 = _tier(0.1, 0.5, 0.01, write=0.125)


def _claude(
    prefix: str,
    label: str,
    min_tokens: int,
    price: Prices | None,
    context: int = 200_000,
    max_output: int | None = None,
    retired: str | None = None,
    *,
    keeps_thinking: bool = True,
) -> ModelFamily:
    family = next((f for f in _LINES if f in label.lower().split()), "")
    return ModelFamily(
        provider="anthropic",
        prefix=prefix,
        prices=price.relative() if price is not None else _ANTHROPIC,
        min_cache_tokens=min_tokens,
        keeps_thinking=keeps_thinking,
        family=family,
        label=f"Claude {label}" if label else "",
        list_prices=price,
        context_tokens=context,
        max_output_tokens=max_output,
        retired_on=datetime.date.fromisoformat(retired) if retired else None,
        replacement=LATEST_PER_FAMILY.get(family) if retired else None,
    )


_LINES = ("opus", "sonnet", "haiku", "fable", "mythos")


def _gpt(
    prefix: str,
    *,
    read: float,
    output: float,
    context: int,
    write: float = 1.0,
    max_input: int | None = None,
    reasoning: bool = False,
    extended: bool = False,
    efforts: tuple[str, ...] = (),
    default_effort: str | None = None,
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
        max_input_tokens=max_input,
        reasoning=reasoning,
        reasoning_efforts=efforts,
        default_reasoning_effort=default_effort if reasoning else None,
        extended_cache_retention=extended,
        family=prefix,
    )


_K, _M = 200_000, 1_000_000  # context windows


class _Thinking(TypedDict):
    keeps_thinking: bool


_DROPS: _Thinking = {"keeps_thinking": False}  # earlier turns' thinking leaves the context


class _Gpt5(TypedDict):
    max_input: int
    reasoning: bool
    extended: bool
    efforts: tuple[str, ...]
    default_effort: str


# Reasoning efforts (OpenAI's API reference): gpt-5, -mini and -nano take minimal to high
# and default to medium; from gpt-5.1 on, none (the default: no reasoning) to high, and
# xhigh on the models after gpt-5.1-codex-max; the o-series low to high.
_EFFORTS_5 = ("minimal", "low", "medium", "high")
_EFFORTS_51 = ("none", "low", "medium", "high")
_EFFORTS_52 = (*_EFFORTS_51, "xhigh")
_EFFORTS_O = ("low", "medium", "high")
_GPT5: _Gpt5 = {
    "max_input": 272_000,
    "reasoning": True,
    "extended": True,
    "efforts": _EFFORTS_5,
    "default_effort": "medium",
}
_GPT5_SMALL: _Gpt5 = {**_GPT5, "extended": False}
_GPT51: _Gpt5 = {**_GPT5, "efforts": _EFFORTS_51, "default_effort": "none"}
_GPT52: _Gpt5 = {**_GPT51, "efforts": _EFFORTS_52}
MODEL_FAMILIES: tuple[ModelFamily, ...] = (
    # Anthropic: an empty prefix is the fallback for Claude models not listed here.
    _claude("", "", 1024, None),
    # prefix, name, shortest cached prefix, list prices, context window, maximum output,
    # retirement. Windows, output and price tiers: Claude Code 2.1.332's catalog;
    # retirement: its first-party dates (Opus 4.1 has none there: Claude Code remaps it).
    _claude("claude-opus-5-5", "Opus 5.5", 512, _T4_20_READ_0_20, _M, 128_000),
    _claude("claude-opus-5", "Opus 5", 512, _T5_25, _M, 128_000),
    _claude("claude-fable-5-2", "Fable 5.2", 512, _T8_40_READ_0_20, _M, 128_000),
    _claude("claude-fable-5-1", "Fable 5.1", 512, _T10_50_READ_0_25, _M, 128_000),
    _claude("claude-fable-5", "Fable 5", 512, _T10_50, _M, 128_000),
    _claude("claude-mythos-5-2", "Mythos 5.2", 512, _T8_40_READ_0_20, _M, 128_000),
    _claude("claude-mythos-5-1", "Mythos 5.1", 512, _T10_50_READ_0_25, _M, 128_000),
    _claude("claude-mythos-5", "Mythos 5", 512, _T10_50, _M, 128_000),
    _claude("claude-mythos", "Mythos", 4096, None),
    _claude("claude-opus-4-8", "Opus 4.8", 1024, _T5_25, _M, 128_000),
    _claude("claude-opus-4-7", "Opus 4.7", 2048, _T5_25, _M, 128_000),
    _claude("claude-opus-4-6", "Opus 4.6", 4096, _T5_25, max_output=128_000),
    _claude("claude-opus-4-5", "Opus 4.5", 4096, _T5_25, _K, 64_000, "2027-01-22"),
    _claude("claude-opus-4-1", "Opus 4.1", 1024, _T15_75, _K, 32_000, **_DROPS),
    _claude("claude-opus-4-0", "Opus 4", 1024, _T15_75, _K, 32_000, "2026-06-15", **_DROPS),
    # Opus 4's short and dated names (claude-opus-4, claude-opus-4-20250514).
    _claude("claude-opus-4", "Opus 4", 1024, _T15_75, _K, 32_000, "2026-06-15", **_DROPS),
    _claude("claude-sonnet-5-5", "Sonnet 5.5", 1024, _T2_10_READ_0_10, _M, 128_000),
    _claude("claude-sonnet-5", "Sonnet 5", 1024, _T2_10, _M, 128_000),
    _claude("claude-sonnet-4-6", "Sonnet 4.6", 2048, _T3_15, max_output=128_000),
    _claude("claude-sonnet-4-5", "Sonnet 4.5", 1024, _T3_15, _K, 64_000, "2026-11-30", **_DROPS),
    _claude("claude-sonnet-4-0", "Sonnet 4", 1024, _T3_15, _K, 64_000, "2026-06-15", **_DROPS),
    # Sonnet 4's short and dated names (claude-sonnet-4, claude-sonnet-4-20250514).
    _claude("claude-sonnet-4", "Sonnet 4", 1024, _T3_15, _K, 64_000, "2026-06-15", **_DROPS),
    _claude("claude-3-7-sonnet", "3.7 Sonnet", 1024, _T3_15, _K, 64_000, "2026-02-19", **_DROPS),
    _claude("claude-3-5-sonnet", "3.5 Sonnet", 1024, _T3_15, _K, 8192, "2025-10-28", **_DROPS),
    _claude("claude-3-opus", "3 Opus", 1024, None, retired="2026-01-05", **_DROPS),
    # Haiku 5.5's shortest cached prefix is not published; the fallback's is assumed.
    _claude("claude-haiku-5-5", "Haiku 5.5", 1024, _HAIKU_55, _M, 128_000),
    _claude("claude-haiku-4-5", "Haiku 4.5", 4096, _HAIKU_45, _K, 64_000, **_DROPS),
    _claude("claude-3-5-haiku", "3.5 Haiku", 2048, _HAIKU_35, _K, 8192, "2026-02-19", **_DROPS),
    _claude("claude-3-haiku", "3 Haiku", 2048, None, **_DROPS),
    # OpenAI and OpenAI-compatible servers: the fallback is the gpt-4o ratios.
    # ``extended``: listed on OpenAI's prompt-caching page as taking
    # ``prompt_cache_retention: "24h"`` (gpt-5.5, 5.4, 5.2, 5.1 and their codex and chat
    # variants, gpt-5, gpt-5-codex, gpt-4.1, and "all future models"); the mini and nano
    # models, gpt-5-chat, gpt-4o and the o-series are not listed. ``max_input``: GPT-5's
    # 400,000-token window takes at most 272,000 tokens of prompt.
    _gpt("", read=0.5, output=4.0, context=128_000),
    _gpt("gpt-4o", read=0.5, output=4.0, context=128_000),
    _gpt("gpt-4.1", read=0.25, output=4.0, context=1_047_576, extended=True),
    _gpt("gpt-4.1-mini", read=0.25, output=4.0, context=1_047_576),
    _gpt("gpt-4.1-nano", read=0.25, output=4.0, context=1_047_576),
    _gpt(
        "o3",
        read=0.25,
        output=4.0,
        context=200_000,
        reasoning=True,
        efforts=_EFFORTS_O,
        default_effort="medium",
    ),
    _gpt(
        "o4-mini",
        read=0.25,
        output=4.0,
        context=200_000,
        reasoning=True,
        efforts=_EFFORTS_O,
        default_effort="medium",
    ),
    _gpt("gpt-5", read=0.1, output=8.0, context=400_000, **_GPT5),
    _gpt("gpt-5-mini", read=0.1, output=8.0, context=400_000, **_GPT5_SMALL),
    _gpt("gpt-5-nano", read=0.1, output=8.0, context=400_000, **_GPT5_SMALL),
    # gpt-5-chat-latest answers without reasoning; its window is 128,000 tokens.
    _gpt("gpt-5-chat", read=0.1, output=8.0, context=128_000),
    _gpt("gpt-5.1", read=0.1, output=8.0, context=400_000, **_GPT51),
    _gpt("gpt-5.", read=0.1, output=8.0, context=400_000, **_GPT52),  # 5.2 to 5.5
    _gpt("gpt-5.6", read=0.1, output=8.0, context=400_000, write=1.25, **_GPT52),
    _gpt("gpt-5.7", read=0.1, output=8.0, context=400_000, write=1.25, **_GPT52),
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
    if best.reasoning_efforts and _OWN_EFFORTS.search(name):
        # Their efforts are their own (gpt-5-pro takes only high, the codex models no
        # minimal or none, the chat models only medium): unknown here, so none is sent.
        best = dataclasses.replace(best, reasoning_efforts=(), default_reasoning_effort=None)
    if prices:
        override = _override(prices, who, name)
        if override is not None:
            best = dataclasses.replace(best, prices=override)
    return best


_OWN_EFFORTS = re.compile(r"-(?:codex|pro|chat)(?:-|$)")
"""The GPT-5 variants whose ``reasoning_effort`` values differ from their line's."""


def _override(prices: Mapping[str, Prices], provider: Provider, name: str) -> Prices | None:
    spec = f"{provider}:{name}"
    found: tuple[int, Prices] | None = None
    for key, value in prices.items():
        matches = spec.startswith(key) or name.startswith(key)
        if matches and (found is None or len(key) > found[0]):
            found = (len(key), value)
    return found[1] if found is not None else None


def _today() -> datetime.date:
    return datetime.datetime.now(datetime.UTC).date()


def _long_date(day: datetime.date) -> str:
    # As Claude Code writes it: "November 30, 2026".
    return f"{day.strftime('%B')} {day.day}, {day.year}"


def _retired(model_name: str, today: datetime.date | None) -> ModelFamily | None:
    """The family of ``model_name`` when Anthropic no longer serves it on ``today``."""
    if provider_of(model_name) != "anthropic":
        return None
    family = model_family(model_name, "anthropic")
    if family.retired_on is None or (today or _today()) < family.retired_on:
        return None
    return family


def retirement(model_name: str, *, today: datetime.date | None = None) -> str | None:
    """Why ``model_name`` (a bare name or a spec) cannot be used on ``today`` (default: the
    current UTC date), in one line naming its replacement; None while it is served.

    A model is retired from the day Claude Code's table gives for Anthropic's own API on.
    """
    family = _retired(model_name, today)
    if family is None or family.retired_on is None:
        return None
    name = _bare(model_name)
    instead = f"; use anthropic:{family.replacement} instead" if family.replacement else ""
    return (
        f"{name} ({family.label or 'this model'}) was retired on "
        f"{_long_date(family.retired_on)}{instead}"
    )


def upcoming_retirement(model_name: str, *, today: datetime.date | None = None) -> str | None:
    """The day ``model_name`` will be retired and its replacement, in one line, while it
    is still served on ``today`` and a retirement day is set (Claude Code warns the same
    way); None otherwise."""
    if provider_of(model_name) != "anthropic":
        return None
    family = model_family(model_name, "anthropic")
    if family.retired_on is None or (today or _today()) >= family.retired_on:
        return None
    instead = f"; use anthropic:{family.replacement}" if family.replacement else ""
    return (
        f"{_bare(model_name)} ({family.label or 'this model'}) will be retired on "
        f"{_long_date(family.retired_on)}{instead}"
    )


def check_not_retired(model_name: str, *, today: datetime.date | None = None) -> None:
    """Raise :class:`~memdir.errors.UsageError` with :func:`retirement`'s line when
    ``model_name`` is retired on ``today``."""
    why = retirement(model_name, today=today)
    if why is not None:
        raise UsageError(why)


def in_service(model_name: str, *, today: datetime.date | None = None) -> str:
    """``model_name`` (a bare name or a spec), or its replacement in the same form when it
    is retired on ``today``: the model for work that follows a host still naming it."""
    family = _retired(model_name, today)
    if family is None or family.replacement is None:
        return model_name
    head, _, rest = model_name.partition(":")
    return f"{head}:{family.replacement}" if rest and head == "anthropic" else family.replacement
