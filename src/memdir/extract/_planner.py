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

from dataclasses import dataclass
from typing import Literal

from memdir.cost import CostEstimate, ModelFamily

__all__ = ["Mode", "RequestShape", "RunPlan", "RunStats", "estimate", "plan_run"]

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


@dataclass
class RunStats:
    """What earlier runs of one extractor looked like, to expect the next one from.

    Starts from a typical run: one or two requests (nothing to save is one; a save is
    one; changing a memory is a read, then a write), a short answer or a file.
    """

    requests: float = 1.5
    """Model requests a run makes, on average."""
    output_tokens: float = 150.0
    """Tokens a run generates, on average."""
    growth_tokens: float = 400.0
    """Tokens each later request of a run adds to the one before (calls and results)."""
    runs: int = 0
    """Runs seen so far."""
    warm_share: float = 0.5
    """How often a run came soon enough after the one before for its cache to live."""
    save_share: float = 0.3
    """How often a run changed memory (which changes what the next standalone run sends
    right after memdir's instructions, so less of it is cached)."""
    gaps: int = 0
    """Gaps between runs seen so far."""

    def record(
        self, requests: int, output_tokens: int, growth_tokens: float, *, saved: bool = False
    ) -> None:
        """Fold one finished run in: the first few count fully, later ones as a moving mean."""
        self.runs += 1
        weight = max(1.0 / self.runs, 0.2)
        self.requests += weight * (requests - self.requests)
        self.output_tokens += weight * (output_tokens - self.output_tokens)
        self.save_share += weight * (float(saved) - self.save_share)
        if requests > 1:
            self.growth_tokens += weight * (growth_tokens - self.growth_tokens)

    def record_gap(self, warm: bool) -> None:
        """Fold in whether the time since the last run was within the cache's lifetime."""
        self.gaps += 1
        weight = max(1.0 / self.gaps, 0.2)
        self.warm_share += weight * (float(warm) - self.warm_share)


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
    (on OpenAI that is the input price: it bills no write); below the family's minimum
    nothing is cached and all of it is plain input. Each later request reads the one
    before and writes what it adds.
    """
    family = shape.family
    prices = family.prices
    prompt = float(shape.prompt_tokens)
    cacheable = prompt >= family.min_cache_tokens
    warm = float(min(shape.warm_tokens, shape.prompt_tokens)) if cacheable else 0.0
    read = warm
    written = prompt - warm if cacheable else 0.0
    plain = 0.0 if cacheable else prompt
    # Later requests: request k reads the whole of request k - 1 and writes what it adds.
    later = max(stats.requests - 1.0, 0.0)
    read += later * (prompt + stats.growth_tokens * (later - 1.0) / 2.0) if cacheable else 0.0
    written += later * stats.growth_tokens if cacheable else 0.0
    plain += 0.0 if cacheable else later * (prompt + stats.growth_tokens * (later + 1.0) / 2.0)
    cost = (
        plain * prices.input
        + written * prices.cache_write
        + read * prices.cache_read
        + stats.output_tokens * prices.output
    )
    return CostEstimate(
        mode=mode,
        model=shape.model,
        requests=stats.requests,
        input_tokens=plain,
        cache_read_tokens=read,
        cache_write_tokens=written,
        output_tokens=stats.output_tokens,
        cost=cost,
        note=shape.note,
    )


def steady(hot: RequestShape, cold: RequestShape, stats: RunStats) -> CostEstimate:
    """What a standalone run costs on average once runs are standalone: ``hot`` when the
    last one is recent enough, ``cold`` when not, in the shares seen so far.

    A run that goes standalone while its cache is cold pays to warm it for the runs
    after; comparing only this run's cost would keep a cheaper way from ever being taken.
    """
    warm = estimate("standalone", hot, stats)
    cold_estimate = estimate("standalone", cold, stats)
    p = stats.warm_share

    def mix(a: float, b: float) -> float:
        return p * a + (1.0 - p) * b

    return CostEstimate(
        mode="standalone",
        model=hot.model,
        requests=warm.requests,
        input_tokens=mix(warm.input_tokens, cold_estimate.input_tokens),
        cache_read_tokens=mix(warm.cache_read_tokens, cold_estimate.cache_read_tokens),
        cache_write_tokens=mix(warm.cache_write_tokens, cold_estimate.cache_write_tokens),
        output_tokens=warm.output_tokens,
        cost=mix(warm.cost, cold_estimate.cost),
        note=f"steady state: {p:.0%} of runs find memdir's cache warm",
    )


def plan_run(
    setting: Mode,
    fork: RequestShape | None,
    standalone: RequestShape,
    stats: RunStats,
    standalone_steady: CostEstimate | None = None,
) -> RunPlan:
    """Price both ways and choose by ``setting``: ``auto`` takes the cheaper, ``fork`` and
    ``standalone`` insist (the fork only while a host request exists and fits the model).

    The standalone side is always this run's own estimate, with memdir's cache as it is
    now (cold on its first standalone run): that is what the run will be billed, and what
    telemetry compares with the bill. ``standalone_steady`` (see :func:`steady`), the cost
    of standalone runs once they follow one another, only decides whether a cold
    standalone run that costs more than the fork is worth taking to make the next one
    cheaper.
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
        if standalone_steady is not None and _switch_pays(shared, alone, standalone_steady, stats):
            reason = "standalone pays back its cold cache in later runs"
            return RunPlan(mode="standalone", fork=shared, standalone=alone, reason=reason)
        return RunPlan(mode="fork", fork=shared, standalone=alone, reason="fork is cheaper")
    return RunPlan(mode="standalone", fork=shared, standalone=alone, reason="standalone is cheaper")


def _switch_pays(
    shared: CostEstimate, alone: CostEstimate, steady: CostEstimate, stats: RunStats
) -> bool:
    """Whether going standalone now, dearer than the fork because memdir's cache is cold,
    is paid back by the standalone runs after it: this run's extra cost against what each
    of them (``steady``, which counts how often the cache will have expired by then) saves
    on the fork. Runs are counted until the cache is expected to lapse (one over the
    share of gaps that outlive it), at most :data:`PAYBACK_RUNS`: a cache write that no
    later run reads is a cost with no saving, and runs far ahead are too uncertain to
    bank on."""
    lapse = max(1.0 - stats.warm_share, 1.0 / PAYBACK_RUNS)
    return alone.cost - shared.cost < (shared.cost - steady.cost) / lapse


PAYBACK_RUNS = 4.0
"""The most later runs a cold standalone run's extra cost may be spread over."""
