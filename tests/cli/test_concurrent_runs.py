"""Two runs over one session, as two Stop hooks of quick turns start them: the one that
read the transcript first must neither start the session over nor move the cursor back."""

from __future__ import annotations

import asyncio
from pathlib import Path

from memdir._cli._run import extract_transcript
from memdir.models import OfflineModel
from memdir.state import StateFile
from memdir.store import MemoryDir
from memdir.transcripts import load_transcript
from tests.cli.conftest import TURNS, append_turns, write_session


def test_an_older_copy_of_the_session_leaves_a_later_runs_cursor_alone(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s.jsonl", TURNS[:1])
    older = load_transcript(path)  # the first Stop hook's copy: one turn
    append_turns(path, 1, TURNS[1:2])
    newer = load_transcript(path)  # the second's: two turns
    memory = MemoryDir(tmp_path / "memory")
    session = newer.session_id
    assert session is not None

    later = asyncio.run(extract_transcript(newer, memory, OfflineModel()))
    assert later.turns == 2
    cursor = StateFile(memory).get(session).cursor
    assert cursor == newer.messages[-1].uuid
    saved = sorted(p.name for p in memory.root.glob("*.md"))

    first = asyncio.run(extract_transcript(older, memory, OfflineModel()))

    assert first.runs == 0
    assert StateFile(memory).get(session).cursor == cursor  # not moved back to turn 1
    assert sorted(p.name for p in memory.root.glob("*.md")) == saved


def test_a_run_picks_up_where_another_run_of_the_session_went_meanwhile(tmp_path: Path) -> None:
    from memdir.state import SessionState

    path = write_session(tmp_path / "s.jsonl", TURNS[:2])
    transcript = load_transcript(path)
    memory = MemoryDir(tmp_path / "memory")
    session = transcript.session_id
    assert session is not None
    states = StateFile(memory)

    def other_run_went_on() -> None:
        # Once this run has done turn 1, another (a later hook) covers turn 2.
        if states.get(session).cursor == "a0":
            states.put(session, SessionState(cursor="a1", turns_since_run=0))

    report = asyncio.run(
        extract_transcript(transcript, memory, OfflineModel(), on_turn=other_run_went_on)
    )

    assert report.runs == 1  # turn 2 was the other run's
    assert states.get(session).cursor == "a1"
