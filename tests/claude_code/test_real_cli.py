"""memdir and today's Claude Code CLI share one memory: the index, the files, the transcript."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memdir.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from memdir.store import MemoryDir, default_memory_dir, format_memory_file
from memdir.testing import Reply
from memdir.transcripts import load_transcript
from tests.claude_code._cli import ClaudeCli, CliRun, memory_dir_in


def test_the_cli_loads_the_index_memdir_wrote(claude_cli: ClaudeCli) -> None:
    folder = MemoryDir(default_memory_dir(claude_cli.project, env=claude_cli.env()))
    folder.write("MEMORY.md", "- [Polars](polars.md) — data frames: polars, never pandas\n")

    run = claude_cli.run("Which data frame library do we use?", replies=["Polars."])

    # Both tools compute the same folder, and the CLI reads the index from it.
    assert run.memory_dir == folder.root
    first = run.first_user_text()
    assert f"Contents of {folder.entrypoint}" in first
    assert "- [Polars](polars.md) — data frames: polars, never pandas" in first
    assert run.stdout.strip() == "Polars."


# --- a memory the CLI's own agent writes --------------------------------------------------

MEMORY_TEXT = format_memory_file(
    name="Always use polars, never pandas",
    description="Data frames: polars only",
    type="feedback",
    body="Use polars for every data frame.\n\n**Why:** the team standardised on it.",
)


def write_then_confirm(filename: str, text: str, done: str) -> Callable[[dict[str, Any]], Reply]:
    """Turn 1: Write ``text`` to ``filename`` in the memory folder; turn 2: answer ``done``."""

    def reply(body: dict[str, Any]) -> Reply:
        if any(
            block.get("type") == "tool_result"
            for message in body["messages"]
            if isinstance(message.get("content"), list)
            for block in message["content"]
        ):
            return done
        folder = memory_dir_in(body, Path("/"))
        assert folder is not None, "the system prompt names no memory folder"
        write = ToolUseBlock(
            id="toolu_write_1",
            name="Write",
            input={"file_path": str(folder / filename), "content": text},
        )
        return Message(role="assistant", content=(write,))

    return reply


_write_then_confirm = write_then_confirm("polars.md", MEMORY_TEXT, "Saved.")


@pytest.fixture(scope="module")
def write_run(claude_binary: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> CliRun:
    """One session whose agent saves a memory with the Write tool."""
    cli = ClaudeCli(*claude_binary, tmp_path_factory.mktemp("write-session"))
    return cli.run("Remember: we use polars, never pandas.", replies=_write_then_confirm)


def test_a_memory_the_cli_writes_is_re_serialised(write_run: CliRun) -> None:
    assert write_run.memory_dir is not None
    written = (write_run.memory_dir / "polars.md").read_bytes()
    # What Claude Code 2.1.332 wrote for MEMORY_TEXT, byte for byte (session id and time
    # vary):
    #   ---\n
    #   name: always-use-polars-never-pandas\n
    #   description: "Data frames: polars only"\n
    #   metadata:\n
    #     node_type: memory\n
    #     type: feedback\n
    #     originSessionId: 75f76813-da6d-417a-af50-769ce96fd5f6\n
    #     modified: 2026-12-03T07:26:50.027Z\n
    #   ---\n
    #   \n
    #   Use polars for every data frame.\n
    #   \n
    #   **Why:** the team standardised on it.\n
    # The name is slugified, the description double-quoted, and the top-level `type`
    # moved under `metadata` with the stamps; the body is kept as written.
    expected = (
        rb"---\n"
        rb"name: always-use-polars-never-pandas\n"
        rb'description: "Data frames: polars only"\n'
        rb"metadata:\n"
        rb"  node_type: memory\n"
        rb"  type: feedback\n"
        rb"  originSessionId: " + re.escape(write_run.session_id.encode()) + rb"\n"
        rb"  modified: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\n"
        rb"---\n"
        rb"\n"
        rb"Use polars for every data frame\.\n"
        rb"\n"
        rb"\*\*Why:\*\* the team standardised on it\.\n"
    )
    assert re.fullmatch(expected, written), written


def test_memdir_lists_a_memory_the_cli_wrote(write_run: CliRun) -> None:
    assert write_run.memory_dir is not None
    headers = MemoryDir(write_run.memory_dir).scan()
    assert [h.filename for h in headers] == ["polars.md"]
    assert headers[0].name == "always-use-polars-never-pandas"
    assert headers[0].description == "Data frames: polars only"
    assert headers[0].type == "feedback"  # read from metadata.type, where the CLI moved it


def test_memdir_loads_the_cli_transcript(write_run: CliRun) -> None:
    assert write_run.transcript is not None
    assert write_run.transcript.name == f"{write_run.session_id}.jsonl"

    transcript = load_transcript(write_run.transcript)

    assert transcript.format == "claude-code"
    # Every line type today's CLI writes is known: nothing skipped, nothing warned about.
    assert transcript.skipped == ()
    assert transcript.session_id == write_run.session_id
    assert transcript.cwd == str(write_run.cwd.resolve())
    roles = [m.role for m in transcript.messages]
    assert roles == ["user", "assistant", "user", "assistant"]
    prompt, call, result, answer = transcript.messages
    assert prompt.content == (TextBlock(text="Remember: we use polars, never pandas."),)
    (write,) = call.tool_uses
    assert write.name == "Write"
    assert write.input["content"] == MEMORY_TEXT
    (done,) = result.content
    assert isinstance(done, ToolResultBlock)
    assert done.tool_use_id == write.id
    assert answer.text == "Saved."


# --- a memory memdir wrote, then the CLI's agent edits ------------------------------------

MEMDIR_WROTE = format_memory_file(
    name="Deploys go out on Thursdays",
    description="Release train: Thursdays, 10:00 UTC",
    type="project",
    body="The release train leaves on Thursdays.\n\n**Why:** QA signs off on Wednesdays.",
    origin_session_id="3f2c9a4e-7b1d-4c8e-9a55-1d2e3f4a5b6c",
    modified="2026-12-01T09:30:00.000Z",
)


def test_a_memory_memdir_wrote_changes_only_its_stamp_when_the_cli_rewrites_it(
    claude_cli: ClaudeCli,
) -> None:
    folder = MemoryDir(default_memory_dir(claude_cli.project, env=claude_cli.env()))
    folder.write("deploys.md", MEMDIR_WROTE)

    rewrite = write_then_confirm("deploys.md", MEMDIR_WROTE, "Done.")
    claude_cli.run("Keep the deploy memory as it is.", replies=rewrite)

    after = (folder.root / "deploys.md").read_text(encoding="utf-8")
    stamp = re.compile(r"^  modified: .*$", re.M)
    assert after != MEMDIR_WROTE  # the CLI did write it: a new stamp
    assert stamp.sub("  modified: *", after) == stamp.sub("  modified: *", MEMDIR_WROTE)
