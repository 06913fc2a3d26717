"""The offline engine after another process changed the index between its Read and Write.

``memdir forget`` may rewrite ``MEMORY.md`` while the memory agent works: its Write of
the index is then refused as stale, and a memory saved in the same turn would be left
without a line. The engine reads the index (and what it wrote) again and writes the index
once more, with only its own lines put in.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from datetime import date
from pathlib import Path

from memdir.extract import ExtractConfig, MemoryExtractor, MemorySaved, TurnContext
from memdir.messages import Message, derive_uuid
from memdir.models import ModelRequest, ModelResponse, OfflineModel
from memdir.store import MemoryDir, forget_memory, format_memory_file


class ForgetsAtRequest:
    """The offline engine, with ``victim`` forgotten (as by another process) just before
    request number ``at`` is answered; records the tool calls of every answer."""

    def __init__(self, md: MemoryDir, victim: str, at: int) -> None:
        self.inner = OfflineModel(today=date(2027, 1, 4))
        self.md = md
        self.victim = victim
        self.at = at
        self.calls: list[list[tuple[str, str]]] = []
        self.then: tuple[int, Callable[[], str]] | None = None

    @property
    def name(self) -> str:
        return self.inner.name

    async def request(self, request: ModelRequest) -> ModelResponse:
        number = len(self.calls) + 1
        if number == self.at:
            forget_memory(self.md, self.victim)
        if self.then is not None and number == self.then[0]:
            forget_memory(self.md, self.then[1]())
        response = await self.inner.request(request)
        root = str(self.md.root) + "/"
        self.calls.append(
            [
                (u.name, str(u.input.get("file_path", "")).removeprefix(root))
                for u in response.message.tool_uses
            ]
        )
        return response


def conversation(text: str) -> tuple[Message, ...]:
    messages = []
    last = None
    for message in (Message.user(text), Message.assistant("Noted.")):
        last = derive_uuid(last, message)
        messages.append(dataclasses.replace(message, uuid=last))
    return tuple(messages)


KEPT = ("old", "other", "MEMORY")


def setup(root: Path) -> MemoryDir:
    for name in ("old", "other"):
        (root / f"{name}.md").write_text(
            format_memory_file(name=name, description=f"the {name} one", type="user", body="x")
        )
    (root / "MEMORY.md").write_text("- [old](old.md) — the old one\n- [other](other.md) — other\n")
    return MemoryDir(root)


def extract(md: MemoryDir, model: ForgetsAtRequest) -> list[MemorySaved]:
    saved: list[MemorySaved] = []

    async def go() -> None:
        extractor = MemoryExtractor(md, model, ExtractConfig())
        said = "Remember that we always use uv for the billing repo."
        extractor.on_turn_end(
            TurnContext(messages=conversation(said), cwd=str(md.root)), saved.append
        )
        await extractor.drain(timeout=60)

    asyncio.run(go())
    return saved


def test_a_forget_between_read_and_write_still_indexes_the_new_memory(tmp_path: Path) -> None:
    md = setup(tmp_path)
    model = ForgetsAtRequest(md, "old.md", at=2)  # after the Reads, before the Writes
    saved = extract(md, model)
    [written] = [p for n in saved for p in n.paths]
    index = (tmp_path / "MEMORY.md").read_text()
    assert f"]({written.name})" in index
    assert "old.md" not in index  # the forgotten line does not come back
    assert "- [other](other.md) — other" in index
    # Writes refused as stale, then: the index and the memory read again, the index written.
    assert [kind for kind, _ in model.calls[1]] == ["Write", "Write"]
    assert sorted(model.calls[2]) == sorted([("Read", "MEMORY.md"), ("Read", written.name)])
    assert model.calls[3] == [("Write", "MEMORY.md")]
    assert len(model.calls) == 4  # indexed: the run ends without asking for a summary


def test_a_memory_forgotten_before_the_retry_gets_no_line(tmp_path: Path) -> None:
    md = setup(tmp_path)
    model = ForgetsAtRequest(md, "old.md", at=2)
    # And, before the retry's Reads are answered, the memory the run just wrote.
    model.then = (3, lambda: next(p.name for p in tmp_path.glob("*.md") if p.stem not in KEPT))
    saved = extract(md, model)
    [written] = [p for n in saved for p in n.paths]  # saved, then forgotten by the other
    assert not written.exists()
    assert sorted(model.calls[2]) == sorted([("Read", "MEMORY.md"), ("Read", written.name)])
    assert model.calls[3] == []  # the index already says what is there: nothing to write
    index = (tmp_path / "MEMORY.md").read_text()
    assert index == "- [other](other.md) — other\n"
