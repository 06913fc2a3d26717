"""memdir's extraction request beside the one Claude Code sends, for a real ``claude -p``
session: the same project context (the turn's date, the project's CLAUDE.md), and, in a
fork, no instruction that contradicts Claude Code's own memory section."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anthropic
import pytest

from memdir._cli._run import TranscriptReport, extract_transcript
from memdir.extract import STANDALONE_SYSTEM_PROMPT
from memdir.extract._planner import Mode
from memdir.models import AnthropicModel
from memdir.store import MemoryDir
from memdir.testing import FakeAnthropicServer, RecordedRequest
from memdir.transcripts import load_transcript
from tests.claude_code._cli import ClaudeCli, CliRun

PROMPT_HEAD = "# Memory update"
PROJECT_MARKER = "MARKER-project-4f1c: the ingest job is owned by the platform team."
LOCAL_MARKER = "MARKER-local-9b2e"
USER_MARKER = "MARKER-user-77d0"
QUESTION = "Our release freeze starts next Thursday. Please keep that in mind."


def texts(body: Mapping[str, Any]) -> list[str]:
    """Every text block of a request's messages, in order."""
    out: list[str] = []
    for message in body.get("messages") or ():
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
            continue
        out.extend(str(b.get("text", "")) for b in content or () if b.get("type") == "text")
    return out


def system_text(body: Mapping[str, Any]) -> str:
    system = body.get("system")
    if isinstance(system, str):
        return system
    return "\n".join(str(b.get("text", "")) for b in system or ())


def is_memdirs(body: Mapping[str, Any]) -> bool:
    return system_text(body).startswith(STANDALONE_SYSTEM_PROMPT) or any(
        t.startswith(PROMPT_HEAD) for t in texts(body)
    )


@pytest.fixture
def session(claude_cli: ClaudeCli) -> CliRun:
    """A one-turn session in a project whose instruction files hold markers."""
    (claude_cli.project / "CLAUDE.md").write_text(f"# Ingest\n\n{PROJECT_MARKER}\n")
    (claude_cli.project / "CLAUDE.local.md").write_text(f"{LOCAL_MARKER}\n")
    config = claude_cli.home / ".claude"
    config.mkdir(parents=True, exist_ok=True)
    (config / "CLAUDE.md").write_text(f"{USER_MARKER}\n")
    run = claude_cli.run(QUESTION, replies=("Noted: the freeze starts next Thursday.",))
    # Claude Code's own request carries every marker.
    sent = "\n".join(texts(run.turns[0].body))
    for marker in (PROJECT_MARKER, LOCAL_MARKER, USER_MARKER):
        assert marker in sent
    assert run.transcript is not None
    return run


def turn_date(run: CliRun) -> str:
    """The local date of the session's last message, as its transcript stamps it."""
    assert run.transcript is not None
    messages = load_transcript(run.transcript).messages
    stamp = messages[-1].timestamp
    assert stamp is not None
    return stamp.astimezone().date().isoformat()


def claude_codes_date(run: CliRun) -> str:
    """The date Claude Code gave its own agent (its transcript's ``date`` attachment)."""
    assert run.transcript is not None
    for line in run.transcript.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        attachment = entry.get("attachment")
        if isinstance(attachment, dict) and attachment.get("type") == "date":
            return str(attachment["date"])
    raise AssertionError("the transcript records no date")


def extract_request(
    run: CliRun, memory: Path, mode: Mode, env: Mapping[str, str] | None = None
) -> tuple[RecordedRequest, TranscriptReport]:
    """memdir's request for the session's turn, as ``memdir extract`` (and the hook) run it
    on the transcript, against the fake; ``mode`` fixed, where ``auto`` would choose."""
    assert run.transcript is not None
    transcript = load_transcript(run.transcript)
    with FakeAnthropicServer(handler=lambda body: "Nothing to save.") as server:

        async def main() -> TranscriptReport:
            # A client of the test's own, closed here: the fork's model shares it.
            client = anthropic.AsyncAnthropic(api_key="sk-ant-test", base_url=server.base_url)
            model = AnthropicModel("claude-sonnet-5-5", client=client)
            try:
                return await extract_transcript(transcript, MemoryDir(memory), model, mode=mode)
            finally:
                await client.close()

        report = asyncio.run(main())
        [request] = [r for r in server.requests if is_memdirs(r.body)]
    return request, report


def test_memdirs_standalone_request_holds_the_turns_date_and_the_claude_md(
    session: CliRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As the user runs it afterwards, from elsewhere: the session's HOME; the
    # transcript's cwd says where the project is, not the command's; a fresh memory dir.
    monkeypatch.setenv("HOME", session.env["HOME"])
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    request, report = extract_request(session, tmp_path / "fresh-memory", "standalone")
    assert report.modes == ["standalone"]
    body = request.body
    assert system_text(body).startswith(STANDALONE_SYSTEM_PROMPT)
    state, *_, last = texts(body)
    # The project's files, each once, in the cached message before the conversation.
    for marker in (PROJECT_MARKER, LOCAL_MARKER, USER_MARKER):
        assert state.count(marker) == 1
    assert f"Contents of {session.cwd / 'CLAUDE.md'}" in state
    # The turn's own date, in the request that ends the message list: the one Claude Code
    # gave its agent in the same session.
    assert turn_date(session) == claude_codes_date(session)
    assert f"Today's date is {turn_date(session)}." in last
    assert "next Thursday" in "\n".join(texts(body))


def test_in_a_fork_memdirs_prompt_defers_to_claude_codes_memory_section(
    session: CliRun, tmp_path: Path
) -> None:
    request, report = extract_request(session, tmp_path / "memory", "fork")
    assert report.modes == ["fork"]
    assert "# Memory\n" in system_text(request.body)  # Claude Code's section, as sent
    prompt = texts(request.body)[-1]
    assert prompt.startswith(PROMPT_HEAD)
    assert "Your system prompt's memory section rules" in prompt
    # Nothing that asks for another layout than the section's kebab-case name and
    # metadata.type: no frontmatter example, no list of types of memdir's own.
    assert "<short title>" not in prompt
    assert re.search(r"^type:", prompt, re.M) is None
    assert "## Types" not in prompt
    assert "One fact per file" in prompt
    assert "[[name]]" in prompt
    assert "Nothing to save." in prompt
    assert f"Today's date is {turn_date(session)}." in prompt
