"""A transcript must be a regular file: a named pipe or a device is refused at once.

Opening a FIFO for reading blocks until a writer appears, so before, ``memdir extract``
and the hook's worker waited forever on one. The loader refuses it before reading, so
every caller gets the same one line.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir._cli import cli
from memdir.errors import TranscriptError
from memdir.transcripts import load_transcript
from tests.cli.conftest import TURNS, write_session

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")


def load_or_unblock(path: Path) -> BaseException | None:
    """``load_transcript(path)`` in a thread; if it blocks on the pipe, a writer is
    opened to let it go and the test fails, rather than hanging the whole run."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            load_transcript(path)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(5.0)
    if thread.is_alive():
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        thread.join(5.0)
        pytest.fail(f"reading {path} blocked")
    return outcome[0]


def test_a_fifo_is_refused_before_it_is_opened_for_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    error = load_or_unblock(fifo)
    assert isinstance(error, TranscriptError)
    assert "named pipe (FIFO)" in str(error)
    assert "not a regular file" in str(error)


def test_a_link_to_a_fifo_is_refused_and_a_link_to_a_file_is_read(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    (tmp_path / "to-pipe.jsonl").symlink_to(fifo)
    error = load_or_unblock(tmp_path / "to-pipe.jsonl")
    assert isinstance(error, TranscriptError)
    assert "named pipe" in str(error)
    session = write_session(tmp_path / "s.jsonl", TURNS[:1])
    (tmp_path / "to-file.jsonl").symlink_to(session)
    assert len(load_transcript(tmp_path / "to-file.jsonl").messages) == 2


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="needs /dev/null")
def test_a_device_is_refused() -> None:
    # /dev/null, not an endless device: without the check this reads an empty file and
    # fails for that, rather than filling memory.
    with pytest.raises(TranscriptError, match="is a character device, not a regular file"):
        load_transcript("/dev/null")


def test_extract_refuses_a_fifo_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    memory = tmp_path / "memory"
    outcome: list[object] = []

    def invoke() -> None:
        args = ["extract", str(fifo), "--memory-dir", str(memory)]
        outcome.append(CliRunner().invoke(cli, args))

    thread = threading.Thread(target=invoke, daemon=True)
    thread.start()
    thread.join(10.0)
    if thread.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(5.0)
        pytest.fail("memdir extract blocked on a named pipe")
    result = outcome[0]
    assert result.exit_code == 2  # type: ignore[attr-defined]
    err: str = result.stderr  # type: ignore[attr-defined]
    assert err.count("\n") == 1, err
    assert "not a regular file" in err
    assert not memory.exists()
