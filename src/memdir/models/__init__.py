"""Models: the protocol the memory agent talks to, and adapters for real providers.

:func:`resolve_model` turns a spec such as ``anthropic:claude-sonnet-4-5`` or
``openai:gpt-4.1`` into a :class:`Model`; ``offline`` is :class:`OfflineModel`, a
rule-based model that needs no provider at all.
"""

from __future__ import annotations

from memdir.errors import UsageError
from memdir.models._anthropic import AnthropicModel
from memdir.models._offline import OfflineModel
from memdir.models._openai import OpenAIModel, openai_tools
from memdir.models._retry import RetryPolicy
from memdir.models._types import Model, ModelRequest, ModelResponse, SystemPrompt, Usage

__all__ = [
    "AnthropicModel",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "OfflineModel",
    "OpenAIModel",
    "RetryPolicy",
    "SystemPrompt",
    "Usage",
    "openai_tools",
    "resolve_model",
]

_PROVIDERS = ("anthropic", "openai")


def resolve_model(
    spec: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float = 600.0,
    retry: RetryPolicy | None = None,
) -> Model:
    """The model a spec names: ``anthropic:MODEL``, ``openai:MODEL`` or ``offline``.

    ``api_key`` and ``base_url`` go to the provider's client; left out, the client reads
    its usual environment variables (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``,
    ``OPENAI_BASE_URL``, …). Raises :class:`~memdir.errors.UsageError` for a spec it
    cannot serve.
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
            name, api_key=api_key, base_url=base_url, timeout=timeout, retry=retry
        )
    return OpenAIModel(name, api_key=api_key, base_url=base_url, timeout=timeout, retry=retry)
