"""Each message is converted once, and a long conversation's first conversion lets the
event loop through: nothing proportional to the conversation holds the host's loop."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

import pytest

import memdir.extract._standalone as standalone
import memdir.models._anthropic as anthropic_model
import memdir.models._openai as openai_model
import memdir.models._wire_cache as wire_cache
from memdir.extract import MemoryExtractor, TurnContext
from memdir.messages import Message
from memdir.models import AnthropicModel, ModelRequest, OpenAIModel
from memdir.models._wire_cache import WireCache
from memdir.testing import FunctionModel


def conversation(n: int) -> tuple[Message, ...]:
    return tuple(
        Message.user(f"question {i}") if i % 2 == 0 else Message.assistant(f"answer {i}")
        for i in range(n)
    )


def test_a_message_is_converted_once_and_forgotten_with_it() -> None:
    calls: list[int] = []

    def convert(message: Message, index: int) -> str:
        calls.append(index)
        return message.text.upper()

    cache: WireCache[str] = WireCache(convert)
    messages = list(conversation(10))
    assert cache.convert(messages) == [m.text.upper() for m in messages]
    assert cache.convert([*messages, Message.user("more")])[-1] == "MORE"
    assert calls == [*range(10), 10]
    assert len(cache) == 10  # "more" is gone already: nothing else held it
    del messages
    gc.collect()
    assert len(cache) == 0


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_growing_conversation_converts_only_what_is_new(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module: Any = anthropic_model if provider == "anthropic" else openai_model
    name = "messages_to_anthropic" if provider == "anthropic" else "messages_to_openai"
    real = getattr(module, name)
    converted: list[int] = []

    def counting(messages: Any) -> Any:
        converted.append(len(messages))
        return real(messages)

    monkeypatch.setattr(module, name, counting)
    model: Any = (
        AnthropicModel("claude-test", api_key="k")
        if provider == "anthropic"
        else OpenAIModel("gpt-test", api_key="k")
    )
    messages = conversation(100)
    for end in range(2, 101, 2):
        model.wire_request(ModelRequest(messages=messages[:end]))
    assert converted == [1] * 100  # one message at a time, each once


def test_a_long_first_conversion_lets_the_loop_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire_cache, "SLICE_SECONDS", 0.0)  # yield at every check
    cache: WireCache[str] = WireCache(lambda m, i: m.text)
    messages = conversation(5_000)

    async def main() -> int:
        ticks = 0
        done = asyncio.Event()

        async def tick() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(tick())
        await cache.convert_in_slices(messages)
        done.set()
        await ticker
        return ticks

    assert asyncio.run(main()) >= 5_000 // 32


def test_a_standalone_run_renders_in_slices_and_each_message_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(standalone, "_SLICE_SECONDS", 0.0)
    real = standalone._rendered_text
    rendered: list[str] = []

    def counting(message: Message, limit: int) -> str | None:
        rendered.append(message.text)
        return real(message, limit)

    monkeypatch.setattr(standalone, "_rendered_text", counting)
    extractor = MemoryExtractor(tmp_path / "memory", FunctionModel(lambda r: "Nothing."))
    messages = conversation(20_000)

    # The first 19,990 messages were handled before: the runs look at the last turns.
    extractor.restore(messages[19_989].uuid)

    async def main() -> tuple[int, int]:
        ticks = 0
        done = asyncio.Event()

        async def tick() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(tick())
        extractor.on_turn_end(TurnContext(messages=messages[:-2], cwd=str(tmp_path)))
        await extractor.drain()
        first, seen = ticks, len(rendered)
        extractor.on_turn_end(TurnContext(messages=messages, cwd=str(tmp_path)))
        await extractor.drain()
        done.set()
        await ticker
        return first, seen

    first, seen = asyncio.run(main())
    assert first >= 19_998 // 32  # the loop ran between slices of the first rendering
    # The first run measured every message, and rendered its window and new ones to send;
    # the second measured and rendered only its own two.
    assert 19_998 <= seen < 19_998 + 2_000
    assert len(rendered) - seen == 4
