"""The example agent, end to end against FakeAnthropicServer through the official SDK."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from anthropic import AsyncAnthropic

from memdir.messages import Message, ToolUseBlock
from memdir.store import parse_memory_file
from memdir.testing import FakeAnthropicServer
from tests.examples import load_example


def last_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))


def write(call_id: str, path: Path, content: str) -> ToolUseBlock:
    return ToolUseBlock(
        id=call_id, name="Write", input={"file_path": str(path), "content": content}
    )


def scripted(memory: Path) -> Any:
    """Answers as the host agent, and as its memory agent when memdir's prompt is last."""
    role_file = memory / "user_role.md"
    feedback_file = memory / "feedback_polars.md"

    def handler(body: dict[str, Any]) -> Message | str:
        text = last_text(body)
        last = body["messages"][-1]["content"]
        is_results = isinstance(last, list) and last and last[0].get("type") == "tool_result"
        # memdir's prompt: save two memories (memdir's tools write their index lines)
        if text.startswith("# Memory update") and not is_results:
            role = (
                "---\nname: User role\ndescription: Ana leads the data platform team\n"
                "type: user\n---\n\nAna leads the data platform team.\n"
            )
            feedback = (
                "---\nname: Polars only\ndescription: use polars, never pandas\n"
                "type: feedback\n---\n\n"
                "Use polars for dataframes.\n\n**Why:** the team standardised on it.\n\n"
                "**How to apply:** never suggest pandas.\n"
            )
            uses = (
                ToolUseBlock(
                    id="w1", name="Write", input={"file_path": str(role_file), "content": role}
                ),
                ToolUseBlock(
                    id="w2",
                    name="Write",
                    input={"file_path": str(feedback_file), "content": feedback},
                ),
            )
            return Message(role="assistant", content=uses)
        if is_results and "# Memory update" in str(body["messages"][-3:]):
            return "Saved two memories."
        return "Got it — polars it is."

    return handler


def test_example_agent_saves_memories_inside_the_parent_cache(tmp_path: Path) -> None:
    example = load_example("anthropic_agent.py")
    memory = tmp_path / "memory"
    said: list[str] = []
    with FakeAnthropicServer(handler=scripted(memory)) as server:

        async def go() -> list[Message]:
            async with AsyncAnthropic(base_url=server.base_url, api_key="test") as client:
                result: list[Message] = await example.run_agent(
                    client,
                    "claude-test",
                    memory,
                    ["I'm Ana, I lead the data platform team. Always use polars, never pandas."],
                    cwd=tmp_path,
                    say=said.append,
                )
                return result

        conversation = asyncio.run(go())
        requests = server.requests
        server.assert_no_errors()

    assert conversation[-1].text == "Got it — polars it is."
    # Memory files with valid frontmatter, and one index pointer per memory.
    saved = sorted(p.name for p in memory.glob("*.md") if p.name != "MEMORY.md")
    assert saved == ["feedback_polars.md", "user_role.md"]
    for name in saved:
        parsed = parse_memory_file((memory / name).read_text())
        assert parsed.name
        assert parsed.description
        assert parsed.type in ("user", "feedback")
        assert not parsed.malformed
    index = (memory / "MEMORY.md").read_text()
    for name in saved:
        assert index.count(f"]({name})") == 1
    # The notice reached the user, MEMORY.md left out of the count.
    assert any(line.startswith("● Saved 2 memories") for line in said)
    # Two requests: the host's answer, then the memory agent's one turn of writes, which
    # reads the host's cached prefix; its writes all succeeded, so it asks nothing more.
    assert len(requests) == 2
    parent, fork_first = requests
    assert parent.usage is not None
    assert fork_first.usage is not None
    assert parent.usage["cache_creation_input_tokens"] > 0
    assert (
        fork_first.usage["cache_read_input_tokens"] == parent.usage["cache_creation_input_tokens"]
    )
    assert fork_first.body["tools"] == parent.body["tools"]
    assert fork_first.body["system"] == parent.body["system"]


def test_memories_come_back_in_the_next_conversation(tmp_path: Path) -> None:
    example = load_example("anthropic_agent.py")
    memory = tmp_path / "memory"
    with FakeAnthropicServer(handler=scripted(memory)) as server:

        async def chat(lines: list[str]) -> None:
            async with AsyncAnthropic(base_url=server.base_url, api_key="test") as client:
                await example.run_agent(
                    client, "claude-test", memory, lines, cwd=tmp_path, say=lambda _: None
                )

        asyncio.run(
            chat(["I'm Ana, I lead the data platform team. Always use polars, never pandas."])
        )
        first_conversation = len(server.requests)
        asyncio.run(
            chat(
                [
                    "Which dataframe library should I use here, polars or pandas?",
                    "What's the weather like on the moon today?",
                ]
            )
        )
        later = server.requests[first_conversation:]
        server.assert_no_errors()

    opening = later[0].body
    system = "".join(b["text"] for b in opening["system"])
    assert str(memory) in system  # where memory lives and how to use it
    assert "MEMORY.md" in system
    reminder = json.dumps(opening["messages"][0])
    assert "<system-reminder>" in reminder
    assert "](user_role.md)" in reminder  # the index saved by the first conversation
    assert "](feedback_polars.md)" in reminder
    # The polars memory is surfaced for the dataframe question, as a file of its own...
    asked = opening["messages"]
    question_at = max(i for i, m in enumerate(asked) if "polars or pandas" in json.dumps(m))
    surfaced = [json.dumps(m) for m in asked[1:question_at]]
    assert any("never suggest pandas" in s for s in surfaced)
    # ...and nothing more for the unrelated one.
    weather = next(r.body for r in later if "moon" in json.dumps(r.body["messages"][-1]))
    moon_at = len(weather["messages"]) - 1
    between = [json.dumps(m) for m in weather["messages"][question_at + 1 : moon_at]]
    assert not any("Memory" in s and "system-reminder" in s for s in between)
