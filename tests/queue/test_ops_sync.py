"""``memdir sync`` both ways: what the folder changed reaches the database under the
generation check, what the database changed reaches the folder, and a forgotten memory
stays forgotten."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")

import psycopg
from click.testing import CliRunner

from memdir._cli import cli
from memdir._cli._queue import sync_command
from memdir.extract import TurnContext
from memdir.queue import QueueExtractor, QueueWorker, WorkerSettings, _sync, sync_dir
from memdir.queue._runs import merge_index
from memdir.queue._store import sha256
from tests.queue._helpers import CONFIG, conversation, one, saving_model

_INDEX = (
    b"- [Deploy](deploy.md) \xe2\x80\x94 deploys on Fridays\n- [Tabs](tabs.md) \xe2\x80\x94 tabs\n"
)


def _put(dsn: str, dir_id: str, files: dict[str, bytes], *, bump: bool = True) -> None:
    """Write files into the database as a worker's commit would: bump, then upsert."""
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO memdir_dirs (dir_id) VALUES (%s) ON CONFLICT DO NOTHING", (dir_id,)
        )
        if bump:
            conn.execute(
                "UPDATE memdir_dirs SET generation = generation + 1 WHERE dir_id = %s", (dir_id,)
            )
        for path, content in files.items():
            conn.execute(
                "INSERT INTO memdir_files (dir_id, path, content, sha256, mtime) "
                "VALUES (%s, %s, %s, %s, 1.0) ON CONFLICT (dir_id, path) DO UPDATE "
                "SET content = excluded.content, sha256 = excluded.sha256",
                (dir_id, path, content, sha256(content)),
            )


def _db_files(dsn: str, dir_id: str) -> dict[str, bytes]:
    with psycopg.connect(dsn) as conn:
        return {
            p: bytes(c)
            for p, c in conn.execute(
                "SELECT path, content FROM memdir_files WHERE dir_id = %s", (dir_id,)
            )
        }


def _folder(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and ".memdir" not in p.relative_to(root).parts
    }


def _seeded(dsn: str, tmp_path: Path) -> Path:
    _put(
        dsn,
        "d",
        {"MEMORY.md": _INDEX, "deploy.md": b"Deploys run on Fridays.\n", "tabs.md": b"Tabs.\n"},
    )
    folder = tmp_path / "m"
    sync_dir(dsn, "d", folder)
    return folder


def test_forget_then_sync_then_sync_keeps_the_memory_forgotten(pg_dsn: str, tmp_path: Path):
    folder = _seeded(pg_dsn, tmp_path)
    assert _folder(folder) == _db_files(pg_dsn, "d")
    # What `memdir forget` does: the file goes, and its index line.
    (folder / "deploy.md").unlink()
    (folder / "MEMORY.md").write_bytes(b"- [Tabs](tabs.md) \xe2\x80\x94 tabs\n")
    first = sync_dir(pg_dsn, "d", folder)
    assert first.pushed == ["MEMORY.md", "deploy.md"]
    assert first.conflicts == []
    assert "deploy.md" not in _db_files(pg_dsn, "d")
    assert b"deploy" not in _db_files(pg_dsn, "d")["MEMORY.md"]
    second = sync_dir(pg_dsn, "d", folder)
    assert (second.pushed, second.pulled) == ([], [])
    assert not (folder / "deploy.md").exists()
    assert _folder(folder) == _db_files(pg_dsn, "d")
    # A sync is a commit: the generation moved, so a run checked out before it is refused.
    with psycopg.connect(pg_dsn) as conn:
        assert one(conn, "SELECT generation FROM memdir_dirs WHERE dir_id = 'd'") == (2,)


def test_a_hand_edit_reaches_the_database(pg_dsn: str, tmp_path: Path):
    folder = _seeded(pg_dsn, tmp_path)
    (folder / "tabs.md").write_bytes(b"Spaces, after all.\n")
    (folder / "new.md").write_bytes(b"A new one.\n")
    result = sync_dir(pg_dsn, "d", folder)
    assert result.pushed == ["new.md", "tabs.md"]
    files = _db_files(pg_dsn, "d")
    assert files["tabs.md"] == b"Spaces, after all.\n"
    assert files["new.md"] == b"A new one.\n"


def test_a_database_change_reaches_the_folder(pg_dsn: str, tmp_path: Path):
    folder = _seeded(pg_dsn, tmp_path)
    _put(pg_dsn, "d", {"deploy.md": b"Deploys run on Thursdays now.\n"})
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("DELETE FROM memdir_files WHERE dir_id = 'd' AND path = 'tabs.md'")
    result = sync_dir(pg_dsn, "d", folder)
    assert result.pulled == ["deploy.md", "tabs.md"]
    assert result.pushed == []
    assert (folder / "deploy.md").read_bytes() == b"Deploys run on Thursdays now.\n"
    assert not (folder / "tabs.md").exists()


def test_both_sides_changed_keeps_the_database_and_reports(pg_dsn: str, tmp_path: Path):
    folder = _seeded(pg_dsn, tmp_path)
    (folder / "deploy.md").write_bytes(b"folder's version\n")
    _put(pg_dsn, "d", {"deploy.md": b"worker's version\n"})
    result = sync_dir(pg_dsn, "d", folder)
    assert result.conflicts == ["deploy.md"]
    assert _db_files(pg_dsn, "d")["deploy.md"] == b"worker's version\n"
    assert (folder / "deploy.md").read_bytes() == b"worker's version\n"


def test_the_index_merges_by_lines() -> None:
    base = b"- a\n- b\n"
    ours = b"- a\n- c\n"  # the folder forgot b and added c
    theirs = b"- a\n- b\n- d\n"  # a worker added d
    assert merge_index(base, ours, theirs) == b"- a\n- d\n- c\n"


def test_a_first_sync_keeps_the_folders_own_files(pg_dsn: str, tmp_path: Path):
    _put(pg_dsn, "d", {"deploy.md": b"db\n"})
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "mine.md").write_bytes(b"mine\n")
    (folder / "deploy.md").write_bytes(b"folder\n")
    result = sync_dir(pg_dsn, "d", folder)
    assert result.pushed == ["mine.md"]
    assert result.conflicts == ["deploy.md"]
    assert _db_files(pg_dsn, "d") == {"deploy.md": b"db\n", "mine.md": b"mine\n"}
    assert _folder(folder) == _db_files(pg_dsn, "d")


def test_a_worker_commit_racing_the_sync_is_not_lost(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    folder = _seeded(pg_dsn, tmp_path)
    host = QueueExtractor(pg_dsn, "d")
    host.on_turn_end(TurnContext(messages=conversation("s1", 1), session_id="s1"))
    host.close()
    (folder / "tabs.md").unlink()  # the folder forgets one memory
    model = saving_model()
    worker = QueueWorker(WorkerSettings(dsn=pg_dsn, models=lambda _n: model, config=CONFIG))
    real = _sync._folder_changes
    calls: list[int] = []

    def racing(*args: Any) -> Any:
        # Between the sync's read and its compare-and-bump, a worker commits.
        if not calls:
            assert asyncio.run(worker.extract("d")).committed
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(_sync, "_folder_changes", racing)
    result = sync_dir(pg_dsn, "d", folder)
    assert result.retries == 1
    assert result.pushed == ["tabs.md"]
    files = _db_files(pg_dsn, "d")
    assert "s1-1.md" in files  # the worker's memory survived the sync
    assert "tabs.md" not in files  # and the folder's forget reached the database
    assert (folder / "s1-1.md").is_file()
    assert _folder(folder) == files


def test_the_command_reports_both_directions(pg_dsn: str, tmp_path: Path):
    folder = _seeded(pg_dsn, tmp_path)
    (folder / "tabs.md").unlink()
    _put(pg_dsn, "d", {"deploy.md": b"changed\n"})
    result = CliRunner().invoke(sync_command, ["--db", pg_dsn, "d", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["pushed"], report["pulled"], report["conflicts"]) == (
        ["tabs.md"],
        ["deploy.md"],
        [],
    )
    text = CliRunner().invoke(sync_command, ["--db", pg_dsn, "d", str(folder)]).output
    assert "0 to the database, 0 to the folder, 0 conflicts" in text


def test_memdir_forget_and_undo_reach_the_database(pg_dsn: str, tmp_path: Path):
    folder = _seeded(pg_dsn, tmp_path)
    runner = CliRunner()
    forgot = runner.invoke(cli, ["forget", "deploy", "--memory-dir", str(folder), "--yes"])
    assert forgot.exit_code == 0, forgot.output
    assert not (folder / "deploy.md").exists()
    sync_dir(pg_dsn, "d", folder)
    assert "deploy.md" not in _db_files(pg_dsn, "d")
    assert b"deploy.md" not in _db_files(pg_dsn, "d")["MEMORY.md"]
    sync_dir(pg_dsn, "d", folder)
    assert not (folder / "deploy.md").exists()  # the second sync does not bring it back
    undone = runner.invoke(cli, ["forget", "--undo", "--memory-dir", str(folder), "--yes"])
    assert undone.exit_code == 0, undone.output
    result = sync_dir(pg_dsn, "d", folder)
    assert "deploy.md" in result.pushed
    assert _db_files(pg_dsn, "d")["deploy.md"] == b"Deploys run on Fridays.\n"
    assert b"deploy.md" in _db_files(pg_dsn, "d")["MEMORY.md"]


def test_an_emptied_file_counts_as_removed(pg_dsn: str, tmp_path: Path):
    folder = _seeded(pg_dsn, tmp_path)
    (folder / "tabs.md").write_bytes(b"\n")
    result = sync_dir(pg_dsn, "d", folder)
    assert result.pushed == ["tabs.md"]
    assert "tabs.md" not in _db_files(pg_dsn, "d")
    assert not (folder / "tabs.md").exists()


def test_a_run_checked_out_before_the_sync_is_refused_and_runs_again(pg_dsn: str, tmp_path: Path):
    folder = _seeded(pg_dsn, tmp_path)
    host = QueueExtractor(pg_dsn, "d")
    host.on_turn_end(TurnContext(messages=conversation("s1", 1), session_id="s1"))
    host.close()
    started, block = threading.Event(), threading.Event()
    model = saving_model(block=block, started=started)
    worker = QueueWorker(WorkerSettings(dsn=pg_dsn, models=lambda _n: model, config=CONFIG))
    runs: list[Any] = []
    thread = threading.Thread(target=lambda: runs.append(asyncio.run(worker.extract("d"))))
    thread.start()
    try:
        assert started.wait(30), "the run never reached the model"
        (folder / "tabs.md").unlink()  # forgotten while the run holds its checkout
        assert sync_dir(pg_dsn, "d", folder).pushed == ["tabs.md"]
    finally:
        block.set()
        thread.join(30)
    [late] = runs
    assert late.conflict  # the sync moved the generation: the late commit is refused
    assert "tabs.md" not in _db_files(pg_dsn, "d")
    with psycopg.connect(pg_dsn) as conn:
        assert one(conn, "SELECT count(*) FROM memdir_pending") == (1,)  # the turn is kept
    again = asyncio.run(worker.extract("d"))
    assert again.committed
    files = _db_files(pg_dsn, "d")
    assert "s1-1.md" in files
    assert "tabs.md" not in files  # the new run started from the synced files


def test_a_folder_made_by_export_then_synced_keeps_a_forget_and_a_worker_delete(
    pg_dsn: str, tmp_path: Path
):
    """A folder the one-way mirror made shares its history with the database: a later
    two-way sync neither brings back what the folder forgot nor what a worker deleted."""
    from memdir.queue import export_dir

    _put(
        pg_dsn,
        "d",
        {"MEMORY.md": _INDEX, "deploy.md": b"Deploys run on Fridays.\n", "tabs.md": b"Tabs.\n"},
    )
    folder = tmp_path / "m"
    export_dir(pg_dsn, "d", folder)
    (folder / "deploy.md").unlink()  # forgotten in the folder
    with psycopg.connect(pg_dsn) as conn:  # and a worker deletes the other memory
        conn.execute("UPDATE memdir_dirs SET generation = generation + 1 WHERE dir_id = 'd'")
        conn.execute("DELETE FROM memdir_files WHERE dir_id = 'd' AND path = 'tabs.md'")
    result = sync_dir(pg_dsn, "d", folder)
    assert result.conflicts == []
    assert "deploy.md" not in _db_files(pg_dsn, "d")
    assert "tabs.md" not in _db_files(pg_dsn, "d")
    assert not (folder / "tabs.md").exists()
    assert _folder(folder) == _db_files(pg_dsn, "d")
