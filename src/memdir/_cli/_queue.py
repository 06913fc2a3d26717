"""``memdir worker``, ``memdir queue status|init|migrate|retry|prune`` and ``memdir sync``:
the PostgreSQL backend from the command line.

Every command imports :mod:`memdir.queue` only when it runs, so ``memdir --help`` and
the single-machine commands never need procrastinate or psycopg; a missing ``[postgres]``
extra is reported in one line by the command that needs it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ParamSpec, TypeVar

import click

from memdir._cli._common import (
    EXIT_FAILED,
    EXIT_USAGE,
    base_url_option,
    choose_model,
    every_option,
    fail,
    guarded,
    json_option,
    model_option,
    print_json,
    team_option,
)
from memdir._cli._run import memory_format
from memdir.errors import MemdirError
from memdir.extract import ExtractConfig
from memdir.models import Model, in_service, resolve_model
from memdir.telemetry import JsonlSink, LoggingSink, Sink, fan_out

if TYPE_CHECKING:
    from memdir.queue import QueueStatus

__all__ = ["queue_group", "sync_command", "worker_command"]

DB_ENV = "MEMDIR_DB"

P = ParamSpec("P")
R = TypeVar("R")


def _one_line_errors(callback: Callable[P, R]) -> Callable[P, R]:
    """``callback`` with memdir's errors (the missing extra among them) and the
    database's (unreachable, refused, no such database) reported in one line: exit 1
    for the database, which may come back, 2 for the rest, as the other commands do."""
    callback = guarded(callback)

    @functools.wraps(callback)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return callback(*args, **kwargs)
        except Exception as exc:
            if type(exc).__module__.split(".")[0] != "psycopg":
                raise
            fail(f"the database: {exc}", EXIT_FAILED, kind="database")

    return run


db_option = click.option(
    "--db",
    "dsn",
    envvar=DB_ENV,
    required=True,
    help=f"The PostgreSQL database (a libpq URL or key=value string; default: ${DB_ENV}).",
)


class _Models:
    """The worker's model per shipped model name: the host's own model where memdir can
    reach it (so the fork shares the host's prompt cache), else the worker's default."""

    def __init__(self, default: Model, base_url: str | None) -> None:
        self._default = default
        self._base_url = base_url
        self._by_name: dict[str, Model] = {}

    def __call__(self, name: str | None) -> Model:
        if name is None:
            return self._default
        model = self._by_name.get(name)
        if model is None:
            try:
                # A retired host model runs on its replacement, as in `extract`.
                model = resolve_model(in_service(name), base_url=self._base_url)
            except MemdirError:
                model = self._default  # a spec this machine cannot call: run standalone-ish
            self._by_name[name] = model
        return model


@click.command("worker")
@db_option
@model_option
@base_url_option
@every_option
@team_option
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Directories this worker runs at once.",
)
@click.option("--name", help="This worker's name in the queue (default: host:pid).")
@click.option(
    "--run-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=900.0,
    show_default=True,
    help="Seconds a session's run may take before it is cancelled and retried.",
)
@click.option(
    "--max-attempts",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Failed attempts after which a session is parked and its job failed with why.",
)
@click.option(
    "--prune-cron",
    default="17 * * * *",
    show_default=True,
    help="When to prune consumed messages, old runs and finished jobs (cron syntax; 'off': never).",
)
@click.option(
    "--events",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Append telemetry events to this JSONL file (also logged).",
)
@click.option(
    "--init/--no-init",
    "init_schema",
    default=False,
    show_default=True,
    help="Run `memdir queue migrate` first (for a single machine; a fleet migrates once, "
    "before its workers start).",
)
@click.option(
    "--stop-timeout",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Seconds from SIGTERM/SIGINT to exit: runs get half to finish, then are "
    "cancelled (their turns stay pending).",
)
@_one_line_errors
def worker_command(
    dsn: str,
    model_option: str | None,
    base_url: str | None,
    every: int,
    team: bool,
    concurrency: int,
    name: str | None,
    run_timeout: float,
    max_attempts: int,
    prune_cron: str,
    events: Path | None,
    init_schema: bool,
    stop_timeout: float,
) -> None:
    """Run extraction jobs from PostgreSQL until stopped (Ctrl-C or SIGTERM).

    Each job runs one memory directory: it checks the files out of the database, runs
    the memory agent on the pending turns as one machine would, and commits the files
    and cursors only if no other worker committed meanwhile.

    The worker outlives the database: when it is lost, the worker reconnects with
    backoff and listens again. It exits with an error only on what waiting cannot
    mend: a refused DSN or password, or a schema that is missing or too old (run
    `memdir queue migrate`). It logs at INFO to stderr (the `memdir.queue` logger).
    """
    from memdir.queue import QueueWorker, SchemaError, WorkerSettings, apply_schema

    _show_worker_log()
    if init_schema:
        apply_schema(dsn)
    model = choose_model(model_option, base_url)
    config = ExtractConfig(every_n_turns=every, team=team, memory_format=memory_format())
    jsonl = JsonlSink(events) if events is not None else None
    sink: Sink | None = fan_out(LoggingSink(), jsonl)
    settings = WorkerSettings(
        dsn=dsn,
        models=_Models(model, base_url),
        config=config,
        concurrency=concurrency,
        run_timeout=run_timeout,
        max_attempts=max_attempts,
        prune_cron=None if prune_cron == "off" else prune_cron,
        sink=sink,
        stop_timeout=stop_timeout,
    )
    if name:
        settings = dataclasses.replace(settings, name=name)
    try:
        asyncio.run(QueueWorker(settings).run(wait=True))
    except SchemaError as exc:
        fail(str(exc), EXIT_USAGE, kind="schema")
    finally:
        if jsonl is not None:
            jsonl.close()


def _show_worker_log() -> None:
    """The worker's INFO lines on stderr, unless the application configured logging
    itself (a handler on the root logger or on ``memdir.queue``)."""
    log = logging.getLogger("memdir.queue")
    if logging.getLogger().handlers or log.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    # procrastinate's own warnings in the same form, one line each: a lost connection
    # is expected (the worker says what it does about it), not a traceback.
    quiet = logging.StreamHandler()
    quiet.setFormatter(handler.formatter)
    quiet.addFilter(_one_line)
    procrastinate_log = logging.getLogger("procrastinate")
    procrastinate_log.addHandler(quiet)
    procrastinate_log.setLevel(logging.WARNING)
    procrastinate_log.propagate = False


def _one_line(record: logging.LogRecord) -> bool:
    """Drop a record's traceback, keeping its first line."""
    record.exc_info = None
    record.exc_text = None
    record.msg = " ".join(str(record.msg).split())
    return True


@click.group("queue")
def queue_group() -> None:
    """The extraction queue on PostgreSQL."""


@queue_group.command("init")
@db_option
@_one_line_errors
def queue_init_command(dsn: str) -> None:
    """Create procrastinate's and memdir's tables (safe to run again, and from many
    processes at once)."""
    _migrate(dsn)


@queue_group.command("migrate")
@db_option
@_one_line_errors
def queue_migrate_command(dsn: str) -> None:
    """Bring the queue's tables to this memdir's schema version, procrastinate's SQL
    migrations included (stop the workers first when procrastinate was upgraded)."""
    _migrate(dsn)


def _migrate(dsn: str) -> None:
    from memdir.queue import SCHEMA_VERSION, SchemaError, migrate_schema

    try:
        applied = migrate_schema(dsn)
    except SchemaError as exc:
        fail(str(exc), EXIT_USAGE, kind="schema")
    if applied:
        click.echo(f"memdir: applied {', '.join(applied)}")
    click.echo(f"memdir: the queue's tables are ready (schema version {SCHEMA_VERSION})")


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


@queue_group.command("status")
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
@_one_line_errors
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


@queue_group.command("retry")
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
@_one_line_errors
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


@queue_group.command("prune")
@db_option
@click.option(
    "--older-than",
    default="7d",
    show_default=True,
    help="Remove what ended longer ago than this (7d, 12h, 30m, 90s).",
)
@dry_run_option
@json_option
@_one_line_errors
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


@click.command("sync")
@db_option
@click.argument("dir_id")
@click.argument("target", type=click.Path(file_okay=False, path_type=Path))
@json_option
@_one_line_errors
def sync_command(dsn: str, dir_id: str, target: Path, as_json: bool) -> None:
    """Sync the memory directory DIR_ID in the database with the folder TARGET, both ways.

    What the folder changed since its last sync (a forget, an undo, a dream, a hand
    edit, a removed file) reaches the database, under the same generation check as a
    worker's commit; what the database changed reaches the folder. A file both sides
    changed keeps the database's content and is reported. TARGET can then be read as
    any memory directory (Claude Code's, for instance).
    """
    from memdir.queue import sync_dir

    result = sync_dir(dsn, dir_id, target)
    if as_json:
        print_json({**result.as_dict(), "target": str(target)})
        return
    click.echo(
        f"memdir: {dir_id} at generation {result.generation} synced with {target}: "
        f"{len(result.pushed)} to the database, {len(result.pulled)} to the folder, "
        f"{len(result.conflicts)} conflicts"
    )
    for path in result.conflicts:
        click.echo(f"  conflict: {path} changed on both sides; the database's kept")
