"""The fake servers' prompt caches follow the providers' documented rules, one test per rule.

Most tests drive :class:`AnthropicCache` / :class:`OpenAICache` directly with request bodies
as the SDKs send them; a few go through the official SDKs and the fake servers over HTTP.
Lifetimes run on a :class:`FakeClock`: no test sleeps.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai
import pytest

import memdir.testing._cache as cache_module
from memdir.cost import model_family
from memdir.testing import FakeAnthropicServer, FakeClock, FakeOpenAIServer
from memdir.testing._cache import AnthropicCache, AnthropicUsage, OpenAICache

Body = dict[str, Any]

# About 1,100 tokens: above the 1,024-token minimum of models the table does not know.
PAD = "Notes on the user's projects, kept between sessions for later use. " * 65
MODEL = "claude-test"  # not in the table: 1,024-token minimum, earlier thinking kept
EPHEMERAL = {"type": "ephemeral"}


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


def text(value: str, *, mark: bool = False, ttl: str | None = None) -> Body:
    block: Body = {"type": "text", "text": value}
    if ttl is not None:
        block["cache_control"] = {"type": "ephemeral", "ttl": ttl}
    elif mark:
        block["cache_control"] = dict(EPHEMERAL)
    return block


def user(*blocks: Body) -> Body:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: Body) -> Body:
    return {"role": "assistant", "content": list(blocks)}


def request(messages: list[Body], **params: Any) -> Body:
    return {"model": MODEL, "max_tokens": 100, "messages": messages, **params}


def unmarked(block: Body) -> Body:
    out = {k: v for k, v in block.items() if k != "cache_control"}
    if isinstance(out.get("content"), list):
        out["content"] = [unmarked(item) for item in out["content"]]
    return out


def tokens(*blocks: Body) -> int:
    """The fake's estimate: characters / 4 of each block's compact JSON as sent, unmarked."""
    sizes = (
        len(json.dumps(unmarked(b), separators=(",", ":"), ensure_ascii=False)) for b in blocks
    )
    return sum(math.ceil(size / 4) for size in sizes)


def prompt(usage: AnthropicUsage) -> int:
    return usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens


def at(clock: FakeClock, seconds: float) -> None:
    """Move ``clock`` to ``seconds`` after it started (at 0)."""
    clock.advance(seconds - clock.now)


# Anthropic: the look-back.


@pytest.mark.parametrize(("added", "hit"), [(19, True), (20, False)])
def test_lookback_is_twenty_positions_counting_the_breakpoint(added: int, hit: bool) -> None:
    cache = AnthropicCache(clock=FakeClock())
    written = cache.account(request([user(text(PAD, mark=True))])).cache_creation_input_tokens
    notes = [text(f"note {i}") for i in range(added)]
    notes[-1] = text(f"note {added - 1}", mark=True)
    # The earlier write is at position added + 1, the breakpoint being position 1: with 20
    # blocks added it is the 21st, one past the window.
    usage = cache.account(request([user(text(PAD), *notes)]))
    assert usage.cache_read_input_tokens == (written if hit else 0)


# Anthropic: lifetimes.


@dataclass(frozen=True)
class Lifetime:
    name: str
    ttl: str | None
    """The marker's ``ttl``; None for the default."""
    times: list[float]
    """When the same request is sent again, in seconds after the first one wrote."""
    hits: list[bool]
    """Whether each of them reads what the first wrote."""


LIFETIMES = [
    Lifetime("5m-hit-at-4:59", None, [299], [True]),
    Lifetime("5m-miss-at-5:01", None, [301], [False]),
    Lifetime("5m-explicit-miss-at-5:01", "5m", [301], [False]),
    Lifetime("a-hit-refreshes", None, [240, 480, 720], [True, True, True]),
    Lifetime("refreshed-for-5m-only", None, [240, 541], [True, False]),
    Lifetime("1h-survives-59-min", "1h", [59 * 60], [True]),
    Lifetime("1h-miss-at-61-min", "1h", [61 * 60], [False]),
    Lifetime("1h-refreshed-by-a-hit", "1h", [50 * 60, 100 * 60], [True, True]),
]


@pytest.mark.parametrize("case", LIFETIMES, ids=lambda c: c.name)
def test_an_entry_lives_its_ttl_from_its_last_use(case: Lifetime) -> None:
    clock = FakeClock()
    cache = AnthropicCache(clock=clock)
    body = request([user(text(PAD, mark=True, ttl=case.ttl))])
    written = cache.account(body).cache_creation_input_tokens
    assert written == tokens(text(PAD))
    hits = []
    for seconds in case.times:
        at(clock, seconds)
        usage = cache.account(body)
        hits.append(usage.cache_read_input_tokens == written)
        # A miss pays the whole prefix again.
        assert usage.cache_creation_input_tokens == (0 if hits[-1] else written)
    assert hits == case.hits


def test_a_read_through_the_look_back_refreshes_the_entry_it_reads() -> None:
    clock = FakeClock()
    cache = AnthropicCache(clock=clock)
    written = cache.account(request([user(text(PAD, mark=True))])).cache_creation_input_tokens
    # Each later request reads the first entry from a breakpoint further on, and writes
    # its own; only the read keeps the first entry alive past five minutes.
    for seconds, note in [(240, "first"), (480, "second")]:
        at(clock, seconds)
        usage = cache.account(request([user(text(PAD), text(f"The {note} note.", mark=True))]))
        assert usage.cache_read_input_tokens == written, note


@pytest.mark.parametrize(("first", "then"), [("1h", "5m"), ("5m", "1h")])
def test_a_rewrite_keeps_the_longer_lifetime(first: str, then: str) -> None:
    clock = FakeClock()
    cache = AnthropicCache(clock=clock)
    written = cache.account(request([user(text(PAD, ttl=first))])).cache_creation_input_tokens
    at(clock, 60)
    assert cache.account(request([user(text(PAD, ttl=then))])).cache_read_input_tokens == written
    at(clock, 60 + 30 * 60)  # past five minutes: only an hour-long entry is still there
    assert cache.account(request([user(text(PAD, mark=True))])).cache_read_input_tokens == written


def test_expired_entries_are_dropped() -> None:
    clock = FakeClock()
    cache = AnthropicCache(clock=clock)
    cache.account(request([user(text(PAD, mark=True))]))
    assert cache.entry_count() == 1
    at(clock, 301)
    cache.account(request([user(text(PAD + " Another.", mark=True))]))
    assert cache.entry_count() == 1


@dataclass(frozen=True)
class Order:
    name: str
    system: str | None
    message: str | None
    top_level: str | None = None
    refused: bool = False


ORDERS = [
    Order("1h-then-5m", "1h", "5m"),
    Order("1h-then-1h", "1h", "1h"),
    Order("5m-then-5m", "5m", "5m"),
    Order("5m-then-1h", "5m", "1h", refused=True),
    Order("top-level-1h-after-5m", "5m", None, top_level="1h", refused=True),
    Order("top-level-5m-after-1h", "1h", None, top_level="5m"),
]


@pytest.mark.parametrize("case", ORDERS, ids=lambda c: c.name)
def test_a_longer_ttl_must_come_before_a_shorter_one(case: Order) -> None:
    params: Body = {}
    if case.top_level is not None:
        params["cache_control"] = {"type": "ephemeral", "ttl": case.top_level}
    body = request(
        [user(text("Hello.", ttl=case.message))], system=[text(PAD, ttl=case.system)], **params
    )
    refusal = AnthropicCache().refusal(body)
    if case.refused:
        assert refusal == (
            "cache_control TTL ordering: a ttl='1h' cache_control block must not come after "
            "a ttl='5m' block"
        )
    else:
        assert refusal is None


def test_a_malformed_cache_control_is_refused() -> None:
    cache = AnthropicCache()
    bad_ttl = request([user({**text("hi"), "cache_control": {"type": "ephemeral", "ttl": "10m"}})])
    assert cache.refusal(bad_ttl) == (
        "messages.0.content.0.cache_control.ttl: Input should be '5m' or '1h'"
    )
    bad_type = request([user(text("hi"))], cache_control={"type": "persistent"})
    assert cache.refusal(bad_type) == "cache_control.type: Input should be 'ephemeral'"


def test_a_null_cache_control_is_no_breakpoint() -> None:
    cache = AnthropicCache()
    body = request([user(*({**text(f"part {i}"), "cache_control": None} for i in range(5)))])
    assert cache.breakpoints(body) == 0
    assert cache.refusal(body) is None


# Anthropic: billing of mixed lifetimes.

TOOL: Body = {
    "name": "Read",
    "description": "Read a file from the memory directory.",
    "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
}


def test_writes_are_billed_by_lifetime() -> None:
    # A: the prefix read; B: the last one-hour breakpoint written after A; C: the last
    # breakpoint. A is read, B - A written for an hour, C - B for five minutes.
    cache = AnthropicCache(min_tokens=0, clock=FakeClock())
    tools = [{**TOOL, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    question = text("What did I say about tabs?", ttl="5m")

    first = cache.account(request([user(question)], tools=tools, system=[text(PAD, ttl="1h")]))
    assert first.cache_read_input_tokens == 0
    assert first.cache_creation_1h_input_tokens == tokens(TOOL, text(PAD))
    assert first.cache_creation_5m_input_tokens == tokens(question)
    assert first.input_tokens == 0

    # A new system prompt: the tools are read, the system is written for an hour again.
    system = [text(PAD + " Be brief.", ttl="1h")]
    second = cache.account(request([user(question)], tools=tools, system=system))
    assert second.cache_read_input_tokens == tokens(TOOL)
    assert second.cache_creation_1h_input_tokens == tokens(system[0])
    assert second.cache_creation_5m_input_tokens == tokens(question)

    # The conversation goes on: everything up to the old question is read, the one-hour
    # breakpoints lie before it, so the new turn is a five-minute write.
    later = [
        user(text(question["text"])),
        assistant(text("Tabs.")),
        user(text("Thanks.", ttl="5m")),
    ]
    third = cache.account(request(later, tools=tools, system=system))
    assert third.cache_read_input_tokens == tokens(TOOL, system[0], question)
    assert third.cache_creation_1h_input_tokens == 0
    assert third.cache_creation_5m_input_tokens == tokens(text("Tabs."), text("Thanks."))


# Anthropic: what invalidates what.

SYSTEM = text(PAD, mark=True)
QUESTION = text("Remember that I prefer tabs.", mark=True)
IMAGE: Body = {
    "type": "image",
    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgoAAAANSUhEUg=="},
}


def base_request(**params: Any) -> Body:
    tools = [{**TOOL, "cache_control": dict(EPHEMERAL)}]
    return request([user(QUESTION)], tools=tools, system=[SYSTEM], **params)


LEVEL_TOKENS = {
    "nothing": 0,
    "tools": tokens(TOOL),
    "system": tokens(TOOL, SYSTEM),
    "all": tokens(TOOL, SYSTEM, QUESTION),
}


@dataclass(frozen=True)
class Change:
    name: str
    after: Callable[[], Body]
    """The second request; the first is :func:`base_request` with ``before``."""
    read: str
    """How far the second one reads: a key of LEVEL_TOKENS."""
    before: Body = field(default_factory=dict)


THINKING = {"type": "enabled", "budget_tokens": 1024}
CHANGES = [
    Change("nothing", base_request, "all"),
    Change(
        "thinking-disabled-is-the-default",
        lambda: base_request(thinking={"type": "disabled"}),
        "all",
    ),
    Change(
        "question",
        lambda: {**base_request(), "messages": [user(text("Other.", mark=True))]},
        "system",
    ),
    Change("tool_choice", lambda: base_request(tool_choice={"type": "any"}), "system"),
    Change("thinking-enabled", lambda: base_request(thinking=THINKING), "system"),
    Change(
        "thinking-budget",
        lambda: base_request(thinking={**THINKING, "budget_tokens": 4096}),
        "system",
        before={"thinking": THINKING},
    ),
    Change(
        "image-added-at-the-end",
        lambda: {
            **base_request(),
            "messages": [user(unmarked(QUESTION), {**IMAGE, "cache_control": EPHEMERAL})],
        },
        "system",
    ),
    Change("speed", lambda: base_request(speed="fast"), "tools"),
    Change("speed-standard-is-the-default", lambda: base_request(speed="standard"), "all"),
    Change(
        "tool",
        lambda: {
            **base_request(),
            "tools": [{**TOOL, "description": "Read a file.", "cache_control": EPHEMERAL}],
        },
        "nothing",
    ),
    Change("model", lambda: base_request(model="claude-other"), "nothing"),
]


@pytest.mark.parametrize("case", CHANGES, ids=lambda c: c.name)
def test_a_change_invalidates_its_level_and_those_after(case: Change) -> None:
    cache = AnthropicCache(min_tokens=0, clock=FakeClock())
    cache.account(base_request(**case.before))
    usage = cache.account(case.after())
    assert usage.cache_read_input_tokens == LEVEL_TOKENS[case.read]


def test_key_order_is_part_of_the_key() -> None:
    cache = AnthropicCache(min_tokens=0, clock=FakeClock())
    first = cache.account(base_request())
    reordered_tool = {"description": TOOL["description"], **TOOL, "cache_control": EPHEMERAL}
    assert list(reordered_tool) != list(TOOL)
    second = cache.account({**base_request(), "tools": [reordered_tool]})
    # The same content and the same tokens, but a different text: nothing is read.
    assert prompt(second) == prompt(first)
    assert second.cache_read_input_tokens == 0

    reordered_question = {"text": QUESTION["text"], "type": "text", "cache_control": EPHEMERAL}
    third = cache.account({**base_request(), "messages": [user(reordered_question)]})
    assert third.cache_read_input_tokens == tokens(TOOL, SYSTEM)


# Anthropic: top-level (automatic) caching.


def test_top_level_cache_control_marks_the_last_cacheable_block() -> None:
    cache = AnthropicCache(clock=FakeClock())
    first = cache.account(request([user(text(PAD))], cache_control=EPHEMERAL))
    assert first.cache_creation_input_tokens == tokens(text(PAD))
    # A trailing empty text cannot carry the breakpoint: the one before it does.
    conversation = [user(text(PAD)), assistant(text("Noted.")), user(text("More."), text(""))]
    second = cache.account(request(conversation, cache_control=EPHEMERAL))
    assert second.cache_read_input_tokens == tokens(text(PAD))
    assert second.cache_creation_input_tokens == tokens(text("Noted."), text("More."))
    assert second.input_tokens == tokens(text(""))


@pytest.mark.parametrize(("explicit", "refused"), [(3, False), (4, True)])
def test_top_level_cache_control_takes_one_of_four_slots(explicit: int, refused: bool) -> None:
    cache = AnthropicCache()
    body = request(
        [user(*(text(f"part {i}", mark=True) for i in range(explicit)))], cache_control=EPHEMERAL
    )
    assert cache.breakpoints(body) == explicit + 1
    expected = "A maximum of 4 blocks with cache_control may be provided. Found 5."
    assert cache.refusal(body) == (expected if refused else None)


def test_top_level_and_explicit_markers_on_the_last_block_must_agree() -> None:
    cache = AnthropicCache()
    top = {"type": "ephemeral", "ttl": "1h"}
    same = request([user(text("hi", ttl="1h"))], cache_control=top)
    assert cache.refusal(same) is None
    different = request(
        [user(text("hi", ttl="5m"))], system=[text(PAD, ttl="1h")], cache_control=top
    )
    refusal = cache.refusal(different)
    assert refusal is not None
    assert "different TTL" in refusal


# Anthropic: the minimum cacheable prefix, per model.

PREFIX_2000 = text("x" * (8000 - len('{"type":"text","text":""}')))


@pytest.mark.parametrize(
    ("model", "cached"),
    [
        ("claude-sonnet-4-5", True),  # 1,024
        ("claude-opus-5", True),  # 512
        ("claude-sonnet-4-6", False),  # 2,048
        ("claude-haiku-4-5", False),  # 4,096
        ("claude-opus-4-5", False),  # 4,096
    ],
)
def test_the_minimum_prefix_is_the_models(model: str, cached: bool) -> None:
    assert tokens(PREFIX_2000) == 2000
    cache = AnthropicCache(clock=FakeClock())
    body = request([user({**PREFIX_2000, "cache_control": EPHEMERAL})], model=model)
    first = cache.account(body)
    second = cache.account(body)
    assert first.cache_creation_input_tokens == (2000 if cached else 0)
    assert second.cache_read_input_tokens == (2000 if cached else 0)
    assert second.input_tokens == (0 if cached else 2000)


@pytest.mark.parametrize(
    ("override", "model", "cached"),
    [(4096, "claude-sonnet-4-5", False), (0, "claude-haiku-4-5", True)],
)
def test_a_given_minimum_holds_for_every_model(override: int, model: str, cached: bool) -> None:
    cache = AnthropicCache(override, clock=FakeClock())
    body = request([user({**PREFIX_2000, "cache_control": EPHEMERAL})], model=model)
    assert cache.account(body).cache_creation_input_tokens == (2000 if cached else 0)


def test_the_servers_say_which_minimum_applies() -> None:
    by_table = FakeAnthropicServer()
    assert by_table.min_cache_tokens is None
    assert by_table.min_cache_tokens_for("claude-haiku-4-5") == 4096
    assert by_table.min_cache_tokens_for("claude-made-up") == 1024
    assert FakeAnthropicServer(min_cache_tokens=100).min_cache_tokens_for("claude-haiku-4-5") == 100
    assert FakeOpenAIServer().min_cache_tokens_for("gpt-4.1") == 1024
    assert FakeOpenAIServer(min_cache_tokens=0).min_cache_tokens == 0


# Anthropic: earlier thinking blocks on the models that drop them.

BIG_SYSTEM = text("The user's notes, in full. " * 650, mark=True)  # about 4,400 tokens
THINK_1 = {
    "type": "thinking",
    "thinking": "They want the release planned. " * 20,
    "signature": "s1",
}
THINK_2 = {"type": "thinking", "thinking": "The tests pass; report back. " * 20, "signature": "s2"}
CALL = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "make test"}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "all 212 tests pass"}
CALL_2 = {**CALL, "id": "toolu_2", "input": {"command": "make release"}}
RESULT_2 = {**RESULT, "tool_use_id": "toolu_2", "content": "released 1.4.0"}
ASK = text("Plan the release.")


def tool_loop() -> list[Body]:
    """The turn so far: a question, a thinking tool call, its result (the breakpoint)."""
    return [user(ASK), assistant(THINK_1, CALL), user({**RESULT, "cache_control": EPHEMERAL})]


def next_turn() -> list[Body]:
    """The turn done and the next question asked: a plain user message follows."""
    done = assistant(THINK_2, text("Released."))
    return [
        user(ASK),
        assistant(THINK_1, CALL),
        user(RESULT),
        done,
        user(text("Thanks.", mark=True)),
    ]


@dataclass(frozen=True)
class Keeping:
    name: str
    model: str
    override: bool | None
    keeps: bool


KEEPING = [
    Keeping("sonnet-4-5-drops", "claude-sonnet-4-5", None, keeps=False),
    Keeping("haiku-4-5-drops", "claude-haiku-4-5", None, keeps=False),
    Keeping("opus-4-5-keeps", "claude-opus-4-5", None, keeps=True),
    Keeping("unknown-model-keeps", MODEL, None, keeps=True),
    Keeping("override-keeps", "claude-sonnet-4-5", True, keeps=True),
    Keeping("override-drops", "claude-opus-4-5", False, keeps=False),
]


@pytest.mark.parametrize("case", KEEPING, ids=lambda c: c.name)
def test_earlier_thinking_is_dropped_by_the_models_that_drop_it(case: Keeping) -> None:
    cache = AnthropicCache(keeps_thinking=case.override, clock=FakeClock())
    first = cache.account(request(tool_loop(), model=case.model, system=[BIG_SYSTEM]))
    assert prompt(first) == tokens(BIG_SYSTEM, ASK, THINK_1, CALL, RESULT)
    second = cache.account(request(next_turn(), model=case.model, system=[BIG_SYSTEM]))
    if case.keeps:
        assert second.cache_read_input_tokens == prompt(first)
        assert prompt(second) == prompt(first) + tokens(THINK_2, text("Released."), text("Thanks."))
    else:
        # Processed as if the thinking blocks were never there: the messages after the
        # first of them lose their cache, and the blocks cost nothing.
        assert second.cache_read_input_tokens == tokens(BIG_SYSTEM)
        rest = tokens(BIG_SYSTEM, ASK, CALL, RESULT, text("Released."), text("Thanks."))
        assert prompt(second) == rest


def test_thinking_of_the_current_tool_loop_is_kept() -> None:
    cache = AnthropicCache(clock=FakeClock())
    model = "claude-sonnet-4-5"
    first = cache.account(request(tool_loop(), model=model, system=[BIG_SYSTEM]))
    # Still the same turn: only tool results follow the question, so nothing is dropped.
    loop = [
        *tool_loop()[:2],
        user(RESULT),
        assistant(THINK_2, CALL_2),
        user({**RESULT_2, "cache_control": EPHEMERAL}),
    ]
    second = cache.account(request(loop, model=model, system=[BIG_SYSTEM]))
    assert second.cache_read_input_tokens == prompt(first)
    assert second.cache_creation_input_tokens == tokens(THINK_2, CALL_2, RESULT_2)


# Through the Anthropic SDK.


def claude(server: FakeAnthropicServer) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=server.base_url, api_key="test", max_retries=0)


async def ask(server: FakeAnthropicServer, body: Body, *, stream: bool = False) -> Any:
    async with claude(server) as client:
        if not stream:
            return (await client.messages.create(**body)).usage
        async with client.messages.stream(**body) as events:
            return (await events.get_final_message()).usage


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_sdk_sees_lifetimes_and_the_breakdown(stream: bool) -> None:
    clock = FakeClock()
    system = [text(PAD, ttl="1h")]
    body = request([user(text("What do you remember?", mark=True))], system=system)

    async def scenario() -> list[Any]:
        async with FakeAnthropicServer(["a", "b", "c"], clock=clock) as server:
            usages = [await ask(server, body, stream=stream)]
            clock.advance(4 * 60 + 59)
            usages.append(await ask(server, body, stream=stream))
            clock.advance(30 * 60)  # the message's five minutes are over, the hour is not
            usages.append(await ask(server, body, stream=stream))
            server.assert_all_used()
        return usages

    first, again, later = run(scenario())
    question = tokens(text("What do you remember?"))
    assert first.cache_creation.ephemeral_1h_input_tokens == tokens(system[0])
    assert first.cache_creation.ephemeral_5m_input_tokens == question
    assert again.cache_read_input_tokens == tokens(system[0]) + question
    assert again.cache_creation.ephemeral_5m_input_tokens == 0
    assert later.cache_read_input_tokens == tokens(system[0])
    assert later.cache_creation_input_tokens == question
    assert later.cache_creation.ephemeral_5m_input_tokens == question


def test_sdk_gets_a_400_for_ttl_order_and_for_a_fifth_slot() -> None:
    wrong_order = request([user(text("hi", ttl="1h"))], system=[text(PAD, ttl="5m")])
    five = request([user(*(text(f"{i}", mark=True) for i in range(4)))], cache_control=EPHEMERAL)

    async def scenario() -> None:
        async with FakeAnthropicServer(["a"]) as server:
            with pytest.raises(anthropic.BadRequestError, match="must not come after a ttl='5m'"):
                await ask(server, wrong_order)
            with pytest.raises(anthropic.BadRequestError, match="Found 5"):
                await ask(server, five)
            assert server.unused == 1

    run(scenario())


def test_sdk_top_level_cache_control_and_thinking_change() -> None:
    tools = [{**TOOL, "cache_control": EPHEMERAL}]
    body = request([user(text(PAD))], tools=tools, system=[SYSTEM], cache_control=EPHEMERAL)

    async def scenario() -> tuple[Any, Any]:
        async with FakeAnthropicServer(["a", "b"], clock=FakeClock()) as server:
            first = await ask(server, body)
            thinking = await ask(server, {**body, "thinking": THINKING}, stream=True)
        return first, thinking

    first, thinking = run(scenario())
    assert first.cache_creation_input_tokens == tokens(TOOL, SYSTEM, text(PAD))
    # Thinking settings invalidate the messages only; the automatic breakpoint writes them.
    assert thinking.cache_read_input_tokens == tokens(TOOL, SYSTEM)
    assert thinking.cache_creation_input_tokens == tokens(text(PAD))


# OpenAI.

GPT = "gpt-test"
OPENING: Body = {"role": "system", "content": PAD * 2}  # about 2,200 tokens


def gpt_request(*messages: Body, **params: Any) -> Body:
    return {"model": GPT, "messages": [OPENING, *messages], **params}


def cached(cache: OpenAICache, body: Body) -> int:
    return cache.account(body).cached_tokens


def steps(chars: int) -> int:
    """What the fake reports for a shared prefix of ``chars`` characters."""
    return (chars // 4) // 128 * 128


ASK_GPT: Body = {"role": "user", "content": "What do you remember about me?"}
OPENING_TOKENS = steps(len(json.dumps([OPENING], separators=(",", ":"))) - 2)


@pytest.mark.parametrize(("idle", "hit"), [(299, True), (301, False)])
def test_openai_evicts_after_five_idle_minutes(idle: float, hit: bool) -> None:
    clock = FakeClock()
    cache = OpenAICache(clock=clock)
    body = gpt_request(ASK_GPT)
    assert cached(cache, body) == 0
    at(clock, idle)
    assert (cached(cache, body) > 0) is hit


def test_openai_hit_refreshes_and_the_hour_is_the_longest() -> None:
    clock = FakeClock()
    cache = OpenAICache(clock=clock)
    body = gpt_request(ASK_GPT)
    cache.account(body)
    for minute in range(4, 60, 4):  # a hit every four minutes keeps it past five
        at(clock, minute * 60)
        assert cached(cache, body) > 0, minute
    at(clock, 3600)  # four minutes since the last use, but an hour since it was written
    assert cached(cache, body) == 0
    at(clock, 3660)
    assert cached(cache, body) > 0  # written again at 60:00


def test_openai_a_growing_conversation_inherits_the_hour() -> None:
    clock = FakeClock()
    cache = OpenAICache(clock=clock)
    conversation = [ASK_GPT]
    cache.account(gpt_request(*conversation))
    for minute in range(4, 60, 4):
        at(clock, minute * 60)
        conversation += [{"role": "assistant", "content": f"Answer {minute}."}, ASK_GPT]
        assert cached(cache, gpt_request(*conversation)) > 0, minute
    at(clock, 3600)  # the opening was first written an hour ago
    assert cached(cache, gpt_request(*conversation, ASK_GPT)) == 0


@pytest.mark.parametrize(
    ("retention", "hours", "hit"),
    [("24h", 23, True), ("24h", 24.1, False), ("in_memory", 2, False)],
)
def test_openai_extended_retention_keeps_a_day(retention: str, hours: float, hit: bool) -> None:
    # gpt-5.1 is one of the models OpenAI lists for the 24-hour retention.
    clock = FakeClock()
    cache = OpenAICache(clock=clock)
    cache.account(gpt_request(ASK_GPT, model="gpt-5.1", prompt_cache_retention=retention))
    at(clock, hours * 3600)
    assert (cached(cache, gpt_request(ASK_GPT, model="gpt-5.1")) > 0) is hit


@pytest.mark.parametrize(
    ("model", "kept"),
    [
        ("gpt-5", True),
        ("gpt-5.1-codex-mini", True),
        ("gpt-4.1", True),
        ("gpt-4.1-2025-04-14", True),
        ("gpt-5-mini", False),
        ("gpt-5-nano", False),
        ("gpt-4.1-mini", False),
        ("gpt-4.1-nano", False),
        ("gpt-4o", False),
        ("o4-mini", False),
        ("gpt-test", False),  # a model the table does not know
    ],
)
def test_openai_extended_retention_only_on_the_models_that_take_it(model: str, kept: bool) -> None:
    # Elsewhere the request is served with the in-memory lifetime: gone after idle minutes.
    clock = FakeClock()
    cache = OpenAICache(clock=clock)
    cache.account(gpt_request(ASK_GPT, model=model, prompt_cache_retention="24h"))
    at(clock, 2 * 3600)
    assert (cached(cache, gpt_request(ASK_GPT, model=model)) > 0) is kept
    assert model_family(model, "openai").extended_cache_retention is kept


def test_openai_prompt_cache_key_partitions() -> None:
    cache = OpenAICache(clock=FakeClock())
    assert cached(cache, gpt_request(ASK_GPT, prompt_cache_key="user-a")) == 0
    assert cached(cache, gpt_request(ASK_GPT, prompt_cache_key="user-b")) == 0
    assert cached(cache, gpt_request(ASK_GPT)) == 0  # no key is a partition of its own
    assert cached(cache, gpt_request(ASK_GPT, prompt_cache_key="user-a")) > 0
    assert cached(cache, gpt_request(ASK_GPT, prompt_cache_key="user-b")) > 0
    assert cached(cache, gpt_request(ASK_GPT, model="gpt-other", prompt_cache_key="user-a")) == 0


def test_openai_routes_by_the_opening() -> None:
    # Two prompts that part within their first 1,024 characters reach different machines:
    # even the 600 characters they share are not read (here the minimum is 0).
    cache = OpenAICache(0, clock=FakeClock())
    shared = "A" * 600
    cache.account({"model": GPT, "messages": [{"role": "user", "content": shared + "B" * 2000}]})
    other = {"model": GPT, "messages": [{"role": "user", "content": shared + "C" * 2000}]}
    assert cached(cache, other) == 0
    # Parting after the opening, they share what comes before.
    cache.account(gpt_request({"role": "user", "content": "B" * 2000}))
    assert cached(cache, gpt_request({"role": "user", "content": "C" * 2000})) == OPENING_TOKENS


def test_openai_key_order_is_as_sent() -> None:
    cache = OpenAICache(clock=FakeClock())
    question = {"role": "user", "content": "Remember this. " * 200}
    cache.account(gpt_request(question))
    reordered = {"content": question["content"], "role": "user"}
    # Only the opening is shared: the next message parts at its first key.
    assert cached(cache, gpt_request(reordered)) == OPENING_TOKENS
    assert cached(cache, gpt_request(question)) > OPENING_TOKENS + 512


def test_openai_evicted_prompts_are_dropped() -> None:
    clock = FakeClock()
    cache = OpenAICache(clock=clock)
    for i in range(3):
        cache.account(gpt_request({"role": "user", "content": f"Question {i}."}))
    assert cache.entry_count() == 3
    at(clock, 301)
    cache.account(gpt_request({"role": "user", "content": "A new one."}))
    assert cache.entry_count() == 1


def test_openai_accounting_is_not_quadratic(monkeypatch: pytest.MonkeyPatch) -> None:
    # 200 requests of a conversation growing to about 200K characters, each ending in a
    # question of its own (as a fork's do), so every earlier prompt shares a long prefix
    # with the new one and none is a prefix of it. Each request is compared with its
    # neighbours in sorted order, not with every earlier prompt.
    compared: list[int] = []
    real = cache_module._common_prefix

    def counting(a: str, b: str) -> int:
        compared.append(1)
        return real(a, b)

    monkeypatch.setattr(cache_module, "_common_prefix", counting)
    cache = OpenAICache(clock=FakeClock())
    conversation: list[Body] = []
    for i in range(200):
        conversation.append(
            {"role": "user" if i % 2 else "assistant", "content": f"{i} " + "z" * 1000}
        )
        question = {"role": "user", "content": f"What is worth keeping from turn {i}?"}
        usage = cache.account(gpt_request(*conversation, question))
    assert usage.prompt_tokens > 50_000
    assert usage.cached_tokens > usage.prompt_tokens - 512
    assert len(compared) <= 2 * 200  # two neighbours a request at most, not all before it


def gpt(server: FakeOpenAIServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)


def test_sdk_openai_eviction_and_prompt_cache_key() -> None:
    clock = FakeClock()

    async def scenario() -> list[int]:
        async with FakeOpenAIServer(["a"] * 5, clock=clock) as server, gpt(server) as client:
            seen = []
            messages: Any = [OPENING, ASK_GPT]  # Any: the SDK's TypedDict params
            for key, pause in [("a", 0), ("b", 0), ("a", 120), ("a", 301), ("a", 10)]:
                clock.advance(pause)
                done = await client.chat.completions.create(
                    model=GPT, messages=messages, prompt_cache_key=key
                )
                assert done.usage is not None
                assert done.usage.prompt_tokens_details is not None
                seen.append(done.usage.prompt_tokens_details.cached_tokens or 0)
            server.assert_all_used()
        return seen

    first, other_key, same_key, idle, again = run(scenario())
    assert (first, other_key) == (0, 0)
    assert same_key > 1024
    assert idle == 0  # five minutes and a second since the last use
    assert again == same_key


def test_a_system_block_added_at_send_time_can_be_left_out_of_the_cache() -> None:
    # Claude Code adds an attribution block to its system prompt when it sends a request,
    # and does not record it; a fork rebuilt from the record lacks it. Whether the
    # provider caches past that block decides whether the fork reads Claude Code's cache:
    # the fake models both.
    attribution = text("x-anthropic-billing-header: cc_version=2.1.332; cc_entrypoint=cli;")
    system = [text("You are Claude Code. " * 400)]
    conversation = [user(text("hello " * 300, mark=True))]
    sent = request(conversation, system=[attribution, *system])
    rebuilt = request(conversation, system=system)
    counting = AnthropicCache(clock=FakeClock())
    counting.account(sent)
    assert counting.account(rebuilt).cache_read_input_tokens == 0
    ignoring = AnthropicCache(
        clock=FakeClock(), ignored_system_prefixes=("x-anthropic-billing-header:",)
    )
    ignoring.account(sent)
    usage = ignoring.account(rebuilt)
    assert usage.cache_read_input_tokens == prompt(usage) > 0
