"""``memdir worker``, ``memdir queue status|init|migrate|retry|prune`` and ``memdir sync``:
the PostgreSQL backend from the command line.

Every command imports :mod:`memdir.queue` only when it runs, so ``memdir --help`` and
the single-machine commands never need procrastinate or psycopg; a missing ``[postgres]``
extra is reported in one line by the command that needs it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path

import click

from memdir._cli._common import (
    EXIT_USAGE,
    base_url_option,
    choose_model,
    every_option,
    fail,
    json_option,
    model_option,
    print_json,
    team_option,
)
from memdir._cli._queue_common import db_option, one_line_errors
from memdir._cli._queue_ops import (
    queue_prune_command,
    queue_retry_command,
    queue_status_command,
)
from memdir._cli._run import memory_format
from memdir.errors import MemdirError
from memdir.extract import ExtractConfig
from memdir.models import Model, in_service, resolve_model
from memdir.telemetry import JsonlSink, LoggingSink, Sink, fan_out

__all__ = ["queue_group", "sync_command", "worker_command"]


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
@one_line_errors
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
@one_line_errors
def queue_init_command(dsn: str) -> None:
    """Create procrastinate's and memdir's tables (safe to run again, and from many
    processes at once)."""
    _migrate(dsn)


@queue_group.command("migrate")
@db_option
@one_line_errors
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


@click.command("sync")
@db_option
@click.argument("dir_id")
@click.argument("target", type=click.Path(file_okay=False, path_type=Path))
@json_option
@one_line_errors
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


for _command in (queue_status_command, queue_retry_command, queue_prune_command):
    queue_group.add_command(_command)
