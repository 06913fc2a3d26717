"""What memdir's own tools take off the memory agent's output: a path relative to the
memory directory, the ``name`` and ``type`` its file name already says, and a closing
line; and, in a store too large to list, the ``Grep`` that finds a memory the request
does not list."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.extract._prompts import extract_prompt_parts
from memdir.fork import CacheSafeParams
from memdir.messages import Message, ToolResultBlock, ToolUseBlock
from memdir.store import parse_memory_file
from memdir.testing import ScriptedModel
from memdir.tools import ToolContext, ToolOutput
from tests.extract.test_bounded_state import fill

NEW = (
    Message.user("I'm a data engineer; I look after the ingest pipelines."),
    Message.assistant("Good to know."),
)


def call(n: int, name: str, **tool_input: object) -> ToolUseBlock:
    return ToolUseBlock(id=f"toolu_{n:02d}", name=name, input=tool_input)


def run(
    memory: Path, cwd: Path, steps: list[Message | str], mode: str, messages: tuple[Message, ...]
) -> ScriptedModel:
    model = ScriptedModel(steps)
    config = ExtractConfig(mode=mode, load_instructions=False)  # type: ignore[arg-type]
    extractor = MemoryExtractor(memory, model, config)
    params = CacheSafeParams(model=model, system="You are the host agent.", tools=[])

    async def main() -> None:
        context = TurnContext(messages=messages, params=params, cwd=str(cwd))
        extractor.on_turn_end(context)
        await extractor.drain()

    asyncio.run(main())
    return model


@pytest.mark.parametrize("mode", ["standalone", "fork"])
def test_a_relative_path_lands_in_the_memory_directory_named_by_its_file(
    tmp_path: Path, mode: str
) -> None:
    memory, cwd = tmp_path / "memory", tmp_path / "project"
    cwd.mkdir()
    text = "---\ndescription: data engineer on the ingest pipelines\n---\n\nData engineer.\n"
    write = Message(
        role="assistant", content=(call(1, "Write", file_path="user_role.md", content=text),)
    )
    model = run(memory, cwd, [write], mode, NEW)
    # The run ended on its write: no request for a closing line.
    assert len(model.requests) == 1
    assert not (cwd / "user_role.md").exists()
    stored = (memory / "user_role.md").read_text()
    parsed = parse_memory_file(stored)
    assert parsed.name == "user-role"
    assert parsed.type == "user"
    assert parsed.description == "data engineer on the ingest pipelines"
    assert "Data engineer." in stored
    assert "](user_role.md)" in (memory / "MEMORY.md").read_text()


def test_a_relative_path_cannot_climb_out_of_the_memory_directory(tmp_path: Path) -> None:
    memory, cwd = tmp_path / "memory", tmp_path / "project"
    cwd.mkdir()
    escape = Message(
        role="assistant",
        content=(call(1, "Write", file_path="../project/notes.md", content="x\n"),),
    )
    model = run(memory, cwd, [escape, "Nothing to save."], "standalone", NEW)
    assert not (cwd / "notes.md").exists()
    (result,) = model.requests[1].messages[-1].content
    assert isinstance(result, ToolResultBlock)
    assert result.is_error
    assert "inside the memory directory" in result.text


def test_a_type_or_name_the_agent_writes_wins_over_the_file_name(tmp_path: Path) -> None:
    memory, cwd = tmp_path / "memory", tmp_path / "project"
    cwd.mkdir()
    text = "---\nname: Ingest owner\ndescription: who owns ingest\ntype: project\n---\n\nMe.\n"
    write = Message(
        role="assistant", content=(call(1, "Write", file_path="user_role.md", content=text),)
    )
    run(memory, cwd, [write], "standalone", NEW)
    parsed = parse_memory_file((memory / "user_role.md").read_text())
    assert (parsed.name, parsed.type) == ("ingest-owner", "project")


def test_the_prompt_asks_only_for_what_the_tools_cannot_derive() -> None:
    own = extract_prompt_parts(2, "", memory_dir="/m", memdir_indexes=True, own_tools=True)
    host = extract_prompt_parts(2, "", memory_dir="/m", memdir_indexes=True)
    assert "(relative paths start there)" in own.whole
    assert "---\ndescription: <one specific line" in own.whole
    assert "type: <" not in own.whole
    assert "name: <" not in own.whole
    assert "## Finish" not in own.whole  # writes end the run: no closing line asked for
    assert "no words beside them" in own.whole
    # Where the real Claude Code CLI runs the calls, every field, and absolute paths.
    assert "Use absolute paths." in host.whole
    assert "name: <short-name-in-kebab-case>" in host.whole
    assert "## Finish" in host.whole


def test_memdirs_own_request_keeps_what_never_changes_out_of_its_last_message() -> None:
    parts = extract_prompt_parts(
        2, "", memory_dir="/m", memdir_indexes=True, own_tools=True, standalone=True
    )
    assert parts.request.startswith("# Memory update\n\nLook at the last ~2 messages above.")
    assert "/m" not in parts.request
    assert "The memory directory is `/m`." in parts.instructions
    assert "## Each request" in parts.instructions


def test_a_memory_the_request_does_not_list_is_found_with_grep_and_updated(
    tmp_path: Path,
) -> None:
    # 60 memories: past the list's budget, and the new messages name none of them, so the
    # request lists none; the agent greps, reads and edits the one about the person.
    memory, cwd = tmp_path / "memory", tmp_path / "project"
    cwd.mkdir()
    fill(memory, 60)
    role = "---\ndescription: the person's role\n---\n\nBackend engineer.\n"
    (memory / "user_role.md").write_text(role)
    new = (Message.user("Actually I moved teams: data engineer now."), Message.assistant("Noted."))
    steps: list[Message | str] = [
        Message(role="assistant", content=(call(1, "Grep", pattern="role", **{"-i": True}),)),
        Message(role="assistant", content=(call(2, "Read", file_path="user_role.md"),)),
        Message(
            role="assistant",
            content=(
                call(
                    3,
                    "Edit",
                    file_path="user_role.md",
                    old_string="Backend engineer.",
                    new_string="Data engineer (was backend).",
                ),
            ),
        ),
    ]
    model = run(memory, cwd, steps, "standalone", new)
    first = model.requests[0]
    assert "Grep" in [tool["name"] for tool in first.tools]
    assert "user_role.md" not in first.messages[-1].text  # not listed: found by Grep
    (result,) = model.requests[1].messages[-1].content
    assert isinstance(result, ToolResultBlock)
    assert "user_role.md" in result.text
    assert "Data engineer (was backend)." in (memory / "user_role.md").read_text()


class ProjectWrite:
    """A tool of the host's own, named like memdir's Write but declaring no effects: it
    writes a relative path from the process's folder, the project's."""

    def __init__(self, project: Path) -> None:
        self.project = project

    @property
    def name(self) -> str:
        return "Write"

    def definition(self) -> dict[str, object]:
        return {"name": "Write", "description": "Write a file.", "input_schema": {}}

    async def run(self, tool_input: Mapping[str, Any], context: ToolContext) -> ToolOutput:
        (self.project / str(tool_input["file_path"])).write_text(str(tool_input["content"]))
        return ToolOutput(content="written")


def test_a_tool_that_declares_no_effects_is_judged_from_the_projects_folder(
    tmp_path: Path,
) -> None:
    # The gate takes such a tool's relative path from where it runs, the project: not
    # from the memory directory, where memdir's own tools start.
    memory, cwd = tmp_path / "memory", tmp_path / "project"
    cwd.mkdir()
    model = ScriptedModel(
        [
            Message(
                role="assistant",
                content=(call(1, "Write", file_path="user_role.md", content="x\n"),),
            ),
            "Nothing to save.",
        ]
    )
    extractor = MemoryExtractor(
        memory,
        model,
        ExtractConfig(mode="standalone", load_instructions=False),
        tools=[ProjectWrite(cwd)],
    )

    async def main() -> None:
        extractor.on_turn_end(TurnContext(messages=NEW, cwd=str(cwd)))
        await extractor.drain()

    asyncio.run(main())
    assert not (cwd / "user_role.md").exists()


def test_a_team_memory_gets_its_name_and_type_from_its_file_name(tmp_path: Path) -> None:
    memory, cwd = tmp_path / "memory", tmp_path / "project"
    cwd.mkdir()
    text = "---\ndescription: CI must pass before a merge\n---\n\nCI first.\n"
    write = Message(
        role="assistant",
        content=(call(1, "Write", file_path="team/feedback_ci.md", content=text),),
    )
    model = ScriptedModel([write])
    config = ExtractConfig(mode="standalone", team=True, load_instructions=False)
    extractor = MemoryExtractor(memory, model, config)

    async def main() -> None:
        extractor.on_turn_end(TurnContext(messages=NEW, cwd=str(cwd)))
        await extractor.drain()

    asyncio.run(main())
    parsed = parse_memory_file((memory / "team" / "feedback_ci.md").read_text())
    assert (parsed.name, parsed.type) == ("feedback-ci", "feedback")
    assert "(relative paths start in the private one)" in str(model.requests[0].system)
