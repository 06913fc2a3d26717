"""Models: the protocol the memory agent talks to, adapters for real providers, and the
table of the models memdir knows.

:func:`resolve_model` turns a spec such as ``anthropic:claude-sonnet-5-5`` or
``openai:gpt-4.1`` into a :class:`Model`; ``offline`` is :class:`OfflineModel`, a
rule-based model that needs no provider at all. :data:`MODEL_FAMILIES` holds each model
family's context window, prices, cache rules and retirement date; a retired model is
refused in one line naming its replacement (:func:`retirement`).
"""

from __future__ import annotations

import datetime

from memdir.errors import UsageError
from memdir.models._anthropic import AnthropicModel
from memdir.models._offline import OfflineModel
from memdir.models._openai import OpenAIModel, openai_tools
from memdir.models._retry import RetryPolicy
from memdir.models._table import (
    DEFAULT_ANTHROPIC_MODEL,
    DEFAULT_OPENAI_MODEL,
    MODEL_FAMILIES,
    ModelFamily,
    Prices,
    check_not_retired,
    in_service,
    model_family,
    provider_of,
    retirement,
    upcoming_retirement,
)
from memdir.models._types import Model, ModelRequest, ModelResponse, SystemPrompt, Usage

__all__ = [
    "DEFAULT_ANTHROPIC_MODEL",
    "DEFAULT_OPENAI_MODEL",
    "MODEL_FAMILIES",
    "AnthropicModel",
    "Model",
    "ModelFamily",
    "ModelRequest",
    "ModelResponse",
    "OfflineModel",
    "OpenAIModel",
    "Prices",
    "RetryPolicy",
    "SystemPrompt",
    "Usage",
    "check_not_retired",
    "in_service",
    "model_family",
    "openai_tools",
    "provider_of",
    "resolve_model",
    "retirement",
    "upcoming_retirement",
]

_PROVIDERS = ("anthropic", "openai")


def resolve_model(
    spec: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float = 600.0,
    retry: RetryPolicy | None = None,
    today: datetime.date | None = None,
) -> Model:
    """The model a spec names: ``anthropic:MODEL``, ``openai:MODEL`` or ``offline``.

    ``api_key`` and ``base_url`` go to the provider's client; left out, the client reads
    its usual environment variables (for Anthropic ``MEMDIR_ANTHROPIC_API_KEY`` first,
    then ``ANTHROPIC_API_KEY`` or ``ANTHROPIC_AUTH_TOKEN``; ``OPENAI_API_KEY``,
    ``OPENAI_BASE_URL``, …). Raises :class:`~memdir.errors.UsageError` for a spec it
    cannot serve, a model retired on ``today`` (default: the current date) among them.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise UsageError("a model spec is needed: 'anthropic:MODEL', 'openai:MODEL' or 'offline'")
    spec = spec.strip()
    if spec == "offline":
        return OfflineModel()
    provider, sep, name = spec.partition(":")
    if not sep or provider not in _PROVIDERS or not name:
        raise UsageError(
            f"unknown model spec {spec!r}: use 'anthropic:MODEL', 'openai:MODEL' or 'offline'"
        )
    if provider == "anthropic":
        return AnthropicModel(
            name, api_key=api_key, base_url=base_url, timeout=timeout, retry=retry, today=today
        )
    return OpenAIModel(name, api_key=api_key, base_url=base_url, timeout=timeout, retry=retry)
