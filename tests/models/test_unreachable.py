"""An endpoint that cannot be reached fails at once; one that may recover is retried.

A refused connection and an unknown host name answer the same on every repeat, so
repeating them only turns one line into a long silence. Timeouts and 5xx answers may
pass and keep their retries; and a caller's SDK client does not repeat each of ours.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from memdir.errors import ModelError
from memdir.messages import Message
from memdir.models import AnthropicModel, Model, ModelRequest, OpenAIModel, RetryPolicy
from memdir.testing import FakeAnthropicServer, FakeOpenAIServer, Fault, Reply

# The default policy: five attempts with waits that add up to seconds.
PATIENT = RetryPolicy()
FAST = RetryPolicy(max_retries=2, initial_delay=0.0, jitter=0.0)
REQUEST = ModelRequest(system="Be brief.", messages=(Message.user("hi"),))
# The .invalid top-level domain never resolves (RFC 6761): the resolver says so
# without asking any server.
UNKNOWN_HOST = "http://memdir-no-such-host.invalid"


def free_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


Factory = Callable[[str, RetryPolicy], Model]


def anthropic_model(base_url: str, retry: RetryPolicy) -> Model:
    return AnthropicModel("claude-test", api_key="k", base_url=base_url, retry=retry, timeout=5)


def openai_model(base_url: str, retry: RetryPolicy) -> Model:
    return OpenAIModel("gpt-test", api_key="k", base_url=base_url, retry=retry, timeout=5)


def ask(model: Model, client: Any = None) -> Coroutine[Any, Any, Any]:
    async def go() -> Any:
        try:
            return await model.request(REQUEST)
        finally:
            await model.aclose()  # type: ignore[attr-defined]
            if client is not None:  # the caller's, which the model leaves open
                await client.close()

    return go()


@pytest.mark.parametrize("factory", [anthropic_model, openai_model])
def test_refused_connection_fails_at_once(factory: Factory) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    model = factory(url, PATIENT)
    started = time.monotonic()
    with pytest.raises(ModelError, match="connection refused") as info:
        asyncio.run(ask(model))
    assert time.monotonic() - started < 1.0
    assert "gave up" not in str(info.value)
    assert f"127.0.0.1:{url.rsplit(':', 1)[1]}" in str(info.value)
    assert info.value.status is None


@pytest.mark.parametrize("factory", [anthropic_model, openai_model])
def test_unknown_host_fails_at_once(factory: Factory) -> None:
    model = factory(UNKNOWN_HOST, PATIENT)
    started = time.monotonic()
    with pytest.raises(ModelError, match="cannot resolve the host name") as info:
        asyncio.run(ask(model))
    assert time.monotonic() - started < 1.0
    assert "memdir-no-such-host.invalid" in str(info.value)


def test_timeout_is_still_retried() -> None:
    faults: list[Reply] = [Fault(status=200, delay=30.0), Fault(status=200, delay=30.0), "late"]
    with FakeAnthropicServer(faults, min_cache_tokens=0) as server:
        model = AnthropicModel(
            "claude-test", api_key="k", base_url=server.base_url, retry=FAST, timeout=0.3
        )
        response = asyncio.run(ask(model))
        assert len(server.requests) == 3
    assert response.message.text == "late"


def test_callers_anthropic_client_does_not_repeat_our_retries() -> None:
    import anthropic

    faults = [Fault(status=503, headers={"retry-after": "0"}) for _ in range(9)]
    with FakeAnthropicServer(faults, min_cache_tokens=0) as server:
        client = anthropic.AsyncAnthropic(api_key="k", base_url=server.base_url, max_retries=2)
        model = AnthropicModel("claude-test", client=client, retry=FAST)
        with pytest.raises(ModelError, match="gave up after 3 attempts"):
            asyncio.run(ask(model, client))
        # Three of ours, each one request: not three times the SDK's three.
        assert len(server.requests) == 3
    assert client.max_retries == 2  # the caller's client is left as it was


def test_callers_openai_client_does_not_repeat_our_retries() -> None:
    import openai

    faults = [Fault(status=503, headers={"retry-after": "0"}) for _ in range(9)]
    with FakeOpenAIServer(faults) as server:
        client = openai.AsyncOpenAI(api_key="k", base_url=server.base_url, max_retries=2)
        model = OpenAIModel("gpt-test", client=client, retry=FAST)
        with pytest.raises(ModelError, match="gave up after 3 attempts"):
            asyncio.run(ask(model, client))
        assert len(server.requests) == 3
    assert client.max_retries == 2
