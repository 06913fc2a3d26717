"""``memdir extract``: memories from transcripts already on disk."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from memdir._cli._common import (
    EXIT_FAILED,
    ModelChoice,
    base_url_option,
    choose_memory_dir,
    every_option,
    fail,
    json_option,
    memory_dir_option,
    model_option,
    print_json,
    team_option,
)
from memdir._cli._plan import describe, new_turns, plan_extraction, skipped
from memdir._cli._run import TranscriptReport, completed_turn_ends, extract_transcript
from memdir.errors import TranscriptError
from memdir.models import Model, OfflineModel, RetryPolicy
from memdir.models._retry import UnreachableError
from memdir.store import MemoryDir, Repair, repair_memory_dir
from memdir.telemetry import Event, Sink, emit
from memdir.transcripts import Transcript, load_transcript


class _UnreachableError(Exception):
    """Stops a backfill whose provider cannot be reached: every later turn would fail
    the same way, one request each, to report the same line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _StopWhenUnreachable:
    """The extractor's sink, watching for a run that failed because the endpoint cannot
    be reached; :meth:`check`, called after each turn, then ends the backfill."""

    def __init__(self) -> None:
        self.reason: str | None = None

    def __call__(self, event: Event) -> None:
        if event.name == "extract.error" and event.fields.get("error_type") == (
            UnreachableError.__name__
        ):
            self.reason = str(event.fields.get("reason") or "the provider cannot be reached")

    def check(self) -> None:
        if self.reason is not None:
            raise _UnreachableError(self.reason)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")


def parse_since(value: str, now: datetime.datetime | None = None) -> datetime.datetime:
    """``--since``'s value as a moment with a time zone: a duration back from ``now``
    (``90m``, ``12h``, ``7d``, ``2w``) or an ISO-8601 date or time (``2026-12-01``,
    ``2026-12-01T09:30``, ``…Z``), local time when it names no zone."""
    text = value.strip()
    match = _DURATION.fullmatch(text)
    if match:
        now = now or datetime.datetime.now(datetime.UTC)
        return now - datetime.timedelta(seconds=float(match[1]) * _UNITS[match[2]])
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{value!r} is neither a duration (90m, 12h, 7d, 2w) nor a date (2026-12-01)"
        ) from None
    return moment if moment.tzinfo is not None else moment.astimezone()


def _since(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> datetime.datetime | None:
    """``--since``'s value read by :func:`parse_since`; a usage error when it is neither."""
    if value is None:
        return None
    try:
        return parse_since(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


LARGE_BACKFILL_TURNS = 200
"""More new turns than this, with someone at a terminal, and extract asks first."""


def _interactive() -> bool:
    """Whether there is someone at a terminal to ask (the tests stand in for them)."""
    stdin = sys.stdin
    return stdin is not None and stdin.isatty()


def _confirm_backfill(
    targets: list[tuple[Transcript, MemoryDir, Model]],
    *,
    every: int,
    batch: bool,
    team: bool,
    since: datetime.datetime | None,
) -> None:
    """Show what a large backfill would send and cost, and stop unless the user agrees."""
    plans = asyncio.run(plan_extraction(targets, every=every, batch=batch, team=team, since=since))
    click.echo(describe(plans, most=5), err=True)
    names = ", ".join(dict.fromkeys(model.name for _, _, model in targets))
    runs = sum(len(p.runs) for p in plans)
    tokens = sum(p.input_tokens for p in plans)
    if not click.confirm(
        f"Send {runs} run(s), ~{tokens:,} input tokens, to {names}?", default=False, err=True
    ):
        fail(
            "not extracting: nothing was sent (--yes skips this question; --since 7d "
            "reads only the last week)"
        )


def _progress(total: int, enabled: bool) -> tuple[Any, Callable[[], object]]:
    """A rich progress bar on stderr, or a stand-in that does nothing."""
    if enabled:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        progress = Progress(
            TextColumn("extracting"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("turns"),
            console=Console(stderr=True),
            transient=True,
        )
        task = progress.add_task("turns", total=total)
        return progress, lambda: progress.advance(task)
    return None, lambda: None


def _announce_retries(model: Model, progress: Any) -> None:
    """Have ``model`` say on stderr when it waits to try a request again (a 429, a 5xx, a
    timeout), above the progress bar when there is one: a wait is not silence."""
    policy = getattr(model, "retry", None)
    if not isinstance(policy, RetryPolicy):
        return

    def say(line: str) -> None:
        if progress is not None:
            progress.console.print(f"memdir: {line}", markup=False, highlight=False)
        else:
            click.echo(f"memdir: {line}", err=True)

    model.retry = dataclasses.replace(policy, on_retry=say)  # type: ignore[attr-defined]


def _repair(memory: MemoryDir, sink: Sink) -> list[Repair]:
    """Repair ``memory`` (:func:`~memdir.store.repair_memory_dir`), each repair reported
    to ``sink`` as a ``memory.repaired`` event."""
    made = repair_memory_dir(memory)
    for repair in made:
        emit(sink, "memory.repaired", kind=repair.kind, path=repair.path)
    return made


def _summary(report: TranscriptReport) -> str:
    tokens = (
        report.input_tokens + report.cache_read_input_tokens + report.cache_creation_input_tokens
    )
    if report.usage_estimated:
        usage = (
            f"tokens estimated ~{tokens} in, ~{report.output_tokens} out "
            "(the offline model calls no provider)"
        )
    else:
        usage = (
            f"input tokens {tokens} ({report.cache_share:.0%} from cache)"
            f" · output tokens {report.output_tokens}"
        )
    lines = [
        f"{report.path}",
        f"  turns {report.turns} · runs {report.runs} · memories saved {report.memories_saved}"
        f" · {usage}",
    ]
    if report.errors:
        reasons = sorted(set(report.error_reasons))
        why = f": {reasons[0]}" if len(reasons) == 1 else ""
        lines.append(f"  {report.errors} run(s) failed{why}; those turns will be retried next time")
        if len(reasons) > 1:
            lines.extend(f"    {reason}" for reason in reasons)
    if report.skipped_messages:
        lines.append(
            f"  {skipped(report.skipped_messages, report.skipped_turns, report.skipped_why)}"
        )
    for line, reason in report.skipped_lines:
        lines.append(f"  skipped line {line}: {reason}")
    lines.extend(f"  saved {path}" for path in report.saved_paths)
    return "\n".join(lines)


@click.command("extract")
@click.argument(
    "transcripts", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False)
)
@memory_dir_option
@model_option
@base_url_option
@every_option
@click.option("--batch", is_flag=True, help="One run over everything new (cheap backfills).")
@team_option
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the runs it would make, their tokens and estimated cost; send and write nothing.",
)
@click.option(
    "--since",
    metavar="DURATION|DATE",
    callback=_since,
    help="Read only turns from this time on (7d, 12h, 2026-12-01); older ones are skipped "
    "and the cursor moves past them.",
)
@click.option(
    "--yes",
    "-y",
    is_flag=True,
    help=f"Do not ask before a backfill of more than {LARGE_BACKFILL_TURNS} turns.",
)
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
@json_option
def extract_command(
    transcripts: tuple[Path, ...],
    memory_dir: Path | None,
    model_option: str | None,
    base_url: str | None,
    every: int,
    batch: bool,
    team: bool,
    dry_run: bool,
    since: datetime.datetime | None,
    yes: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Save memories from TRANSCRIPT files (Claude Code sessions, Anthropic or OpenAI JSON).

    Each transcript is read turn by turn from where the last run stopped (cursors are kept
    per session in the memory directory), so running it again only looks at what is new.
    The memory directory is --memory-dir, else $MEMDIR_DIR, else the one Claude Code uses
    for the session's working directory. Exit status: 0 done, 1 a run failed (it is
    retried next time), 2 bad usage or an unreadable transcript (nothing written).

    --dry-run prints the runs it would make, with their input tokens and estimated cost
    (in input-token equivalents of the model: cached reads cost less, output more), and
    sends and writes nothing. At a terminal, a backfill of more than 200 new turns shows
    that plan and asks first (--yes does not ask); without a terminal it goes ahead.

    --since DURATION|DATE reads only the turns from then on (a Claude Code transcript
    stamps every message): the older ones are skipped, the cursor moves past them, and
    the output says how many. Without it, everything past the cursor is read.
    """
    loaded: list[Transcript] = []
    for path in transcripts:
        try:
            loaded.append(load_transcript(path))
        except TranscriptError as exc:
            fail(str(exc))
    # By default each session is read by its host's own model (Claude Code's, as recorded).
    models = ModelChoice(model_option, base_url, quiet=quiet or as_json)
    chosen = [models.for_transcript(t) for t in loaded]
    targets = [
        (t, choose_memory_dir(memory_dir, t.cwd, write=not dry_run), model)
        for t, model in zip(loaded, chosen, strict=True)
    ]
    if dry_run:
        plans = asyncio.run(
            plan_extraction(targets, every=every, batch=batch, team=team, since=since)
        )
        asyncio.run(models.aclose())
        if as_json:
            print_json({"dry_run": True, "transcripts": [p.as_dict() for p in plans]})
        else:
            click.echo(describe(plans))
        return
    large = sum(new_turns(t, m, since=since) for t, m, _ in targets) > LARGE_BACKFILL_TURNS
    paid = any(not isinstance(model, OfflineModel) for model in chosen)
    if large and not yes and paid and _interactive():
        _confirm_backfill(targets, every=every, batch=batch, team=team, since=since)
    total = sum(len(completed_turn_ends(t.messages)) for t in loaded)
    show_bar = sys.stderr.isatty() and not (quiet or as_json)
    progress, advance = _progress(total, show_bar)
    if not quiet:
        for model in {id(m): m for m in chosen}.values():
            _announce_retries(model, progress)
    watch = _StopWhenUnreachable()
    # What a killed run left behind (memories saved but not indexed, leftover temporary
    # files, half-made trash entries) is put right before anything new is saved.
    repaired = {
        memory.root: _repair(memory, watch)
        for memory in {m.root: m for _, m, _ in targets}.values()
    }

    def after_turn() -> None:
        advance()
        watch.check()

    async def run_all() -> list[TranscriptReport]:
        reports = []
        try:
            for transcript, memory, model in targets:
                reports.append(
                    await extract_transcript(
                        transcript,
                        memory,
                        model,
                        every=every,
                        batch=batch,
                        team=team,
                        sink=watch,
                        on_turn=after_turn,
                        since=since,
                        # A person ran this and saw what it costs (or bounded it with
                        # --since): the whole backlog is read, not only its recent part.
                        backlog_tokens=None,
                    )
                )
        finally:
            await models.aclose()
        return reports

    try:
        if progress is not None:
            with progress:
                reports = asyncio.run(run_all())
        else:
            reports = asyncio.run(run_all())
    except _UnreachableError as stop:
        # The turn that found it keeps its place (its cursor was not moved), so the next
        # run starts there once the endpoint answers.
        fail(f"{stop.reason} (nothing was saved from that turn on)", EXIT_FAILED, kind="model")
    failed = [detail for r in reports for detail in r.errors_detail]
    repairs = [(root, r) for root, made in repaired.items() for r in made]
    if as_json:
        out: dict[str, object] = {"transcripts": [r.as_dict() for r in reports]}
        out["repaired"] = [
            {"memory_dir": str(root), "kind": r.kind, "path": r.path} for root, r in repairs
        ]
        if failed:
            out["error"] = failed[0]
        print_json(out)
    elif not quiet:
        for root, repair in repairs:
            click.echo(f"repaired {root}: {repair.describe()}")
        for report in reports:
            click.echo(_summary(report))
    if any(r.errors for r in reports):
        first = failed[0]["message"] if failed else "an extraction run failed"
        click.echo(f"memdir: {first} (retried next time)", err=True)
        sys.exit(EXIT_FAILED)
