"""Transcripts are read in bounded memory, whatever the file holds.

Before, the loader read the whole file, then split and decoded it: a file without
newlines (or ``/dev/zero`` behind a link, or a sync's garbage) grew memory until a
``MemoryError``, and one huge line was kept whole and sent to the model. Memory is
measured with tracemalloc, so each bound holds on any machine; each test also runs on a
file far larger than its bound.
"""

from __future__ import annotations

import io
import json
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from memdir.errors import TranscriptError
from memdir.transcripts import DOCUMENT_MAX_BYTES, LINE_MAX_BYTES, load_transcript
from memdir.transcripts._lines import Overlong, read_lines
from tests.transcripts.test_claude_code import Session

MiB = 2**20
T = TypeVar("T")


def peak_of(call: Callable[[], T]) -> tuple[T | BaseException, int]:
    """What ``call`` returned (or raised) and the most memory it held at once."""
    tracemalloc.start()
    try:
        try:
            outcome: T | BaseException = call()
        except Exception as exc:
            outcome = exc
        return outcome, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def sparse(path: Path, head: bytes, size: int) -> Path:
    """A file of ``size`` bytes: ``head`` then zeros, no newline; it takes no disk."""
    with path.open("wb") as handle:
        handle.write(head)
        handle.truncate(size)
    return path


def test_a_file_without_newlines_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    file = sparse(tmp_path / "s.jsonl", b'{"type": "user", "x": "', 4 * LINE_MAX_BYTES)
    error, peak = peak_of(lambda: load_transcript(file))
    assert isinstance(error, TranscriptError)
    assert "\n" not in str(error)
    assert peak < LINE_MAX_BYTES + 8 * MiB, f"peak {peak / MiB:.0f} MiB"


def test_a_json_document_over_the_cap_is_refused_unread(tmp_path: Path) -> None:
    file = sparse(tmp_path / "chat.json", b"[", DOCUMENT_MAX_BYTES + 1)
    error, peak = peak_of(lambda: load_transcript(file))
    assert isinstance(error, TranscriptError)
    assert "JSON document of 64.0 MiB, over the 64.0 MiB memdir reads whole" in str(error)
    assert peak < 4 * MiB


def test_an_overlong_line_is_skipped_listed_and_never_kept(tmp_path: Path) -> None:
    session = Session()
    session.user("u0", None, "I'm Ana, I lead the data platform team.")
    session.assistant("a0", "u0", "m0", [{"type": "text", "text": "Noted."}])
    session.user("u1", "a0", "z" * (LINE_MAX_BYTES + MiB))
    session.assistant("a1", "u1", "m1", [{"type": "text", "text": "That is long."}])
    file = session.write(tmp_path / "s.jsonl")
    del session
    transcript, peak = peak_of(lambda: load_transcript(file))
    assert not isinstance(transcript, BaseException)
    assert [m.text for m in transcript.messages] == [
        "I'm Ana, I lead the data platform team.",
        "Noted.",
        "That is long.",
    ]
    (skipped,) = transcript.skipped
    assert skipped.line == 3
    assert "33.0 MiB, longer than the 32.0 MiB a line may hold; skipped unread" in skipped.reason
    # The line's start is held until it passes the cap, never two copies of it: before,
    # the file was read whole, split and decoded, several copies of its 33 MiB at once.
    assert peak < LINE_MAX_BYTES + 8 * MiB, f"peak {peak / MiB:.0f} MiB"


@pytest.mark.parametrize(
    ("opening", "size"),
    [
        ("", 96 * MiB),  # over the size a JSON document may have
        # Under it, a session that opens with a line of no conversation (Claude Code's
        # often do) is still never read whole to learn it is not one JSON document.
        ('{"type": "summary", "summary": "Ingest work", "leafUuid": "a0"}\n', 48 * MiB),
    ],
)
def test_a_long_session_streams_through_lines_it_does_not_keep(
    tmp_path: Path, opening: str, size: int
) -> None:
    file = tmp_path / "s.jsonl"
    noise = json.dumps({"type": "unknown-bookkeeping", "blob": "n" * 4000}) + "\n"
    session = Session()
    session.user("u0", None, "I prefer small commits.")
    session.assistant("a0", "u0", "m0", [{"type": "text", "text": "Noted."}])
    with file.open("w") as handle:
        handle.write(opening + "\n".join(session.lines) + "\n")
        handle.write(noise * (size // len(noise)))
    transcript, peak = peak_of(lambda: load_transcript(file))
    assert not isinstance(transcript, BaseException)
    assert len(transcript.messages) == 2
    # Lines memdir reads past; what stays is their numbers in ``skipped``.
    assert peak < 16 * MiB, f"peak {peak / MiB:.0f} MiB"


@dataclass(frozen=True)
class Case:
    data: bytes
    want: list[tuple[int, bytes | int]]
    """Lines by number: their bytes, or the length of one skipped as over the cap."""


@pytest.mark.parametrize(
    "case",
    [
        Case(b"", []),
        Case(b"abc", [(1, b"abc")]),
        Case(b"abc\n", [(1, b"abc")]),
        Case(b"a\n\nbc\n", [(1, b"a"), (2, b""), (3, b"bc")]),
        Case(b"12345\nab\n", [(1, b"12345"), (2, b"ab")]),
        Case(b"123456\nab", [(1, 6), (2, b"ab")]),
        Case(b"ab\n1234567890123\ncd", [(1, b"ab"), (2, 13), (3, b"cd")]),
        Case(b"ab\n123456789", [(1, b"ab"), (2, 9)]),
        Case(b"\n\n", [(1, b""), (2, b"")]),
    ],
)
@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64])
def test_read_lines_splits_and_skips_across_chunks(case: Case, chunk: int) -> None:
    got = [
        (number, line.size if isinstance(line, Overlong) else line)
        for number, line in read_lines(io.BytesIO(case.data), max_line=5, chunk=chunk)
    ]
    assert got == case.want
