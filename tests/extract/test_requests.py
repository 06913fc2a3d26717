"""No wasted requests: a run ends on its writes, memdir's tools writing each index line."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import filelock
import pytest

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.fork import CacheSafeParams
from memdir.messages import Message, ToolUseBlock
from memdir.models import ModelRequest
from memdir.store import lock_path
from memdir.telemetry import CollectingSink
from memdir.testing import FunctionModel

NOTE = (
    "---\nname: Freeze\ndescription: the release freeze starts 2026-12-04\ntype: project\n---\n\n"
    "Freeze from 2026-12-04.\n\n**Why:** the launch.\n\n**How to apply:** nothing risky.\n"
)
INDEX = "- [Role](user_role.md) — data engineer\n"
CONVERSATION = (
    Message.user("Remember that the release freeze starts on 2026-12-04."),
    Message.assistant("Noted."),
)


def call(name: str, n: int, **tool_input: Any) -> ToolUseBlock:
    return ToolUseBlock(id=f"c{n}", name=name, input=tool_input)


def run(
    tmp_path: Path,
    answers: Callable[[ModelRequest, int], Message | str],
    *,
    fork: bool,
    index: str | None = INDEX,
    **config: Any,
) -> tuple[list[ModelRequest], CollectingSink, Path]:
    memory = tmp_path / "memory"
    memory.mkdir()
    if index is not None:
        (memory / "MEMORY.md").write_text(index)
    requests: list[ModelRequest] = []

    async def answer(request: ModelRequest) -> Message | str:
        requests.append(request)
        return answers(request, len(requests))

    model = FunctionModel(answer)
    sink = CollectingSink()
    extractor = MemoryExtractor(memory, model, ExtractConfig(**config), sink=sink)
    params = CacheSafeParams(model=model, system="host") if fork else None

    async def main() -> None:
        extractor.on_turn_end(TurnContext(messages=CONVERSATION, params=params, cwd=str(tmp_path)))
        await extractor.drain()

    asyncio.run(main())
    return requests, sink, memory


@pytest.mark.parametrize("fork", [True, False], ids=["fork", "standalone"])
def test_a_save_is_one_request_of_writes_and_memdir_indexes_it(tmp_path: Path, fork: bool) -> None:
    memory = tmp_path / "memory"

    def answers(request: ModelRequest, n: int) -> Message:
        assert n == 1, "the run should have ended on its writes"
        write = call("Write", 1, file_path=str(memory / "freeze.md"), content=NOTE)
        return Message(role="assistant", content=(write,))

    requests, sink, memory = run(tmp_path, answers, fork=fork)
    assert len(requests) == 1
    system = requests[0].system
    shown = requests[0].messages[-1].text
    # Not shown the index, and told memdir keeps it: the agent writes the memory alone.
    assert "data engineer" not in shown
    told = " ".join(f"{system if isinstance(system, str) else ''}\n{shown}".split())
    assert "memdir writes each memory's pointer line" in told
    (event,) = sink.named("extract.run")
    assert event.fields["turn_count"] == 1
    assert event.fields["memories_saved"] == 1
    assert (memory / "MEMORY.md").read_text() == (
        INDEX + "- [freeze](freeze.md) — the release freeze starts 2026-12-04\n"
    )


def test_a_memory_memdir_could_not_index_gets_another_turn(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    # Another process holds the index for longer than memdir's Write waits for it.
    held = filelock.FileLock(lock_path(memory / "MEMORY.md"))

    def answers(request: ModelRequest, n: int) -> Message | str:
        if n == 1:
            held.acquire()
            write = call("Write", 1, file_path=str(memory / "freeze.md"), content=NOTE)
            return Message(role="assistant", content=(write,))
        held.release()
        return "Saved."

    requests, _, memory = run(tmp_path, answers, fork=False)
    # The Write succeeded; the run did not end on it, as the memory has no line yet.
    assert len(requests) == 2
    assert (memory / "freeze.md").is_file()
    assert "](freeze.md)" not in (memory / "MEMORY.md").read_text()


def test_with_skip_index_a_write_alone_ends_the_run(tmp_path: Path) -> None:
    memory = tmp_path / "memory"

    def answers(request: ModelRequest, n: int) -> Message | str:
        write = call("Write", 1, file_path=str(memory / "freeze.md"), content=NOTE)
        return Message(role="assistant", content=(write,)) if n == 1 else "Saved."

    requests, _, memory = run(tmp_path, answers, fork=False, index=None, skip_index=True)
    assert len(requests) == 1
    assert not (memory / "MEMORY.md").exists()  # no index kept: memdir writes none either


def test_a_failed_write_gets_an_answer(tmp_path: Path) -> None:
    memory = tmp_path / "memory"

    def answers(request: ModelRequest, n: int) -> Message | str:
        if n == 1:  # the Edit's old text is not in the file: an error, so the run goes on
            edit = call(
                "Edit", 1, file_path=str(memory / "MEMORY.md"), old_string="nope", new_string="x"
            )
            return Message(role="assistant", content=(edit,))
        assert request.messages[-1].tool_results[0].is_error
        return "Nothing to save after all."

    requests, _, _ = run(tmp_path, answers, fork=True)
    assert len(requests) == 2


def test_the_index_is_not_shown_so_an_edit_of_it_needs_a_read(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    results: list[str] = []

    def answers(request: ModelRequest, n: int) -> Message | str:
        if n == 1:
            edit = call(
                "Edit", 1, file_path=str(memory / "MEMORY.md"), old_string=INDEX, new_string="x\n"
            )
            return Message(role="assistant", content=(edit,))
        results.append(request.messages[-1].tool_results[0].text)
        return "Nothing."

    requests, _, memory = run(tmp_path, answers, fork=True)
    assert len(requests) == 2
    # Written by memdir's tools, not the agent: the index no longer counts as read.
    assert "has not been Read" in results[0]
    assert (memory / "MEMORY.md").read_text() == INDEX


def test_other_memory_files_still_need_a_read(tmp_path: Path) -> None:
    memory = tmp_path / "memory"

    def answers(request: ModelRequest, n: int) -> Message | str:
        if n == 1:
            (memory / "user_role.md").write_text("---\nname: Role\n---\n\nData engineer.\n")
            edit = call(
                "Edit",
                1,
                file_path=str(memory / "user_role.md"),
                old_string="Data",
                new_string="Platform",
            )
            return Message(role="assistant", content=(edit,))
        assert "has not been Read" in request.messages[-1].tool_results[0].text
        return "Nothing."

    requests, _, _ = run(tmp_path, answers, fork=True)
    assert len(requests) == 2


def test_a_memory_directory_behind_a_symlink_still_ends_on_the_write(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "MEMORY.md").write_text(INDEX)
    memory = tmp_path / "memory"
    memory.symlink_to(real, target_is_directory=True)
    requests: list[ModelRequest] = []

    async def answer(request: ModelRequest) -> Message | str:
        requests.append(request)
        write = call("Write", 1, file_path=str(memory / "freeze.md"), content=NOTE)
        return Message(role="assistant", content=(write,)) if len(requests) == 1 else "Saved."

    extractor = MemoryExtractor(memory, FunctionModel(answer), ExtractConfig())

    async def main() -> None:
        extractor.on_turn_end(TurnContext(messages=CONVERSATION, cwd=str(tmp_path)))
        await extractor.drain()

    asyncio.run(main())
    assert "](freeze.md)" in (real / "MEMORY.md").read_text()
    assert len(requests) == 1  # the written file's real path matched its line
