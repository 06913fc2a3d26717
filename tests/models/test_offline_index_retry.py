"""The offline engine while another process changes the index during its run.

``memdir forget`` may rewrite ``MEMORY.md`` while the memory agent works. memdir's own
runs leave the index to memdir's tools, which add a new memory's line under the index's
lock, so the forget and the save never overwrite each other. (Where a prompt leaves the
index to the agent, the engine still reads a stale index again and rewrites it with only
its own lines put in: ``_index_retry``.)
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


def test_a_forget_during_the_run_still_indexes_the_new_memory(tmp_path: Path) -> None:
    md = setup(tmp_path)
    # Forgotten after the run read the memory's state, before the model answers.
    model = ForgetsAtRequest(md, "old.md", at=1)
    saved = extract(md, model)
    [written] = [p for n in saved for p in n.paths]
    index = (tmp_path / "MEMORY.md").read_text()
    assert f"]({written.name})" in index  # memdir's Write put the line in
    assert "old.md" not in index  # the forgotten line does not come back
    assert "- [other](other.md) — other" in index
    # The file alone, in one request: the agent never reads or writes the index, so
    # nothing of it can go stale under a concurrent forget.
    assert model.calls == [[("Write", written.name)]]
