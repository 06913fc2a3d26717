"""A memory's history: each run that touched it, with its session and messages, and the
forget and undo after; kept in memdir's state, so a rewrite of the file loses nothing."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from memdir._cli import cli as main
from memdir.messages import Message
from memdir.provenance import history, read_changes
from memdir.store import MemoryDir, forget_memory, restore_memory
from tests.provenance._runs import save_polars

SESSION = "0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"


def _two_runs(memory: Path) -> list[Message]:
    return save_polars(memory, SESSION)


def test_each_run_that_touched_a_memory_is_in_its_history(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    said = _two_runs(memory)

    story = history(memory, "polars")

    created, changed = story.changes
    assert (created.what, changed.what) == ("created", "changed")
    assert created.session == changed.session == SESSION
    # Each run names the messages it covered: the first two, then the two after them.
    assert created.messages == (said[0].uuid, said[1].uuid)
    assert changed.messages == (said[2].uuid, said[3].uuid)
    assert created.run
    assert changed.run
    assert created.run != changed.run
    assert created.by == changed.by == "memdir"
    assert story.origin == created
    assert story.exists
    assert not story.changed_elsewhere


def test_a_rewrite_of_the_file_keeps_the_history_and_shows_as_a_change_elsewhere(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory"
    _two_runs(memory)
    # Another tool writes the file in its own layout, dropping whatever it does not know.
    (memory / "polars.md").write_text("---\nname: data-frames\n---\n\nPolars.\n", encoding="utf-8")

    story = history(memory, "polars.md")

    assert [c.what for c in story.changes] == ["created", "changed"]
    assert story.changed_elsewhere


def test_forget_and_undo_are_in_the_history(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    _two_runs(memory)
    md = MemoryDir(memory)

    forget_memory(md, "polars.md")
    gone = history(md, "polars")
    assert not gone.exists
    assert [c.what for c in gone.changes][-1] == "forgotten"
    restore_memory(md)

    assert [c.what for c in read_changes(md, "polars.md")] == [
        "created",
        "changed",
        "forgotten",
        "restored",
    ]


def test_show_history_on_the_command_line(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    said = _two_runs(memory)
    runner = CliRunner()

    text = runner.invoke(main, ["show", "polars", "--history", "--memory-dir", str(memory)])
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert lines[0] == "polars.md"
    assert " created by memdir, run " in lines[1]
    assert f"session {SESSION}, messages {said[0].uuid}, {said[1].uuid}" in lines[1]
    assert " changed by memdir" in lines[2]

    as_json = runner.invoke(
        main, ["show", "polars", "--history", "--json", "--memory-dir", str(memory)]
    )
    assert as_json.exit_code == 0
    data = json.loads(as_json.output)
    assert [c["what"] for c in data["changes"]] == ["created", "changed"]
    assert data["changes"][1]["messages"] == [said[2].uuid, said[3].uuid]

    # A forgotten memory still has its story.
    forget_memory(MemoryDir(memory), "polars.md")
    after = runner.invoke(main, ["show", "polars", "--history", "--memory-dir", str(memory)])
    assert after.exit_code == 0, after.output
    assert after.output.splitlines()[0] == "polars.md (not in the folder now)"


def test_show_history_of_an_unknown_name_is_one_line(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    result = CliRunner().invoke(
        main, ["show", "nothing-here", "--history", "--memory-dir", str(memory)]
    )
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("memdir: no memory named 'nothing-here'")
