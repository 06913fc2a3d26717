"""One model used from several event loops, as a sync host's extractor thread does.

A connection pool belongs to the loop that opened its connections, so a model that built
its own client gives every loop a client of its own and closes it on request.
"""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from memdir.messages import Message
from memdir.models import AnthropicModel, ModelRequest, OpenAIModel, RetryPolicy
from memdir.testing import FakeAnthropicServer, FakeOpenAIServer

NO_RETRY = RetryPolicy(max_retries=0)
REQUEST = ModelRequest(system="Be brief.", messages=(Message.user("hello"),))

Provider = tuple[type[Any], Callable[[str], Any]]
PROVIDERS: dict[str, Provider] = {
    "anthropic": (
        FakeAnthropicServer,
        lambda url: AnthropicModel("claude-test", api_key="k", base_url=url, retry=NO_RETRY),
    ),
    "openai": (
        FakeOpenAIServer,
        lambda url: OpenAIModel("gpt-test", api_key="k", base_url=url, retry=NO_RETRY),
    ),
}


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_each_loop_gets_a_working_client_and_closes_it(provider: str) -> None:
    server_type, make = PROVIDERS[provider]
    with server_type(["one", "two", "three"], min_cache_tokens=0) as server:
        model = make(server.base_url)
        first_client = model.client

        async def ask() -> tuple[str, Any]:
            response = await model.request(REQUEST)
            client = model._clients.get()
            await model.aclose()
            return response.message.text, client

        # Three loops in turn, as ``asyncio.run`` per turn or a restarted thread gives.
        answers = [asyncio.run(ask()) for _ in range(3)]
        server.assert_no_errors()
    assert [text for text, _ in answers] == ["one", "two", "three"]
    assert answers[0][1] is first_client
    assert len({id(client) for _, client in answers}) == 3
    assert all(client.is_closed() for _, client in answers)
    gc.collect()  # any socket left open would surface here as an unraisable warning


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_two_live_loops_never_share_a_pool(provider: str) -> None:
    """The host's loop keeps its client while a second loop (the extractor's) asks too."""
    server_type, make = PROVIDERS[provider]
    with server_type(["a", "b", "c"], min_cache_tokens=0) as server:
        model = make(server.base_url)

        async def elsewhere() -> str:
            response = await model.request(REQUEST)
            await model.aclose()
            return str(response.message.text)

        async def host() -> list[str]:
            first = await model.request(REQUEST)
            second = await asyncio.to_thread(asyncio.run, elsewhere())
            third = await model.request(REQUEST)  # the host's pool is still open and usable
            await model.aclose()
            return [str(first.message.text), second, str(third.message.text)]

        assert asyncio.run(host()) == ["a", "b", "c"]
        server.assert_no_errors()


def test_a_client_passed_in_is_the_callers() -> None:
    from anthropic import AsyncAnthropic

    with FakeAnthropicServer(["one", "two"], min_cache_tokens=0) as server:
        client = AsyncAnthropic(api_key="k", base_url=server.base_url, max_retries=0)
        model = AnthropicModel("claude-test", client=client, retry=NO_RETRY)

        async def ask() -> None:
            await model.request(REQUEST)
            assert model._clients.get() is client
            await model.aclose()
            assert not client.is_closed()
            await client.close()

        asyncio.run(ask())


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_asyncio_run_per_turn_closes_each_loops_client_at_its_end(provider: str) -> None:
    """A host that never calls aclose: each loop's shutdown closes the client it used."""
    server_type, make = PROVIDERS[provider]
    with server_type(["one", "two", "three"], min_cache_tokens=0) as server:
        model = make(server.base_url)

        async def ask() -> Any:
            await model.request(REQUEST)
            assert asyncio.all_tasks() == {asyncio.current_task()}  # nothing of ours runs
            return model._clients.get()

        clients = [asyncio.run(ask()) for _ in range(3)]
        server.assert_no_errors()
    assert all(client.is_closed() for client in clients)
    assert len({id(client) for client in clients}) == 3
    state = model._clients
    assert (state._home, state._others, state._watches) == (None, {}, {})  # no loop kept
    assert not model.client.is_closed()  # a fresh one waits for the next loop


def test_a_loop_closed_without_its_shutdown_is_forgotten() -> None:
    with FakeAnthropicServer(["one", "two"], min_cache_tokens=0) as server:
        model = PROVIDERS["anthropic"][1](server.base_url)
        loop = asyncio.new_event_loop()
        loop.run_until_complete(model.request(REQUEST))
        with warnings.catch_warnings():
            # The host closed the loop under an open connection; only the collector can
            # release that one, with a ResourceWarning.
            warnings.simplefilter("ignore", ResourceWarning)
            loop.close()
            del loop
            answer = asyncio.run(model.request(REQUEST))  # a fresh client, not the dead one
            gc.collect()
        server.assert_no_errors()
    assert answer.message.text == "two"
    state = model._clients
    assert (state._home, state._others, state._watches) == (None, {}, {})


def test_a_loop_that_becomes_home_keeps_its_own_client() -> None:
    with FakeAnthropicServer(["a", "b", "c"], min_cache_tokens=0) as server:
        model = PROVIDERS["anthropic"][1](server.base_url)
        first, second = asyncio.new_event_loop(), asyncio.new_event_loop()

        async def ask() -> Any:
            await model.request(REQUEST)
            return model._clients.get()

        try:
            used = [first.run_until_complete(ask()), second.run_until_complete(ask())]
            first.run_until_complete(model.aclose())  # the home loop lets go
            used.append(second.run_until_complete(ask()))  # second is home now
            second.run_until_complete(model.aclose())
        finally:
            for loop in (first, second):
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()
        server.assert_no_errors()
    assert used[2] is used[1]  # the second loop's pool went on serving it
    assert all(client.is_closed() for client in used)
