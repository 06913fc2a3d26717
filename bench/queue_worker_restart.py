"""``memdir worker`` processes across PostgreSQL restarts and outages: does every worker
survive, and how soon after the server is back is a new turn committed?

A throwaway PostgreSQL (durable, so a crash loses nothing acknowledged) and ``--workers``
``memdir worker`` processes (the offline model). Each round either restarts the server
(``pg_ctl stop -m immediate`` then start: every connection cut) or holds it down for
``--outage`` seconds, then records one turn in a new directory and times it to its
commit, polling the database. Reported per round: the pickup time, and whether every
worker is still running.

    python bench/queue_worker_restart.py [--workers 4] [--rounds 3] [--outage 5]
        [--worker-source DIR]

``--worker-source``: the ``src`` folder of another memdir checkout for the workers (to
measure an earlier version's workers against the same faults).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

import memdir
from memdir.extract import TurnContext
from memdir.messages import Message
from memdir.queue import QueueExtractor, TemporaryPostgres, migrate_schema

_WORKER = "import sys\nfrom memdir.cli import main\nsys.argv[0] = 'memdir'\nmain()\n"


def _poll(check: object, deadline: float) -> float | None:
    began = time.monotonic()
    while time.monotonic() - began < deadline:
        try:
            if check():  # type: ignore[operator]
                return time.monotonic() - began
        except psycopg.OperationalError:
            pass  # not back yet
        time.sleep(0.05)  # a poll interval
    return None


def _committed(dsn: str, dir_id: str) -> bool:
    with psycopg.connect(dsn, connect_timeout=2) as conn:
        row = conn.execute(
            "SELECT cursor_uuid FROM memdir_sessions WHERE dir_id = %s", (dir_id,)
        ).fetchone()
    return row is not None and row[0] == "a1"


def _registered(dsn: str) -> int:
    with psycopg.connect(dsn, connect_timeout=2) as conn:
        row = conn.execute("SELECT count(*) FROM procrastinate_workers").fetchone()
    return int(row[0]) if row else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--outage", type=float, default=5.0)
    parser.add_argument("--worker-source", type=Path)
    args = parser.parse_args()
    source = str(args.worker_source or Path(memdir.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": source}
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MEMDIR_MODEL"):
        env.pop(name, None)
    logs = Path(tempfile.mkdtemp(prefix="memdir-restart-"))
    with TemporaryPostgres(durable=True) as server:
        dsn = server.dsn()
        migrate_schema(dsn)
        env["MEMDIR_DB"] = dsn
        workers = [
            subprocess.Popen(
                [sys.executable, "-c", _WORKER, "worker", "--model", "offline", "--name", f"w{i}"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=(logs / f"w{i}.log").open("wb"),
            )
            for i in range(args.workers)
        ]
        try:
            if _poll(lambda: _registered(dsn) == args.workers, 60) is None:
                raise RuntimeError("the workers did not start")
            print("| Round | Fault | Server back → new turn committed | Workers running |")
            print("|---|---|---:|---:|")
            for n in range(args.rounds * 2):
                fault = "restart" if n % 2 == 0 else f"{args.outage:g} s outage"
                server.halt()
                if n % 2:
                    time.sleep(args.outage)  # the outage itself
                server.resume()
                back = time.monotonic()
                dir_id = f"r{n}"
                host = QueueExtractor(dsn, dir_id)
                conv = [
                    Message.user("remember this", uuid="u1"),
                    Message.assistant("ok", uuid="a1"),
                ]
                host.on_turn_end(TurnContext(messages=conv, session_id="s"))
                host.close()
                took = _poll(lambda d=dir_id: _committed(dsn, d), 60)
                took = None if took is None else time.monotonic() - back
                alive = sum(1 for w in workers if w.poll() is None)
                shown = f"{took:.2f} s" if took is not None else "not in 60 s"
                print(f"| {n + 1} | {fault} | {shown} | {alive} of {args.workers} |", flush=True)
        finally:
            for worker in workers:
                if worker.poll() is None:
                    worker.send_signal(signal.SIGTERM)
            codes = [w.wait(30) for w in workers]
            print(f"exit statuses after SIGTERM: {codes}; logs in {logs}")


if __name__ == "__main__":
    main()
