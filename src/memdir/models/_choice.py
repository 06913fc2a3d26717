"""Which model memdir uses when the caller names none: never the offline engine unasked.

Shared by the command line, the hook and the integrations' standalone runs, so that each
picks the same model from the same environment, and each says the same thing
(:data:`NO_MODEL`) when there is none.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping

from memdir.models._anthropic import MEMDIR_ANTHROPIC_API_KEY_ENV
from memdir.models._table import (
    DEFAULT_ANTHROPIC_MODEL,
    DEFAULT_OPENAI_MODEL,
    in_service,
    provider_of,
)

__all__ = ["ANTHROPIC_CREDENTIALS", "MEMDIR_MODEL_ENV", "NO_MODEL", "can_reach", "model_spec"]

MEMDIR_MODEL_ENV = "MEMDIR_MODEL"

NO_MODEL = (
    "no model to run: set MEMDIR_ANTHROPIC_API_KEY, ANTHROPIC_API_KEY or "
    "ANTHROPIC_AUTH_TOKEN (or OPENAI_API_KEY), or pass --model offline for the "
    "rule-based engine"
)
"""Why a command that needs a model stops when no provider is configured: the offline
engine runs only when asked for, never in place of a model the user meant to have."""

ANTHROPIC_CREDENTIALS = (MEMDIR_ANTHROPIC_API_KEY_ENV, "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


def can_reach(provider: str | None, env: Mapping[str, str]) -> bool:
    """Whether ``env`` holds what memdir's own client for ``provider`` needs."""
    if provider == "anthropic":
        return any(env.get(name) for name in ANTHROPIC_CREDENTIALS)
    if provider == "openai":
        return bool(env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"))
    return False


def model_spec(
    option: str | None,
    env: Mapping[str, str] | None = None,
    *,
    host: str | None = None,
    today: datetime.date | None = None,
) -> str | None:
    """The model spec to use, or None when nothing names one and no provider is set up.

    ``--model``, else ``$MEMDIR_MODEL``, else the host's own model (``host``, a name such
    as :func:`~memdir.transcripts.host_model` reads from a transcript; a retired one
    replaced by its successor) when memdir has credentials for its provider, else
    Anthropic's default when ``$MEMDIR_ANTHROPIC_API_KEY``, ``$ANTHROPIC_API_KEY`` or
    ``$ANTHROPIC_AUTH_TOKEN`` is set, else OpenAI's when ``$OPENAI_API_KEY`` or
    ``$OPENAI_BASE_URL`` is. Never ``offline`` unless asked for: None is the caller's to
    report (:data:`NO_MODEL`).
    """
    env = os.environ if env is None else env
    if option:
        return option
    if env.get(MEMDIR_MODEL_ENV):
        return env[MEMDIR_MODEL_ENV]
    if host:
        provider = provider_of(host)
        if provider is not None and can_reach(provider, env):
            spec = host if host.startswith(f"{provider}:") else f"{provider}:{host}"
            return in_service(spec, today=today)
    if can_reach("anthropic", env):
        return f"anthropic:{DEFAULT_ANTHROPIC_MODEL}"
    if can_reach("openai", env):
        return f"openai:{DEFAULT_OPENAI_MODEL}"
    return None
