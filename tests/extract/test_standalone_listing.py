"""memdir's own request from run to run: where the window starts, and the list of memory
files shown before the conversation with the changes since shown after it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.messages import Message
from memdir.models import ModelRequest
from memdir.testing import FakeClock, ScriptedModel

ROLE = "---\nname: Role\ndescription: {what}\nmetadata:\n  type: user\n---\n\nThe user is {what}.\n"


def convo(n: int, size: int, start: int = 0) -> list[Message]:
    out: list[Message] = []
    for i in range(start, start + n):
        out.append(Message.user(f"question {i} " + "x" * size))
        out.append(Message.assistant(f"answer {i} " + "y" * size))
    return out


def runs(
    memory: Path,
    turns: list[tuple[int, ...]],
    messages: list[Message],
    config: ExtractConfig | None = None,
    between: list[object] | None = None,
) -> list[ModelRequest]:
    """One standalone run after each end in ``turns`` (a minute apart); ``between[i]``, if
    callable, runs before run ``i``."""
    model = ScriptedModel(["Nothing to save."] * len(turns))
    clock = FakeClock()
    extractor = MemoryExtractor(memory, model, config or ExtractConfig(), clock=clock)

    async def main() -> None:
        for index, (end,) in enumerate(turns):
            action = (between or [None] * len(turns))[index]
            if callable(action):
                action()
            clock.advance(60.0)
            extractor.on_turn_end(TurnContext(messages=tuple(messages[:end]), cwd=str(memory)))
            await extractor.drain()

    asyncio.run(main())
    return model.requests


def test_the_window_keeps_its_start_until_it_has_grown_past_its_size(tmp_path: Path) -> None:
    messages = convo(40, size=200)  # about 55 tokens a message
    requests = runs(tmp_path / "memory", [(end,) for end in range(2, 80, 2)], messages)
    starts = [r.messages[1].text for r in requests]
    # Each message as the window counts it: its text and its block's keys.
    sizes = [sum(len(m.text) // 4 + 7 for m in r.messages[1:-3]) for r in requests]
    for index in range(1, len(requests)):
        if starts[index] != starts[index - 1]:
            # It moved only once the window, with this run's messages, passed 2,000 tokens.
            assert sizes[index - 1] + 120 > 2_000 - 120
    assert max(sizes) <= 2_000 + 120
    assert len(set(starts)) < len(requests) // 4


def test_a_restart_keeps_the_message_the_new_ones_answer(tmp_path: Path) -> None:
    # The answer before the new message is longer than a quarter of the window.
    messages = [
        Message.user("Shall we move the ingest job to the new cluster?"),
        Message.assistant("Here is the plan: " + "step " * 600),
        Message.user("Yes, do that."),
        Message.assistant("Done."),
    ]
    model = ScriptedModel(["Nothing to save."])
    extractor = MemoryExtractor(tmp_path / "memory", model, clock=FakeClock())
    extractor.restore(messages[1].uuid)

    async def main() -> None:
        extractor.on_turn_end(TurnContext(messages=tuple(messages), cwd=str(tmp_path)))
        await extractor.drain()

    asyncio.run(main())
    (request,) = model.requests
    shown = [m.text for m in request.messages[1:-1]]
    assert shown[0].startswith("Here is the plan:")
    assert shown[1:] == ["Yes, do that.", "Done."]


def test_a_change_that_keeps_the_time_still_shows(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    role = memory / "user_role.md"
    role.write_text(ROLE.format(what="a data engineer"))
    os.utime(role, (1_700_000_000, 1_700_000_000))

    def edit() -> None:
        role.write_text(ROLE.format(what="a frontend developer"))
        os.utime(role, (1_700_000_000, 1_700_000_000))  # a coarse clock: the same time

    messages = convo(3, size=40)
    first, second = runs(memory, [(2,), (4,)], messages, between=[None, edit])
    assert first.messages[0].text == second.messages[0].text  # the list as it was
    final = second.messages[-1].text
    assert "## Memory files changed since the list above" in final
    assert "a frontend developer" in final


def test_memories_saved_after_an_empty_list_are_listed_whole(tmp_path: Path) -> None:
    memory = tmp_path / "memory"

    def save() -> None:
        memory.mkdir(exist_ok=True)
        (memory / "user_role.md").write_text(ROLE.format(what="a data engineer"))

    messages = convo(3, size=40)
    _, second = runs(memory, [(2,), (4,)], messages, between=[None, save])
    final = second.messages[-1].text
    assert "## Existing memory files\n\n- [user] user_role.md" in final
    assert "changed since the list above" not in final


def test_without_the_index_a_listed_store_is_not_called_empty(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "user_role.md").write_text(ROLE.format(what="a data engineer"))
    messages = convo(2, size=40)
    (request,) = runs(memory, [(4,)], messages, ExtractConfig(skip_index=True))
    assert "user_role.md" in request.messages[0].text
    assert "The memory directory is empty." not in request.messages[-1].text
