"""Conversations, a model of fixed latency, and process entry points for the queue tests.

Top-level functions only: worker and producer processes are started with ``spawn`` and
import this module by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psycopg

from memdir.extract import ExtractConfig, TurnContext
from memdir.messages import Message, ToolUseBlock
from memdir.models import ModelRequest
from memdir.queue import NOTIFY_CHANNEL
from memdir.testing import FunctionModel

_DIR_RE = re.compile(r"The memory directory is `([^`]+)`")
_TURN_RE = re.compile(r"^turn (\S+) (\d+)$")

CONFIG = ExtractConfig(skip_index=True, mode="standalone")


def conversation(session: str, turns: int) -> list[Message]:
    """``turns`` turns of one session: a user line and an answer each, stable uuids."""
    out: list[Message] = []
    for k in range(1, turns + 1):
        out.append(Message.user(f"turn {session} {k}", uuid=f"{session}-u{k}"))
        out.append(Message.assistant(f"noted {k}", uuid=f"{session}-a{k}"))
    return out


def memory_name(session: str, turn: int) -> str:
    return f"{session}-{turn}.md"


def request_texts(request: ModelRequest) -> Iterable[str]:
    """The texts of ``request``: its system prompt (where memdir's own request names the
    memory directory), then each message's."""
    # memdir's own request names the memory directory in its system prompt.
    system = request.system
    if isinstance(system, str):
        yield system
    elif system:
        yield "".join(str(block.get("text", "")) for block in system)
    for message in request.messages:
        yield message.text


def saving_model(
    latency: float = 0.0, block: Any = None, started: Any = None, block_on: str | None = None
) -> FunctionModel:
    """Saves one memory per run, named after the newest turn the run sees.

    ``latency``: the model's fixed think time. ``started`` (a multiprocessing Event) is
    set when a request arrives; ``block`` (another) makes the model wait for it first,
    so a test can kill or outrun the process mid-run. ``block_on``: only the requests
    for sessions of that directory (``{dir}.s{n}``) are held; the others go through.
    """

    async def answer(request: ModelRequest) -> Message | str:
        texts = list(request_texts(request))
        turn = None
        for text in texts:
            for line in text.splitlines():
                if found := _TURN_RE.match(line.strip()):
                    turn = (found.group(1), int(found.group(2)))
        held = block_on is None or (turn is not None and turn[0].startswith(f"{block_on}."))
        if held and started is not None:
            started.set()
        if held and block is not None:
            await asyncio.to_thread(block.wait)
        if latency:
            await asyncio.sleep(latency)  # the model's think time, not a wait on us
        if any(m.role == "assistant" and m.tool_uses for m in request.messages):
            return "Saved."
        where = next((m.group(1) for t in texts if (m := _DIR_RE.search(t))), None)
        if where is None or turn is None:
            return "Nothing to save."
        session, k = turn
        body = (
            f"---\nname: {session}-{k}\ndescription: turn {k} of {session}\ntype: project\n"
            f"---\nTurn {k} of {session}.\n"
        )
        use = ToolUseBlock(
            id="w1",
            name="Write",
            input={"file_path": f"{where}/{memory_name(session, k)}", "content": body},
        )
        return Message(role="assistant", content=(use,))

    return FunctionModel(answer, name="function:saver")


def produce(dsn: str, dirs: list[str], sessions: int, turns: int, first: int = 1) -> None:
    """One producer process: every turn of its directories' sessions, in order, from
    turn ``first`` (the ones before it were recorded already)."""
    from memdir.queue import QueueExtractor

    hosts = {d: QueueExtractor(dsn, d) for d in dirs}
    convs = {(d, s): conversation(f"{d}.s{s}", turns) for d in dirs for s in range(sessions)}
    for k in range(first, turns + 1):
        for (d, s), conv in convs.items():
            recorded = hosts[d].on_turn_end(
                TurnContext(messages=conv[: 2 * k], session_id=f"{d}.s{s}")
            )
            if recorded is None:
                raise RuntimeError(f"turn {k} of {d}.s{s} was not recorded")
    for host in hosts.values():
        host.close()


def work(
    dsn: str,
    name: str,
    latency: float = 0.0,
    concurrency: int = 4,
    wait: bool = True,
    block: Any = None,
    started: Any = None,
    scratch: str | None = None,
    block_on: str | None = None,
    events: str | None = None,
) -> None:
    """One worker process, until SIGTERM (``wait``) or until the queue is empty;
    ``scratch``: where its working copies go (a killed worker cannot remove its own);
    ``events``: a JSONL file for its telemetry (each line written whole, so what it
    reported survives a SIGKILL)."""
    from memdir.queue import QueueWorker, WorkerSettings
    from memdir.telemetry import JsonlSink

    model = saving_model(latency, block=block, started=started, block_on=block_on)
    settings = WorkerSettings(
        dsn=dsn,
        models=lambda _name: model,
        config=CONFIG,
        name=name,
        concurrency=concurrency,
        poll_interval=0.5,
        heartbeat_interval=0.5,
        scratch=Path(scratch) if scratch is not None else None,
        sink=JsonlSink(events) if events is not None else None,
    )
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    asyncio.run(QueueWorker(settings).run(wait=wait))


def one(conn: Any, sql: str, params: Any = ()) -> tuple[Any, ...]:
    """The single row a query returns (failing the test when there is none)."""
    row = conn.execute(sql, params).fetchone()
    assert row is not None, sql
    return tuple(row)


def drained(conn: Any) -> bool:
    """Nothing pending and no extract job waiting or running."""
    (pending,) = one(conn, "SELECT count(*) FROM memdir_pending")
    (jobs,) = one(conn, "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')")
    return bool(pending == 0 and jobs == 0)


async def run_until_drained(worker: Any, dsn: str, deadline: float = 60.0) -> None:
    """Run ``worker`` in this loop until the queue is drained, woken by each commit's
    NOTIFY (a retry's job becomes runnable only after the failed one ends, so a worker
    that stops once it has caught up would stop too early), then stop it."""
    task = asyncio.create_task(worker.run(wait=True, install_signal_handlers=False))
    try:
        end = time.monotonic() + deadline
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
            while True:
                async with await psycopg.AsyncConnection.connect(dsn) as check:
                    (pending,) = await (
                        await check.execute("SELECT count(*) FROM memdir_pending")
                    ).fetchone() or (0,)
                    (jobs,) = await (
                        await check.execute(
                            "SELECT count(*) FROM procrastinate_jobs "
                            "WHERE status IN ('todo', 'doing')"
                        )
                    ).fetchone() or (0,)
                if pending == 0 and jobs == 0:
                    return
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError("the queue did not drain in time")
                async for _ in conn.notifies(timeout=min(left, 2.0), stop_after=1):
                    pass
                if task.done():
                    task.result()  # the worker died: say why
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def wait_drained(dsn: str, deadline: float = 90.0) -> None:
    """Block until nothing is pending or queued, woken by each commit's NOTIFY."""
    end = time.monotonic() + deadline
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
        while not drained(conn):
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError("the queue did not drain in time")
            for _ in conn.notifies(timeout=min(left, 5.0), stop_after=1):
                pass
