"""``memdir worker``, ``memdir queue status|init`` and ``memdir sync`` against a real
database; the worker as its own process, with the offline model, stopped by SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import click
import pytest

pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

import psycopg
from click.testing import CliRunner

from memdir._cli._queue import queue_group, sync_command, worker_command
from memdir.extract import TurnContext
from memdir.messages import Message
from memdir.queue import QueueExtractor
from tests.queue._helpers import one, wait_drained


@click.group()
def _cli() -> None:
    """The commands as the real group will hold them."""


for _command in (worker_command, queue_group, sync_command):
    _cli.add_command(_command)

_WORKER = (
    "import sys\n"
    "from tests.queue.test_cli import _cli\n"
    "_cli.main(['worker', *sys.argv[1:]], prog_name='memdir')\n"
)


def test_status_init_and_sync(pg_dsn, tmp_path):
    runner = CliRunner()
    result = runner.invoke(_cli, ["queue", "init", "--db", pg_dsn])
    assert result.exit_code == 0, result.output
    host = QueueExtractor(pg_dsn, "dir-c")
    host.on_turn_end(TurnContext(messages=[Message.user("hi"), Message.assistant("hello")]))
    host.close()
    result = runner.invoke(_cli, ["queue", "status", "--json"], env={"MEMDIR_DB": pg_dsn})
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)
    assert status["jobs"] == {"todo": 1}
    assert status["pending_sessions"] == 1
    text = runner.invoke(_cli, ["queue", "status", "--db", pg_dsn]).output
    assert "queued   1" in text
    result = runner.invoke(_cli, ["sync", "--db", pg_dsn, "dir-c", str(tmp_path / "m"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["generation"] == 0


def test_worker_process_runs_the_queue_and_stops_on_sigterm(pg_dsn, tmp_path):
    host = QueueExtractor(pg_dsn, "dir-w")
    conv = [
        Message.user("Remember that the deploy runs on Fridays.", uuid="u1"),
        Message.assistant("Noted.", uuid="a1"),
    ]
    host.on_turn_end(TurnContext(messages=conv, session_id="s1"))
    host.close()
    env = {**os.environ, "MEMDIR_DB": pg_dsn, "PYTHONPATH": str(Path.cwd())}
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MEMDIR_MODEL"):
        env.pop(name, None)
    events = tmp_path / "events.jsonl"
    worker = subprocess.Popen(
        [sys.executable, "-c", _WORKER, "--model", "offline", "--events", str(events)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_drained(pg_dsn)
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err.decode()
    with psycopg.connect(pg_dsn) as conn:
        assert one(conn, "SELECT cursor_uuid FROM memdir_sessions") == ("a1",)
        paths = [p for (p,) in conn.execute("SELECT path FROM memdir_files")]
    assert any(p != "MEMORY.md" and p.endswith(".md") for p in paths), paths
    names = [json.loads(line)["event"] for line in events.read_text().splitlines()]
    assert "extract.started" in names
    assert "extract.committed" in names
    assert (
        CliRunner().invoke(_cli, ["sync", "--db", pg_dsn, "dir-w", str(tmp_path / "m")]).exit_code
        == 0
    )
    assert sorted(p.name for p in (tmp_path / "m").rglob("*.md")) == sorted(
        Path(p).name for p in paths
    )


def test_an_unreachable_database_is_one_line_and_exit_1():
    from memdir.queue._tempdb import _free_port

    dsn = f"host=127.0.0.1 port={_free_port()} user=postgres connect_timeout=5"
    result = CliRunner().invoke(_cli, ["queue", "status", "--db", dsn])
    assert result.exit_code == 1
    assert result.output.startswith("memdir: the database:")
    assert "Traceback" not in result.output
