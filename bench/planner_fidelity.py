"""How far the run planner's estimates are from the bills, and what its choices cost.

A coding agent (``--system`` tokens of system prompt, memdir's six tools) holds a
``--turns``-turn session through ``AnthropicModel`` against ``FakeAnthropicServer`` on a
clock the run moves. After every turn ``MemoryExtractor.on_turn_end`` gets the host's
request and is drained; the scripted memory agent saves a memory every ``--save-every``
turns and answers "Nothing new to save." otherwise. Each ``extract.run`` event carries the
chosen way's ``estimated_cost`` and the ``billed_cost`` of the usage the server reported
(both in input-token equivalents of the model's prices); this script compares them.

Each schedule runs three times with the same host and replies: ``auto`` (the planner
choosing), ``fork`` and ``standalone`` forced. "Hindsight" adds up, run by run, the cheaper
of the two forced runs' bills: what a planner that knew each bill in advance would have
paid (approximately: the forced runs' memory states and caches drift apart from auto's).

Schedules: ``warm`` (30 s between turns), ``mixed`` (seeded, one pause in four over the
cache's five minutes), ``cold`` (six minutes between turns). Output only.

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
from memdir.models import AnthropicModel, ModelRequest, RetryPolicy
from memdir.telemetry import CollectingSink
from memdir.testing import FakeAnthropicServer, FakeClock
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
    mode: str, schedule: str, turns: int, system_tokens: int, save_every: int
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

    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeAnthropicServer(handler=reply, clock=clock) as server,
    ):
        model = AnthropicModel(
            MODEL, api_key="k", base_url=server.base_url, retry=RetryPolicy(max_retries=0)
        )
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--system", type=int, default=3000, help="host system prompt tokens")
    parser.add_argument("--save-every", type=int, default=4)
    args = parser.parse_args()
    print(
        f"{MODEL}, host system ~{args.system} tokens, {args.turns} turns, "
        f"a save every {args.save_every} turns"
    )
    header = (
        f"{'schedule':<8} {'runs f/s':>8} {'|est-bill|/bill med':>20} {'max':>6} "
        f"{'within 10%':>10} {'est/bill total':>14} {'auto':>8} {'hindsight':>9} {'over':>6}"
    )
    print(header)
    for schedule in ("warm", "mixed", "cold"):
        auto, fork, alone = (
            session(mode, schedule, args.turns, args.system, args.save_every)
            for mode in ("auto", "fork", "standalone")
        )
        errors = [abs(r["estimated_cost"] - r["billed_cost"]) / r["billed_cost"] for r in auto]
        estimated = sum(r["estimated_cost"] for r in auto)
        billed = sum(r["billed_cost"] for r in auto)
        best = sum(
            min(f["billed_cost"], s["billed_cost"]) for f, s in zip(fork, alone, strict=True)
        )
        forks = sum(1 for r in auto if r["mode"] == "fork")
        within = sum(1 for e in errors if e <= 0.1)
        print(
            f"{schedule:<8} {f'{forks}/{len(auto) - forks}':>8} "
            f"{statistics.median(errors):>20.1%} {max(errors):>6.0%} "
            f"{f'{within}/{len(errors)}':>10} {estimated / billed:>14.2f} {billed:>8.0f} "
            f"{best:>9.0f} {billed / best - 1:>6.0%}"
        )
    print("\nper run (mixed schedule, auto): mode, estimate, bill, note")
    for n, run in enumerate(session("auto", "mixed", args.turns, args.system, args.save_every)):
        print(
            f"  {n:>2} {run['mode']:<10} {run['estimated_cost']:>8.0f} {run['billed_cost']:>8.0f}"
            f"  {run['estimate_note']}"
        )


if __name__ == "__main__":
    main()
