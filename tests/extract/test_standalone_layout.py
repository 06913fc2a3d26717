"""A save changes nothing before the new messages in memdir's own request.

The memory's state (the list of memory files, ``MEMORY.md``) changes with every save. It
goes after the conversation, with the request, so the next run still reads the whole
prefix the last one wrote (instructions, tools, window, the messages it covered) from the
cache.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from memdir.extract import MemoryExtractor, TurnContext
from memdir.messages import Message, ToolUseBlock
from memdir.models import AnthropicModel, RetryPolicy
from memdir.testing import FakeAnthropicServer, FakeClock

NOTE = (
    "---\nname: Freeze\ndescription: the release freeze starts 2026-12-04\n"
    "metadata:\n  type: project\n---\n\nFreeze from 2026-12-04.\n"
)


def convo(n: int, start: int = 0) -> list[Message]:
    out: list[Message] = []
    for i in range(start, start + n):
        out.append(Message.user(f"question {i} " + "x" * 300))
        out.append(Message.assistant(f"answer {i} " + "y" * 300))
    return out


def test_a_save_leaves_the_next_runs_prefix_cached(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    answers: list[Message | str] = [
        Message(
            role="assistant",
            content=(
                ToolUseBlock(
                    id="w1",
                    name="Write",
                    input={"file_path": str(memory / "freeze.md"), "content": NOTE},
                ),
            ),
        ),
        "Nothing to save.",
    ]
    messages = convo(12)
    clock = FakeClock()
    with FakeAnthropicServer(handler=lambda body: answers.pop(0), clock=clock) as server:
        model = AnthropicModel(
            "claude-test", api_key="k", base_url=server.base_url, retry=RetryPolicy(max_retries=0)
        )
        extractor = MemoryExtractor(memory, model, clock=clock)
        extractor.restore(messages[19].uuid)

        async def main() -> None:
            for end in (22, 24):
                clock.advance(60.0)
                turn = TurnContext(messages=tuple(messages[:end]), cwd=str(tmp_path))
                extractor.on_turn_end(turn)
                await extractor.drain()
            await model.aclose()

        asyncio.run(main())
        first, second = server.requests
    assert (memory / "freeze.md").is_file()  # the first run saved, memdir indexed it
    assert "](freeze.md)" in (memory / "MEMORY.md").read_text()
    one, two = first.body, second.body
    # Byte for byte, the second request starts with everything of the first but its
    # last message: the request and the memory's state, which the save changed.
    assert two["system"] == one["system"]
    assert two["tools"] == one["tools"]
    covered = len(one["messages"]) - 1
    strip = _without_cache_marks
    assert strip(two["messages"][:covered]) == strip(one["messages"][:covered])
    assert "freeze.md" in str(two["messages"][-1])
    # The list of memory files in the first message stays as it was; the new memory is
    # named after the conversation, as changed since.
    # The store was empty when the list was made: the new memory is listed after the
    # conversation.
    final = two["messages"][-1]["content"][0]["text"]
    assert "## Existing memory files\n\n- [project] freeze.md" in final
    # And the provider reads it: all of it but the first run's last message.
    assert first.usage is not None
    assert second.usage is not None
    written = first.usage["cache_creation_input_tokens"] + first.usage["input_tokens"]
    last = len(json.dumps(one["messages"][-1], ensure_ascii=False)) // 4
    assert second.usage["cache_read_input_tokens"] >= written - last - 20


def _without_cache_marks(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_cache_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_marks(v) for v in value]
    return value
