"""Which way a run goes: inside the host's prompt cache (the fork), or memdir's own request.

Both see the same new messages and save the same memories; they differ in what they pay
for. The fork re-sends the host's whole request, which is cheap only while the host's
cache still holds it: read at a tenth of the input price on Anthropic, written again at
1.25 times once it has expired, and too big to send at all past the model's context
window. The standalone request pays for a bounded window of conversation, the new
messages and memdir's own instructions, most of them cached across its runs.

:func:`plan_run` prices both from token estimates and the cache's state, and picks the
cheaper; the estimates are values (:class:`~memdir.cost.CostEstimate`) that telemetry
reports and tests assert.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from memdir.cost import CostEstimate, ModelFamily

__all__ = [
    "LONG_TTL_SECONDS",
    "Mode",
    "RequestShape",
    "RunPlan",
    "RunStats",
    "estimate",
    "long_ttl_pays",
    "plan_run",
    "priced_as_run",
]

Mode = Literal["auto", "fork", "standalone"]


@dataclass(frozen=True, kw_only=True)
class RequestShape:
    """A run's first request, in estimated tokens, and what the cache holds of it."""

    family: ModelFamily
    """The model it goes to."""
    model: str
    """That model's spec, for the report."""
    prompt_tokens: int
    """Every input token of the first request."""
    warm_tokens: int
    """How many of them, from the start, the provider's cache should still hold."""
    note: str = ""
    """What decided ``warm_tokens`` (``host cache warm``, ``host cache expired``, …)."""
    priced: bool = True
    """Whether the model's provider is known, and so its prices and cache rules; for a
    model of memdir's own (a test double, the offline model) they are guesses."""
    can_write: bool = True
    """Whether the request's tools let the model save a memory (a fork is shown only the
    host's tools: without Write, Edit or the memory tool among them it cannot save)."""
    cache_ttl: str | None = None
    """The lifetime the request asks for its stable prefix (Anthropic ``"1h"``), None for
    the default; see :func:`long_ttl_pays`."""
    long_tokens: int = 0
    """Of ``prompt_tokens``, those from the start up to the last breakpoint written with
    the one-hour lifetime: what of them is not warm is written at
    :attr:`~memdir.cost.Prices.cache_write_1h`."""


LONG_TTL_SECONDS = 3600.0
"""Anthropic's longer cache lifetime (``ttl: "1h"``)."""


@dataclass
class RunStats:
    """What earlier runs of one extractor looked like, to expect the next one from.

    Runs come in two kinds that cost very differently: most find nothing to save and
    answer in a few tokens; a save writes a memory file and its index line, tens to
    hundreds of tokens at the output price (five to eight times the input's; memdir
    writes the index line itself). Each kind
    keeps its own means, and :attr:`save_share` says how often the second comes. Starts
    from a typical run of each kind.
    """

    requests: float = 1.0
    """Model requests a run that saves nothing makes, on average (one: it answers)."""
    output_tokens: float = 20.0
    """Tokens such a run generates, on average."""
    save_requests: float = 1.1
    """Model requests a run that saves makes, on average: one when the files go out
    together (memdir ends the run on its writes); two or three for an update, whose file
    is read (and perhaps searched for) first. 1.1 in ``bench/cost_vs_mem0.py``."""
    save_output_tokens: float = 100.0
    """Tokens a run that saves generates, on average: a memory file of a few lines, with
    its name and type left to memdir's tools and no words beside the call (85 to 95 in
    ``bench/cost_vs_mem0.py`` and ``bench/planner_fidelity.py``)."""
    growth_tokens: float = 400.0
    """Tokens each later request of a run adds to the one before (calls and results)."""
    runs: int = 0
    """Runs seen so far."""
    saves: int = 0
    """Of them, runs that saved."""
    warm_share: float = 0.5
    """How often a run came soon enough after the one before for memdir's cache to live
    (within the lifetime it is written with: five minutes, or OpenAI's 24 hours)."""
    short_share: float = 0.5
    """How often the gap between two runs was under five minutes (Anthropic's default
    lifetime)."""
    hour_share: float = 0.75
    """How often it was under an hour (Anthropic's ``ttl: "1h"``)."""
    save_share: float = 0.3
    """How often a run changed memory: the share of the last :data:`SAVE_WINDOW` runs that
    did, with this starting value counted as :data:`_PRIOR_RUNS` runs of them."""
    gaps: int = 0
    """Gaps between runs seen so far."""
    recent: deque[bool] = field(default_factory=lambda: deque(maxlen=SAVE_WINDOW))
    """Whether each of the last :data:`SAVE_WINDOW` runs saved, oldest first."""
    _prior_share: float = field(init=False, repr=False, default=0.0)

    def __post_init__(self) -> None:
        self._prior_share = self.save_share

    @classmethod
    def for_family(cls, family: ModelFamily, effort: str | None = None) -> RunStats:
        """The starting figures for runs on ``family``: a reasoning model thinks before
        each answer, in tokens billed as output (:data:`REASONING_TOKENS` a request at its
        default effort, fewer at the ``effort`` memdir asks for, if any)."""
        stats = cls()
        if family.reasoning:
            effort = effort or family.default_reasoning_effort
            reasoning = REASONING_TOKENS * _EFFORT_SHARE.get(effort or "medium", 1.0)
            stats.output_tokens += reasoning * stats.requests
            stats.save_output_tokens += reasoning * stats.save_requests
        return stats

    def record(
        self, requests: int, output_tokens: int, growth_tokens: float, *, saved: bool = False
    ) -> None:
        """Fold one finished run in: the first few count fully, later ones as a moving mean."""
        self.runs += 1
        # The share of recent runs that saved, the starting value counted as a few runs
        # (one run that saved says little of the next): a plain share rather than a moving
        # mean, which jumps by a fifth at every save and overstates how often runs save.
        self.recent.append(saved)
        prior = self._prior_share * _PRIOR_RUNS
        self.save_share = (prior + sum(self.recent)) / (_PRIOR_RUNS + len(self.recent))
        if saved:
            self.saves += 1
            weight = _weight(self.saves)
            self.save_requests += weight * (requests - self.save_requests)
            self.save_output_tokens += weight * (output_tokens - self.save_output_tokens)
        else:
            weight = _weight(self.runs - self.saves)
            self.requests += weight * (requests - self.requests)
            self.output_tokens += weight * (output_tokens - self.output_tokens)
        if requests > 1:
            self.growth_tokens += _weight(self.runs) * (growth_tokens - self.growth_tokens)

    def record_gap(self, seconds: float, lifetime: float = 300.0) -> None:
        """Fold in the time since the last run, against ``lifetime``, how long memdir's
        cache lives unused, and against the five-minute and one-hour lifetimes."""
        self.gaps += 1
        weight = _weight(self.gaps)
        self.warm_share += weight * (float(seconds < lifetime) - self.warm_share)
        self.short_share += weight * (float(seconds < 300.0) - self.short_share)
        self.hour_share += weight * (float(seconds < LONG_TTL_SECONDS) - self.hour_share)


SAVE_WINDOW = 20
"""How many of the latest runs :attr:`RunStats.save_share` counts: enough that one save
moves it little, few enough that a session whose subject changes is followed."""

REASONING_TOKENS = 300
"""Unseen reasoning tokens expected of a reasoning model's answer before any run has
shown how many it spends: of the order a short tool-calling answer of gpt-5-mini takes."""

_EFFORT_SHARE = {"none": 0.0, "minimal": 1 / 3, "low": 0.5}
"""Reasoning at a lower effort, as a share of the default's: a first guess (OpenAI gives
no figures), which each run's reported usage then replaces."""

OPENAI_CACHE_STEP = 128
"""OpenAI reports (and bills) cache hits in steps of this many tokens."""

_PRIOR_RUNS = 2
"""How many runs :attr:`RunStats.save_share`'s starting value weighs as."""


def _weight(count: int) -> float:
    return max(1.0 / count, 0.2) if count > 0 else 1.0


def long_ttl_pays(family: ModelFamily, stats: RunStats, stable: int, written: int) -> bool:
    """Whether memdir's own request should cache its stable prefix (everything before the
    final message: instructions, tools, the window and the new messages; ``stable``
    tokens) for an hour rather than five minutes.

    An hour costs more now: what this run writes of that prefix (``written``) at
    :attr:`~memdir.cost.Prices.cache_write_1h` (2x) instead of ``cache_write`` (1.25x).
    It saves later: a run that comes between five minutes and an hour after this one
    (:attr:`RunStats.short_share`, :attr:`RunStats.hour_share`) reads the whole prefix at
    0.1x instead of writing it again. Only Anthropic prices the two lifetimes apart;
    OpenAI's longer retention is a parameter with no price of its own.
    """
    prices = family.prices
    if family.provider != "anthropic" or stats.gaps == 0 or stable < family.min_cache_tokens:
        return False
    premium = (prices.cache_write_1h - prices.cache_write) * max(written, 0)
    between = max(stats.hour_share - stats.short_share, 0.0)
    return between * stable * (prices.cache_write - prices.cache_read) > premium


@dataclass(frozen=True, kw_only=True)
class RunPlan:
    """The way chosen for one run, and what each way was expected to cost."""

    mode: Literal["fork", "standalone"]
    """What runs."""
    fork: CostEstimate | None
    """The fork's estimate; None when there is no host request to share."""
    standalone: CostEstimate
    """The standalone request's estimate."""
    reason: str
    """Why, in a few words."""


def estimate(
    mode: Literal["fork", "standalone"], shape: RequestShape, stats: RunStats
) -> CostEstimate:
    """What a run of ``shape`` should cost at its family's prices.

    The first request reads what is warm and writes the rest at the cache-write price
    (the one-hour price up to :attr:`RequestShape.long_tokens`; on OpenAI that is the
    input price: it bills no write); below the family's minimum nothing is cached and all
    of it is plain input. Each later request reads the one before and writes what it
    adds. A run that saves and one that does not are priced apart, each with its own
    requests and output, and weighed by how often runs save.
    """
    idle = _priced(shape, stats.requests, stats.output_tokens, stats.growth_tokens)
    saving = _priced(shape, stats.save_requests, stats.save_output_tokens, stats.growth_tokens)
    p = stats.save_share

    def mix(i: int) -> float:
        return p * saving[i] + (1.0 - p) * idle[i]

    return CostEstimate(
        mode=mode,
        model=shape.model,
        requests=p * stats.save_requests + (1.0 - p) * stats.requests,
        input_tokens=mix(0),
        cache_read_tokens=mix(2),
        cache_write_tokens=mix(1) + mix(3),
        output_tokens=p * stats.save_output_tokens + (1.0 - p) * stats.output_tokens,
        cost=mix(4),
        note=shape.note,
        cost_if_saved=saving[4],
        cost_if_nothing_saved=idle[4],
    )


def priced_as_run(
    shape: RequestShape, requests: int, output_tokens: int, growth_tokens: float
) -> float:
    """What ``shape`` costs priced with what the run then did: its ``requests``, the
    ``output_tokens`` it generated and the tokens each later request added.

    The estimate made before the run (:func:`estimate`) expects those from earlier runs;
    whether a run saves, and whether a save first reads the memory it updates, is the
    model's choice, and moves a run's bill by a third to twice over. With them taken as
    they came, what is left of the gap to the bill is the planner's view of the request
    and the cache: its token counts, and what it took to be warm.
    """
    return _priced(shape, float(requests), float(output_tokens), growth_tokens)[4]


def _priced(
    shape: RequestShape, requests: float, output: float, growth: float
) -> tuple[float, float, float, float, float]:
    """Plain, short-lived written, read and hour-long written tokens of a run of
    ``requests`` requests, and its cost with ``output`` tokens generated."""
    family = shape.family
    prices = family.prices
    prompt = float(shape.prompt_tokens)
    cacheable = prompt >= family.min_cache_tokens
    warm = float(min(shape.warm_tokens, shape.prompt_tokens)) if cacheable else 0.0
    if family.provider == "openai":
        # OpenAI serves a cached prefix in whole steps of 128 tokens.
        warm = warm // OPENAI_CACHE_STEP * OPENAI_CACHE_STEP
    read = warm
    long_written = max(float(min(shape.long_tokens, shape.prompt_tokens)) - warm, 0.0)
    long_written = long_written if cacheable else 0.0
    written = prompt - warm - long_written if cacheable else 0.0
    plain = 0.0 if cacheable else prompt
    # Later requests: request k reads the whole of request k - 1 and writes what it adds.
    later = max(requests - 1.0, 0.0)
    read += later * (prompt + growth * (later - 1.0) / 2.0) if cacheable else 0.0
    written += later * growth if cacheable else 0.0
    plain += 0.0 if cacheable else later * (prompt + growth * (later + 1.0) / 2.0)
    cost = (
        plain * prices.input
        + written * prices.cache_write
        + long_written * prices.cache_write_1h
        + read * prices.cache_read
        + output * prices.output
    )
    return plain, written, read, long_written, cost


def plan_run(
    setting: Mode,
    fork: RequestShape | None,
    standalone: RequestShape,
    stats: RunStats,
    standalone_warm: CostEstimate | None = None,
    warm_share: float | None = None,
    later_share: float | None = None,
) -> RunPlan:
    """Price both ways and choose by ``setting``: ``auto`` takes the cheaper, ``fork`` and
    ``standalone`` insist (the fork only while a host request exists and fits the model).

    The standalone side is always this run's own estimate, with memdir's cache as it is
    now (cold on its first standalone run): that is what the run will be billed, and what
    telemetry compares with the bill. ``standalone_warm``, a standalone run that finds
    memdir's cache as this one leaves it, only decides whether a cold standalone run that
    costs more than the fork is worth taking to make the next one cheaper (see
    :func:`_switch_pays`); ``warm_share`` is how often the next run is expected to find
    memdir's cache still there (default :attr:`RunStats.warm_share`;
    :attr:`RunStats.hour_share` where memdir writes its cache for an hour).
    """
    alone = estimate("standalone", standalone, stats)
    if fork is None:
        return RunPlan(mode="standalone", fork=None, standalone=alone, reason="no host request")
    shared = estimate("fork", fork, stats)
    if fork.prompt_tokens > fork.family.prompt_limit:
        reason = "the host's request outgrew the model's context window"
        return RunPlan(mode="standalone", fork=shared, standalone=alone, reason=reason)
    if setting == "fork":
        return RunPlan(mode="fork", fork=shared, standalone=alone, reason="mode=fork")
    if setting == "auto" and fork.priced and not fork.can_write:
        reason = "the host's tools cannot write memory"
        return RunPlan(mode="standalone", fork=shared, standalone=alone, reason=reason)
    if setting == "auto" and not (fork.priced and standalone.priced):
        # Without real prices the comparison means nothing; sharing the host's cache is
        # the design's default.
        reason = "no prices for the model: the fork shares the host's cache"
        return RunPlan(mode="fork", fork=shared, standalone=alone, reason=reason)
    if setting == "standalone":
        return RunPlan(mode="standalone", fork=shared, standalone=alone, reason="mode=standalone")
    if shared.cost <= alone.cost:
        share = stats.warm_share if warm_share is None else warm_share
        later = share if later_share is None else later_share
        if standalone_warm is not None and _switch_pays(
            shared, alone, standalone_warm, share, later
        ):
            reason = "standalone pays back its cold cache in later runs"
            return RunPlan(mode="standalone", fork=shared, standalone=alone, reason=reason)
        return RunPlan(mode="fork", fork=shared, standalone=alone, reason="fork is cheaper")
    return RunPlan(mode="standalone", fork=shared, standalone=alone, reason="standalone is cheaper")


def _switch_pays(
    shared: CostEstimate,
    alone: CostEstimate,
    warm: CostEstimate,
    warm_share: float,
    later_share: float | None = None,
) -> bool:
    """Whether going standalone now, dearer than the fork because memdir's cache is cold,
    is paid back by the runs after it: each that finds the cache this run writes costs
    ``warm`` instead of the fork's ``shared``.

    The next run finds it ``warm_share`` of the time, and each one after that (reading
    what the one before wrote) ``later_share`` of the time (by default as often): ``w·(1 +
    v + v² + …)`` runs in all, at most :data:`PAYBACK_RUNS` (sessions end, and runs far
    ahead are too uncertain to bank on). On Claude a warm run writes for an hour where
    pauses call for it, at little cost (:func:`long_ttl_pays`), so after the next run the
    chain lasts as long as the runs come within the hour.
    A run that comes too late for the cache costs nothing more than a fork: it chooses
    again, and forks if the cold write does not pay then either. Where even a warm
    standalone run costs more than the fork, no run pays the write back."""
    if warm.cost >= shared.cost:
        return False
    later = warm_share if later_share is None else later_share
    # The next run comes in time warm_share of the time; each after it, later_share of
    # the time (Claude: a warm run writes for an hour at little cost, so the runs after
    # it are kept within the hour): w·(1 + v + v² + …).
    chain = PAYBACK_RUNS if later >= 1.0 else later / (1.0 - later)
    runs = min(warm_share * (1.0 + chain), PAYBACK_RUNS)
    return alone.cost - shared.cost < runs * (shared.cost - warm.cost)


PAYBACK_RUNS = 4.0
"""The most later runs a cold standalone run's extra cost may be spread over."""
