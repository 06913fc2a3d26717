"""A consolidation pass is in the history of each memory it rewrote or retired."""

from __future__ import annotations

import asyncio
from pathlib import Path

from memdir.dream import AutoDream, DreamConfig
from memdir.messages import Message, ToolUseBlock
from memdir.provenance import history
from memdir.store import format_memory_file
from memdir.testing import ScriptedModel
from tests.provenance._runs import save_polars

EARLIER = "c0ffee00-1111-4222-8333-944445555666"


def test_a_pass_that_merges_two_memories_is_in_both_histories(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    save_polars(memory, EARLIER, twice=False)
    duplicate = memory / "dataframes.md"
    duplicate.write_text(
        format_memory_file(name="Frames", description="polars", type="feedback", body="Polars."),
        encoding="utf-8",
    )
    merged = format_memory_file(
        name="Data frames",
        description="polars, never pandas",
        type="feedback",
        body="Use polars, never pandas.",
    )

    def call(i: int, name: str, **given: str) -> ToolUseBlock:
        return ToolUseBlock(id=f"t{i}", name=name, input=given)

    reads = Message(
        role="assistant",
        content=(
            call(0, "Read", file_path=str(memory / "polars.md")),
            call(1, "Read", file_path=str(duplicate)),
        ),
    )
    writes = Message(
        role="assistant",
        content=(
            call(2, "Write", file_path=str(memory / "polars.md"), content=merged),
            call(3, "Write", file_path=str(duplicate), content=""),
        ),
    )
    model = ScriptedModel([reads, writes, "Merged."])
    dream = AutoDream(memory, model, transcript_dir=tmp_path / "sessions", config=DreamConfig())
    assert asyncio.run(dream.run())

    kept = history(memory, "polars")
    assert [(c.what, c.by) for c in kept.changes] == [("created", "memdir"), ("changed", "dream")]
    gone = history(memory, "dataframes")
    assert not gone.exists
    (retired,) = gone.changes
    assert (retired.what, retired.by) == ("removed", "dream")
    assert retired.run == kept.changes[-1].run  # the pass that took it in
