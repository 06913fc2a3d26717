"""resolve_model: specs to models, and clear errors for the rest."""

from __future__ import annotations

import asyncio
import datetime

import pytest

from memdir.errors import UsageError
from memdir.messages import Message
from memdir.models import (
    DEFAULT_ANTHROPIC_MODEL,
    AnthropicModel,
    Model,
    ModelRequest,
    OfflineModel,
    OpenAIModel,
    resolve_model,
)
from memdir.testing import FakeAnthropicServer


def test_anthropic_spec() -> None:
    model = resolve_model("anthropic:claude-sonnet-5-5", api_key="k", base_url="http://127.0.0.1:9")
    assert isinstance(model, AnthropicModel)
    assert model.name == "anthropic:claude-sonnet-5-5"
    assert isinstance(model, Model)


def test_the_default_anthropic_model_is_in_service() -> None:
    model = resolve_model(f"anthropic:{DEFAULT_ANTHROPIC_MODEL}", api_key="k")
    assert model.name == "anthropic:claude-sonnet-5-5"


@pytest.mark.parametrize("name", ["claude-sonnet-4-5", "claude-sonnet-4-5-20250929"])
def test_a_retired_model_is_refused_naming_its_replacement(name: str) -> None:
    with pytest.raises(UsageError) as caught:
        resolve_model(f"anthropic:{name}", api_key="k", today=datetime.date(2026, 11, 30))
    assert str(caught.value) == (
        f"{name} (Claude Sonnet 4.5) was retired on November 30, 2026; "
        "use anthropic:claude-sonnet-5-5 instead"
    )


def test_a_model_is_served_until_its_retirement_day() -> None:
    model = resolve_model(
        "anthropic:claude-sonnet-4-5", api_key="k", today=datetime.date(2026, 11, 29)
    )
    assert model.name == "anthropic:claude-sonnet-4-5"
    with pytest.raises(UsageError, match="use anthropic:claude-opus-5-5 instead"):
        AnthropicModel("claude-opus-4-5", api_key="k", today=datetime.date(2027, 1, 22))


def test_a_callers_own_client_decides_for_itself() -> None:
    # A client of the caller's may reach a platform that still serves the model.
    from anthropic import AsyncAnthropic

    client = AsyncAnthropic(api_key="k", base_url="http://127.0.0.1:9")
    model = AnthropicModel("claude-sonnet-4-5", client=client)
    assert model.name == "anthropic:claude-sonnet-4-5"


def _headers_sent(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> dict[str, str]:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "MEMDIR_ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with FakeAnthropicServer(["ok"]) as server:
        model = resolve_model("anthropic:claude-sonnet-5-5", base_url=server.base_url)

        async def ask() -> None:
            try:
                await model.request(ModelRequest(messages=(Message.user("hi"),)))
            finally:
                await model.client.close()  # type: ignore[attr-defined]

        asyncio.run(ask())
        return dict(server.requests[0].headers)


def test_a_bearer_token_alone_is_sent_as_a_bearer_token(monkeypatch: pytest.MonkeyPatch) -> None:
    headers = _headers_sent(monkeypatch, {"ANTHROPIC_AUTH_TOKEN": "gateway-token"})
    assert headers["authorization"] == "Bearer gateway-token"
    assert "x-api-key" not in headers


def test_the_memdir_key_goes_before_the_hosts_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    headers = _headers_sent(
        monkeypatch,
        {
            "MEMDIR_ANTHROPIC_API_KEY": "memory-key",
            "ANTHROPIC_API_KEY": "host-key",
            "ANTHROPIC_AUTH_TOKEN": "gateway-token",
        },
    )
    assert headers["authorization"] == "Bearer memory-key"
    assert "host-key" not in str(headers)
    assert "gateway-token" not in str(headers)


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
