"""`memdir sync` mirrors a directory's `MEMORY.md` under the lock every other writer of an
index takes, so it never lands between another writer's read and write."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from memdir.extract import TurnContext
from memdir.queue import QueueExtractor, QueueWorker, WorkerSettings, _store, export_dir
from memdir.store import file_lock
from tests.queue._helpers import CONFIG, conversation, saving_model


def test_the_mirrored_index_is_written_under_its_lock(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = QueueExtractor(pg_dsn, "dir-a")
    host.on_turn_end(TurnContext(messages=conversation("s1", 2), session_id="s1"))
    host.close()
    model = saving_model()
    worker = QueueWorker(WorkerSettings(dsn=pg_dsn, models=lambda _n: model, config=CONFIG))
    assert asyncio.run(worker.extract("dir-a")).committed
    index = b"- [Note](note.md) \xe2\x80\x94 a note\n"
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(
            "INSERT INTO memdir_files (dir_id, path, content, sha256, mtime) "
            "VALUES ('dir-a', 'MEMORY.md', %s, %s, 1.0)",
            (index, hashlib.sha256(index).hexdigest()),
        )
    locked: list[str] = []
    real = file_lock

    @contextlib.contextmanager
    def recording(path: Path, **kwargs: float) -> Iterator[None]:
        with real(path, **kwargs):
            locked.append(Path(path).name)
            yield

    monkeypatch.setattr(_store, "file_lock", recording)
    mirror = tmp_path / "mirror"
    assert export_dir(pg_dsn, "dir-a", mirror) == 1
    assert (mirror / "MEMORY.md").is_file()
    assert locked == ["MEMORY.md"]  # the index, and only it
