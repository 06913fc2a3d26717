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

    python bench/cost_vs_mem0.py [--data DIR] [--price-models gpt-4o,gpt-4.1-nano,gpt-5-mini]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import lzma
import random
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _scripted import Save, is_memory_request, parse_memory_request, save_calls
from memdir.cost import bill, model_family
from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.fork import CacheSafeParams
from memdir.messages import Message
from memdir.models import ModelRequest, OpenAIModel, RetryPolicy, Usage
from memdir.telemetry import CollectingSink
from memdir.testing import FakeClock, FakeOpenAIServer, RecordedRequest
from memdir.tools import builtin_tools

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "research-data" / "mem0-anchor"
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

# What a good memory agent keeps, by turn: the file, its type, its title, a description.
SAVES: Mapping[int, tuple[str, str, str, str]] = {
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
    """Answers the host with the conversation and the memory agent as a good one would."""

    def __init__(self, turns: Sequence[Turn]) -> None:
        self.by_user = {t.user: t for t in turns}
        self.current = turns[0]

    def __call__(self, body: dict[str, Any]) -> Message | str:
        if not is_memory_request(body):
            return self.current.assistant
        request = parse_memory_request(body)
        covered = [self.by_user[t] for t in request.new_texts if t in self.by_user]
        saves = [
            Save(
                filename=SAVES[t.number][0],
                type=SAVES[t.number][1],
                title=SAVES[t.number][2],
                description=SAVES[t.number][3],
                body=t.user[:400],
            )
            for t in covered
            if t.number in SAVES
        ]
        if not saves or (request.turn > 1 and not request.read):
            return "Nothing to save."
        return save_calls(request, saves)


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
    turns: Sequence[Turn], schedule: Sequence[float], model_name: str, mode: str, root: Path
) -> dict[str, Any]:
    clock = FakeClock(start=1_000_000.0)
    script = Script(turns)
    memory = root / f"{model_name}-{mode}" / "memory"
    cwd = root / "project"
    cwd.mkdir(exist_ok=True)
    tools = [t.definition() for t in builtin_tools(cwd)]
    sink = CollectingSink()
    host_side = Side("host", {})
    memory_side = Side("memdir", {})
    async with FakeOpenAIServer(handler=script, clock=clock) as server:
        model = OpenAIModel(
            model_name, api_key="k", base_url=server.base_url, retry=RetryPolicy(max_retries=0)
        )
        params = CacheSafeParams(model=model, system=HOST_SYSTEM, tools=tools)
        config = ExtractConfig(mode=mode)  # type: ignore[arg-type]
        extractor = MemoryExtractor(memory, model, config, sink=sink, clock=clock)
        conversation: list[Message] = []
        for turn, pause in zip(turns, schedule, strict=True):
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
                side = memory_side if is_memory_request(recorded.body) else host_side
                side.per_turn.setdefault(turn.number, []).append(usage_of(recorded))
        await model.aclose()
        server.assert_no_errors()
    runs = sink.named("extract.run")
    files = sorted(p.name for p in memory.glob("*.md") if p.name != "MEMORY.md")
    return {
        "host": host_side,
        "memory": memory_side,
        "runs": len(runs),
        "errors": len(sink.named("extract.error")),
        "messages_covered": sum(int(r.fields["message_count"]) for r in runs),
        "modes": {m: sum(1 for r in runs if r.fields["mode"] == m) for m in ("fork", "standalone")},
        "memory_files": files,
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
    }


def replay_mem0(
    turns: Sequence[Turn],
    schedule: Sequence[float],
    mem0: Mapping[int, list[dict[str, Any]]],
    model_name: str,
) -> tuple[Side, int]:
    """mem0's chat requests through the same cache model, each at its turn's moment, sent
    as ``model_name``: the model both sides are priced at, so that both pay its rules (a
    reasoning model's unseen reasoning tokens, billed as output, on mem0's side too)."""
    clock = FakeClock(start=1_000_000.0)
    side = Side("mem0", {})
    embedding_chars = 0
    replies: list[str] = []

    def answer(body: dict[str, Any]) -> str:
        return replies.pop(0)

    with FakeOpenAIServer(handler=answer, clock=clock) as server:
        for turn, pause in zip(turns, schedule, strict=True):
            clock.advance(pause + 2.0)
            for row in mem0.get(turn.number, []):
                if row["kind"] != "chat":
                    embedding_chars += sum(int(c) for c in row["input_chars"])
                    continue
                replies.append(row["response_content"])
                seen = len(server.requests)
                data = json.dumps({**row["body"], "model": model_name}).encode()
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


def flatness(side: Side, prices: Any, turns: Sequence[Turn]) -> dict[str, Any]:
    questions = [t.number for t in turns if t.kind == "question"]
    early = [side.cost(prices, t) for t in questions if t <= 10]
    late = [side.cost(prices, t) for t in questions if t > 40]
    return {
        "turn_5": round(side.cost(prices, 5), 1),
        "turn_50": round(side.cost(prices, 50), 1),
        "turn_50_to_turn_5": round(side.cost(prices, 50) / side.cost(prices, 5), 3),
        "question_turns_41_50_to_1_10": round(statistics.mean(late) / statistics.mean(early), 3),
    }


async def measure(data: Path, price_models: Sequence[str], root: Path) -> dict[str, Any]:
    turns, mem0 = load(data)
    schedule = pauses(len(turns))
    results: dict[str, Any] = {}
    embedding_tokens = 0
    for name in price_models:
        prices = model_family(name, "openai").prices
        mem0_side, embedding_tokens = replay_mem0(turns, schedule, mem0, name)
        runs = {mode: await run_memdir(turns, schedule, name, mode, root) for mode in MODES}
        sides = {f"memdir_{m}": r["memory"] for m, r in runs.items()}
        sides["mem0_2.2.1"] = mem0_side
        sides["host_agent"] = runs["auto"]["host"]
        table = summary(sides, prices, turns)
        mem0_cost = table["mem0_2.2.1"]["cost"]
        results[name] = {
            "prices": {"cache_read": prices.cache_read, "output": prices.output},
            "ratio_to_mem0": {
                f"memdir_{m}": round(table[f"memdir_{m}"]["cost"] / mem0_cost, 3) for m in MODES
            },
            "memdir_auto_to_host_agent": round(
                table["memdir_auto"]["cost"] / table["host_agent"]["cost"], 3
            ),
            "flatness_memdir_auto": flatness(runs["auto"]["memory"], prices, turns),
            "checks": {
                mode: {k: v for k, v in run.items() if k not in ("host", "memory")}
                for mode, run in runs.items()
            },
            "sides": table,
        }
    return {
        "pauses_s": {
            "over_5_min": sum(1 for p in schedule if p > 300),
            "median": round(statistics.median(schedule[1:]), 1),
        },
        "mem0_embedding_tokens": embedding_tokens,
        "price_models": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--price-models", default=",".join(PRICE_MODELS))
    args = parser.parse_args()
    if not (args.data / "conversation.json").is_file():
        parser.error(f"no conversation.json in {args.data} (pass --data)")
    names = [n.strip() for n in args.price_models.split(",") if n.strip()]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(measure(args.data, names, Path(tmp)))
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps({"bench": "cost_vs_mem0", **result}, indent=2))
    bad = [
        (name, mode)
        for name, r in result["price_models"].items()
        for mode, check in r["checks"].items()
        if check["errors"] or check["messages_covered"] != 100 or not check["cursor_at_end"]
    ]
    if bad:
        print(f"runs that failed or missed messages: {bad}", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
