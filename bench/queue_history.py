"""A queue run's database cost against the length of the conversation, and what pruning
gives back.

A throwaway PostgreSQL (``memdir.queue.TemporaryPostgres``) holds the queue. For each
history length (``--turns``, default 10, 1,000 and 10,000 turns of a user line and an
answer, ~120 and ~250 characters, stamped as a Claude Code transcript is) one session
is recorded through ``QueueExtractor.on_turn_end`` and run once; then ``--runs`` more
turns are recorded and run one at a time by ``QueueWorker.extract`` with a scripted
model that saves nothing. Reported per length, medians over those runs:

* ``db_ms``: the run's time in the database (the snapshot's read and the commit; the
  model's time left out);
* ``rows``: message rows it read (``SessionOutcome.rows_read``);
* ``whole_ms`` / ``whole_rows``: what reading and decoding the whole session, as runs
  did before, costs at that length (for comparison).

Then, on the longest history's database, the tables' sizes and rows before and after
``memdir.queue.prune`` (``--jobs`` extra turns are run by a worker that keeps its
finished jobs, so there are jobs to prune), sizes after ``VACUUM FULL``.

    python bench/queue_history.py [--turns 10 1000 10000] [--runs 7] [--jobs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import statistics
import time
from typing import Any

import psycopg

from memdir.extract import ExtractConfig, TurnContext
from memdir.messages import Message
from memdir.models import ModelRequest
from memdir.queue import (
    QueueExtractor,
    QueueWorker,
    TemporaryPostgres,
    WorkerSettings,
    apply_schema,
    prune,
)
from memdir.queue._codec import decode_message
from memdir.testing import FunctionModel

CONFIG = ExtractConfig(skip_index=True, mode="standalone")
TABLES = ("memdir_messages", "memdir_runs", "procrastinate_jobs", "procrastinate_events")
_START = datetime.datetime(2026, 1, 5, 9, 0, tzinfo=datetime.UTC)


def _turn(k: int) -> list[Message]:
    at = _START + datetime.timedelta(minutes=2 * k)
    question = f"turn {k}: could you look at the failing build in module {k % 17} again? " * 2
    answer = (
        f"Looked at module {k % 17}: the build fails because the fixture path changed; "
        "I updated the import, re-ran the tests, and they pass now. Next, the docs. "
    ) * 2
    return [
        Message.user(question.strip(), uuid=f"u{k}", timestamp=at),
        Message.assistant(answer.strip(), uuid=f"a{k}", timestamp=at),
    ]


def _model() -> FunctionModel:
    async def answer(request: ModelRequest) -> str:
        return "Nothing to save."

    return FunctionModel(answer, name="function:quiet")


def _settings(dsn: str, **kw: Any) -> WorkerSettings:
    model = _model()
    return WorkerSettings(
        dsn=dsn,
        models=lambda _n: model,
        config=CONFIG,
        sweep_cron=None,
        prune_cron=None,
        **kw,
    )


def _whole_read(dsn: str, dir_id: str) -> tuple[float, int]:
    """Reading and decoding the whole session, as a run did before."""
    started = time.perf_counter()
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT body FROM memdir_messages WHERE dir_id = %s AND session = 's1' ORDER BY seq",
            (dir_id,),
        ).fetchall()
        for (body,) in rows:
            decode_message(body)
    return (time.perf_counter() - started) * 1000, len(rows)


def measure(dsn: str, turns: int, runs: int) -> dict[str, Any]:
    dir_id = f"dir-{turns}"
    conv = [m for k in range(1, turns + runs + 1) for m in _turn(k)]
    host = QueueExtractor(dsn, dir_id)
    host.on_turn_end(TurnContext(messages=conv[: 2 * turns], session_id="s1"))
    worker = QueueWorker(_settings(dsn))
    asyncio.run(worker.extract(dir_id))
    db_ms: list[float] = []
    rows: list[int] = []
    whole_ms: list[float] = []
    whole_rows = 0
    for k in range(turns + 1, turns + runs + 1):
        host.on_turn_end(TurnContext(messages=conv[: 2 * k], session_id="s1"))
        run = asyncio.run(worker.extract(dir_id))
        [outcome] = run.sessions
        assert outcome.outcome == "ran", outcome
        db_ms.append(run.db_seconds * 1000)
        rows.append(outcome.rows_read)
        ms, whole_rows = _whole_read(dsn, dir_id)
        whole_ms.append(ms)
    host.close()
    return {
        "turns": turns,
        "db_ms": round(statistics.median(db_ms), 1),
        "rows": int(statistics.median(rows)),
        "whole_ms": round(statistics.median(whole_ms), 1),
        "whole_rows": whole_rows,
    }


def _sizes(conn: psycopg.Connection[Any]) -> dict[str, dict[str, int]]:
    out = {}
    for table in TABLES:
        row = conn.execute(
            f"SELECT pg_total_relation_size('{table}'), (SELECT count(*) FROM {table})"
        ).fetchone()
        assert row is not None
        out[table] = {"bytes": int(row[0]), "rows": int(row[1])}
    return out


def pruning(dsn: str, turns: int, jobs: int) -> dict[str, Any]:
    """Jobs to prune (a worker keeping its finished ones), then the sizes around a prune."""
    dir_id = f"dir-{turns}"
    host = QueueExtractor(dsn, dir_id)
    worker = QueueWorker(_settings(dsn, keep_jobs=True))
    last = turns + 1_000_000
    for k in range(last, last + jobs):
        conv = [m for j in range(1, 3) for m in _turn(k + j)]
        host.on_turn_end(TurnContext(messages=conv, session_id=f"extra-{k}"))
        asyncio.run(worker.run(wait=False, install_signal_handlers=False))
    host.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        before = _sizes(conn)
        started = time.perf_counter()
        result = prune(dsn, keep_runs=0, keep_jobs=0)
        prune_ms = (time.perf_counter() - started) * 1000
        after = _sizes(conn)
        for table in TABLES:
            conn.execute(f"VACUUM FULL {table}")
        vacuumed = _sizes(conn)
    return {
        "turns": turns,
        "pruned": {"messages": result.messages, "runs": result.runs, "jobs": result.jobs},
        "prune_ms": round(prune_ms, 1),
        "before": before,
        "after": after,
        "after_vacuum_full": vacuumed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[10, 1_000, 10_000])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=20)
    args = parser.parse_args()
    with TemporaryPostgres() as server:
        rows = []
        for turns in args.turns:
            name = f"bench_{turns}"
            with psycopg.connect(server.dsn(), autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {name}")
            apply_schema(server.dsn(name))
            rows.append(measure(server.dsn(name), turns, args.runs))
        sizes = pruning(server.dsn(f"bench_{max(args.turns)}"), max(args.turns), args.jobs)
    print(json.dumps({"runs": rows, "prune": sizes}, indent=2))


if __name__ == "__main__":
    main()
