"""memdir's requests to an OpenAI reasoning model ask for the least reasoning it takes:
saving memories is extraction, and every reasoning token is billed as output."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.fork import CacheSafeParams
from memdir.messages import Message
from memdir.models import ModelRequest, OpenAIModel, RetryPolicy
from memdir.testing import DEFAULT_REASONING_TOKENS, FakeClock, FakeOpenAIServer

CONVERSATION = (Message.user("We deploy on Fridays only."), Message.assistant("Noted."))


def one_run(
    tmp_path: Path, model_name: str, config: ExtractConfig, *, fork: bool = False
) -> list[dict[str, Any]]:
    """The bodies of the memory agent's requests (after the host's, in a fork)."""
    clock = FakeClock()
    with FakeOpenAIServer(handler=lambda body: "Nothing to save.", clock=clock) as server:
        model = OpenAIModel(
            model_name, api_key="k", base_url=server.base_url, retry=RetryPolicy(max_retries=0)
        )
        extractor = MemoryExtractor(tmp_path / "memory", model, config, clock=clock)
        system = "You are the host. " * 400  # over the 1,024-token cache minimum

        async def main() -> None:
            params = None
            if fork:
                await model.request(ModelRequest(system=system, messages=CONVERSATION))
                params = CacheSafeParams(model=model, system=system)
            turn = TurnContext(messages=CONVERSATION, params=params, cwd=str(tmp_path))
            extractor.on_turn_end(turn)
            await extractor.drain()
            await model.aclose()

        asyncio.run(main())
        server.assert_no_errors()
        requests = server.requests[1:] if fork else server.requests
        if fork:
            usage = requests[0].usage
            assert usage is not None
            # A different effort leaves the prompt, and so the host's cache, as it was.
            assert usage["prompt_tokens_details"]["cached_tokens"] > 1_000
        return [r.body for r in requests]


@pytest.mark.parametrize(
    ("model_name", "sent"),
    [
        ("gpt-5-mini", "minimal"),
        ("gpt-5", "minimal"),
        ("gpt-5.1", "none"),
        ("gpt-5.4-mini", "none"),
        ("o4-mini", "low"),
        ("gpt-4o", None),  # not a reasoning model: the parameter would be refused
        # Variants whose efforts differ from their line's (gpt-5-pro takes only high, the
        # codex models no minimal or none): left to their default.
        ("gpt-5-codex", None),
        ("gpt-5-pro", None),
        ("gpt-5.1-codex-max", None),
        ("gpt-5.2-chat-latest", None),
        ("gpt-4.1-nano", None),
    ],
)
def test_the_least_effort_the_model_takes(
    tmp_path: Path, model_name: str, sent: str | None
) -> None:
    (body,) = one_run(tmp_path, model_name, ExtractConfig(mode="standalone"))
    assert body.get("reasoning_effort") == sent


def test_a_fork_reasons_little_too_and_still_reads_the_hosts_cache(tmp_path: Path) -> None:
    (body,) = one_run(tmp_path, "gpt-5-mini", ExtractConfig(mode="fork"), fork=True)
    assert body["reasoning_effort"] == "minimal"


@pytest.mark.parametrize(("effort", "sent"), [("low", "low"), (None, None)])
def test_the_effort_can_be_chosen_or_left_to_the_model(
    tmp_path: Path, effort: str | None, sent: str | None
) -> None:
    config = ExtractConfig(mode="standalone", reasoning_effort=effort)
    (body,) = one_run(tmp_path, "gpt-5-mini", config)
    assert body.get("reasoning_effort") == sent


def test_the_bill_holds_the_fewer_reasoning_tokens(tmp_path: Path) -> None:
    clock = FakeClock()
    with FakeOpenAIServer(handler=lambda body: "Nothing to save.", clock=clock) as server:
        model = OpenAIModel("gpt-5-mini", api_key="k", base_url=server.base_url)
        extractor = MemoryExtractor(tmp_path / "memory", model, ExtractConfig(), clock=clock)

        async def main() -> None:
            extractor.on_turn_end(TurnContext(messages=CONVERSATION, cwd=str(tmp_path)))
            await extractor.drain()
            await model.aclose()

        asyncio.run(main())
        (request,) = server.requests
    assert request.usage is not None
    details = request.usage["completion_tokens_details"]
    assert 0 < details["reasoning_tokens"] < DEFAULT_REASONING_TOKENS


def test_an_effort_the_hosts_model_does_not_take_is_not_sent_to_its_fork(tmp_path: Path) -> None:
    """``minimal`` suits memdir's own gpt-5-mini; a fork runs on the host's gpt-5.1, which
    refuses it: the fork goes without (and so does not fail)."""
    clock = FakeClock()
    with FakeOpenAIServer(handler=lambda body: "Nothing to save.", clock=clock) as server:
        retry = RetryPolicy(max_retries=0)
        own = OpenAIModel("gpt-5-mini", api_key="k", base_url=server.base_url, retry=retry)
        host = OpenAIModel("gpt-5.1", api_key="k", base_url=server.base_url, retry=retry)
        config = ExtractConfig(mode="fork", reasoning_effort="minimal")
        extractor = MemoryExtractor(tmp_path / "memory", own, config, clock=clock)
        params = CacheSafeParams(model=host, system="You are the host. " * 400)

        async def main() -> None:
            turn = TurnContext(messages=CONVERSATION, params=params, cwd=str(tmp_path))
            extractor.on_turn_end(turn)
            await extractor.drain()
            await own.aclose()
            await host.aclose()

        asyncio.run(main())
        server.assert_no_errors()
        (request,) = server.requests
    assert request.body["model"] == "gpt-5.1"
    assert "reasoning_effort" not in request.body
