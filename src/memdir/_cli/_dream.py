"""``memdir dream``: consolidate the memory directory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from memdir._cli._common import (
    EXIT_FAILED,
    base_url_option,
    choose_memory_dir,
    choose_model,
    close_model,
    json_option,
    memory_dir_option,
    model_option,
    print_json,
)
from memdir.dream import AutoDream
from memdir.extract import MemorySaved
from memdir.telemetry import CollectingSink


@click.command("dream")
@memory_dir_option
@model_option
@base_url_option
@click.option(
    "--transcripts",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder of session transcripts to consult (default: the memory directory's parent, "
    "where Claude Code keeps a project's sessions).",
)
@click.option("--force", is_flag=True, help="Run now, whatever the time and session gates say.")
@json_option
def dream_command(
    memory_dir: Path | None,
    model_option: str | None,
    base_url: str | None,
    transcripts: Path | None,
    force: bool,
    as_json: bool,
) -> None:
    """Consolidate memory: merge duplicates, drop contradicted facts, fix dates, re-index.

    Without --force it runs only when a day has passed since the last pass and at least
    five sessions were touched since (as after a turn in a live agent).
    """
    memory = choose_memory_dir(memory_dir, None)
    model = choose_model(model_option, base_url, quiet=as_json)
    folder = transcripts if transcripts is not None else memory.root.parent
    events = CollectingSink()
    notices: list[MemorySaved] = []
    dream = AutoDream(memory, model, transcript_dir=folder, sink=events)

    async def go() -> bool:
        try:
            if force:
                return await dream.run(notify=notices.append)
            return await dream.maybe_run(notify=notices.append)
        finally:
            await close_model(model)

    ran = asyncio.run(go())
    failed = bool(events.named("dream.failed"))
    improved = [str(p) for n in notices for p in n.paths]
    if as_json:
        print_json({"ran": ran, "failed": failed, "improved": improved})
    elif failed:
        click.echo("consolidation failed; the next pass will try again", err=True)
    elif ran:
        click.echo(
            "\n".join([f"consolidated {memory.root}", *(f"  improved {p}" for p in improved)])
        )
    else:
        click.echo("not yet: consolidation runs after a day and five sessions (or use --force)")
    if failed:
        raise SystemExit(EXIT_FAILED)
