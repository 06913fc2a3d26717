"""No wasted requests: a run ends on its writes, and the index it is shown counts as read."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.fork import CacheSafeParams
from memdir.messages import Message, ToolUseBlock
from memdir.models import ModelRequest
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
def test_a_save_is_one_request_the_index_edited_without_a_read(tmp_path: Path, fork: bool) -> None:
    memory = tmp_path / "memory"

    def answers(request: ModelRequest, n: int) -> Message:
        assert n == 1, "the run should have ended on its writes"
        return Message(
            role="assistant",
            content=(
                call("Write", 1, file_path=str(memory / "freeze.md"), content=NOTE),
                call(
                    "Edit",
                    2,
                    file_path=str(memory / "MEMORY.md"),
                    old_string=INDEX,
                    new_string=INDEX + "- [Freeze](freeze.md) — from 2026-12-04\n",
                ),
            ),
        )

    requests, sink, memory = run(tmp_path, answers, fork=fork)
    assert len(requests) == 1
    shown = requests[0].messages[-1].text
    assert "```markdown\n- [Role](user_role.md) — data engineer\n```" in shown
    (event,) = sink.named("extract.run")
    assert event.fields["turn_count"] == 1
    assert event.fields["memories_saved"] == 1
    assert "](freeze.md)" in (memory / "MEMORY.md").read_text()


def test_nothing_to_save_is_one_request(tmp_path: Path) -> None:
    requests, sink, _ = run(tmp_path, lambda r, n: "Nothing to save.", fork=False)
    assert len(requests) == 1
    assert sink.named("extract.run")[0].fields["turn_count"] == 1


def test_a_memory_written_but_not_indexed_gets_another_turn(tmp_path: Path) -> None:
    memory = tmp_path / "memory"

    def answers(request: ModelRequest, n: int) -> Message | str:
        if n == 1:
            write = call("Write", 1, file_path=str(memory / "freeze.md"), content=NOTE)
            return Message(role="assistant", content=(write,))
        if n == 2:
            pointer = INDEX + "- [Freeze](freeze.md) — from 2026-12-04\n"
            edit = call(
                "Edit", 2, file_path=str(memory / "MEMORY.md"), old_string=INDEX, new_string=pointer
            )
            return Message(role="assistant", content=(edit,))
        return "Saved."

    requests, sink, _ = run(tmp_path, answers, fork=False)
    assert len(requests) == 2  # the index Edit completed the work: no third request
    assert "](freeze.md)" in (memory / "MEMORY.md").read_text()


def test_with_skip_index_a_write_alone_ends_the_run(tmp_path: Path) -> None:
    memory = tmp_path / "memory"

    def answers(request: ModelRequest, n: int) -> Message | str:
        write = call("Write", 1, file_path=str(memory / "freeze.md"), content=NOTE)
        return Message(role="assistant", content=(write,)) if n == 1 else "Saved."

    requests, _, _ = run(tmp_path, answers, fork=False, index=None, skip_index=True)
    assert len(requests) == 1


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


def test_an_index_changed_since_the_prompt_must_be_read_again(tmp_path: Path) -> None:
    memory = tmp_path / "memory"

    def answers(request: ModelRequest, n: int) -> Message | str:
        if n == 1:
            # Someone else updates the index between the prompt and the edit.
            (memory / "MEMORY.md").write_text(INDEX + "- [Other](other.md) — theirs\n")
            edit = call(
                "Edit", 1, file_path=str(memory / "MEMORY.md"), old_string=INDEX, new_string="x\n"
            )
            return Message(role="assistant", content=(edit,))
        result = request.messages[-1].tool_results[0]
        assert result.is_error
        assert "changed on disk since it was Read" in result.text
        return "Nothing."

    requests, _, memory = run(tmp_path, answers, fork=True)
    assert len(requests) == 2
    assert "[Other](other.md)" in (memory / "MEMORY.md").read_text()


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
