"""What memory costs with memdir and with mem0, on the same 50-turn conversation.

The conversation is ``research-data/mem0-anchor/conversation.json`` beside this checkout
(read where it lies): a backend developer and her service, 33 questions, 5 facts, 5
preferences, 4 deadlines and 3 corrections, with pauses between turns of half a minute to
twenty minutes (a fixed, seeded schedule; a quarter of them over five minutes).

memdir side: a host agent (memdir's six tools, a system prompt of about 1,200 tokens) holds
the conversation through ``OpenAIModel`` against ``FakeOpenAIServer``, which caches by
OpenAI's rules on a clock the run moves: automatic from 1,024 tokens in 128-token steps,
evicted after 5 idle minutes, routed by ``prompt_cache_key``. After every turn the
extractor gets the host's request. The memory model is scripted to save what a good memory
agent would: one memory on each fact, preference and deadline turn, an update of the
earlier memory on each correction (a Read, then a Write), and nothing on questions, which
it answers in one line. memdir runs three ways: ``auto`` (the planner's pick per run),
``fork`` and ``standalone``.

mem0 side: every chat request mem0 2.2.1 sent for the same conversation
(``mem0ai-2.2.1-requests-per_turn.jsonl.xz``) replayed at the same moments through another
``FakeOpenAIServer``, the same cache model, each answered with the reply mem0 got.

Costs are billed-token equivalents (input = 1) at three price models, each run with the
model named so (the planner prices by it): gpt-4o (cached input 0.5, output 4),
gpt-4.1-nano (0.25, 4) and gpt-5-mini (0.1, 8). Tokens are characters / 4. mem0's two
embedding requests a turn are counted apart (memdir makes none).

Conditions (each against mem0 replayed on the same schedule):

- ``published``: the seeded schedule, 17 saves, an empty store.
- ``pauses_60s``: every pause 60 s, so no run finds its cache evicted.
- ``save_every_mem0_turn``: memdir saves on every turn where mem0 saved a memory (its
  recorded replies), one file per fact: a question turn keeps a ``project`` note of what
  was decided; ``save_every_mem0_turn_warm``: the same with every pause 60 s.
- ``store_50``, ``store_150``: that many memories on unrelated topics already in the
  directory (and in ``MEMORY.md``) before turn 1.
- ``realistic``: pauses drawn from the gaps between turns in the real Claude Code sessions
  of ``research-data/real-transcripts`` (skipped, with a note, without them).

Each runs memdir three ways (``auto``, and forced to ``fork`` and to ``standalone``, to
see what the planner's picks cost against either mode alone). For each it reports the
ratio memdir / mem0, the costs, requests and tokens of every side,
turn 50 / turn 5 (with the pauses before each, so a cold turn is never taken for a warm
one), where memdir's billed tokens went (sections of its requests, cached and not, output
and reasoning) and the share spent in runs after an eviction. The table of ratios goes to
stderr; the JSON to stdout.

    python bench/cost_vs_mem0.py [--data DIR] [--transcripts DIR] [--conditions a,b]
        [--price-models gpt-4o,gpt-4.1-nano,gpt-5-mini]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import itertools
import json
import lzma
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias
from unittest import mock

from _conditions import (
    EVICTION_S,
    Breakdown,
    drawn_pauses,
    mem0_saved_turns,
    question_note,
    request_sections,
    seed_store,
    transcript_gaps,
    warm_pauses,
)
from _scripted import Save, is_memory_request, parse_memory_request, save_calls
from memdir.cost import bill, model_family
from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext, _run
from memdir.extract._planner import Mode, RunPlan
from memdir.extract._planner import plan_run as planner
from memdir.fork import CacheSafeParams
from memdir.messages import Message
from memdir.models import ModelRequest, OpenAIModel, RetryPolicy, Usage
from memdir.telemetry import CollectingSink
from memdir.testing import FakeClock, FakeOpenAIServer, RecordedRequest
from memdir.tools import builtin_tools

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "research-data" / "mem0-anchor"
DEFAULT_TRANSCRIPTS = DEFAULT_DATA.parent / "real-transcripts"
# The folders there that hold real sessions, as its PROVENANCE.md says: the others are
# fixtures, mock data or synthetic files, whose seconds-apart prompts say nothing of how
# a person pauses.
REAL_SESSIONS = ("marot__spotter", "kzahel__yepanywhere")
PRICE_MODELS = ("gpt-4o", "gpt-4.1-nano", "gpt-5-mini")
MODES = ("auto", "fork", "standalone")
SEED = 20261202

HOST_SYSTEM = "\n\n".join(
    [
        "You are a senior backend engineer pairing with the user on their service. Answer "
        "their questions about design, databases, testing, deployment and planning with "
        "concrete, opinionated advice. Prefer the simplest design that will hold for the "
        "next year, name the trade-offs, and say what you would measure before deciding.",
        "You can read the repository with Read, Grep and Glob, run read-only commands with "
        "Bash, and change files with Write and Edit when the user asks for a change. Keep "
        "answers short: a few paragraphs or a list, with code only when it helps.",
        *(
            f"Guideline {n}: when the user asks about {topic}, start from what their service "
            "already does, check the constraints they gave earlier in the conversation, "
            "and end with the one next step you would take."
            for n, topic in enumerate(
                ("schemas", "indexes", "queues", "deployments", "observability", "testing",
                 "security", "performance", "APIs", "planning", "teams", "migrations"),
                start=1,
            )
        ),
    ]
)  # fmt: skip

Note: TypeAlias = tuple[str, str, str, str]
"""A memory to keep: the file, its type, its title, a description."""

# What a good memory agent keeps, by turn.
SAVES: Mapping[int, Note] = {
    1: ("user_profile.md", "user", "Who Maya is", "Maya: backend engineer, builds Routewise"),
    4: ("feedback_testing.md", "feedback", "Testing style", "pytest, plain asserts, fixtures"),
    7: ("project_milestone.md", "project", "API milestone", "public tracking API milestone date"),
    10: ("feedback_sql.md", "feedback", "SQL by hand", "no ORMs: hand-written SQL"),
    13: ("project_team.md", "project", "The team", "who is on Maya's team and their levels"),
    16: ("project_stack.md", "project", "Database stack", "Postgres 16 on AWS"),
    19: ("feedback_tooling.md", "feedback", "Tooling", "Neovim, ruff, ruff format in CI"),
    22: ("project_security.md", "project", "Security review", "security review date"),
    25: ("user_personal.md", "user", "Team lunch", "vegetarian; organises the team lunch"),
    28: ("project_milestone.md", "project", "API milestone", "public tracking API milestone date"),
    31: ("feedback_examples.md", "feedback", "Code examples", "short, fully typed examples"),
    34: ("project_time_off.md", "project", "Time off", "Maya away April 7-18, Tomas on call"),
    37: ("project_docs.md", "project", "Onboarding docs", "carrier onboarding docs deadline"),
    40: ("feedback_answers.md", "feedback", "Answer style", "bullet summary at the end"),
    43: ("project_team.md", "project", "The team", "who is on Maya's team and their levels"),
    46: ("project_team.md", "project", "The team", "who is on Maya's team and their levels"),
    49: ("project_freeze.md", "project", "Code freeze", "code freeze three days before launch"),
}


@dataclass(frozen=True)
class Turn:
    number: int
    kind: str
    user: str
    assistant: str


def load(data: Path) -> tuple[list[Turn], dict[int, list[dict[str, Any]]]]:
    conversation = json.loads((data / "conversation.json").read_text())
    turns = [Turn(t["turn"], t["kind"], t["user"], t["assistant"]) for t in conversation]
    mem0: dict[int, list[dict[str, Any]]] = {}
    with lzma.open(data / "mem0ai-2.2.1-requests-per_turn.jsonl.xz", "rt") as lines:
        for line in lines:
            row = json.loads(line)
            mem0.setdefault(int(row["mark"]["turn"]), []).append(row)
    return turns, mem0


def pauses(count: int) -> list[float]:
    """Seconds before each turn: mostly under three minutes, a quarter of them over five."""
    rng = random.Random(SEED)
    out = [0.0]
    for _ in range(count - 1):
        long = rng.random() < 0.25
        out.append(rng.uniform(360.0, 1200.0) if long else rng.uniform(30.0, 180.0))
    return out


class Script:
    """Answers the host with the conversation and the memory agent as a good one would:
    on each turn of ``saves``, that memory (an update of the file when it exists)."""

    def __init__(self, turns: Sequence[Turn], saves: Mapping[int, Note]) -> None:
        self.by_user = {t.user: t for t in turns}
        self.current = turns[0]
        self.saves = saves

    def __call__(self, body: dict[str, Any]) -> Message | str:
        if not is_memory_request(body):
            return self.current.assistant
        request = parse_memory_request(body)
        covered = [self.by_user[t] for t in request.new_texts if t in self.by_user]
        saves = [
            Save(
                filename=self.saves[t.number][0],
                type=self.saves[t.number][1],
                title=self.saves[t.number][2],
                description=self.saves[t.number][3],
                body=t.user[:400],
            )
            for t in covered
            if t.number in self.saves
        ]
        if not saves or (request.turn > 1 and not request.read and not request.found):
            return "Nothing to save."
        # What earlier turns saved exists now: a save of the same file is an update.
        first = min(t.number for t in covered)
        known = {note[0] for number, note in self.saves.items() if number < first}
        return save_calls(request, saves, known)


@dataclass(frozen=True)
class Condition:
    """One way the conversation is held: its pauses, what memdir saves, what is stored."""

    name: str
    """What ``--conditions`` calls it."""
    about: str
    """One line for the report."""
    schedule: tuple[float, ...]
    """Seconds before each turn."""
    saves: Mapping[int, Note]
    """What the memory agent keeps, by turn."""
    store: int = 0
    """Memories in the directory before turn 1."""
    modes: tuple[str, ...] = MODES
    """memdir's modes run: the planner's pick, and forced ones to compare with."""


CONDITIONS = (
    "published",
    "pauses_60s",
    "save_every_mem0_turn",
    "save_every_mem0_turn_warm",
    "store_50",
    "store_150",
    "realistic",
)


def conditions(
    turns: Sequence[Turn], data: Path, transcripts: Path, wanted: Sequence[str]
) -> tuple[list[Condition], dict[str, str]]:
    """The conditions in ``wanted``, and a note for each that cannot run here."""
    bench = tuple(pauses(len(turns)))
    warm = tuple(warm_pauses(len(turns)))
    every = dict(SAVES)
    for number in mem0_saved_turns(data / "mem0ai-2.2.1-requests-per_turn.jsonl.xz"):
        turn = turns[number - 1]
        if number not in every:
            every[number] = question_note(number, turn.user)
    made = {
        "published": lambda: Condition(
            "published",
            "the seeded eviction-heavy schedule, 17 saves, an empty store",
            bench,
            SAVES,
        ),
        "pauses_60s": lambda: Condition(
            "pauses_60s", "every pause 60 s (no evictions), 17 saves", warm, SAVES
        ),
        "save_every_mem0_turn": lambda: Condition(
            "save_every_mem0_turn",
            f"a save on each of the {len(every)} turns where mem0 saved, seeded schedule",
            bench,
            every,
        ),
        "save_every_mem0_turn_warm": lambda: Condition(
            "save_every_mem0_turn_warm",
            f"a save on each of the {len(every)} turns where mem0 saved, every pause 60 s",
            warm,
            every,
        ),
        "store_50": lambda: Condition(
            "store_50", "50 unrelated memories stored before turn 1, 17 saves", bench, SAVES, 50
        ),
        "store_150": lambda: Condition(
            "store_150", "150 unrelated memories stored before turn 1, 17 saves", bench, SAVES, 150
        ),
    }
    out: list[Condition] = []
    skipped: dict[str, str] = {}
    for name in wanted:
        if name != "realistic":
            out.append(made[name]())
            continue
        gaps = transcript_gaps(transcripts, REAL_SESSIONS) if transcripts.is_dir() else []
        if not gaps:
            skipped[name] = f"no real Claude Code sessions with timed turns in {transcripts}"
            continue
        out.append(
            Condition(
                "realistic",
                f"pauses drawn from the {len(gaps)} gaps between turns of real Claude Code "
                f"sessions (median {statistics.median(gaps):.0f} s), 17 saves",
                tuple(drawn_pauses(gaps, len(turns), SEED)),
                SAVES,
            )
        )
    return out, skipped


@dataclass
class Side:
    """One side's requests, turn by turn."""

    name: str
    per_turn: dict[int, list[Usage]]

    def cost(self, prices: Any, turn: int | None = None) -> float:
        turns = [turn] if turn is not None else list(self.per_turn)
        return sum(bill(u, prices) for t in turns for u in self.per_turn.get(t, []))

    def requests(self) -> int:
        return sum(len(u) for u in self.per_turn.values())


def usage_of(recorded: RecordedRequest) -> Usage:
    if recorded.usage is None:
        raise RuntimeError(f"request answered {recorded.status} without usage")
    prompt = int(recorded.usage["prompt_tokens"])
    cached = int(recorded.usage["prompt_tokens_details"]["cached_tokens"])
    return Usage(
        input_tokens=prompt - cached,
        cache_read_input_tokens=cached,
        output_tokens=int(recorded.usage["completion_tokens"]),
    )


async def run_memdir(
    turns: Sequence[Turn],
    condition: Condition,
    model_name: str,
    mode: str,
    root: Path,
    flips: Mapping[int, Mode] | None = None,
) -> dict[str, Any]:
    """One memdir session; ``flips`` sends the runs it names (by number) the way it
    gives, whatever the planner would choose."""
    if flips:
        planned = itertools.count()

        def plan_run(setting: Mode, *args: Any, **kwargs: Any) -> RunPlan:
            return planner(flips.get(next(planned), setting), *args, **kwargs)

        with mock.patch.object(_run, "plan_run", plan_run):
            return await run_memdir(turns, condition, model_name, mode, root)
    clock = FakeClock(start=1_000_000.0)
    script = Script(turns, condition.saves)
    memory = root / condition.name / f"{model_name}-{mode}" / "memory"
    seed_store(memory, condition.store)
    cwd = root / "project"
    cwd.mkdir(exist_ok=True)
    tools = [t.definition() for t in builtin_tools(cwd)]
    sink = CollectingSink()
    host_side = Side("host", {})
    memory_side = Side("memdir", {})
    prices = model_family(model_name, "openai").prices
    breakdown = Breakdown(cache_read=prices.cache_read, output=prices.output)
    conversation_texts = frozenset(t.user for t in turns) | {t.assistant for t in turns}
    async with FakeOpenAIServer(handler=script, clock=clock) as server:
        model = OpenAIModel(
            model_name, api_key="k", base_url=server.base_url, retry=RetryPolicy(max_retries=0)
        )
        params = CacheSafeParams(model=model, system=HOST_SYSTEM, tools=tools)
        config = ExtractConfig(mode=mode)  # type: ignore[arg-type]
        extractor = MemoryExtractor(memory, model, config, sink=sink, clock=clock)
        conversation: list[Message] = []
        for turn, pause in zip(turns, condition.schedule, strict=True):
            clock.advance(pause)
            script.current = turn
            seen = len(server.requests)
            conversation.append(Message.user(turn.user))
            request = ModelRequest(system=HOST_SYSTEM, tools=tools, messages=tuple(conversation))
            answer = await model.request(request)
            conversation.append(answer.message)
            context = TurnContext(
                messages=tuple(conversation), params=params, cwd=str(cwd), last_request_at=clock()
            )
            clock.advance(2.0)  # the answer streams out; then the turn ends
            extractor.on_turn_end(context)
            await extractor.drain(timeout=120)
            for recorded in server.requests[seen:]:
                if not is_memory_request(recorded.body):
                    host_side.per_turn.setdefault(turn.number, []).append(usage_of(recorded))
                    continue
                memory_side.per_turn.setdefault(turn.number, []).append(usage_of(recorded))
                sections = request_sections(
                    recorded.body, host_system=HOST_SYSTEM, conversation=conversation_texts
                )
                breakdown.add(sections, recorded.usage or {})
        await model.aclose()
        server.assert_no_errors()
    runs = sink.named("extract.run")
    files = sorted(p.name for p in memory.glob("*.md") if p.name != "MEMORY.md")
    return {
        "host": host_side,
        "memory": memory_side,
        "breakdown": breakdown,
        "runs": len(runs),
        "errors": len(sink.named("extract.error")),
        "messages_covered": sum(int(r.fields["message_count"]) for r in runs),
        "modes": {m: sum(1 for r in runs if r.fields["mode"] == m) for m in ("fork", "standalone")},
        "memory_files": len(files),
        # Each save's words in its file at the end: an update lost (a write refused and
        # never retried) shows here, not as a cheaper run.
        "saves_missing": missing_saves(memory, turns, condition.saves),
        "memory_files_before": condition.store,
        "cursor_at_end": extractor.cursor == conversation[-1].uuid,
        "estimates": [
            (
                r.fields["mode"],
                r.fields["estimated_cost_fork"],
                r.fields["estimated_cost_standalone"],
                r.fields["cost"],
            )
            for r in runs
        ],
        "planner": planner_figures([dict(r.fields) for r in runs]),
        "bills": [float(r.fields["billed_cost"]) for r in runs],
    }


def planner_figures(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How far each run's estimates were from its bill. ``estimate``: the expectation
    before the run, a save weighed by how often runs save; ``as_run``: the estimate for
    the outcome the run had (saved something or nothing); ``priced``: the chosen way
    priced with the requests and output the run made, which leaves the planner's view of
    the request and the cache (``estimated_cost_as_run``)."""

    def errors(key: str) -> list[float]:
        return [abs(float(value(r, key)) - r["billed_cost"]) / r["billed_cost"] for r in runs]

    def value(run: Mapping[str, Any], key: str) -> float:
        if key == "as_run":
            key = (
                "estimated_cost_if_saved"
                if run["memories_saved"]
                else "estimated_cost_if_nothing_saved"
            )
        found = run.get(key)
        return float(found if found is not None else run["estimated_cost"])

    out: dict[str, Any] = {"runs": len(runs)}
    for label, key in (
        ("estimate", "estimated_cost"),
        ("as_run", "as_run"),
        ("priced", "estimated_cost_as_run"),
    ):
        each = errors(key)
        out[label] = {
            "within_10pct": sum(1 for e in each if e <= 0.1),
            "max_error_pct": round(100 * max(each, default=0.0), 1),
        }
    billed = sum(r["billed_cost"] for r in runs) or 1.0
    out["estimate_to_bill"] = round(sum(r["estimated_cost"] for r in runs) / billed, 3)
    return out


def hindsight(
    turns: Sequence[Turn], condition: Condition, model_name: str, auto: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``auto`` session against hindsight: each run replayed the other way (the same
    state before it, the planner choosing again after it), its regret what that saves over
    the whole session, if anything. Hindsight is the session's bill less every regret:
    not a session one could run (two flips that each save by keeping the same cache warm
    are both counted), so it errs on the low side, against the planner."""
    bills = auto["bills"]
    modes = [m for m, *_ in auto["estimates"]]
    tasks = [
        (turns, condition, model_name, n, "fork" if mode == "standalone" else "standalone")
        for n, mode in enumerate(modes)
    ]
    # Fresh interpreters: this process runs an event loop and its worker threads.
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(os.cpu_count() or 1, mp_context=spawn) as pool:
        replays = list(pool.map(_replay, tasks))
    total = sum(bills)
    regrets = []
    for n, replayed in enumerate(replays):
        # The same session up to the flipped run, or it would not be the same state.
        assert [round(b, 1) for b in replayed[:n]] == [round(b, 1) for b in bills[:n]], n
        regrets.append(max(total - sum(replayed), 0.0))
    best = total - sum(regrets)
    return {
        "auto": round(total, 1),
        "hindsight": round(best, 1),
        "auto_over_hindsight_pct": round(100 * (total / best - 1), 1),
        "runs_with_regret": sum(1 for r in regrets if r > 0),
    }


def _replay(task: tuple[Sequence[Turn], Condition, str, int, Mode]) -> list[float]:
    turns, condition, model_name, run, mode = task
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(
            run_memdir(turns, condition, model_name, "auto", Path(tmp), flips={run: mode})
        )
    return list(result["bills"])


def missing_saves(memory: Path, turns: Sequence[Turn], saves: Mapping[int, Note]) -> int:
    """How many of ``saves`` left no trace: the file missing, or without the words its
    turn gave it (the first line of what the person said)."""
    missing = 0
    for number, (filename, *_) in saves.items():
        path = memory / filename
        words = turns[number - 1].user[:400].split("\n", 1)[0]
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        missing += words not in text
    return missing


def replay_mem0(
    turns: Sequence[Turn],
    schedule: Sequence[float],
    mem0: Mapping[int, list[dict[str, Any]]],
    model_name: str,
) -> tuple[Side, int]:
    """mem0's chat requests through the same cache model, each at its turn's moment, sent
    as ``model_name``: the model both sides are priced at, so that both pay its rules (a
    reasoning model's unseen reasoning tokens, billed as output, on mem0's side too).

    On a reasoning model mem0 is given the effort memdir sends (the least the model
    takes): mem0 2.2.1 has the setting (``reasoning_effort`` in its LLM config), and the
    baseline is mem0 as well configured as it can be."""
    clock = FakeClock(start=1_000_000.0)
    side = Side("mem0", {})
    embedding_chars = 0
    replies: list[str] = []

    def answer(body: dict[str, Any]) -> str:
        return replies.pop(0)

    family = model_family(model_name, "openai")
    effort = {"reasoning_effort": family.reasoning_efforts[0]} if family.reasoning_efforts else {}
    with FakeOpenAIServer(handler=answer, clock=clock) as server:
        for turn, pause in zip(turns, schedule, strict=True):
            clock.advance(pause + 2.0)
            for row in mem0.get(turn.number, []):
                if row["kind"] != "chat":
                    embedding_chars += sum(int(c) for c in row["input_chars"])
                    continue
                replies.append(row["response_content"])
                seen = len(server.requests)
                data = json.dumps({**row["body"], "model": model_name, **effort}).encode()
                post = urllib.request.Request(
                    server.base_url + "/chat/completions",
                    data=data,
                    headers={"content-type": "application/json"},
                )
                with urllib.request.urlopen(post) as response:
                    response.read()
                (recorded,) = server.requests[seen:]
                side.per_turn.setdefault(turn.number, []).append(usage_of(recorded))
        server.assert_no_errors()
    return side, embedding_chars // 4


def summary(sides: Mapping[str, Side], prices: Any, turns: Sequence[Turn]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, side in sides.items():
        total = Usage()
        for usages in side.per_turn.values():
            for usage in usages:
                total = total + usage
        out[name] = {
            "requests": side.requests(),
            "input_tokens": total.input_tokens,
            "cached_tokens": total.cache_read_input_tokens,
            "output_tokens": total.output_tokens,
            "cost": round(side.cost(prices), 1),
            "per_turn": [round(side.cost(prices, t.number), 1) for t in turns],
        }
    return out


def flatness(
    side: Side, prices: Any, turns: Sequence[Turn], schedule: Sequence[float]
) -> dict[str, Any]:
    """Turn 50 against turn 5, with the pauses before each: a turn after a pause of over
    five minutes finds memdir's cache evicted, so the ratio compares like with like only
    when ``both_warm``."""
    questions = [t.number for t in turns if t.kind == "question"]
    early = [side.cost(prices, t) for t in questions if t <= 10]
    late = [side.cost(prices, t) for t in questions if t > 40]
    return {
        "turn_5": round(side.cost(prices, 5), 1),
        "turn_50": round(side.cost(prices, 50), 1),
        "turn_50_to_turn_5": round(side.cost(prices, 50) / side.cost(prices, 5), 3),
        "pause_before_turn_5_s": round(schedule[4], 1),
        "pause_before_turn_50_s": round(schedule[49], 1),
        "both_warm": schedule[4] <= EVICTION_S and schedule[49] <= EVICTION_S,
        "question_turns_41_50_to_1_10": round(statistics.mean(late) / statistics.mean(early), 3),
    }


def after_eviction(side: Side, prices: Any, schedule: Sequence[float]) -> dict[str, Any]:
    """The share of ``side``'s bill spent on turns that followed a pause over five minutes."""
    evicted = [n for n, pause in enumerate(schedule, start=1) if pause > EVICTION_S]
    total = side.cost(prices) or 1.0
    return {
        "turns": len(evicted),
        "share_pct": round(100 * sum(side.cost(prices, n) for n in evicted) / total, 1),
    }


async def measure_condition(
    condition: Condition,
    turns: Sequence[Turn],
    mem0: Mapping[int, list[dict[str, Any]]],
    price_models: Sequence[str],
    root: Path,
    with_hindsight: bool = False,
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in price_models:
        prices = model_family(name, "openai").prices
        mem0_side, _ = replay_mem0(turns, condition.schedule, mem0, name)
        runs = {
            mode: await run_memdir(turns, condition, name, mode, root) for mode in condition.modes
        }
        sides = {f"memdir_{m}": r["memory"] for m, r in runs.items()}
        sides["mem0_2.2.1"] = mem0_side
        sides["host_agent"] = runs["auto"]["host"]
        table = summary(sides, prices, turns)
        mem0_cost = table["mem0_2.2.1"]["cost"]
        results[name] = {
            "prices": {"cache_read": prices.cache_read, "output": prices.output},
            "ratio_to_mem0": {
                f"memdir_{m}": round(table[f"memdir_{m}"]["cost"] / mem0_cost, 3) for m in runs
            },
            "memdir_auto_to_cheaper_forced_mode": round(
                table["memdir_auto"]["cost"]
                / min(table[f"memdir_{m}"]["cost"] for m in runs if m != "auto"),
                3,
            )
            if len(runs) > 1
            else None,
            "memdir_auto_to_host_agent": round(
                table["memdir_auto"]["cost"] / table["host_agent"]["cost"], 3
            ),
            "flatness_memdir_auto": flatness(
                runs["auto"]["memory"], prices, turns, condition.schedule
            ),
            "breakdown_memdir_auto": runs["auto"]["breakdown"].shares(),
            "planner_memdir_auto": {
                **runs["auto"]["planner"],
                **(
                    {"hindsight": hindsight(turns, condition, name, runs["auto"])}
                    if with_hindsight
                    else {}
                ),
            },
            "after_eviction_memdir_auto": after_eviction(
                runs["auto"]["memory"], prices, condition.schedule
            ),
            "checks": {
                mode: {
                    k: v
                    for k, v in run.items()
                    if k not in ("host", "memory", "breakdown", "planner", "bills")
                }
                for mode, run in runs.items()
            },
            "sides": table,
        }
    return {
        "about": condition.about,
        "pauses_s": {
            "over_5_min": sum(1 for p in condition.schedule if p > EVICTION_S),
            "median": round(statistics.median(condition.schedule[1:]), 1),
        },
        "memories_before": condition.store,
        "memdir_save_turns": len(condition.saves),
        "price_models": results,
    }


def ratio_table(results: Mapping[str, Any], price_models: Sequence[str]) -> list[str]:
    """memdir auto / mem0 by condition and price model; ``*`` marks a ratio over 0.5."""
    width = max([len("condition"), *map(len, results)])
    lines = ["  ".join(["condition".ljust(width), *(f"{n:>13}" for n in price_models)])]
    for name, result in results.items():
        cells = []
        for model in price_models:
            ratio = result["price_models"][model]["ratio_to_mem0"]["memdir_auto"]
            cells.append(f"{ratio:>12.3f}{'*' if ratio > 0.5 else ' '}")
        lines.append("  ".join([name.ljust(width), *cells]))
    lines.append("memdir (auto) / mem0 2.2.1; * over 0.5")
    return lines


def planner_table(results: Mapping[str, Any], price_models: Sequence[str]) -> list[str]:
    """The planner in each cell (memdir ``auto``): runs whose estimate is within 10% of
    the bill, as the run went (``priced``), for the outcome it had (``as run``) and before
    it (``before``); the estimates' sum over the bills'; and, with ``--hindsight``, how
    much dearer its choices were than hindsight's. A last line sums every cell."""
    kinds = ("priced", "as_run", "estimate")
    cells = [
        (f"{c} {m}", r["price_models"][m]["planner_memdir_auto"])
        for c, r in results.items()
        for m in price_models
    ]
    width = max(len(label) for label, _ in [("condition / model", None), *cells])
    lines = [
        f"{'condition / model':<{width}} {'priced':>8} {'as run':>8} {'before':>8} "
        f"{'est/bill':>8} {'auto':>9} {'hindsight':>9} {'over':>6}"
    ]
    runs = auto = best = 0.0
    within = dict.fromkeys(kinds, 0)
    for label, p in cells:
        counts = " ".join(f"{p[k]['within_10pct']}/{p['runs']}".rjust(8) for k in kinds)
        line = f"{label:<{width}} {counts} {p['estimate_to_bill']:>8.3f}"
        runs += p["runs"]
        for k in kinds:
            within[k] += p[k]["within_10pct"]
        if "hindsight" in p:
            h = p["hindsight"]
            line += (
                f" {h['auto']:>9.0f} {h['hindsight']:>9.0f} {h['auto_over_hindsight_pct']:>5.1f}%"
            )
            auto += h["auto"]
            best += h["hindsight"]
        lines.append(line)
    counts = " ".join(f"{within[k]}/{runs:.0f}".rjust(8) for k in kinds)
    total = f"{'all cells':<{width}} {counts} {'':>8}"
    if best:
        total += f" {auto:>9.0f} {best:>9.0f} {100 * (auto / best - 1):>5.1f}%"
    lines.append(total)
    return lines


def flatness_figures(results: Mapping[str, Any], price_models: Sequence[str]) -> dict[str, Any]:
    """Turn 50 / turn 5 of memdir (auto) by price model: with both turns warm, at 17
    memories (``pauses_60s``) and at 50 (``save_every_mem0_turn_warm``); and as published
    before, a cold turn 5 (after a pause of over five minutes) against a warm turn 50."""
    out: dict[str, Any] = {}
    for label, name in (
        ("both_warm_17_memories", "pauses_60s"),
        ("both_warm_50_memories", "save_every_mem0_turn_warm"),
        ("cold_turn_5_warm_turn_50_published", "published"),
    ):
        if name not in results:
            continue
        figures = {
            m: results[name]["price_models"][m]["flatness_memdir_auto"] for m in price_models
        }
        first = next(iter(figures.values()))
        out[label] = {
            "condition": name,
            "pause_before_turn_5_s": first["pause_before_turn_5_s"],
            "pause_before_turn_50_s": first["pause_before_turn_50_s"],
            **{m: f["turn_50_to_turn_5"] for m, f in figures.items()},
        }
    return out


async def measure(
    data: Path,
    transcripts: Path,
    wanted: Sequence[str],
    price_models: Sequence[str],
    root: Path,
    with_hindsight: bool = False,
) -> dict[str, Any]:
    turns, mem0 = load(data)
    chosen, skipped = conditions(turns, data, transcripts, wanted)
    results: dict[str, Any] = {}
    for condition in chosen:
        results[condition.name] = await measure_condition(
            condition, turns, mem0, price_models, root, with_hindsight
        )
        if with_hindsight:
            print(f"hindsight: {condition.name} done", file=sys.stderr, flush=True)
    embedding_chars = sum(
        int(c)
        for rows in mem0.values()
        for r in rows
        if r["kind"] != "chat"
        for c in r["input_chars"]
    )
    return {
        "table": ratio_table(results, price_models),
        "planner_table": planner_table(results, price_models),
        "flatness_turn_50_to_turn_5": flatness_figures(results, price_models),
        "skipped": skipped,
        "mem0_embedding_tokens": embedding_chars // 4,
        "conditions": results,
    }


def failures(result: Mapping[str, Any], turns: int = 50) -> list[tuple[str, str, str]]:
    """(condition, price model, mode) of every run that erred or missed messages."""
    return [
        (condition, name, mode)
        for condition, c in result["conditions"].items()
        for name, r in c["price_models"].items()
        for mode, check in r["checks"].items()
        if check["errors"] or check["messages_covered"] != 2 * turns or not check["cursor_at_end"]
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--transcripts", type=Path, default=DEFAULT_TRANSCRIPTS)
    parser.add_argument("--conditions", default=",".join(CONDITIONS))
    parser.add_argument("--price-models", default=",".join(PRICE_MODELS))
    parser.add_argument(
        "--hindsight",
        action="store_true",
        help="also replay each run of every auto session the other way (50 sessions a "
        "cell, on every core: 10 to 20 minutes on two) and report the planner's choices "
        "against hindsight",
    )
    args = parser.parse_args()
    if not (args.data / "conversation.json").is_file():
        parser.error(f"no conversation.json in {args.data} (pass --data)")
    names = [n.strip() for n in args.price_models.split(",") if n.strip()]
    wanted = [n.strip() for n in args.conditions.split(",") if n.strip()]
    unknown = sorted(set(wanted) - set(CONDITIONS))
    if unknown:
        parser.error(f"unknown conditions {unknown}; known: {', '.join(CONDITIONS)}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(
            measure(args.data, args.transcripts, wanted, names, Path(tmp), args.hindsight)
        )
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps({"bench": "cost_vs_mem0", **result}, indent=2))
    print("\n".join(result["table"]), file=sys.stderr)
    print(
        "\nthe planner (memdir auto): runs whose estimate is within 10% of the bill",
        file=sys.stderr,
    )
    print("\n".join(result["planner_table"]), file=sys.stderr)
    for condition, note in result["skipped"].items():
        print(f"skipped {condition}: {note}", file=sys.stderr)
    bad = failures(result)
    if bad:
        print(f"runs that failed or missed messages: {bad}", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
