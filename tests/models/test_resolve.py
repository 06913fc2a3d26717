"""resolve_model: specs to models, and clear errors for the rest."""

from __future__ import annotations

import pytest

from memdir.errors import UsageError
from memdir.models import AnthropicModel, Model, OfflineModel, OpenAIModel, resolve_model


def test_anthropic_spec() -> None:
    model = resolve_model("anthropic:claude-sonnet-4-5", api_key="k", base_url="http://127.0.0.1:9")
    assert isinstance(model, AnthropicModel)
    assert model.name == "anthropic:claude-sonnet-4-5"
    assert isinstance(model, Model)


def test_openai_spec() -> None:
    model = resolve_model("openai:gpt-4.1", api_key="k", base_url="http://127.0.0.1:9/v1")
    assert isinstance(model, OpenAIModel)
    assert model.name == "openai:gpt-4.1"


def test_offline_spec() -> None:
    model = resolve_model("offline")
    assert isinstance(model, OfflineModel)
    assert model.name == "offline"


@pytest.mark.parametrize("spec", ["", "  ", "claude", "anthropic:", "mistral:large", ":x"])
def test_bad_specs(spec: str) -> None:
    with pytest.raises(UsageError, match="model spec"):
        resolve_model(spec)
