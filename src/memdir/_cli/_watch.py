"""``memdir watch``: follow transcripts as they grow and extract each completed turn."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from pathlib import Path

import click

from memdir._cli._common import (
    ModelChoice,
    base_url_option,
    every_option,
    fail,
    find_memory_dir,
    json_option,
    memory_dir_option,
    model_option,
    team_option,
)
from memdir._cli._run import extract_transcript
from memdir.errors import TranscriptError
from memdir.store import repair_memory_dir
from memdir.transcripts import load_transcript


def _transcripts(paths: tuple[Path, ...]) -> list[Path]:
    """The session files under ``paths``: files as given, folders searched for ``*.jsonl``.

    Subagent transcripts (``subagents/`` folders, ``agent-*.jsonl``) belong to their
    session and are not followed on their own.
    """
    found: list[Path] = []
    for path in (p.expanduser() for p in paths):
        if path.is_dir():
            for candidate in sorted(path.rglob("*.jsonl")):
                if "subagents" in candidate.parts or candidate.name.startswith("agent-"):
                    continue
                found.append(candidate)
        elif path.exists():
            found.append(path)
    return found


@click.command("watch")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@memory_dir_option
@model_option
@base_url_option
@every_option
@team_option
@click.option(
    "--interval",
    type=click.FloatRange(min=0.01),
    default=1.0,
    show_default=True,
    help="Seconds between looks at the files.",
)
@json_option
def watch_command(
    paths: tuple[Path, ...],
    memory_dir: Path | None,
    model_option: str | None,
    base_url: str | None,
    every: int,
    team: bool,
    interval: float,
    as_json: bool,
) -> None:
    """Follow transcript files, or a Claude Code projects folder, and extract as turns end.

    Runs until interrupted (Ctrl-C), then waits for the extraction in progress to finish.
    Each pass that did something prints one line (one JSON object with --json). Every
    path must exist when the watch starts: a mistyped one would otherwise be watched, in
    silence, forever.
    """
    missing = [p for p in paths if not p.expanduser().exists()]
    if missing:
        fail(f"nothing to watch at {missing[0]}: no such file or folder")
    # Each session is read by its host's own model unless --model names one.
    models = ModelChoice(model_option, base_url, quiet=as_json)
    models.check()

    def say(record: dict[str, object], text: str) -> None:
        click.echo(json.dumps(record) if as_json else text)

    async def follow() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        seen: dict[Path, tuple[int, int]] = {}
        repaired: set[Path] = set()
        say({"event": "watching", "paths": [str(p) for p in paths]}, "watching; Ctrl-C to stop")
        try:
            while not stop.is_set():
                for file in _transcripts(paths):
                    try:
                        st = file.stat()
                    except OSError:
                        continue
                    stamp = (st.st_size, st.st_mtime_ns)
                    if seen.get(file) == stamp:
                        continue
                    seen[file] = stamp
                    try:
                        transcript = load_transcript(file)
                    except TranscriptError as exc:
                        say(
                            {"event": "unreadable", "path": str(file), "reason": str(exc)},
                            f"skipped {exc}",
                        )
                        continue
                    memory = find_memory_dir(memory_dir, transcript.cwd, write=True)
                    if isinstance(memory, str):
                        # One project's folder is unusable: say so, and go on with the rest.
                        say(
                            {"event": "unusable", "path": str(file), "reason": memory},
                            f"skipped {file}: {memory}",
                        )
                        continue
                    if memory.root not in repaired:
                        # What a killed run left there is put right once, before the
                        # first extraction into that folder.
                        repaired.add(memory.root)
                        for repair in await asyncio.to_thread(repair_memory_dir, memory):
                            say(
                                {
                                    "event": "repaired",
                                    "memory_dir": str(memory.root),
                                    "kind": repair.kind,
                                    "path": repair.path,
                                },
                                f"repaired {memory.root}: {repair.describe()}",
                            )
                    model = models.for_transcript(transcript)
                    report = await extract_transcript(
                        transcript, memory, model, every=every, team=team
                    )
                    if report.turns:
                        say(
                            {"event": "extracted", **report.as_dict()},
                            f"{file}: {report.turns} new turn(s), {report.runs} run(s), "
                            f"{report.memories_saved} memories saved",
                        )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=interval)
        finally:
            await models.aclose()
        say({"event": "stopped"}, "stopped")

    asyncio.run(follow())
