"""The queue's fault drill: kills, a pause and a server restart under load, then the audit.

On a throwaway PostgreSQL (``memdir.queue.TemporaryPostgres``, its own: the drill restarts
it), ``--hosts`` host processes record ``--turns`` turns of ``--dirs`` directories x
``--sessions`` sessions through ``QueueExtractor.on_turn_end`` and log what each call
acknowledged; ``--workers`` ``memdir worker`` processes run the jobs against a scripted
model (a ``FakeAnthropicServer`` in this process: one memory per run, named after the
newest turn the run saw, ``--latency-ms`` of think time per request). Meanwhile the
drill

- SIGKILLs ``--kills`` busy workers, one at a time, and starts each again (as a service
  manager would); it knows the process is dead, so it ages that worker's heartbeat and
  the sweeper fails its job at once rather than ``--stalled-after`` seconds later;
- SIGSTOPs one busy worker for ``--pause`` seconds (its jobs are failed by the sweeper
  meanwhile; its late commit must be refused), timing every host call made meanwhile;
- restarts the server (``pg_ctl restart -m fast``) and times a new turn's pickup after;
- restarts any worker that exits on its own, and counts it.

Then it drains (sweeping every 2 s), stops the workers with SIGTERM (timed), and audits:
coverage gaps, overlapping runs, turns run twice, lost acknowledged turns (a turn
``on_turn_end`` reported recorded that is not covered), memories missing, stuck
directories and a ``memdir sync`` folder that differs from the database: all must be zero.
Figures: turns, kills, seconds, throughput, the slowest host call, worker exits, stop time.

    python bench/queue_drill.py [--dirs 8] [--sessions 2] [--turns 15] [--hosts 3]
        [--workers 3] [--kills 4] [--pause 8] [--no-restart] [--interval-ms 1000]
        [--json OUT]

Exit status 0 when every count that must be zero is.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from memdir.extract import TurnContext
from memdir.messages import Message, ToolUseBlock
from memdir.queue import (
    NOTIFY_CHANNEL,
    QueueExtractor,
    TemporaryPostgres,
    apply_schema,
    make_app,
    sweep,
    sync_dir,
)
from memdir.testing import FakeAnthropicServer

_DIR_RE = re.compile(r"The memory directory is `([^`]+)`")
_TURN_RE = re.compile(r"turn (\S+) (\d+)(?![\d])")
_MODEL = "claude-fake-1"
_RUN_ENDS = ("extract.finished", "queue.job_failed")
"""The worker's events that end a run its ``extract.started`` opened."""


@dataclass(frozen=True, kw_only=True)
class DrillOptions:
    dirs: int = 8
    sessions: int = 2
    turns: int = 15
    hosts: int = 3
    workers: int = 3
    concurrency: int = 2
    kills: int = 4
    pause: float = 8.0
    """Seconds one worker stays SIGSTOPped; 0: no pause."""
    restart: bool = True
    latency_ms: int = 50
    interval_ms: int = 1000
    """A host's pause between two rounds of turns (the conversation's pace)."""
    stalled_after: float = 15.0
    """The drill's sweeper: seconds without a heartbeat (the CLI worker beats every 10 s)."""
    drain_timeout: float = 180.0
    host_limit: float = 2.0
    """Seconds a host's ``on_turn_end`` may take; a slower call is a host waiting on a
    worker (or the database), counted as a problem."""


@dataclass(kw_only=True)
class DrillReport:
    options: dict[str, Any]
    turns_acknowledged: int = 0
    turns_not_recorded: int = 0
    host_errors: int = 0
    host_call_max_seconds: float = 0.0
    host_call_p99_seconds: float = 0.0
    slow_host_calls: list[str] = field(default_factory=list)
    """Host calls slower than ``host_limit``."""
    kills: int = 0
    pauses: int = 0
    paused_in_commit: bool = False
    """The paused worker was caught inside its commit, holding its directory's locks."""
    server_restarts: int = 0
    pickup_after_restart_seconds: float | None = None
    worker_exits: list[str] = field(default_factory=list)
    """Workers that exited on their own (not killed by the drill), with their status."""
    hosts_hung: int = 0
    """Host processes still running ``--drain-timeout`` seconds after the faults."""
    stop_max_seconds: float = 0.0
    """The slowest worker's exit after SIGTERM."""
    runs: int = 0
    seconds: float = 0.0
    drain_seconds: float = 0.0
    runs_per_second: float = 0.0
    gaps: list[str] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    lost_acknowledged: list[str] = field(default_factory=list)
    missing_memories: list[str] = field(default_factory=list)
    stuck_dirs: list[str] = field(default_factory=list)
    sync_differs: list[str] = field(default_factory=list)

    def problems(self) -> dict[str, int]:
        """Every count that must be zero."""
        return {
            "gaps": len(self.gaps),
            "overlaps": len(self.overlaps),
            "duplicates": len(self.duplicates),
            "lost_acknowledged": len(self.lost_acknowledged),
            "missing_memories": len(self.missing_memories),
            "stuck_dirs": len(self.stuck_dirs),
            "sync_differs": len(self.sync_differs),
            "slow_host_calls": len(self.slow_host_calls),
            "hosts_hung": self.hosts_hung,
            "worker_exits": len(self.worker_exits),
        }

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "problems": self.problems()}


# --- the scripted model ---------------------------------------------------------------


def _scripted(latency: float) -> Any:
    """The memory agent as a good one behaves here: one memory per run, named after the
    newest turn of the session it was shown, then "Saved." once the write went through."""

    def handler(body: dict[str, Any]) -> Message | str:
        if latency:
            time.sleep(latency)  # the model's think time, on the server's own thread
        last = body["messages"][-1]["content"]
        if isinstance(last, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in last
        ):
            return "Saved."
        sent = json.dumps(body)
        where = _DIR_RE.search(sent)
        turns = [(m.group(1), int(m.group(2))) for m in _TURN_RE.finditer(sent)]
        if where is None or not turns:
            return "Nothing to save."
        session = turns[-1][0]
        k = max(n for s, n in turns if s == session)
        text = (
            f"---\nname: {session}-{k}\ndescription: turn {k} of {session}\ntype: project\n"
            f"---\nTurn {k} of {session}.\n"
        )
        return Message(
            role="assistant",
            content=(
                ToolUseBlock(
                    id="w1",
                    name="Write",
                    input={"file_path": f"{where.group(1)}/{session}-{k}.md", "content": text},
                ),
            ),
        )

    return handler


# --- the host processes ---------------------------------------------------------------


def conversation(session: str, turns: int) -> list[Message]:
    out: list[Message] = []
    for k in range(1, turns + 1):
        out.append(Message.user(f"turn {session} {k}", uuid=f"{session}-u{k}"))
        out.append(Message.assistant(f"noted {k}", uuid=f"{session}-a{k}"))
    return out


def host_main(
    dsn: str, dirs: Sequence[str], sessions: int, turns: int, interval: float, log: Path
) -> None:
    """One host process: every turn of its directories' sessions, round by round; each
    call's outcome and duration as one JSON line, flushed (a host never waits on a
    worker, and what it acknowledged must end up covered)."""
    hosts = {d: QueueExtractor(dsn, d) for d in dirs}
    convs = {
        (d, f"{d}.s{s}"): conversation(f"{d}.s{s}", turns) for d in dirs for s in range(sessions)
    }
    with log.open("a", encoding="utf-8") as out:
        for k in range(1, turns + 1):
            for (d, session), conv in convs.items():
                start = time.monotonic()
                error = None
                try:
                    recorded = hosts[d].on_turn_end(
                        TurnContext(messages=conv[: 2 * k], session_id=session)
                    )
                except Exception as exc:  # the host promises not to raise; count it if it does
                    recorded, error = None, f"{type(exc).__name__}: {exc}"
                line = {
                    "dir": d,
                    "session": session,
                    "turn": k,
                    "acked": recorded is not None,
                    "seconds": round(time.monotonic() - start, 4),
                    "error": error,
                }
                out.write(json.dumps(line) + "\n")
                out.flush()
            if interval:
                time.sleep(interval)  # the conversation's pace
    for host in hosts.values():
        host.close()


# --- the drill ------------------------------------------------------------------------


class _Worker:
    """One ``memdir worker`` slot: its process, restarted when it dies."""

    def __init__(self, index: int, dsn: str, base_url: str, logs: Path, concurrency: int) -> None:
        self.name = f"w{index}"
        self.dsn = dsn
        self.base_url = base_url
        self.logs = logs
        self.concurrency = concurrency
        self.generation = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log: Path = logs

    def start(self) -> None:
        self.generation += 1
        self.log = self.logs / f"{self.name}.{self.generation}.jsonl"
        err = (self.logs / f"{self.name}.{self.generation}.err").open("wb")
        with err:  # the child has its own copy
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "memdir",
                    "worker",
                    "--db",
                    self.dsn,
                    "--model",
                    f"anthropic:{_MODEL}",
                    "--base-url",
                    self.base_url,
                    "--name",
                    f"{self.name}.{self.generation}",
                    "--events",
                    str(self.log),
                    "--concurrency",
                    str(self.concurrency),
                ],
                env=_worker_env(),
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    def busy_dirs(self) -> list[str]:
        """Directories this process started a run of and has not finished."""
        opened: dict[str, int] = {}
        with contextlib.suppress(OSError):
            for line in self.log.read_text().splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                dir_id = record.get("fields", {}).get("dir_id", "")
                if record["event"] == "extract.started":
                    opened[dir_id] = opened.get(dir_id, 0) + 1
                elif record["event"] in _RUN_ENDS:
                    opened[dir_id] = opened.get(dir_id, 0) - 1
        return [d for d, n in opened.items() if n > 0]


def _worker_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "OPENAI_", "MEMDIR_"))
    }
    env.update(ANTHROPIC_API_KEY="test", NO_PROXY="127.0.0.1,localhost")
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    return env


def _age_heartbeats(dsn: str, dirs: Sequence[str]) -> None:
    """The killed worker's jobs' worker: dead, as the drill knows; age its heartbeat so the
    sweeper fails them now."""
    if not dirs:
        return
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE procrastinate_workers SET last_heartbeat = now() - interval '1 hour' "
            "WHERE id IN (SELECT worker_id FROM procrastinate_jobs WHERE status = 'doing' "
            "AND lock = ANY(%s))",
            (list(dirs),),
        )


def _sweep(dsn: str, stalled_after: float) -> None:
    async def go() -> None:
        app = make_app(dsn)
        async with app.open_async():
            await sweep(app, dsn, stalled_after=stalled_after)

    with contextlib.suppress(psycopg.Error):
        asyncio.run(go())


def _drained(dsn: str) -> bool:
    with contextlib.suppress(psycopg.Error), psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM memdir_pending), (SELECT count(*) FROM "
            "procrastinate_jobs WHERE status IN ('todo', 'doing') AND task_name = 'memdir.extract')"
        ).fetchone()
        return row is not None and row[0] == 0 and row[1] == 0
    return False


def _say(line: str) -> None:
    print(f"drill: {line}", file=sys.stderr, flush=True)


def _writing_ports(conn: psycopg.Connection[Any]) -> set[int]:
    """Client ports of the connections inside a transaction that wrote memdir's tables
    (a worker's commit; procrastinate's own short transactions write too, and are not
    what a frozen commit is about)."""
    return {
        int(port)
        for (port,) in conn.execute(
            "SELECT client_port FROM pg_stat_activity WHERE backend_xid IS NOT NULL "
            "AND datname = current_database() AND pid <> pg_backend_pid() "
            "AND (query LIKE '%memdir\\_%' OR query LIKE '%pg_notify%') "
            "AND query NOT LIKE '%procrastinate%'"
        )
        if port is not None
    }


def _socket_owners(ports: set[int], pids: Sequence[int]) -> dict[int, int]:
    """Local port → which of ``pids`` holds that TCP socket, for ``ports`` (Linux /proc)."""
    by_inode: dict[str, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                port = int(fields[1].rsplit(":", 1)[1], 16)
                if port in ports:
                    by_inode[f"socket:[{fields[9]}]"] = port
    owners: dict[int, int] = {}
    if not by_inode:
        return owners
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                held = by_inode.get(os.readlink(fd))
                if held is not None:
                    owners[held] = pid
    return owners


def _next_commit(dsn: str, timeout: float) -> None:
    """Wait for a worker's next commit (its NOTIFY), at most ``timeout`` seconds."""
    with contextlib.suppress(psycopg.Error), psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
        for _ in conn.notifies(timeout=timeout, stop_after=1):
            pass


class Drill:
    def __init__(
        self, options: DrillOptions, dsn: str, work: Path, server: TemporaryPostgres | None
    ) -> None:
        self.o = options
        self.dsn = dsn
        self.work = work
        self.server = server
        self.report = DrillReport(options=asdict(options))
        self.slots: list[_Worker] = []
        self.expected_exit: set[int] = set()

    def _supervise(self) -> None:
        """Start again any worker that exited; count the ones the drill did not kill."""
        for slot in self.slots:
            process = slot.process
            if process is None or process.poll() is None:
                continue
            if process.pid not in self.expected_exit:
                self.report.worker_exits.append(
                    f"{slot.name}.{slot.generation}: exit {process.returncode}"
                )
            slot.start()

    def _wait(self, seconds: float, hosts: Sequence[subprocess.Popen[bytes]] = ()) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._supervise()
            time.sleep(0.1)  # the drill's own clock: it paces faults, it waits on no result

    def _busy(self, timeout: float = 20.0) -> tuple[_Worker, list[str]] | None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for slot in self.slots:
                dirs = slot.busy_dirs()
                if dirs and slot.process is not None and slot.process.poll() is None:
                    return slot, dirs
            self._wait(0.05)
        return None

    def run(self, base_url: str) -> DrillReport:
        o, report = self.o, self.report
        started = time.monotonic()
        self.slots = [
            _Worker(i, self.dsn, base_url, self.work, o.concurrency) for i in range(o.workers)
        ]
        for slot in self.slots:
            slot.start()
        names = [f"d{i:02d}" for i in range(o.dirs)]
        host_logs = [self.work / f"host{i}.jsonl" for i in range(o.hosts)]
        hosts = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--role",
                    "host",
                    "--dsn",
                    self.dsn,
                    "--host-dirs",
                    ",".join(names[i :: o.hosts]),
                    "--sessions",
                    str(o.sessions),
                    "--turns",
                    str(o.turns),
                    "--interval-ms",
                    str(o.interval_ms),
                    "--host-log",
                    str(host_logs[i]),
                ],
                env=_worker_env(),
            )
            for i in range(o.hosts)
        ]
        for _ in range(o.kills):
            found = self._busy()
            if found is None:
                break
            slot, dirs = found
            assert slot.process is not None
            self.expected_exit.add(slot.process.pid)
            slot.process.send_signal(signal.SIGKILL)
            slot.process.wait()
            report.kills += 1
            _age_heartbeats(self.dsn, dirs)
            _sweep(self.dsn, o.stalled_after)
            self._wait(0.5)
        _say(f"{report.kills} kills done")
        if o.pause > 0:
            # Frozen inside its commit (holding the directory's row locks) if the drill
            # catches one there within 10 s, else frozen wherever it is busy.
            paused = self._committing(10.0)
            report.paused_in_commit = paused is not None
            if paused is None:
                found = self._busy()
                paused = found[0] if found is not None else None
                if paused is not None and paused.process is not None:
                    paused.process.send_signal(signal.SIGSTOP)
            if paused is not None:
                slot = paused
                assert slot.process is not None
                report.pauses += 1
                _say(f"{slot.name} paused{' inside its commit' * report.paused_in_commit}")
                try:
                    end = time.monotonic() + o.pause
                    while time.monotonic() < end:
                        _sweep(self.dsn, o.stalled_after)
                        self._wait(min(2.0, max(0.0, end - time.monotonic())))
                finally:
                    slot.process.send_signal(signal.SIGCONT)
        if o.restart and self.server is not None:
            _say("restarting the server")
            self.server.restart()
            report.server_restarts += 1
            report.pickup_after_restart_seconds = self._pickup()
        _say("waiting for the hosts")
        host_end = time.monotonic() + o.drain_timeout
        for host in hosts:
            while host.poll() is None and time.monotonic() < host_end:
                self._wait(0.2)
            if host.poll() is None:
                host.kill()
                host.wait()
                report.hosts_hung += 1
        _say("draining")
        drain_start = time.monotonic()
        while not _drained(self.dsn) and time.monotonic() - drain_start < o.drain_timeout:
            _sweep(self.dsn, o.stalled_after)
            self._supervise()
            _next_commit(self.dsn, 2.0)
        report.drain_seconds = round(time.monotonic() - drain_start, 1)
        report.seconds = round(time.monotonic() - started, 1)
        report.stop_max_seconds = self._stop()
        self._read_hosts(host_logs)
        self._audit(names)
        report.runs_per_second = round(report.runs / report.seconds, 2) if report.seconds else 0.0
        return report

    def _committing(self, timeout: float) -> _Worker | None:
        """A worker frozen inside a transaction that wrote (its commit: it holds row
        locks), found from the server's view of its connections, mapped to the process
        by port; stopped, and checked still inside it once stopped (else let go, and
        another try)."""
        end = time.monotonic() + timeout
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while time.monotonic() < end:
                ports = _writing_ports(conn)
                pids = [
                    w.process.pid
                    for w in self.slots
                    if w.process is not None and w.process.poll() is None
                ]
                owners = _socket_owners(ports, pids) if ports else {}
                for slot in self.slots:
                    process = slot.process
                    if process is None or process.poll() is not None:
                        continue
                    if process.pid not in owners.values():
                        continue
                    process.send_signal(signal.SIGSTOP)
                    mine = {
                        p
                        for p, pid in _socket_owners(_writing_ports(conn), [process.pid]).items()
                        if pid == process.pid
                    }
                    if mine:
                        return slot
                    process.send_signal(signal.SIGCONT)  # it committed before it stopped
                time.sleep(0.002)  # polling the server's view, not waiting on a result
        return None

    def _pickup(self) -> float | None:
        """A new turn after the server's return: seconds until a worker committed it."""
        start = time.monotonic()
        host = QueueExtractor(self.dsn, "probe")
        try:
            while (
                host.on_turn_end(
                    TurnContext(messages=conversation("probe.s0", 1), session_id="probe.s0")
                )
                is None
            ):
                if time.monotonic() - start > 30:
                    return None
                self._wait(0.2)
        finally:
            host.close()
        while time.monotonic() - start < 60:
            with contextlib.suppress(psycopg.Error), psycopg.connect(self.dsn) as conn:
                if conn.execute("SELECT 1 FROM memdir_runs WHERE dir_id = 'probe'").fetchone():
                    return round(time.monotonic() - start, 2)
            self._wait(0.1)
        return None

    def _stop(self) -> float:
        slowest = 0.0
        for slot in self.slots:
            process = slot.process
            if process is None or process.poll() is not None:
                continue
            start = time.monotonic()
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                self.report.worker_exits.append(f"{slot.name}: did not stop within 30 s of SIGTERM")
            slowest = max(slowest, time.monotonic() - start)
        return round(slowest, 2)

    def _read_hosts(self, logs: Sequence[Path]) -> None:
        self.acked: dict[tuple[str, str], int] = {}
        durations: list[float] = []
        for log in logs:
            with contextlib.suppress(OSError):
                for line in log.read_text().splitlines():
                    record = json.loads(line)
                    durations.append(float(record["seconds"]))
                    if record["seconds"] > self.o.host_limit:
                        self.report.slow_host_calls.append(
                            f"{record['session']} turn {record['turn']}: {record['seconds']} s"
                        )
                    if record["error"]:
                        self.report.host_errors += 1
                    if record["acked"]:
                        self.report.turns_acknowledged += 1
                        key = (record["dir"], record["session"])
                        self.acked[key] = max(self.acked.get(key, 0), int(record["turn"]))
                    else:
                        self.report.turns_not_recorded += 1
        if durations:
            durations.sort()
            self.report.host_call_max_seconds = round(durations[-1], 3)
            self.report.host_call_p99_seconds = round(
                durations[min(len(durations) - 1, int(len(durations) * 0.99))], 3
            )

    def _audit(self, names: Sequence[str]) -> None:
        report = self.report
        with psycopg.connect(self.dsn) as conn:
            runs = conn.execute(
                "SELECT dir_id, session, generation, from_seq, to_seq, started_at, committed_at, "
                "job_id FROM memdir_runs WHERE dir_id <> 'probe' ORDER BY dir_id, session, from_seq"
            ).fetchall()
            shipped = {
                (d, s): int(n)
                for d, s, n in conn.execute(
                    "SELECT dir_id, session, shipped_seq FROM memdir_sessions"
                )
            }
            files = {(d, p) for d, p in conn.execute("SELECT dir_id, path FROM memdir_files")}
            stuck = conn.execute(
                "SELECT dir_id FROM memdir_pending UNION SELECT lock FROM procrastinate_jobs "
                "WHERE status IN ('todo', 'doing') AND task_name = 'memdir.extract'"
            ).fetchall()
        report.runs = len(runs)
        report.stuck_dirs = sorted(str(d) for (d,) in stuck)
        by_session: dict[tuple[str, str], list[tuple[int, int]]] = {}
        # One interval per job: a job's sessions run side by side and commit one by one.
        spans: dict[str, dict[tuple[str, int], tuple[Any, Any]]] = {}
        for d, s, gen, low, high, start, end, job in runs:
            by_session.setdefault((d, s), []).append((int(low), int(high)))
            span = ("job", int(job)) if job is not None else ("generation", int(gen))
            first, last = spans.setdefault(d, {}).get(span, (start, end))
            spans[d][span] = (min(first, start), max(last, end))
        for dir_id, jobs in spans.items():
            ordered = sorted(jobs.values())
            for (_, end), (start, _) in itertools.pairwise(ordered):
                if start < end:
                    report.overlaps.append(f"{dir_id}: a run started at {start}, before {end}")
        for key in sorted(set(by_session) | set(self.acked)):
            dir_id, session = key
            expected = 1
            seen: set[int] = set()
            for low, high in sorted(by_session.get(key, [])):
                if low > expected:
                    report.gaps.append(
                        f"{dir_id}/{session}: messages {expected}..{low - 1} never run"
                    )
                elif low < expected:
                    report.duplicates.append(
                        f"{dir_id}/{session}: messages {low}..{expected - 1} run twice"
                    )
                expected = max(expected, high + 1)
                if high in seen:
                    report.duplicates.append(f"{dir_id}/{session}: turn {high // 2} saved twice")
                seen.add(high)
                if (dir_id, f"{session}-{high // 2}.md") not in files:
                    report.missing_memories.append(f"{dir_id}/{session}: turn {high // 2}")
            covered = expected - 1
            if covered < shipped.get(key, 0):
                report.gaps.append(
                    f"{dir_id}/{session}: covered {covered} of {shipped[key]} shipped"
                )
            acked = self.acked.get(key, 0)
            if 2 * acked > covered:
                report.lost_acknowledged.append(
                    f"{dir_id}/{session}: turn {acked} acknowledged, "
                    f"covered up to turn {covered // 2}"
                )
        for dir_id in names:
            folder = self.work / "sync" / dir_id
            with contextlib.suppress(psycopg.Error):
                sync_dir(self.dsn, dir_id, folder)
            with psycopg.connect(self.dsn) as conn:
                stored = {
                    p: bytes(c)
                    for p, c in conn.execute(
                        "SELECT path, content FROM memdir_files WHERE dir_id = %s", (dir_id,)
                    )
                }
            mirrored = {
                p.relative_to(folder).as_posix(): p.read_bytes()
                for p in folder.rglob("*")
                if p.is_file() and ".memdir" not in p.relative_to(folder).parts
            }
            if mirrored != stored:
                report.sync_differs.append(dir_id)


def drill(
    options: DrillOptions, *, dsn: str | None = None, work: Path | None = None
) -> DrillReport:
    """Run the drill; on ``dsn`` (a database with the schema; no server restart then) or on
    a TemporaryPostgres of its own."""
    with contextlib.ExitStack() as stack:
        if work is None:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="memdir-drill-")))
        server = None
        if dsn is None:
            server = stack.enter_context(TemporaryPostgres())
            with psycopg.connect(server.dsn(), autocommit=True) as conn:
                conn.execute("CREATE DATABASE drill")
            dsn = server.dsn("drill")
            apply_schema(dsn)
        fake = stack.enter_context(
            FakeAnthropicServer(handler=_scripted(options.latency_ms / 1000), model=_MODEL)
        )
        return Drill(options, dsn, work, server).run(fake.base_url)
    raise AssertionError("unreachable")


def _summary(report: DrillReport) -> Iterator[str]:
    yield (
        f"turns {report.turns_acknowledged} acknowledged, {report.turns_not_recorded} not "
        f"recorded, {report.host_errors} host errors; host call max "
        f"{report.host_call_max_seconds} s, p99 {report.host_call_p99_seconds} s"
    )
    yield (
        f"faults: {report.kills} kills, {report.pauses} pauses "
        f"({'inside a commit' if report.paused_in_commit else 'not inside a commit'}), "
        f"{report.server_restarts} server "
        f"restarts; pickup after restart {report.pickup_after_restart_seconds} s; worker exits "
        f"on their own: {len(report.worker_exits)}; slowest stop on SIGTERM "
        f"{report.stop_max_seconds} s"
    )
    yield (
        f"runs {report.runs} in {report.seconds} s ({report.runs_per_second}/s), "
        f"drain {report.drain_seconds} s"
    )
    for name, count in report.problems().items():
        yield f"{name:18} {count}"
    for name in report.problems():
        found = getattr(report, name)
        for line in found[:10] if isinstance(found, list) else ():
            yield f"  {name}: {line}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--role", choices=("drill", "host"), default="drill", help=argparse.SUPPRESS
    )
    parser.add_argument("--dsn", help=argparse.SUPPRESS)
    parser.add_argument("--host-dirs", help=argparse.SUPPRESS)
    parser.add_argument("--host-log", type=Path, help=argparse.SUPPRESS)
    defaults = DrillOptions()
    parser.add_argument("--dirs", type=int, default=defaults.dirs)
    parser.add_argument("--sessions", type=int, default=defaults.sessions)
    parser.add_argument("--turns", type=int, default=defaults.turns)
    parser.add_argument("--hosts", type=int, default=defaults.hosts)
    parser.add_argument("--workers", type=int, default=defaults.workers)
    parser.add_argument("--concurrency", type=int, default=defaults.concurrency)
    parser.add_argument("--kills", type=int, default=defaults.kills)
    parser.add_argument("--pause", type=float, default=defaults.pause)
    parser.add_argument("--no-restart", dest="restart", action="store_false")
    parser.add_argument("--latency-ms", type=int, default=defaults.latency_ms)
    parser.add_argument("--interval-ms", type=int, default=defaults.interval_ms)
    parser.add_argument("--stalled-after", type=float, default=defaults.stalled_after)
    parser.add_argument("--drain-timeout", type=float, default=defaults.drain_timeout)
    parser.add_argument("--host-limit", type=float, default=defaults.host_limit)
    parser.add_argument("--json", type=Path, help="Write the full report here.")
    parser.add_argument(
        "--work", type=Path, help="Keep the hosts' and workers' logs in this folder."
    )
    args = parser.parse_args(argv)
    if args.role == "host":
        host_main(
            args.dsn,
            args.host_dirs.split(","),
            args.sessions,
            args.turns,
            args.interval_ms / 1000,
            args.host_log,
        )
        return 0
    options = DrillOptions(
        dirs=args.dirs,
        sessions=args.sessions,
        turns=args.turns,
        hosts=args.hosts,
        workers=args.workers,
        concurrency=args.concurrency,
        kills=args.kills,
        pause=args.pause,
        restart=args.restart,
        latency_ms=args.latency_ms,
        interval_ms=args.interval_ms,
        stalled_after=args.stalled_after,
        drain_timeout=args.drain_timeout,
        host_limit=args.host_limit,
    )
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
    report = drill(options, work=args.work)
    for line in _summary(report):
        print(line)
    if args.json is not None:
        args.json.write_text(json.dumps(report.as_dict(), indent=1) + "\n")
    return 0 if not any(report.problems().values()) else 1


if __name__ == "__main__":
    sys.exit(main())
