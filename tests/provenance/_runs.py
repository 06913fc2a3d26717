"""Memories saved by memdir's extractor with a scripted model, for the provenance tests."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.messages import Message, ToolUseBlock
from memdir.store import format_memory_file
from memdir.testing import ScriptedModel

POLARS = format_memory_file(
    name="Data frames", description="polars, never pandas", type="feedback", body="Use polars."
)
POLARS_WHY = format_memory_file(
    name="Data frames",
    description="polars, never pandas",
    type="feedback",
    body="Use polars.\n\n**Why:** the nightly job ran out of memory with pandas.",
)


def call(name: str, **given: str) -> Message:
    """An assistant message calling one tool."""
    block = ToolUseBlock(id=f"toolu_{name}", name=name, input=given)
    return Message(role="assistant", content=(block,))


def save_polars(memory: Path, session: str, *, twice: bool = True) -> list[Message]:
    """A conversation of two turns in ``session``: the first saves ``polars.md``, the
    second reads and rewrites it (with ``twice``). Returns its messages."""
    path = str(memory / "polars.md")
    steps: list[Message] = [call("Write", file_path=path, content=POLARS)]
    if twice:
        steps += [call("Read", file_path=path), call("Write", file_path=path, content=POLARS_WHY)]
    model = ScriptedModel(steps)
    extractor = MemoryExtractor(memory, model, ExtractConfig(load_instructions=False))
    said = [
        Message.user("We use polars, never pandas."),
        Message.assistant("Noted."),
        Message.user("Pandas ran the nightly job out of memory, that's why."),
        Message.assistant("Understood."),
    ]
    turns: Sequence[Sequence[Message]] = (said[:2], said) if twice else (said[:2],)

    async def main() -> None:
        for messages in turns:
            extractor.on_turn_end(TurnContext(messages=messages, session_id=session))
            await extractor.drain()

    asyncio.run(main())
    model.assert_all_used()
    return said
