"""Every cache the provider offers: OpenAI's 24-hour retention on the models that take it,
Anthropic's one-hour lifetime where a session's pauses make it cheaper, and estimates
that price what each run is billed, through the real model clients and the fake servers."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from memdir.cost import model_family
from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.extract._planner import (
    LONG_TTL_SECONDS,
    OPENAI_CACHE_STEP,
    RequestShape,
    RunStats,
    estimate,
    long_ttl_pays,
)
from memdir.fork import CacheSafeParams
from memdir.messages import Message
from memdir.models import AnthropicModel, Model, ModelRequest, OpenAIModel, RetryPolicy
from memdir.telemetry import CollectingSink
from memdir.testing import FakeAnthropicServer, FakeClock, FakeOpenAIServer
from memdir.testing._cache import AnthropicCache
from memdir.tools import builtin_tools

SONNET = "claude-sonnet-5-5"
WRITE_TOOLS = [t.definition() for t in builtin_tools("/")]
ANSWER = "Batch the writes by partition and flush every second; retry with backoff. " * 12


def question(turn: int) -> str:
    return f"Turn {turn}: the ingest job for tenant {turn * 7} misses its window; why? " * 10


def session(
    tmp_path: Path,
    model_name: str,
    pauses: list[float],
    *,
    mode: str = "standalone",
    host_params: dict[str, Any] | None = None,
    host_age: float = 0.0,
) -> tuple[list[dict[str, Any]], list[Any]]:
    """A host turn after each pause, each followed by a run of the extractor, through the
    fake server of the model's provider on a clock the test moves: the ``extract.run``
    fields, and every request the server saw (host and memory agent alike).

    ``host_age``: seconds between the host's request and the run, so that the host's
    cache may have expired by the time a fork reads it."""
    clock = FakeClock()
    openai = model_name.startswith("gpt-")
    server_type = FakeOpenAIServer if openai else FakeAnthropicServer
    system = "You are a careful coding agent in the user's repository. " * 120
    with server_type(handler=lambda body: "Nothing to save.", clock=clock) as server:
        retry = RetryPolicy(max_retries=0)
        model: Model
        if openai:
            model = OpenAIModel(model_name, api_key="k", base_url=server.base_url, retry=retry)
        else:
            model = AnthropicModel(model_name, api_key="k", base_url=server.base_url, retry=retry)
        params = CacheSafeParams(
            model=model, system=system, tools=WRITE_TOOLS, params=host_params or {}
        )
        sink = CollectingSink()
        config = ExtractConfig(mode=mode)  # type: ignore[arg-type]
        extractor = MemoryExtractor(tmp_path / "memory", model, config, sink=sink, clock=clock)

        async def main() -> None:
            messages: list[Message] = []
            for turn, pause in enumerate(pauses):
                clock.advance(pause)
                messages.append(Message.user(question(turn)))
                answer = await model.request(
                    ModelRequest(
                        system=system,
                        tools=WRITE_TOOLS,
                        messages=tuple(messages),
                        params=host_params or {},
                    )
                )
                messages.append(answer.message)
                sent = clock()
                clock.advance(host_age)
                extractor.on_turn_end(
                    TurnContext(
                        messages=tuple(messages),
                        params=params,
                        last_request_at=sent,
                        cwd=str(tmp_path),
                    )
                )
                await extractor.drain()
            await model.aclose()

        asyncio.run(main())
        server.assert_no_errors()
        requests = list(server.requests)
    return [dict(e.fields) for e in sink.named("extract.run")], requests


def memory_requests(requests: list[Any]) -> list[Any]:
    """The memory agent's requests: every second one, after each host request."""
    return requests[1::2]


# --- OpenAI: prompt_cache_retention ---------------------------------------------------------


@pytest.mark.parametrize(
    ("model_name", "takes_it"),
    [("gpt-4.1", True), ("gpt-5", True), ("gpt-4o", False), ("gpt-4.1-mini", False)],
)
def test_own_requests_ask_openai_for_a_day_only_where_the_model_takes_it(
    tmp_path: Path, model_name: str, takes_it: bool
) -> None:
    """The 24-hour retention goes only to the models OpenAI lists for it (the model table's
    ``extended_cache_retention``); with it, a run half an hour after the last still reads
    memdir's prefix, and the planner expects it to."""
    assert model_family(model_name).extended_cache_retention is takes_it
    runs, requests = session(tmp_path, model_name, [0.0, 1800.0, 1800.0])
    bodies = [r.body for r in memory_requests(requests)]
    assert len(bodies) == 3
    for body in bodies:
        assert body.get("prompt_cache_retention") == ("24h" if takes_it else None)
        assert ("prompt_cache_retention" in body) is takes_it
    # The host's own requests are the host's: memdir adds nothing to them.
    assert all("prompt_cache_retention" not in r.body for r in requests[0::2])
    cached = [r.usage["prompt_tokens_details"]["cached_tokens"] for r in memory_requests(requests)]
    last = runs[-1]
    if takes_it:
        assert cached[2] > 1_024
        assert last["estimate_note"] == "memdir's window cached"
    else:
        assert cached[2] == 0
        assert last["estimate_note"] == "memdir's cache cold"
    # The planner counts characters / 4, so it cannot tell on which side of one of
    # OpenAI's 128-token cache steps the real cached prefix ends: one step, read instead of
    # paid in full, is the error it may make on top of its 10%.
    prices = model_family(model_name).prices
    step = OPENAI_CACHE_STEP * (prices.input - prices.cache_read)
    for run in runs:
        estimated = run["estimated_cost_if_nothing_saved"]
        assert estimated == pytest.approx(run["billed_cost"], rel=0.1, abs=step)


def test_a_fork_sends_the_hosts_retention_and_adds_none(tmp_path: Path) -> None:
    """The fork keeps the host's parameters as they are: retention changes neither the
    prefix nor the price, and 24 hours is a data-handling choice that is the host's."""
    _, requests = session(tmp_path / "a", "gpt-4.1", [0.0, 30.0], mode="fork")
    assert all("prompt_cache_retention" not in r.body for r in requests)
    runs, requests = session(
        tmp_path / "b",
        "gpt-4.1",
        [0.0, 1800.0],
        mode="fork",
        host_params={"prompt_cache_retention": "24h"},
        host_age=600.0,
    )
    assert all(r.body["prompt_cache_retention"] == "24h" for r in requests)
    # Ten minutes after the host's request its prompt still lives, kept for a day, and
    # the planner knows it.
    assert [run["estimate_note"] for run in runs] == ["host cache warm"] * 2


# --- Anthropic: ttl "1h" ----------------------------------------------------------------------


def markers(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every ``cache_control`` of a Messages request, in cache order."""
    found: list[dict[str, Any]] = []
    for block in body.get("tools") or ():
        if block.get("cache_control"):
            found.append(block["cache_control"])
    for block in body.get("system") or ():
        if block.get("cache_control"):
            found.append(block["cache_control"])
    for message in body["messages"]:
        content = message["content"]
        for block in content if isinstance(content, list) else ():
            if block.get("cache_control"):
                found.append(block["cache_control"])
    return found


def test_long_pauses_write_memdirs_prefix_for_an_hour(tmp_path: Path) -> None:
    """Twenty minutes between runs: a five-minute entry is gone by the next run, so once
    the planner has seen such a pause it writes the stable prefix (system prompt, window,
    new messages) for an hour, at 2x, and the next run reads it."""
    runs, requests = session(tmp_path, SONNET, [0.0, 1200.0, 1200.0, 1200.0])
    mine = memory_requests(requests)
    # The first run has seen no pause: the default lifetime everywhere.
    assert all("ttl" not in m for m in markers(mine[0].body))
    for request in mine[1:]:
        body = request.body
        found = markers(body)
        # System prompt and window points for an hour; the final message, which changes
        # every run, for five minutes, after them (longer lifetimes first).
        assert [m.get("ttl") for m in found][:-1] == ["1h"] * (len(found) - 1)
        assert "ttl" not in found[-1]
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    # The second run found its cache expired (written for five minutes) and wrote it for
    # an hour: the fake bills that as an hour's write.
    second, third, fourth = (r.usage for r in mine[1:])
    assert second["cache_read_input_tokens"] == 0
    assert second["cache_creation"]["ephemeral_1h_input_tokens"] > 1_000
    # Twenty minutes later the next runs read it, and write only their new turn for an hour.
    for usage in (third, fourth):
        assert usage["cache_read_input_tokens"] > 1_000
        assert 0 < usage["cache_creation"]["ephemeral_1h_input_tokens"] < 400
    assert runs[1]["estimate_note"] == "memdir's cache cold, written for an hour"
    assert runs[2]["estimate_note"] == "memdir's window cached, written for an hour"
    # Each estimate, for the outcome the run had, is its bill within 10%, the hour's
    # price included.
    for run in runs:
        estimated = run["estimated_cost_if_nothing_saved"]
        assert estimated == pytest.approx(run["billed_cost"], rel=0.1)


def test_short_pauses_keep_the_five_minute_lifetime(tmp_path: Path) -> None:
    """Runs a minute apart read a five-minute entry anyway: the hour's dearer write would
    buy nothing, and no marker asks for it."""
    runs, requests = session(tmp_path, SONNET, [0.0, 60.0, 60.0, 60.0])
    for request in memory_requests(requests):
        assert all("ttl" not in m for m in markers(request.body))
        assert request.usage["cache_creation"]["ephemeral_1h_input_tokens"] == 0
    assert all(u.usage["cache_read_input_tokens"] > 1_000 for u in memory_requests(requests)[1:])
    assert "an hour" not in json.dumps([r["estimate_note"] for r in runs])


def test_the_hour_pays_when_enough_pauses_fall_between_five_minutes_and_an_hour() -> None:
    family = model_family(SONNET)
    stats = RunStats()
    assert not long_ttl_pays(family, stats, 5_000, 500)  # no pause seen yet
    for _ in range(3):
        stats.record_gap(1_200.0)
    assert stats.short_share < 0.1
    assert stats.hour_share > 0.9
    # A warm run writes its new turn (500 of 5,000): 375 more now, 5,750 saved next run.
    assert long_ttl_pays(family, stats, 5_000, 500)
    # Pauses past an hour outlive either lifetime; pauses under five minutes need neither.
    far, near = RunStats(), RunStats()
    for _ in range(3):
        far.record_gap(2 * LONG_TTL_SECONDS)
        near.record_gap(60.0)
    assert not long_ttl_pays(family, far, 5_000, 500)
    assert not long_ttl_pays(family, near, 5_000, 500)
    # OpenAI has no price for a longer lifetime: its retention is a parameter instead.
    assert not long_ttl_pays(model_family("gpt-4.1"), stats, 5_000, 500)


def test_an_hours_write_is_priced_at_the_hours_price() -> None:
    family = model_family(SONNET)
    stats = RunStats(requests=1.0, output_tokens=0.0, save_share=0.0)
    base = RequestShape(family=family, model=SONNET, prompt_tokens=5_000, warm_tokens=3_000)
    long = RequestShape(
        family=family, model=SONNET, prompt_tokens=5_000, warm_tokens=3_000, long_tokens=4_500
    )
    prices = family.prices
    read = 3_000 * prices.cache_read
    assert estimate("standalone", base, stats).cost == pytest.approx(
        read + 2_000 * prices.cache_write
    )
    # Up to the last one-hour breakpoint (4,500) at 2x, the rest at 1.25x.
    assert prices.cache_write_1h == 2.0
    assert estimate("standalone", long, stats).cost == pytest.approx(
        read + 1_500 * 2.0 + 500 * prices.cache_write
    )


# --- estimates against bills, each mode, cold then warm ---------------------------------------


@pytest.mark.parametrize("mode", ["fork", "standalone"])
def test_each_modes_estimate_is_its_bill_cold_and_warm(tmp_path: Path, mode: str) -> None:
    """The first run finds its cache cold (memdir's own, or the host's six minutes after
    its request); the ones after find it warm. Priced for the outcome each had (nothing
    to save), the estimate is the bill within 10%; the expectation, which weighs in a
    save's output, is dearer and tells the two outcomes apart."""
    age = 360.0 if mode == "fork" else 0.0
    runs, requests = session(tmp_path, SONNET, [0.0, 30.0, 30.0], mode=mode, host_age=age)
    notes = [run["estimate_note"] for run in runs]
    if mode == "fork":
        assert notes == ["host cache expired"] * 3
    else:
        assert notes == ["memdir's cache cold"] + ["memdir's window cached"] * 2
    first = memory_requests(requests)[0].usage
    assert first["cache_read_input_tokens"] == 0
    for run in runs:
        assert run["mode"] == mode
        assert run["estimated_cost_if_nothing_saved"] == pytest.approx(run["billed_cost"], rel=0.1)
        assert run["estimated_cost_if_nothing_saved"] <= run["estimated_cost"]
        assert run["estimated_cost"] < run["estimated_cost_if_saved"]


def test_the_model_layer_puts_the_hour_on_the_stable_prefix_only() -> None:
    """``ModelRequest.cache_ttl``: the system prompt's marker and those at ``cache_points``
    ask for an hour; the last message's keeps the default, after them, as Anthropic wants
    longer lifetimes before shorter ones. Without it nothing changes."""
    model = AnthropicModel(SONNET, api_key="k")
    messages = tuple(Message.user(question(n)) for n in range(4))
    request = ModelRequest(system="Save memories.", messages=messages, cache_points=(0, 2))
    plain = model.wire_request(request)
    assert all("ttl" not in m for m in markers(plain))
    long = model.wire_request(dataclasses.replace(request, cache_ttl="1h"))
    assert [m.get("ttl") for m in markers(long)] == ["1h", "1h", "1h", None]
    assert AnthropicCache().refusal(long) is None


def test_a_stamped_conversation_tells_the_first_run_how_far_apart_turns_come(
    tmp_path: Path,
) -> None:
    """A process that runs once per turn (the Claude Code hook) never sees a gap between
    runs of its own; the transcript's stamps show the person's turns 20 minutes apart, so
    its first run already writes memdir's prefix for an hour."""
    start = datetime.datetime(2026, 3, 1, 9, 0, tzinfo=datetime.UTC)
    stamped: list[Message] = []
    for turn in range(6):
        at = start + datetime.timedelta(minutes=20 * turn)
        stamped.append(dataclasses.replace(Message.user(question(turn)), timestamp=at))
        stamped.append(Message.assistant(ANSWER))

    def first_body(messages: list[Message], folder: str) -> dict[str, Any]:
        with FakeAnthropicServer(["Nothing to save."]) as server:
            model = AnthropicModel(
                SONNET, api_key="k", base_url=server.base_url, retry=RetryPolicy(max_retries=0)
            )
            extractor = MemoryExtractor(tmp_path / folder, model)

            async def main() -> None:
                extractor.on_turn_end(TurnContext(messages=tuple(messages), cwd=str(tmp_path)))
                await extractor.drain()
                await model.aclose()

            asyncio.run(main())
            server.assert_no_errors()
            body: dict[str, Any] = server.requests[0].body
        return body

    assert first_body(stamped, "stamped")["system"][-1]["cache_control"] == {
        "type": "ephemeral",
        "ttl": "1h",
    }
    # The same conversation a minute a turn, or without stamps: the default lifetime.
    quick = [
        dataclasses.replace(m, timestamp=start + datetime.timedelta(minutes=n))
        for n, m in enumerate(stamped)
    ]
    unstamped = [dataclasses.replace(m, timestamp=None) for m in stamped]
    for folder, messages in (("quick", quick), ("unstamped", unstamped)):
        assert all("ttl" not in m for m in markers(first_body(messages, folder)))
