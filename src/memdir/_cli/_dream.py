"""``memdir dream``: consolidate the memory directory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from memdir._cli._common import (
    EXIT_FAILED,
    base_url_option,
    choose_model,
    close_model,
    json_option,
    memory_dir_option,
    model_option,
    print_json,
)
from memdir._cli._existing import existing_memory_dir
from memdir.dream import AutoDream
from memdir.extract import MemorySaved
from memdir.store import Repair
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
    memory = existing_memory_dir(memory_dir, None, write=True)
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
    failures = events.named("dream.failed")
    skipped = events.named("dream.skipped")
    improved = [str(p) for n in notices for p in n.paths]
    repaired = [
        Repair(kind=e.fields["kind"], path=str(e.fields["path"]))
        for e in events.named("memory.repaired")
    ]
    reason = None
    if failures:
        reason = str(failures[-1].fields.get("reason") or failures[-1].fields.get("error_type"))
    elif skipped:
        reason = str(skipped[-1].fields.get("reason"))
    if as_json:
        failure = failures[-1].fields if failures else {}
        print_json(
            {
                "ran": ran,
                "failed": bool(failures),
                "reason": reason,
                "error": {
                    "kind": failure.get("error_kind"),
                    "status": failure.get("status"),
                    "message": reason,
                }
                if failures
                else None,
                "improved": improved,
                "repaired": [{"kind": r.kind, "path": r.path} for r in repaired],
            }
        )
    if not as_json:
        for repair in repaired:
            click.echo(f"repaired: {repair.describe()}")
    if failures:
        click.echo(f"memdir: consolidation could not run: {reason}", err=True)
        raise SystemExit(EXIT_FAILED)
    if as_json:
        return
    if ran:
        click.echo(
            "\n".join([f"consolidated {memory.root}", *(f"  improved {p}" for p in improved)])
        )
    elif reason is not None and not reason.startswith("not yet"):
        click.echo(f"memdir: consolidation did not run: {reason}", err=True)
    else:
        why = reason or "not yet"
        click.echo(f"{why} (a pass needs a day and five sessions since the last; or --force)")
