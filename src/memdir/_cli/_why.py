"""``memdir why SESSION`` and ``memdir show NAME --history``: where memory came from and
what a session was shown."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from memdir._cli._common import json_option, memory_dir_option, print_json
from memdir._cli._existing import existing_memory_dir
from memdir.provenance import Change, MemoryHistory, SessionView, ShownMemory, history, why
from memdir.store import MemoryDir

__all__ = ["print_history", "why_command"]


def _messages(ids: Sequence[str]) -> str:
    if not ids:
        return ""
    if len(ids) <= 3:
        return f", messages {', '.join(ids)}"
    return f", messages {ids[0]} … {ids[-1]} ({len(ids)})"


def change_line(change: Change) -> str:
    """One change, as a line of text."""
    parts = [f"{change.at}  {change.what} by {change.by}"]
    if change.run is not None:
        parts.append(f", run {change.run}")
    if change.session is not None:
        parts.append(f", session {change.session}")
    parts.append(_messages(change.messages))
    return "".join(parts)


def print_history(memory: MemoryDir, name: str, as_json: bool) -> None:
    """Print the history of the memory ``name`` (a :class:`~memdir.errors.UsageError`
    for a memory neither present nor recorded)."""
    found = history(memory, name)
    if as_json:
        print_json(found.to_json())
        return
    _echo_history(found)


def _echo_history(found: MemoryHistory, indent: str = "") -> None:
    state = "" if found.exists else " (not in the folder now)"
    click.echo(f"{indent}{found.file}{state}")
    if not found.changes:
        click.echo(f"{indent}  no recorded change: it was written before memdir kept records")
    for change in found.changes:
        click.echo(f"{indent}  {change_line(change)}")
    if found.changed_elsewhere:
        click.echo(f"{indent}  changed since outside memdir's records (an editor, a host's agent)")


def _origin(memory: ShownMemory) -> str:
    if memory.history is None or memory.history.origin is None:
        return ""
    first = memory.history.origin
    told = f" — {first.what} {first.at}"
    if first.session is not None:
        told += f" from session {first.session}"
    told += _messages(first.messages)
    later = len(memory.history.changes) - 1
    return told + (f"; {later} later change(s)" if later > 0 else "")


def _echo_view(view: SessionView) -> None:
    click.echo(f"session {view.session}")
    if view.transcript is not None:
        click.echo(f"transcript {view.transcript}")
    for number, turn in enumerate(view.turns, start=1):
        if not (turn.loaded or turn.surfaced or turn.saved):
            continue
        head = f"turn {number}" + (f" ({turn.turn})" if turn.turn else " (before the first prompt)")
        click.echo(head + (f": {turn.prompt}" if turn.prompt else ""))
        for shown in turn.loaded:
            cut = " (cut: only part of it was loaded)" if shown.cut else ""
            click.echo(f"  loaded    {shown.file}{cut}")
        for shown in turn.surfaced:
            click.echo(f"  surfaced  {shown.file}{_origin(shown)}")
        for change in turn.saved:
            click.echo(f"  saved     {change.file}: {change_line(change)}")
    for fired in view.rules_fired:
        click.echo(
            f"rule {fired.get('action', '?')} at {fired.get('at', '?')}: "
            f"{fired.get('tool', '?')} {fired.get('stopped', '')!r} "
            f"(rule {fired.get('rule', '?')} of {fired.get('memory', '?')})"
        )


@click.command("why")
@click.argument("session")
@click.option(
    "--transcript",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The session's Claude Code transcript (default: the one beside the memory folder).",
)
@memory_dir_option
@json_option
def why_command(
    session: str, transcript: Path | None, memory_dir: Path | None, as_json: bool
) -> None:
    """What the session SESSION was shown of memory, turn by turn: the index it loaded
    (and whether it was cut), the memories surfaced to it and the memories saved from it,
    each with where it came from."""
    memory = existing_memory_dir(memory_dir, None)
    view = why(memory, session, transcript=transcript)
    if as_json:
        print_json(view.to_json())
    else:
        _echo_view(view)
