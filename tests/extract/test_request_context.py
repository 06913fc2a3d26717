"""What each run's request tells the memory agent about its situation: the turn's date,
the project's instruction files (memdir's own request), and, in a fork, whether the
host's system prompt already explains memory."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path

import pytest

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.fork import CacheSafeParams
from memdir.messages import Message
from memdir.models import ModelRequest
from memdir.recall import memory_prompt
from memdir.testing import FakeClock, ScriptedModel

MARKER = "MARKER-5d1e: deployments go through the release train."
HOST_MEMORY = (
    "You are the host agent.\n\n# Memory\n\nYou have a persistent file-based memory at "
    "`/somewhere/memory/`. Each memory is one file holding one fact.\n"
)


def stamped(text: str, role: str, when: str) -> Message:
    moment = datetime.datetime.fromisoformat(when)
    if role == "user":
        return Message.user(text, timestamp=moment)
    return Message.assistant(text, timestamp=moment)


CONVERSATION = (
    stamped("The freeze starts next Thursday.", "user", "2026-03-04T12:00:00+00:00"),
    stamped("Noted.", "assistant", "2026-03-05T12:00:01+00:00"),
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with a CLAUDE.md, and a HOME of its own (no user files)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CLAUDE_CODE_DISABLE_CLAUDE_MDS", raising=False)
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "CLAUDE.md").write_text(f"# Project\n\n{MARKER}\n")
    return folder


def one_request(
    memory: Path,
    turn: TurnContext,
    config: ExtractConfig | None = None,
    clock: FakeClock | None = None,
) -> ModelRequest:
    model = ScriptedModel(["Nothing to save."])
    extractor = MemoryExtractor(memory, model, config or ExtractConfig(), clock=clock)

    async def main() -> None:
        extractor.on_turn_end(turn)
        await extractor.drain()

    asyncio.run(main())
    (request,) = model.requests
    return request


def test_memdirs_own_request_holds_the_turns_date_and_the_projects_claude_md(
    tmp_path: Path, project: Path
) -> None:
    # A fresh memory dir: nothing in it yet that could say what day it is.
    memory = tmp_path / "memory"
    request = one_request(memory, TurnContext(messages=CONVERSATION, cwd=str(project)))
    opening, *conversation, last = request.messages
    assert opening.is_meta
    # Before the conversation, in the cached prefix: they change rarely.
    assert "## The project's instruction files" in opening.text
    assert f"Contents of {project / 'CLAUDE.md'} (project instructions" in opening.text
    assert MARKER in opening.text
    # The memory's state goes last, after the request: a save changes nothing before it.
    assert "## `MEMORY.md` as it is now" not in opening.text
    # memdir writes the index lines: the agent is not shown the index at all.
    assert "MEMORY.md` as it is now" not in last.text
    assert "The memory directory is empty." in last.text
    assert MARKER not in last.text
    # The date of the newest message the run covers, not of the first, nor the run's.
    local = CONVERSATION[-1].timestamp
    assert local is not None
    today = local.astimezone().date().isoformat()
    assert f"\n\nToday's date is {today}.\n\n" in last.text
    # Only in the last message: the cached prefix before it stays the same on other days.
    assert isinstance(request.system, str)
    assert "Today's date" not in request.system + opening.text
    assert MARKER not in request.system


def test_without_timestamps_the_date_is_when_the_turn_was_reported(
    tmp_path: Path, project: Path
) -> None:
    clock = FakeClock(datetime.datetime(2026, 7, 1, 12, tzinfo=datetime.UTC).timestamp())
    plain = (Message.user("The freeze starts next Thursday."), Message.assistant("Noted."))
    request = one_request(
        tmp_path / "memory", TurnContext(messages=plain, cwd=str(project)), clock=clock
    )
    expected = datetime.datetime.fromtimestamp(clock()).date().isoformat()
    assert f"Today's date is {expected}.\n\n" in request.messages[-1].text


def test_the_instruction_files_can_be_left_out(tmp_path: Path, project: Path) -> None:
    config = ExtractConfig(load_instructions=False)
    turn = TurnContext(messages=CONVERSATION, cwd=str(project))
    request = one_request(tmp_path / "memory", turn, config)
    assert MARKER not in request.messages[0].text
    assert "instruction files" not in request.messages[0].text


def test_a_fork_never_loads_the_instruction_files_itself(tmp_path: Path, project: Path) -> None:
    # The host's request is the fork's context: it holds the files if the host loads them.
    model = ScriptedModel(["Nothing to save."])
    params = CacheSafeParams(model=model, system="You are the host agent.")
    extractor = MemoryExtractor(tmp_path / "memory", model, ExtractConfig(mode="fork"))

    async def main() -> None:
        extractor.on_turn_end(TurnContext(messages=CONVERSATION, params=params, cwd=str(project)))
        await extractor.drain()

    asyncio.run(main())
    (request,) = model.requests
    assert all(MARKER not in m.text for m in request.messages)


def fork_prompt(tmp_path: Path, system: object, *, host_messages: tuple[Message, ...] = ()) -> str:
    model = ScriptedModel(["Nothing to save."])
    params = CacheSafeParams(model=model, system=system)  # type: ignore[arg-type]
    extractor = MemoryExtractor(tmp_path / "memory", model, ExtractConfig(mode="fork"))
    turn = TurnContext(messages=(*host_messages, *CONVERSATION), params=params, cwd=str(tmp_path))

    async def main() -> None:
        extractor.on_turn_end(turn)
        await extractor.drain()

    asyncio.run(main())
    (request,) = model.requests
    assert request.system == system  # the host's, unchanged: the cache prefix holds
    return request.messages[-1].text


@pytest.mark.parametrize(
    "system",
    [
        pytest.param(HOST_MEMORY, id="claude-code"),
        pytest.param([{"type": "text", "text": HOST_MEMORY}], id="blocks"),
    ],
)
def test_a_fork_defers_to_the_hosts_memory_section(tmp_path: Path, system: object) -> None:
    prompt = fork_prompt(tmp_path, system)
    assert "Your system prompt's memory section rules" in prompt
    assert "<short title>" not in prompt
    assert "## Types" not in prompt
    assert "Today's date is 2026-03-0" in prompt


def test_memdirs_own_memory_section_counts_as_the_hosts(tmp_path: Path) -> None:
    system = "You are the host agent.\n\n" + memory_prompt(tmp_path / "memory")
    assert "Your system prompt's memory section rules" in fork_prompt(tmp_path, system)


def test_a_memory_section_in_an_openai_system_message_counts(tmp_path: Path) -> None:
    system_message = Message(role="system", content=Message.user(HOST_MEMORY).content)
    prompt = fork_prompt(tmp_path, None, host_messages=(system_message,))
    assert "Your system prompt's memory section rules" in prompt


def test_a_host_without_a_memory_section_gets_the_whole_prompt(tmp_path: Path) -> None:
    prompt = fork_prompt(tmp_path, "You are the host agent.")
    assert "## Types" in prompt
    # memdir's tools run the fork's writes: they take the name and type from the file's
    # name and write Claude Code's layout, so the agent writes the description alone.
    assert "---\ndescription: <one specific line" in prompt
    assert "memdir takes `name` and `type` from the file name" in prompt
    assert "Your system prompt's memory section" not in prompt
