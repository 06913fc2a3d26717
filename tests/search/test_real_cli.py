"""Search over the transcript the real Claude Code CLI writes, where it writes it."""

from __future__ import annotations

import asyncio

from memdir.recall import select_relevant_memories
from memdir.search import SearchIndex, search
from memdir.store import MemoryDir, default_memory_dir
from tests.claude_code._cli import ClaudeCli

FACT = "For the record: the canary deploy always goes to eu-west-3 first."


def test_a_fact_said_in_a_real_session_is_found_and_recalled(claude_cli: ClaudeCli) -> None:
    first = claude_cli.run(FACT, replies=["Understood, eu-west-3 first."])
    assert first.transcript is not None
    memory = MemoryDir(default_memory_dir(claude_cli.project, env=claude_cli.env()))
    # Claude Code keeps the project's sessions beside its memory folder.
    assert first.transcript.parent == memory.root.parent

    hits = search(memory, "which region does the canary deploy go to")
    assert hits
    said = next(h for h in hits if h.role == "user")
    assert said.text == FACT
    assert said.session_id == first.session_id
    assert said.uuid is not None
    assert said.timestamp is not None
    replies = search(memory, "understood", memories=False)
    assert [(h.role, h.text) for h in replies] == [("assistant", "Understood, eu-west-3 first.")]

    # No memory holds it (the CLI's agent saved none): recall falls back to the passage.
    surfaced = asyncio.run(
        select_relevant_memories(
            "which region does the canary deploy go to", memory, search_fallback=True
        )
    )
    assert [m.filename for m in surfaced][:1] == [f"session:{first.session_id}#{said.uuid}"]

    # The session goes on: the next pass reads only what the resumed run appended.
    size = first.transcript.stat().st_size
    claude_cli.run(
        "And the rollback window is ninety minutes.", replies=["Noted."], resume=first.session_id
    )
    grown = first.transcript.stat().st_size - size
    with SearchIndex(memory) as index:
        stats = index.index_sessions([first.transcript])
        assert stats.sessions_reindexed == 0
        assert stats.bytes_read == grown
        top = index.search("rollback window minutes", kinds=("turn",))[0]
        assert top.text == "And the rollback window is ninety minutes."
