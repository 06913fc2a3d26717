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
by how often runs save and the second shows how well the rest is priced.

Each schedule runs three times with the same host and replies: ``auto`` (the planner
choosing), ``fork`` and ``standalone`` forced. "Hindsight" adds up, run by run, the cheaper
of the two forced runs' bills: what a planner that knew each bill in advance would have
paid (approximately: the forced runs' memory states and caches drift apart from auto's;
it pairs runs that no one schedule can: a forced standalone run cheap because the forced
session's run before it warmed its cache, with the fork where that run was dearer).
"best mode" is the cheaper of the two forced sessions, a bound a planner can reach.

Schedules: ``warm`` (30 s between turns), ``mixed`` (seeded, one pause in four over the
cache's five minutes), ``cold`` (six minutes between turns), on Claude Sonnet; then
``mixed`` and ``cold`` on gpt-4.1 (which takes ``prompt_cache_retention: "24h"``) and gpt-4o
(which does not). Output only.

    python bench/planner_fidelity.py [--turns 12] [--system 3000] [--save-every 4]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
from pathlib import Path
from typing import Any

from _scripted import feedback_saves, is_memory_request, parse_memory_request, save_calls
from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
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


def pauses(schedule: str, turns: int) -> list[float]:
    if schedule == "warm":
        return [30.0] * turns
    if schedule == "cold":
        return [360.0] * turns
    rng = random.Random(24)
    return [rng.choice([20.0, 45.0, 90.0, 400.0]) for _ in range(turns)]


def session(
    mode: str, schedule: str, turns: int, system_tokens: int, save_every: int, name: str = MODEL
) -> list[dict[str, Any]]:
    """The ``extract.run`` fields of one session."""
    clock = FakeClock()
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
            for turn, pause in enumerate(pauses(schedule, turns)):
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


def row(label: str, auto: list[dict[str, Any]], fork: list[Any], alone: list[Any]) -> str:
    errors = [abs(r["estimated_cost"] - r["billed_cost"]) / r["billed_cost"] for r in auto]
    run_errors = [abs(as_run(r) - r["billed_cost"]) / r["billed_cost"] for r in auto]
    estimated = sum(r["estimated_cost"] for r in auto)
    billed = sum(r["billed_cost"] for r in auto)
    best = sum(min(f["billed_cost"], s["billed_cost"]) for f, s in zip(fork, alone, strict=True))
    mode_best = min(sum(r["billed_cost"] for r in fork), sum(r["billed_cost"] for r in alone))
    forks = sum(1 for r in auto if r["mode"] == "fork")
    within = sum(1 for e in errors if e <= 0.1)
    run_within = sum(1 for e in run_errors if e <= 0.1)
    return (
        f"{label:<20} {f'{forks}/{len(auto) - forks}':>8} "
        f"{statistics.median(errors):>8.1%} {max(errors):>6.0%} "
        f"{f'{within}/{len(errors)}':>7} {f'{run_within}/{len(errors)}':>7} "
        f"{estimated / billed:>8.2f} {billed:>8.0f} "
        f"{best:>9.0f} {billed / best - 1:>6.0%} {mode_best:>9.0f} {billed / mode_best - 1:>6.0%}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--system", type=int, default=3000, help="host system prompt tokens")
    parser.add_argument("--save-every", type=int, default=4)
    args = parser.parse_args()
    print(
        f"host system ~{args.system} tokens, {args.turns} turns, "
        f"a save every {args.save_every} turns"
    )
    print(
        f"{'model / schedule':<20} {'runs f/s':>8} {'err med':>8} {'max':>6} "
        f"{'in 10%':>7} {'as run':>7} {'est/bill':>8} {'auto':>8} "
        f"{'hindsight':>9} {'over':>6} {'best mode':>9} {'over':>6}"
    )
    cases = [(MODEL, s) for s in ("warm", "mixed", "cold")]
    cases += [(m, s) for m in ("gpt-4.1", "gpt-4o") for s in ("mixed", "cold")]
    for name, schedule in cases:
        auto, fork, alone = (
            session(mode, schedule, args.turns, args.system, args.save_every, name)
            for mode in ("auto", "fork", "standalone")
        )
        print(row(f"{name} {schedule}", auto, fork, alone))
    print("\nper run (mixed schedule, auto): mode, estimate, as run, bill, note")
    for n, run in enumerate(session("auto", "mixed", args.turns, args.system, args.save_every)):
        print(
            f"  {n:>2} {run['mode']:<10} {run['estimated_cost']:>8.0f} {as_run(run):>8.0f}"
            f" {run['billed_cost']:>8.0f}  {run['estimate_note']}"
        )


if __name__ == "__main__":
    main()
