"""What a model's tokens cost: a request's bill, and the estimate of a way to run.

The facts a cost is made of (each model family's prices, cache rules and context window)
live in memdir's one model table, :mod:`memdir.models` (:data:`MODEL_FAMILIES`,
:func:`model_family`); they are re-exported here, where they were first defined, and a
caller's own prices take precedence (``ExtractConfig.prices``).

Prices are relative: each family's input token costs 1.0 and the other kinds are multiples
of it, so a cost is in *input-token equivalents* of that model. That is enough to choose
between two ways of running the same model, and it stays true when list prices change
together. Give absolute prices (say, dollars per million tokens, as
:attr:`ModelFamily.list_prices` holds them) to get absolute costs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from memdir.models import Usage
from memdir.models._table import (
    MODEL_FAMILIES,
    ModelFamily,
    Prices,
    Provider,
    model_family,
    provider_of,
)

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


def bill(usage: Usage, prices: Prices) -> float:
    """What ``usage`` costs at ``prices``: each kind of token at its own price. A reasoning
    model's unseen reasoning tokens are part of ``output_tokens`` and cost what output does."""
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
    cost_if_saved: float | None = None
    """What the run costs if it saves a memory (a file and its index line: most of the
    output); :attr:`cost` weighs this and :attr:`cost_if_nothing_saved` by how often runs
    save. None where the estimate does not tell the two apart."""
    cost_if_nothing_saved: float | None = None
    """What the run costs if it answers that there is nothing to save."""

    @property
    def prompt_tokens(self) -> float:
        """Every input token, however it is billed."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
