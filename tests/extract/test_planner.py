"""The run planner: the fork or memdir's own request, by what each is expected to cost."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from memdir.cost import CostEstimate, Prices, bill, model_family
from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.extract._planner import RequestShape, RunStats, estimate, plan_run
from memdir.fork import CacheSafeParams
from memdir.messages import Message, ToolUseBlock
from memdir.models import AnthropicModel, ModelRequest, RetryPolicy, Usage
from memdir.telemetry import CollectingSink
from memdir.testing import FakeAnthropicServer, FakeClock, ScriptedModel
from memdir.tools import builtin_tools

SONNET = model_family("anthropic:claude-sonnet-4-5")
WRITE_TOOLS = [t.definition() for t in builtin_tools("/")]
GPT4O = model_family("openai:gpt-4o")


def shape(prompt: int, warm: int) -> RequestShape:
    return RequestShape(
        family=SONNET, model="anthropic:claude-sonnet-4-5", prompt_tokens=prompt, warm_tokens=warm
    )


# --- prices and families -------------------------------------------------------------------


def test_families_carry_the_documented_rules() -> None:
    assert model_family("claude-haiku-4-5-20251001").min_cache_tokens == 4096
    assert model_family("claude-sonnet-4-6").min_cache_tokens == 2048
    assert model_family("anthropic:claude-opus-4-5").keeps_thinking is True
    assert model_family("claude-sonnet-4-5").keeps_thinking is False
    assert SONNET.prices == Prices(cache_write=1.25, cache_write_1h=2.0, cache_read=0.1, output=5)
    assert GPT4O.prices.cache_read == 0.5
    assert GPT4O.prices.cache_write == 1.0
    assert model_family("gpt-5-mini").prices.cache_read == 0.1
    assert model_family("gpt-4.1-nano").prices.cache_read == 0.25
    assert model_family("openai:my-local-llama").prices.cache_read == 0.5  # compatible server


def test_prices_can_be_overridden_by_name_or_prefix() -> None:
    mine = Prices(input=3.0, cache_write=3.75, cache_write_1h=6.0, cache_read=0.3, output=15.0)
    family = model_family("claude-sonnet-4-5-20250929", prices={"anthropic:claude-sonnet": mine})
    assert family.prices == mine
    assert family.min_cache_tokens == 1024  # only the prices change


def test_a_bill_prices_each_kind_of_token() -> None:
    usage = Usage(
        input_tokens=100,
        output_tokens=10,
        cache_read_input_tokens=1000,
        cache_creation_input_tokens=300,
        cache_creation_1h_input_tokens=100,
    )
    assert bill(usage, SONNET.prices) == pytest.approx(100 + 50 + 100 + 200 * 1.25 + 100 * 2.0)


# --- estimates -------------------------------------------------------------------------------


def test_a_warm_prefix_is_read_and_a_cold_one_written() -> None:
    stats = RunStats(requests=1.0, output_tokens=0.0, save_share=0.0)
    warm = estimate("fork", shape(50_000, 48_000), stats)
    cold = estimate("fork", shape(50_000, 0), stats)
    assert warm.cost == pytest.approx(48_000 * 0.1 + 2_000 * 1.25)
    assert cold.cost == pytest.approx(50_000 * 1.25)
    assert warm.cache_read_tokens == 48_000
    assert cold.cache_write_tokens == 50_000


def test_below_the_minimum_nothing_is_cached() -> None:
    stats = RunStats(requests=1.0, output_tokens=0.0, save_share=0.0)
    tiny = estimate("standalone", shape(900, 900), stats)
    assert tiny.cost == pytest.approx(900.0)
    assert tiny.input_tokens == 900
    assert tiny.cache_read_tokens == 0


def test_later_requests_read_the_one_before() -> None:
    one = estimate(
        "fork", shape(10_000, 10_000), RunStats(requests=1.0, output_tokens=0.0, save_share=0.0)
    )
    two = estimate(
        "fork", shape(10_000, 10_000), RunStats(requests=2.0, output_tokens=0.0, save_share=0.0)
    )
    assert two.cost == pytest.approx(one.cost + 10_000 * 0.1 + 400 * 1.25)


def test_how_often_runs_save_is_the_share_of_recent_runs_that_did() -> None:
    """A run's expected cost weighs a save by how often runs save. Runs that save one time
    in four are expected to save about one time in four at every run, not a third of the
    time just after a save and a sixth just before the next (a moving mean that jumps by
    a fifth at each save): the expectation is the one the bills bear out."""
    stats = RunStats()
    shares = []
    for run in range(24):
        stats.record(1, 150 if run % 4 == 0 else 5, 0.0, saved=run % 4 == 0)
        shares.append(stats.save_share)
    assert all(abs(share - 0.25) < 0.06 for share in shares[12:])
    # The starting guess counts as two runs among the last twenty.
    assert shares[-1] == pytest.approx((0.3 * 2 + 5) / 22)
    assert RunStats(save_share=0.0).save_share == 0.0


def test_the_plan_takes_the_cheaper_and_reports_both() -> None:
    stats = RunStats()
    plan = plan_run("auto", shape(60_000, 59_000), shape(8_000, 4_000), stats)
    assert plan.mode == "standalone"
    assert plan.fork is not None
    assert plan.fork.cost > plan.standalone.cost
    plan = plan_run("auto", shape(12_000, 11_500), shape(9_000, 0), stats)
    assert plan.mode == "fork"
    assert plan_run("standalone", shape(12_000, 11_500), shape(9_000, 0), stats).mode == (
        "standalone"
    )
    assert plan_run("fork", shape(60_000, 59_000), shape(8_000, 4_000), stats).mode == "fork"
    assert plan_run("auto", None, shape(8_000, 0), stats).fork is None


def standalone_cost(cost: float) -> CostEstimate:
    return CostEstimate(
        mode="standalone",
        model="anthropic:claude-sonnet-4-5",
        requests=1.0,
        input_tokens=0.0,
        cache_read_tokens=0.0,
        cache_write_tokens=0.0,
        output_tokens=0.0,
        cost=cost,
    )


def test_a_cold_standalone_run_is_taken_only_when_later_runs_pay_it_back() -> None:
    """memdir's first standalone run writes its cache (5,000 here, against 4,150 for the
    fork); each standalone run after it costs 3,800 while the cache lives."""
    fork, alone = shape(30_000, 29_000), shape(4_000, 0)
    # Runs follow each other within the cache's life.
    warm = RunStats(requests=1.0, output_tokens=0.0, save_share=0.0, warm_share=1.0)
    plan = plan_run("auto", fork, alone, warm, standalone_cost(3_800.0))
    assert plan.mode == "standalone"
    assert plan.reason == "standalone pays back its cold cache in later runs"
    # It is priced as this run will be billed, cold, not as the runs it makes cheaper.
    assert plan.standalone.cost == pytest.approx(5_000.0)
    assert plan.fork is not None
    assert plan.fork.cost == pytest.approx(4_150.0)
    # Runs far apart: the cache it writes would lapse unread, and the fork stays.
    cold = RunStats(requests=1.0, output_tokens=0.0, save_share=0.0, warm_share=0.0)
    assert plan_run("auto", fork, alone, cold, standalone_cost(3_800.0)).mode == "fork"
    # A warm standalone run dearer than the fork pays nothing back, however soon it comes.
    assert plan_run("auto", fork, alone, warm, standalone_cost(4_200.0)).mode == "fork"


def test_on_claude_the_runs_after_the_next_keep_the_cache_within_the_hour() -> None:
    """Pauses of 400 s and 20 s in turn: half the runs find a five-minute cache. A cold
    standalone run (850 over the fork) is read by the next run half the time (1,150
    saved); the runs after it, every one within the hour, are kept warm by a warm run's
    hour-long write (`long_ttl_pays`), so the write pays back over the chain, not over the
    next run alone. Counting the next run alone, the fork was taken, and the session paid
    a cold write after every fork: 16% dearer than standalone throughout."""
    fork, alone = shape(30_000, 29_000), shape(4_000, 0)
    stats = RunStats(requests=1.0, output_tokens=0.0, save_share=0.0, warm_share=1 / 3)
    # One run in three in time, each after it as often: 575 expected, under the 850.
    assert plan_run("auto", fork, alone, stats, standalone_cost(3_000.0), 1 / 3).mode == "fork"
    # The runs after the next within the hour every time: 1/3 of (1 + 4) runs, 1,917.
    plan = plan_run("auto", fork, alone, stats, standalone_cost(3_000.0), 1 / 3, 1.0)
    assert plan.mode == "standalone"


def test_a_run_that_finds_memdirs_cache_gone_forks_rather_than_paying_it_again() -> None:
    """The cold write (850 over the fork here) makes each run that finds memdir's cache
    1,150 cheaper than the fork. With half the runs in time, the next run reads it half
    the time, the one after that a quarter, and so on: 1,150 expected, more than the 850.
    A run that comes too late pays no cold write of its own: it chooses again, and may
    fork. (Counting such runs as paying the cold write again, the fork was kept for good.)
    Savings are counted over at most four runs: a write that takes more to pay back waits."""
    fork, alone = shape(30_000, 29_000), shape(4_000, 0)
    stats = RunStats(requests=1.0, output_tokens=0.0, save_share=0.0, warm_share=0.5)
    plan = plan_run("auto", fork, alone, stats, standalone_cost(3_000.0))
    assert plan.mode == "standalone"
    assert plan.fork is not None
    assert plan.standalone.cost - plan.fork.cost == pytest.approx(850.0)
    # One run in three in time: 575 expected.
    assert plan_run("auto", fork, alone, stats, standalone_cost(3_000.0), 1 / 3).mode == "fork"
    # Every run in time but each only 100 cheaper: four runs' 400 do not cover the 850.
    close = RunStats(requests=1.0, output_tokens=0.0, save_share=0.0, warm_share=1.0)
    assert plan_run("auto", fork, alone, close, standalone_cost(4_050.0)).mode == "fork"


def test_a_host_request_past_the_context_window_is_never_forked() -> None:
    plan = plan_run("fork", shape(250_000, 250_000), shape(8_000, 0), RunStats())
    assert plan.mode == "standalone"
    assert "context window" in plan.reason


# --- through the extractor, on a clock the test moves --------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def host_turn(turn: int, pasted: int = 0) -> list[Message]:
    log = "".join(
        f"{turn}:{n} WARN ingest batch {n} retried after a timeout\n" for n in range(pasted)
    )
    return [
        Message.user(f"Question {turn}: how should the ingest job batch its writes? " * 4 + log),
        Message.assistant(f"Answer {turn}: batch by partition, flush every second. " * 30),
    ]


def test_the_fork_while_the_host_cache_is_warm_and_standalone_once_it_expired(
    tmp_path: Path,
) -> None:
    clock = Clock()
    name = "anthropic:claude-sonnet-4-5"
    host = ScriptedModel(["Nothing to save."] * 2, name=name)
    mine = ScriptedModel(["Nothing to save."] * 2, name=name)
    system = "You are a coding agent. " * 800  # about 4,800 tokens
    params = CacheSafeParams(model=host, system=system, tools=WRITE_TOOLS)
    sink = CollectingSink()
    extractor = MemoryExtractor(tmp_path / "memory", mine, sink=sink, clock=clock)
    messages: list[Message] = []

    async def turn(pause: float) -> None:
        clock.now += pause
        # A turn with a long log pasted in: about 15,000 tokens of new conversation.
        messages.extend(host_turn(len(messages), pasted=1_200))
        # The host's last request went out just now.
        context = TurnContext(messages=tuple(messages), params=params, last_request_at=clock.now)
        clock.now += pause
        extractor.on_turn_end(context)
        await extractor.drain()

    async def main() -> None:
        # The host's request has just been cached: reading it beats sending the log again.
        await turn(0.0)
        # The run starts 5.5 minutes after the host's request: all of it would be written
        # again, and memdir's own request, which only carries the new turn, is cheaper.
        await turn(330.0)

    asyncio.run(main())
    first, second = sink.named("extract.run")
    assert first.fields["mode"] == "fork"
    assert first.fields["plan_reason"] == "fork is cheaper"
    assert second.fields["mode"] == "standalone"
    assert second.fields["plan_reason"] == "standalone is cheaper"
    for run in (first, second):
        assert run.fields["estimated_cost_fork"] > 0
        assert run.fields["estimated_cost_standalone"] > 0
    assert len(host.requests) == 1
    assert len(mine.requests) == 1
    # The expired fork would have re-written everything: dearer than the warm one.
    assert second.fields["estimated_cost_fork"] > 2 * first.fields["estimated_cost_fork"]


def test_mode_standalone_never_forks_and_mode_fork_always_does(tmp_path: Path) -> None:
    name = "anthropic:claude-sonnet-4-5"
    for mode, forks in (("standalone", False), ("fork", True)):
        host = ScriptedModel(["Nothing."], name=name)
        mine = ScriptedModel(["Nothing."], name=name)
        sink = CollectingSink()
        config = ExtractConfig(mode=mode)  # type: ignore[arg-type]
        extractor = MemoryExtractor(tmp_path / mode, mine, config, sink=sink)
        params = CacheSafeParams(model=host, system="s", tools=WRITE_TOOLS)

        async def main(ex: MemoryExtractor = extractor, p: CacheSafeParams = params) -> None:
            ex.on_turn_end(TurnContext(messages=tuple(host_turn(0)), params=p))
            await ex.drain()

        asyncio.run(main())
        (run,) = sink.named("extract.run")
        assert run.fields["mode"] == ("fork" if forks else "standalone")
        assert len(host.requests) == (1 if forks else 0)
        assert len(mine.requests) == (0 if forks else 1)


def test_without_prices_the_fork_is_kept(tmp_path: Path) -> None:
    host = ScriptedModel(["Nothing."])  # "scripted:model": no provider, no prices
    sink = CollectingSink()
    extractor = MemoryExtractor(tmp_path / "memory", ScriptedModel(), sink=sink)

    async def main() -> None:
        params = CacheSafeParams(model=host, system="s")
        extractor.on_turn_end(TurnContext(messages=tuple(host_turn(0)), params=params))
        await extractor.drain()

    asyncio.run(main())
    (run,) = sink.named("extract.run")
    assert run.fields["mode"] == "fork"
    assert "no prices" in run.fields["plan_reason"]


def test_a_host_whose_tools_cannot_write_is_not_forked(tmp_path: Path) -> None:
    name = "anthropic:claude-sonnet-4-5"
    host = ScriptedModel([], name=name)
    mine = ScriptedModel(["Nothing."], name=name)
    sink = CollectingSink()
    extractor = MemoryExtractor(tmp_path / "memory", mine, sink=sink)
    reader = [t for t in WRITE_TOOLS if t["name"] == "Read"]
    params = CacheSafeParams(model=host, system="A chat agent. " * 50, tools=reader)

    async def main() -> None:
        extractor.on_turn_end(TurnContext(messages=tuple(host_turn(0)), params=params))
        await extractor.drain()

    asyncio.run(main())
    (run,) = sink.named("extract.run")
    assert run.fields["mode"] == "standalone"
    assert run.fields["plan_reason"] == "the host's tools cannot write memory"


# --- estimates against bills, over HTTP to the fake Anthropic server ------------------------


def served_runs(
    tmp_path: Path,
    *,
    system: str,
    tools: list[dict[str, object]],
    turns: int,
    mode: str = "auto",
    pauses: Sequence[float] = (),
    reply: Callable[[dict[str, Any]], Message | str] = lambda body: "Nothing to save.",
) -> tuple[list[dict[str, Any]], list[Mapping[str, Any]]]:
    """``turns`` host turns 20 s apart (or ``pauses`` apart, in turn), each a request of
    the host's through the fake server and then a run of the extractor: the
    ``extract.run`` fields, and the usage the server reported for each of the extractor's
    requests."""
    clock = FakeClock()
    answer = "Batch by partition and flush every second. " * 30
    with FakeAnthropicServer(handler=reply, clock=clock) as server:
        model = AnthropicModel(
            "claude-sonnet-5-5",
            api_key="k",
            base_url=server.base_url,
            retry=RetryPolicy(max_retries=0),
        )
        params = CacheSafeParams(model=model, system=system, tools=tools)
        sink = CollectingSink()
        config = ExtractConfig(mode=mode)  # type: ignore[arg-type]
        extractor = MemoryExtractor(tmp_path / "memory", model, config, sink=sink, clock=clock)

        async def main() -> None:
            messages: list[Message] = []
            for turn in range(turns):
                clock.advance(pauses[turn % len(pauses)] if pauses else 20.0)
                messages.append(Message.user(f"Question {turn}: how should the job batch? " * 4))
                await model.request(
                    ModelRequest(system=system, tools=tools, messages=tuple(messages))
                )
                messages.append(Message.assistant(answer))
                extractor.on_turn_end(
                    TurnContext(
                        messages=tuple(messages),
                        params=params,
                        last_request_at=clock(),
                        cwd=str(tmp_path),
                    )
                )
                await extractor.drain()
            await model.aclose()

        asyncio.run(main())
        server.assert_no_errors()
        usage = [r.usage for r in server.requests[1::2] if r.usage is not None]
    return [dict(e.fields) for e in sink.named("extract.run")], usage


def test_a_sessions_first_save_is_priced_within_ten_percent_before_any_save_is_seen(
    tmp_path: Path,
) -> None:
    """The first run that saves is priced from the starting figures alone: one request
    of a memory file of a few lines (memdir ends the run on its writes, and writes the
    name, type and index line itself). Started from 1.5 requests and 150 to 300 output
    tokens, its estimate was 11 to 20% over the bill."""
    # A project memory as the prompt asks for one: the fact, then its Why and How lines.
    text = (
        "---\ndescription: the ingest job batches its writes by partition\n---\n\n"
        "The ingest job batches writes by partition and flushes every second.\n\n"
        "**Why:** one write per event missed the window at peak load.\n\n"
        "**How to apply:** a new ingest path batches the same way.\n"
    )

    def reply(body: dict[str, Any]) -> Message | str:
        last = body["messages"][-1]["content"]
        said = last if isinstance(last, str) else " ".join(str(b.get("text")) for b in last)
        if said.startswith("# Memory update"):
            write = ToolUseBlock(
                id="toolu_w",
                name="Write",
                input={"file_path": "project_batching.md", "content": text},
            )
            return Message(role="assistant", content=(write,))
        return "Nothing to save."

    runs, _ = served_runs(
        tmp_path, system="You are a coding agent. " * 300, tools=WRITE_TOOLS, turns=1, reply=reply
    )
    (first,) = runs
    assert first["memories_saved"] == 1
    assert first["turn_count"] == 1
    billed = first["billed_cost"]
    assert abs(first["estimated_cost_if_saved"] - billed) <= 0.1 * billed


def test_the_first_standalone_run_is_priced_with_its_cache_cold(tmp_path: Path) -> None:
    """memdir's first standalone request finds nothing of it cached: it is estimated (and
    billed) at the cache-write price, not as the warm standalone run it makes possible.
    It is taken on the first run already, dearer than the fork, because the runs after it
    pay it back: forking first and switching later pays the same cold write, later."""
    # A host prefix of ~1,800 tokens: with memdir's shorter prompt (no index to show or
    # edit) a fork under a prefix of ~1,200 costs little enough to be taken instead.
    runs, usage = served_runs(
        tmp_path, system="You are a coding agent. " * 300, tools=WRITE_TOOLS, turns=3
    )
    first, second, third = runs
    assert first["mode"] == "standalone"
    assert first["plan_reason"] == "standalone pays back its cold cache in later runs"
    assert first["estimate_note"] == "memdir's cache cold"
    assert usage[0]["cache_read_input_tokens"] == 0
    assert first["estimated_cost"] == first["estimated_cost_standalone"]
    assert first["estimated_cost"] > first["estimated_cost_fork"]
    # Nothing is saved: the estimate for that outcome is the bill, within 10% (the
    # expectation over both outcomes prices in a save's output, a fifth of the time).
    assert first["estimated_cost_if_nothing_saved"] == pytest.approx(first["billed_cost"], rel=0.1)
    # The later ones read what the one before wrote, as estimated.
    for later in (second, third):
        assert later["estimate_note"] == "memdir's window cached"
        estimated = later["estimated_cost_if_nothing_saved"]
        assert estimated == pytest.approx(later["billed_cost"], rel=0.1)
        assert later["billed_cost"] < 0.4 * first["billed_cost"]


def test_a_host_request_below_the_cache_minimum_is_priced_without_a_read(
    tmp_path: Path,
) -> None:
    """A host request under the provider's minimum cacheable length (1,024 tokens on
    Sonnet) was never cached: the fork reads none of it and pays to write its own."""
    runs, usage = served_runs(tmp_path, system="A short agent.", tools=[], turns=2, mode="fork")
    for run, used in zip(runs, usage, strict=True):
        assert run["mode"] == "fork"
        assert run["estimate_note"] == "host request below the cache minimum"
        assert used["cache_read_input_tokens"] == 0
        assert run["estimated_cost"] == run["estimated_cost_fork"]
        assert run["billed_cost"] == run["cost"]
    # Priced for a run that saves nothing, as these are, it expects no read at all (a
    # save's later requests would read the first, which is all the expectation reads):
    # ~2,950 estimated, ~2,950 billed.
    for run in runs:
        assert run["estimated_cost_if_nothing_saved"] == pytest.approx(run["billed_cost"], rel=0.05)


def test_pauses_that_outlive_the_cache_every_other_run_do_not_keep_the_fork(
    tmp_path: Path,
) -> None:
    """Every other pause is longer than the cache's five minutes. A run that finds
    memdir's cache gone was once weighed as though every such run paid the cold write
    again, and the planner forked from the third run on: dearer than either way forced.
    A run that comes too late chooses again; the one-hour lifetime keeps the cache over
    the long pauses, and the planner's session costs what the cheaper forced one does."""
    system = "You are a coding agent. " * 200

    def session(mode: str) -> list[dict[str, Any]]:
        folder = tmp_path / mode
        folder.mkdir()
        runs, _ = served_runs(
            folder, system=system, tools=WRITE_TOOLS, turns=8, mode=mode, pauses=(400.0, 20.0)
        )
        return runs

    auto, fork, alone = session("auto"), session("fork"), session("standalone")
    assert [run["mode"] for run in auto] == ["standalone"] * 8
    bills = [sum(run["billed_cost"] for run in runs) for runs in (auto, fork, alone)]
    assert bills[0] <= min(bills[1:]) * 1.01
