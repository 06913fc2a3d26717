"""What ``memdir extract`` would do, found before anything is sent or written.

The extraction runs as it would, turn by turn with the same planner, against a copy of
the memory directory in a temporary folder and a stand-in model that records each request
and answers that there is nothing to save. So the runs, their modes and their request
sizes are the real ones, from the code that makes them, while no provider is called and
neither the memory directory nor its cursors change.

Costs are the planner's estimates (:class:`~memdir.cost.CostEstimate`) at the model's
prices from :mod:`memdir.cost`, which are relative: one uncached input token of that
model costs 1, so a cost reads as *input-token equivalents* (cache reads cost less,
output more). They assume a typical run (a request or two, a short answer).

One difference from the real run: a session's last turn may fork from the request Claude
Code recorded, which needs the model's own client; the stand-in has none, so the plan
prices that turn as a standalone run, the dearer way when the host's cache is warm.
"""

from __future__ import annotations

import datetime
import json
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memdir._cli._run import (
    completed_turn_ends,
    extract_transcript,
    resume_index,
    session_of,
    skip_before,
)
from memdir.messages import Message, TextBlock, messages_to_anthropic
from memdir.models import Model, ModelRequest, ModelResponse, OfflineModel, Usage, model_family
from memdir.state import StateFile
from memdir.store import MemoryDir
from memdir.store._trash import TRASH_DIR_NAME
from memdir.telemetry import Event
from memdir.transcripts import Transcript

COST_UNIT = "input-token equivalents"
"""What an estimated cost counts: uncached input tokens of the model it goes to."""

_CHARS_PER_TOKEN = 4  # the estimate the planner uses too


def _tokens(value: object) -> int:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return len(text) // _CHARS_PER_TOKEN + 1


def request_tokens(request: ModelRequest) -> int:
    """The input tokens of ``request``, estimated from its size on the wire."""
    tokens = _tokens(messages_to_anthropic(request.messages))
    if request.system:
        tokens += _tokens(request.system)
    if request.tools:
        tokens += _tokens(list(request.tools))
    return tokens


class _Recorder:
    """A model that sends nothing: it notes each request's size and answers that there
    is nothing to save, which ends the run after one request."""

    def __init__(self, name: str) -> None:
        self._name = name
        self.requests: list[int] = []

    @property
    def name(self) -> str:
        return self._name

    async def request(self, request: ModelRequest) -> ModelResponse:
        tokens = request_tokens(request)
        self.requests.append(tokens)
        answer = Message(role="assistant", content=(TextBlock(text="Nothing to save."),))
        return ModelResponse(
            message=answer, usage=Usage(input_tokens=tokens), stop_reason="end_turn"
        )


@dataclass
class PlannedRun:
    """One run the extraction would make."""

    turn: int
    """The turn (1-based, among the new ones) whose end starts it."""
    mode: str
    """``fork`` (inside the host's cache) or ``standalone`` (memdir's own request)."""
    input_tokens: int
    """The estimated input tokens of its first request."""
    estimated_cost: float
    """The planner's estimate for the way it goes, in :data:`COST_UNIT`."""
    reason: str
    """Why it goes that way."""


@dataclass
class TranscriptPlan:
    """What extracting one transcript would do."""

    path: str
    memory_dir: str
    model: str
    turns: int
    """New completed turns since the saved cursor."""
    runs: list[PlannedRun] = field(default_factory=list)
    free: bool = False
    """The offline model calls no provider: nothing is paid, whatever the tokens."""
    skipped_messages: int = 0
    """Messages past the cursor that would be left unread (``--since``), the cursor moved
    past them."""
    skipped_turns: int = 0
    skipped_why: str = ""

    @property
    def input_tokens(self) -> int:
        return sum(r.input_tokens for r in self.runs)

    @property
    def estimated_cost(self) -> float:
        return 0.0 if self.free else sum(r.estimated_cost for r in self.runs)

    @property
    def estimated_usd(self) -> float | None:
        """:attr:`estimated_cost` in US dollars at the model's list price for an input
        token (None when the model table has no list price for it)."""
        if self.free:
            return 0.0
        listed = model_family(self.model.partition(":")[2] or self.model).list_prices
        return None if listed is None else self.estimated_cost * listed.input / 1_000_000

    def as_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "memory_dir": self.memory_dir,
            "model": self.model,
            "turns": self.turns,
            "skipped_messages": self.skipped_messages,
            "skipped_turns": self.skipped_turns,
            "input_tokens": self.input_tokens,
            "estimated_cost": round(self.estimated_cost, 1),
            "estimated_usd": None if self.estimated_usd is None else round(self.estimated_usd, 4),
            "cost_unit": "none: the offline model calls no provider" if self.free else COST_UNIT,
            "runs": [vars(r) for r in self.runs],
        }


class _Notes:
    """Each run the extraction reports, with the turn whose end started it."""

    def __init__(self, plan: TranscriptPlan) -> None:
        self.plan = plan
        self.turn = 1

    def event(self, event: Event) -> None:
        if event.name != "extract.run":
            return
        fields = event.fields
        mode = str(fields.get("mode") or "standalone")
        cost = fields.get(f"estimated_cost_{mode}")
        self.plan.runs.append(
            PlannedRun(
                turn=self.turn,
                mode=mode,
                input_tokens=int(fields.get("input_tokens") or 0),
                estimated_cost=float(cost)
                if isinstance(cost, int | float) and not self.plan.free
                else 0.0,
                reason=str(fields.get("plan_reason") or ""),
            )
        )

    def turn_done(self) -> None:
        self.turn += 1


def new_turns(
    transcript: Transcript, memory: MemoryDir, *, since: datetime.datetime | None = None
) -> int:
    """How many completed turns of ``transcript`` are past its saved cursor, and not older
    than ``since`` (reads only)."""
    cursor = StateFile(memory).get(session_of(transcript)).cursor if memory.root.is_dir() else None
    messages = transcript.messages
    start = skip_before(messages, resume_index(messages, cursor), since=since).start
    return sum(1 for end in completed_turn_ends(messages) if end >= start)


def _copy(memory: MemoryDir, into: Path) -> MemoryDir:
    """The memory directory's files and state in ``into`` (its trash left behind)."""
    if memory.root.is_dir():
        trash = memory.root / TRASH_DIR_NAME

        def skip(folder: str, names: list[str]) -> set[str]:
            return {n for n in names if Path(folder, n) == trash}

        shutil.copytree(memory.root, into, symlinks=True, ignore=skip)
    return MemoryDir(into)


async def plan_extraction(
    targets: Sequence[tuple[Transcript, MemoryDir, Model]],
    *,
    every: int,
    batch: bool,
    team: bool,
    since: datetime.datetime | None = None,
) -> list[TranscriptPlan]:
    """What ``extract`` would do for each ``(transcript, memory, model)``, from the turns
    not older than ``since``: nothing is sent, and nothing under the memory directories
    is written."""
    plans: list[TranscriptPlan] = []
    with tempfile.TemporaryDirectory(prefix="memdir-dry-run-") as scratch:
        for number, (transcript, memory, model) in enumerate(targets):
            copy = _copy(memory, Path(scratch) / str(number))
            recorder = _Recorder(model.name)
            plan = TranscriptPlan(
                path=str(transcript.path),
                memory_dir=str(memory.root),
                model=model.name,
                turns=new_turns(transcript, memory, since=since),
                free=isinstance(model, OfflineModel),
            )
            notes = _Notes(plan)
            report = await extract_transcript(
                transcript,
                copy,
                recorder,
                every=every,
                batch=batch,
                team=team,
                sink=notes.event,
                on_turn=notes.turn_done,
                since=since,
                backlog_tokens=None,
            )
            plan.skipped_messages = report.skipped_messages
            plan.skipped_turns = report.skipped_turns
            plan.skipped_why = report.skipped_why
            if batch and plan.runs:
                for run in plan.runs:
                    run.turn = plan.turns
            plans.append(plan)
    return plans


def describe(plans: Sequence[TranscriptPlan], *, most: int = 20) -> str:
    """The plans as text: a summary per transcript, then its runs (the first ``most``)."""
    lines = ["dry run: nothing was sent or written"]
    for plan in plans:
        modes = sorted({r.mode for r in plan.runs})
        split = ", ".join(f"{m} {sum(1 for r in plan.runs if r.mode == m)}" for m in modes)
        cost = (
            "no cost (the offline model calls no provider)"
            if plan.free
            else f"estimated cost ~{plan.estimated_cost:,.0f} {COST_UNIT} at {plan.model}"
            + (f" (~${plan.estimated_usd:,.2f} at list prices)" if plan.estimated_usd else "")
        )
        lines.append(f"{plan.path} -> {plan.memory_dir}")
        lines.append(
            f"  turns {plan.turns} · runs {len(plan.runs)}{f' ({split})' if split else ''}"
            f" · ~{plan.input_tokens:,} input tokens · {cost}"
        )
        if plan.skipped_messages:
            lines.append(
                f"  {skipped(plan.skipped_messages, plan.skipped_turns, plan.skipped_why)}"
            )
        for run in plan.runs[:most]:
            price = "" if plan.free else f", ~{run.estimated_cost:,.0f}"
            lines.append(
                f"  run at turn {run.turn}: {run.mode}, ~{run.input_tokens:,} input tokens"
                f"{price} ({run.reason})"
            )
        if len(plan.runs) > most:
            lines.append(f"  … {len(plan.runs) - most} more run(s); --json lists them all")
    return "\n".join(lines)


def skipped(messages: int, turns: int, why: str) -> str:
    """The line that says which messages were (or would be) left unread."""
    return (
        f"skipped {messages:,} message(s), {turns:,} turn(s), {why}: "
        "the cursor moves past them (the first run may show their end as context)"
    )
