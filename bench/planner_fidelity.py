"""How far the run planner's estimates are from the bills, and what its choices cost.

A coding agent (``--system`` tokens of system prompt, memdir's six tools) holds a
``--turns``-turn session through ``AnthropicModel`` against ``FakeAnthropicServer`` (and,
for the OpenAI rows, ``OpenAIModel`` against ``FakeOpenAIServer``) on a clock the run
moves. After every turn ``MemoryExtractor.on_turn_end`` gets the host's
request and is drained; the scripted memory agent saves a memory every ``--save-every``
turns and answers "Nothing new to save." otherwise. Each ``extract.run`` event carries the
chosen way's ``estimated_cost`` and the ``billed_cost`` of the usage the server reported
(both in input-token equivalents of the model's prices); this script compares them.
"in 10%" counts the runs whose estimate is within 10% of their bill; "as run" does the
same with the estimate for the outcome the run had (``estimated_cost_if_saved`` or
``estimated_cost_if_nothing_saved``): whether a run saves cannot be known before it runs,
and a save's output moves a run's bill by a third or more, so the first figure is bounded
by how often runs save and the second shows how well the rest is priced; "priced" uses
the run's own requests and output (``estimated_cost_as_run``), which leaves the planner's
view of the request and the cache.

Each schedule runs with the planner choosing (``auto``) and with each mode forced; "best
mode" is the cheaper forced session. "Hindsight" asks of each run of the ``auto`` session
whether the other way would have been cheaper: the session is replayed with that one run
going the other way (the same state before it: memory, memdir's cache, the host's) and
the planner choosing again after it, and the run's regret is what the replay saves over
the whole session, if anything: a standalone run that costs more than the fork now but
warms memdir's cache for the runs after it is no mistake if those runs pay it back.
Hindsight is the ``auto`` bill less every run's regret. (Adding up the cheaper of the two
forced sessions' bills run by run, as this script once did, pairs runs no session can
have: a forced standalone run cheap because the run before it warmed its cache, with the
fork where that run was dearer.) "Switch" is how much dearer the ``auto`` session is than
its best single change of course: from one run on, every run sent the way that run did
not go. It catches a loss spread over runs that single flips cannot see: two cold
standalone runs at a session's end where forking both was cheaper, but forking the first
alone leaves the second to write the same cold prefix.

Schedules: ``warm`` (30 s between turns), ``mixed`` (seeded, one pause in four over the
cache's five minutes), ``cold`` (six minutes between turns), on Claude Sonnet; then
``mixed`` and ``cold`` on gpt-4.1 (which takes ``prompt_cache_retention: "24h"``) and gpt-4o
(which does not). Output only.

One draw of the ``mixed`` schedule is one sample of it: a draw that ends on two long
pauses after nine short ones makes any choice made before the next pause look wrong.
``--draws N`` also replays the ``mixed`` rows on the draws ``1`` to ``N`` and reports the
sums over them: the planner's bill, hindsight's, and how far apart they are (each
draw's figure beside it).

    python bench/planner_fidelity.py [--turns 12] [--system 3000] [--save-every 4] [--seed 24]
        [--draws 20]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from unittest import mock

from _scripted import feedback_saves, is_memory_request, parse_memory_request, save_calls
from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext, _run
from memdir.extract._planner import Mode, RunPlan
from memdir.extract._planner import plan_run as planner
from memdir.fork import CacheSafeParams
from memdir.messages import Message
from memdir.models import AnthropicModel, Model, ModelRequest, OpenAIModel, RetryPolicy
from memdir.telemetry import CollectingSink
from memdir.testing import FakeAnthropicServer, FakeClock, FakeOpenAIServer
from memdir.tools import builtin_tools

MODEL = "claude-sonnet-5-5"
TOOLS = [t.definition() for t in builtin_tools("/")]
ANSWER = "Batch the writes by partition and flush every second; retry with backoff. " * 25


def user_text(turn: int) -> str:
    return f"Turn {turn}: the ingest job for tenant {turn * 7} misses its window; why? " * 3


SEED = 24
"""The ``mixed`` schedule's draw (``--seed``)."""


def pauses(schedule: str, turns: int, seed: int = SEED) -> list[float]:
    if schedule == "warm":
        return [30.0] * turns
    if schedule == "cold":
        return [360.0] * turns
    rng = random.Random(seed)
    return [rng.choice([20.0, 45.0, 90.0, 400.0]) for _ in range(turns)]


def session(
    mode: str,
    schedule: str,
    turns: int,
    system_tokens: int,
    save_every: int,
    name: str = MODEL,
    flips: Mapping[int, Mode] | None = None,
    seed: int = SEED,
) -> list[dict[str, Any]]:
    """The ``extract.run`` fields of one session; ``flips`` sends the runs it names (by
    their number) the way it gives, whatever the planner would choose."""
    clock = FakeClock()
    planned = 0

    def plan_run(setting: Mode, *args: Any, **kwargs: Any) -> RunPlan:
        nonlocal planned
        planned += 1
        return planner((flips or {}).get(planned - 1, setting), *args, **kwargs)

    system = "You are a careful coding agent in the user's repository. " * (system_tokens * 4 // 57)

    def reply(body: dict[str, Any]) -> Message | str:
        if not is_memory_request(body):
            return ANSWER
        request = parse_memory_request(body)
        wanted = [
            t
            for t in range(turns)
            if t % save_every == 0 and any(user_text(t) in text for text in request.new_texts)
        ]
        if not wanted or request.turn > 1:
            return "Nothing new to save."
        saves = feedback_saves(wanted, user_text)
        return save_calls(request, saves)

    openai = name.startswith("gpt-")
    fake = FakeOpenAIServer if openai else FakeAnthropicServer
    with (
        mock.patch.object(_run, "plan_run", plan_run),
        tempfile.TemporaryDirectory() as tmp,
        fake(handler=reply, clock=clock) as server,
    ):
        retry = RetryPolicy(max_retries=0)
        model: Model
        if openai:
            model = OpenAIModel(name, api_key="k", base_url=server.base_url, retry=retry)
        else:
            model = AnthropicModel(name, api_key="k", base_url=server.base_url, retry=retry)
        params = CacheSafeParams(model=model, system=system, tools=TOOLS)
        sink = CollectingSink()
        config = ExtractConfig(mode=mode)  # type: ignore[arg-type]
        extractor = MemoryExtractor(Path(tmp) / "memory", model, config, sink=sink, clock=clock)

        async def main() -> None:
            messages: list[Message] = []
            for turn, pause in enumerate(pauses(schedule, turns, seed)):
                clock.advance(pause)
                messages.append(Message.user(user_text(turn)))
                answer = await model.request(
                    ModelRequest(system=system, tools=TOOLS, messages=tuple(messages))
                )
                messages.append(answer.message)
                context = TurnContext(
                    messages=tuple(messages), params=params, last_request_at=clock(), cwd=tmp
                )
                extractor.on_turn_end(context)
                await extractor.drain()
            await model.aclose()

        asyncio.run(main())
        server.assert_no_errors()
    return [dict(event.fields) for event in sink.named("extract.run")]


def as_run(run: dict[str, Any]) -> float:
    """The estimate for the outcome the run had: saved something, or nothing."""
    key = "estimated_cost_if_saved" if run["memories_saved"] else "estimated_cost_if_nothing_saved"
    value = run.get(key)
    return float(value if value is not None else run["estimated_cost"])


def regrets(
    auto: list[dict[str, Any]], schedule: str, args: argparse.Namespace, name: str
) -> list[float]:
    """Each run's regret: what sending it the other way (the same state before it, the
    planner choosing again after it) would have saved over the whole session, if anything."""
    total = sum(r["billed_cost"] for r in auto)
    out = []
    for n, run in enumerate(auto):
        other: Mode = "fork" if run["mode"] == "standalone" else "standalone"
        replay = session(
            "auto",
            schedule,
            args.turns,
            args.system,
            args.save_every,
            name,
            flips={n: other},
            seed=args.seed,
        )
        # The same session up to the flipped run, or it would not be the same state.
        assert [r["billed_cost"] for r in replay[:n]] == [r["billed_cost"] for r in auto[:n]]
        out.append(max(total - sum(r["billed_cost"] for r in replay), 0.0))
    return out


def switch(auto: list[dict[str, Any]], schedule: str, args: argparse.Namespace, name: str) -> float:
    """The most one change of course saves: from some run on, every run sent the way that
    run did not go. Single flips miss a loss spread over two runs (both cold standalone
    runs before a session ends, where forking both was cheaper, but forking the first
    leaves the second to write the same cold prefix); this catches it."""
    total = sum(r["billed_cost"] for r in auto)
    best = 0.0
    for n, run in enumerate(auto):
        other: Mode = "fork" if run["mode"] == "standalone" else "standalone"
        flips = dict.fromkeys(range(n, len(auto)), other)
        replay = session(
            "auto", schedule, args.turns, args.system, args.save_every, name, flips, args.seed
        )
        best = max(best, total - sum(r["billed_cost"] for r in replay))
    return best


def row(
    label: str,
    auto: list[dict[str, Any]],
    fork: list[Any],
    alone: list[Any],
    regret: list[float],
    switched: float,
) -> str:
    errors = [abs(r["estimated_cost"] - r["billed_cost"]) / r["billed_cost"] for r in auto]
    run_errors = [abs(as_run(r) - r["billed_cost"]) / r["billed_cost"] for r in auto]
    priced = [abs(r["estimated_cost_as_run"] - r["billed_cost"]) / r["billed_cost"] for r in auto]
    estimated = sum(r["estimated_cost"] for r in auto)
    billed = sum(r["billed_cost"] for r in auto)
    best = billed - sum(regret)
    mode_best = min(sum(r["billed_cost"] for r in fork), sum(r["billed_cost"] for r in alone))
    forks = sum(1 for r in auto if r["mode"] == "fork")
    within = sum(1 for e in errors if e <= 0.1)
    run_within = sum(1 for e in run_errors if e <= 0.1)
    priced_within = sum(1 for e in priced if e <= 0.1)
    return (
        f"{label:<24} {f'{forks}/{len(auto) - forks}':>8} "
        f"{statistics.median(errors):>8.1%} {max(errors):>6.0%} "
        f"{f'{within}/{len(errors)}':>7} {f'{run_within}/{len(errors)}':>7} "
        f"{f'{priced_within}/{len(errors)}':>7} "
        f"{estimated / billed:>8.2f} {billed:>8.0f} "
        f"{best:>9.0f} {billed / best - 1:>6.0%} {billed / (billed - switched) - 1:>6.0%} "
        f"{mode_best:>9.0f} {billed / mode_best - 1:>6.0%}"
    )


def over_draws(name: str, draws: int, args: argparse.Namespace) -> str:
    """The ``mixed`` schedule's draws 1 to ``draws`` on ``name``: each draw's regret
    (auto over hindsight), and the sums."""
    billed = best = 0.0
    each = []
    for seed in range(1, draws + 1):
        drawn = argparse.Namespace(**{**vars(args), "seed": seed})
        auto = session("auto", "mixed", args.turns, args.system, args.save_every, name, seed=seed)
        total = sum(r["billed_cost"] for r in auto)
        hindsight = total - sum(regrets(auto, "mixed", drawn, name))
        billed += total
        best += hindsight
        each.append(f"{total / hindsight - 1:.0%}")
    return (
        f"{name} mixed, draws 1-{draws}: auto {billed:.0f}, hindsight {best:.0f}, "
        f"over {billed / best - 1:.1%} (each: {' '.join(each)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--system", type=int, default=3000, help="host system prompt tokens")
    parser.add_argument("--save-every", type=int, default=4)
    parser.add_argument("--seed", type=int, default=SEED, help="the mixed schedule's draw")
    parser.add_argument(
        "--draws", type=int, default=0, help="also sum the mixed rows over draws 1 to N"
    )
    args = parser.parse_args()
    print(
        f"host system ~{args.system} tokens, {args.turns} turns, "
        f"a save every {args.save_every} turns"
    )
    print(
        f"{'model / schedule':<24} {'runs f/s':>8} {'err med':>8} {'max':>6} "
        f"{'in 10%':>7} {'as run':>7} {'priced':>7} {'est/bill':>8} {'auto':>8} "
        f"{'hindsight':>9} {'over':>6} {'switch':>6} {'best mode':>9} {'over':>6}"
    )
    cases = [(MODEL, s) for s in ("warm", "mixed", "cold")]
    cases += [(m, s) for m in ("gpt-4.1", "gpt-4o") for s in ("mixed", "cold")]
    per_run: dict[str, tuple[list[dict[str, Any]], list[float]]] = {}
    for name, schedule in cases:
        auto, fork, alone = (
            session(mode, schedule, args.turns, args.system, args.save_every, name, seed=args.seed)
            for mode in ("auto", "fork", "standalone")
        )
        regret = regrets(auto, schedule, args, name)
        switched = switch(auto, schedule, args, name)
        print(row(f"{name} {schedule}", auto, fork, alone, regret, switched))
        per_run[f"{name} {schedule}"] = (auto, regret)
    for label in (f"{MODEL} mixed", f"{MODEL} cold"):
        print(f"\nper run ({label}, auto): mode, estimates (fork, standalone, as run), bill,")
        print("regret, why")
        auto, regret = per_run[label]
        for n, (run, lost) in enumerate(zip(auto, regret, strict=True)):
            fork = run["estimated_cost_fork"]
            print(
                f"  {n:>2} {run['mode']:<10} {fork if fork is not None else 0:>6.0f}"
                f" {run['estimated_cost_standalone']:>6.0f} {as_run(run):>6.0f}"
                f" {run['billed_cost']:>6.0f} {lost:>5.0f}  {run['plan_reason']};"
                f" {run['estimate_note']}"
            )
    if args.draws > 0:
        print()
        for name in (MODEL, "gpt-4.1", "gpt-4o"):
            print(over_draws(name, args.draws, args))


if __name__ == "__main__":
    main()
