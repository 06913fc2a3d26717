"""``memdir queue status``, ``queue retry`` and ``queue prune``: an operator's view of the
queue and the two repairs it most often needs (see docs/QUEUE.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from memdir._cli._common import fail, json_option, print_json
from memdir._cli._queue_common import db_option, one_line_errors

if TYPE_CHECKING:
    from memdir.queue import QueueStatus

__all__ = ["queue_prune_command", "queue_retry_command", "queue_status_command"]


def _ago(seconds: float | None) -> str:
    """``seconds`` as an operator reads an age: 42 s, 7 min, 3 h, 2 d."""
    if seconds is None:
        return "?"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def _render(status: QueueStatus) -> str:
    jobs = status.jobs
    alive = sum(1 for w in status.workers if w["alive"])
    oldest = status.oldest_pending
    rate = status.throughput
    lines = [
        f"workers  {alive} alive, {len(status.workers) - alive} dead",
        f"queued   {jobs.get('todo', 0)}",
        f"running  {status.running}",
        f"stalled  {status.stalled}"
        + (" (on dead workers: the sweeper fails them)" * bool(status.stalled)),
        f"failed   {jobs.get('failed', 0)}",
        f"pending  {status.pending_sessions} sessions in {status.pending_dirs} directories"
        + (
            f", oldest {_ago(oldest['age_seconds'])} ({oldest['dir_id']} {oldest['session']})"
            if oldest
            else ""
        ),
    ]
    if rate:
        lines.append(
            f"done     {rate['runs']} runs in the last {rate['minutes']:g} min "
            f"({rate['runs_per_minute']:g}/min, {rate['dirs']} directories)"
        )
    if status.running_jobs:
        lines.append("jobs doing:")
        lines += [
            f"  job {j['job_id']} {j['dir_id']} on worker {j['worker_id']}: "
            f"{_ago(j['age_seconds'])}" + ("" if j["alive"] else " (its worker is dead)")
            for j in status.running_jobs
        ]
    if status.failures:
        lines.append("failures by reason:")
        lines += [
            f"  {f['count']} {f['kind']}{'s' * (f['count'] != 1)}, newest "
            f"{_ago(f['newest_age_seconds'])} ago, oldest {_ago(f['oldest_age_seconds'])} ago: "
            f"{f['reason']}"
            for f in status.failures
        ]
    if status.failing:
        lines.append("failing sessions (retried with backoff):")
        lines += [
            f"  {f['dir_id']} {f['session']}: attempt {f['attempts']}: {f['error']}"
            for f in status.failing
        ]
    if status.failed_jobs:
        lines.append("failed jobs (`memdir queue retry --all-failed` runs them again now):")
        lines += [f"  job {f['job_id']} {f['dir_id']}: {f['reason']}" for f in status.failed_jobs]
    return "\n".join(lines)


@click.command("status")
@db_option
@click.option(
    "--stalled-after",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    help="Seconds without a heartbeat after which a worker counts as dead.",
)
@click.option(
    "--minutes",
    type=click.FloatRange(min=0, min_open=True),
    default=5.0,
    show_default=True,
    help="The window of the throughput figure.",
)
@json_option
@one_line_errors
def queue_status_command(dsn: str, stalled_after: float, minutes: float, as_json: bool) -> None:
    """Workers alive and dead, jobs queued, running and stalled, the oldest pending
    turn, throughput, and failures by reason with their age."""
    from memdir.queue import queue_status

    status = queue_status(dsn, stalled_after=stalled_after, minutes=minutes)
    if as_json:
        print_json(status.as_dict())
    else:
        click.echo(_render(status))


dry_run_option = click.option(
    "--dry-run", is_flag=True, help="Say what would be done; change nothing."
)


@click.command("retry")
@db_option
@click.option(
    "--dir",
    "dir_ids",
    multiple=True,
    metavar="DIR_ID",
    help="A directory to retry (repeatable).",
)
@click.option("--all-failed", is_flag=True, help="Retry every directory that has a failure.")
@dry_run_option
@json_option
@one_line_errors
def queue_retry_command(
    dsn: str, dir_ids: tuple[str, ...], all_failed: bool, dry_run: bool, as_json: bool
) -> None:
    """Run failed directories' pending turns again now.

    Their sessions' attempts and errors are cleared, their failed jobs removed, and one
    job queued for each (the turns themselves were kept).
    """
    from memdir.queue._retry import retry

    if not dir_ids and not all_failed:
        fail("say which: --dir DIR_ID (repeatable) or --all-failed", kind="usage")
    result = retry(dsn, dir_ids, all_failed=all_failed, dry_run=dry_run)
    if as_json:
        print_json(result.as_dict())
        return
    verb = "would retry" if dry_run else "retried"
    click.echo(
        f"memdir: {verb} {len(result.dirs)} directories: {result.deferred} jobs queued, "
        f"{result.sessions_reset} sessions reset, {result.jobs_removed} failed jobs removed"
    )


_UNITS = {"s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def _duration(text: str) -> float:
    """``7d``, ``12h``, ``30m``, ``90s`` or plain seconds."""
    value = text.strip().lower()
    for unit in sorted(_UNITS, key=len, reverse=True):
        if value.endswith(unit):
            number, scale = value[: -len(unit)], _UNITS[unit]
            break
    else:
        number, scale = value, 1.0
    try:
        seconds = float(number) * scale
    except ValueError:
        raise click.BadParameter(f"{text!r} is no duration (e.g. 7d, 12h, 30m, 90s)") from None
    if seconds < 0:
        raise click.BadParameter("a duration is not negative")
    return seconds


@click.command("prune")
@db_option
@click.option(
    "--older-than",
    default="7d",
    show_default=True,
    help="Remove what ended longer ago than this (7d, 12h, 30m, 90s).",
)
@dry_run_option
@json_option
@one_line_errors
def queue_prune_command(dsn: str, older_than: str, dry_run: bool, as_json: bool) -> None:
    """Remove consumed messages, old run rows and finished jobs.

    A message goes once every run that could still read it has run; run rows and
    finished or failed jobs once they ended longer ago than --older-than. Pending turns,
    queued and running jobs are kept. Workers do the same on --prune-cron.
    """
    from memdir.queue import prune

    age = _duration(older_than)
    result = prune(dsn, keep_runs=age, keep_jobs=age, keep_failed_jobs=age, dry_run=dry_run)
    if as_json:
        print_json({**result.as_dict(), "older_than_seconds": age, "dry_run": dry_run})
        return
    counts = result.as_dict()
    labels = {"messages": "consumed messages", "runs": "run rows", "jobs": "finished jobs"}
    what = ", ".join(f"{counts[kind]} {label}" for kind, label in labels.items())
    verb = "would remove" if dry_run else "removed"
    click.echo(f"memdir: {verb} {what} (older than {older_than})")
