"""What a host memdir loads memory into was shown, recorded as it happens and listed by
``memdir why`` with each memory's history."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from click.testing import CliRunner

from memdir._cli import cli
from memdir.integrations._host import HostCore
from memdir.provenance import read_changes, why
from memdir.recall import select_relevant_memories
from memdir.store import MemoryDir
from tests.provenance._runs import save_polars

EARLIER = "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
NOW = "conversation-7"


def test_a_hosts_session_lists_the_index_it_loaded_and_what_recall_surfaced(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory"
    said = save_polars(memory, EARLIER)
    core = HostCore(memory, "offline")

    assert core.load_memory(NOW) is not None
    assert core.load_memory(NOW) is not None  # loaded once per conversation, recorded once
    surfaced = asyncio.run(
        select_relevant_memories(
            "which data frames library, polars or pandas?", memory, record_session=NOW
        )
    )
    assert [m.filename for m in surfaced] == ["polars.md"]

    view = why(memory, NOW)
    assert view.transcript is None
    loaded = [m for t in view.turns for m in t.loaded]
    assert [(m.file, m.cut) for m in loaded] == [("MEMORY.md", False)]
    (turn,) = [t for t in view.turns if t.surfaced]
    assert turn.prompt == "which data frames library, polars or pandas?"
    (polars,) = turn.surfaced
    assert polars.history is not None
    assert [c.what for c in polars.history.changes] == ["created", "changed"]
    assert polars.history.changes[0].messages == (said[0].uuid, said[1].uuid)


def test_recall_records_nothing_unless_asked(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    save_polars(memory, EARLIER, twice=False)
    asyncio.run(select_relevant_memories("which data frames library, polars?", memory))
    assert not (memory / ".memdir" / "provenance" / "shown").exists()


def test_why_lists_what_a_session_saved_per_turn(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    said = save_polars(memory, EARLIER)

    result = CliRunner().invoke(cli, ["why", EARLIER, "--memory-dir", str(memory), "--json"])

    assert result.exit_code == 0, result.output
    saved = [c for t in json.loads(result.output)["turns"] for c in t["saved"]]
    assert [(c["file"], c["what"]) for c in saved] == [
        ("polars.md", "created"),
        ("polars.md", "changed"),
    ]
    assert saved[1]["messages"] == [said[2].uuid, said[3].uuid]
    assert len(read_changes(MemoryDir(memory))) == 2


def test_an_index_a_host_loaded_in_part_is_reported_as_cut(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    lines = "".join(f"- [Note {n}](note-{n}.md) — a note\n" for n in range(300))
    (memory / "MEMORY.md").write_text(lines, encoding="utf-8")

    assert HostCore(memory, "offline").load_memory(NOW) is not None

    (turn,) = why(memory, NOW).turns
    assert [(m.file, m.cut) for m in turn.loaded] == [("MEMORY.md", True)]
