"""``memdir extract``: memories from transcripts already on disk."""

from __future__ import annotations

import asyncio
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
from memdir._cli._run import TranscriptReport, completed_turn_ends, extract_transcript
from memdir.errors import TranscriptError
from memdir.transcripts import Transcript, load_transcript


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
    quiet: bool,
    as_json: bool,
) -> None:
    """Save memories from TRANSCRIPT files (Claude Code sessions, Anthropic or OpenAI JSON).

    Each transcript is read turn by turn from where the last run stopped (cursors are kept
    per session in the memory directory), so running it again only looks at what is new.
    The memory directory is --memory-dir, else $MEMDIR_DIR, else the one Claude Code uses
    for the session's working directory. Exit status: 0 done, 1 a run failed (it is
    retried next time), 2 bad usage or an unreadable transcript (nothing written).
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
        (t, model, choose_memory_dir(memory_dir, t.cwd, write=True))
        for t, model in zip(loaded, chosen, strict=True)
    ]
    total = sum(len(completed_turn_ends(t.messages)) for t in loaded)
    show_bar = sys.stderr.isatty() and not (quiet or as_json)
    progress, advance = _progress(total, show_bar)

    async def run_all() -> list[TranscriptReport]:
        reports = []
        try:
            for transcript, model, memory in targets:
                reports.append(
                    await extract_transcript(
                        transcript,
                        memory,
                        model,
                        every=every,
                        batch=batch,
                        team=team,
                        on_turn=advance,
                    )
                )
        finally:
            await models.aclose()
        return reports

    if progress is not None:
        with progress:
            reports = asyncio.run(run_all())
    else:
        reports = asyncio.run(run_all())
    failed = [detail for r in reports for detail in r.errors_detail]
    if as_json:
        out: dict[str, object] = {"transcripts": [r.as_dict() for r in reports]}
        if failed:
            out["error"] = failed[0]
        print_json(out)
    elif not quiet:
        for report in reports:
            click.echo(_summary(report))
    if any(r.errors for r in reports):
        first = failed[0]["message"] if failed else "an extraction run failed"
        click.echo(f"memdir: {first} (retried next time)", err=True)
        sys.exit(EXIT_FAILED)
