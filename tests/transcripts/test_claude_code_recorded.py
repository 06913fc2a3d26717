"""A session written by Claude Code itself, against a local fake of the Anthropic API.

The Claude Code binary that ``claude-agent-sdk`` bundles (2.1.332 when this was
written) runs ``claude -p`` twice in a scratch home, with telemetry and all other traffic
off, so it talks only to the fake server on 127.0.0.1. The server keeps every request
body it received, which is what the rebuilt requests are compared with. The tests skip
when the SDK or its binary is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from memdir.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from memdir.testing import FakeAnthropicServer
from memdir.transcripts import Transcript, host_model, load_transcript


def _bundled_claude() -> Path | None:
    spec = importlib.util.find_spec("claude_agent_sdk")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "_bundled" / "claude"
    return binary if binary.is_file() and os.access(binary, os.X_OK) else None


CLAUDE = _bundled_claude()
pytestmark = pytest.mark.skipif(CLAUDE is None, reason="claude-agent-sdk's bundled Claude Code")

PROMPTS = ["Read a.txt and b.txt, then tell me what they say.", "Thanks. Now say bye."]
BILLING = "x-anthropic-billing-header:"


def _reply(project: Path) -> Any:
    def read(call: str, name: str) -> ToolUseBlock:
        return ToolUseBlock(id=call, name="Read", input={"file_path": str(project / name)})

    def handler(body: dict[str, Any]) -> Message | str:
        messages = body.get("messages", [])
        tools = {t.get("name") for t in body.get("tools", []) if isinstance(t, dict)}
        if "Read" in tools and len(messages) <= 2:  # the first turn: two reads at once
            return Message(
                role="assistant",
                content=(
                    TextBlock(text="Reading both files."),
                    read("toolu_a", "a.txt"),
                    read("toolu_b", "b.txt"),
                ),
            )
        return "They say alpha and beta." if len(messages) <= 4 else "Bye."

    return handler


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Transcript, list[dict[str, Any]]]:
    """The session Claude Code wrote, and the bodies the server received (as sent)."""
    assert CLAUDE is not None
    base = tmp_path_factory.mktemp("claude")
    home, project = base / "home", base / "project"
    home.mkdir()
    project.mkdir()
    (project / "a.txt").write_text("alpha\n", encoding="utf-8")
    (project / "b.txt").write_text("beta\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC", "CLAUDE"))}
    with FakeAnthropicServer(handler=_reply(project)) as fake:
        env.update(
            HOME=str(home),
            ANTHROPIC_BASE_URL=fake.base_url,
            ANTHROPIC_API_KEY="sk-ant-test",
            DISABLE_TELEMETRY="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            DISABLE_AUTOUPDATER="1",
        )
        session: list[str] = []
        for prompt in PROMPTS:
            command = [str(CLAUDE), "-p", prompt, "--output-format", "json"]
            command += ["--permission-mode", "acceptEdits"]
            command += ["--resume", *session] if session else []
            done = subprocess.run(
                command, cwd=project, env=env, capture_output=True, text=True, timeout=180
            )
            assert done.returncode == 0, done.stderr[-2000:]
            session = [json.loads(done.stdout)["session_id"]]
        sent = [_as_hashed(r.body, r.headers) for r in fake.requests if r.path == "/v1/messages"]
    (path,) = (home / ".claude" / "projects").glob(f"*/{session[0]}.jsonl")
    return load_transcript(path), sent


def _blocks(message: Any) -> Any:
    if isinstance(message, dict) and isinstance(message.get("content"), str):
        return {**message, "content": [{"type": "text", "text": message["content"]}]}
    return message


def _as_hashed(body: dict[str, Any], headers: Any) -> dict[str, Any]:
    """A body as Claude Code built it: before the billing block, stream and metadata were
    added and ``betas`` became a header; string contents as one text block."""
    out = {k: v for k, v in body.items() if k not in ("stream", "metadata")}
    system = out.get("system")
    if isinstance(system, list):
        out["system"] = [b for b in system if not str(b.get("text", "")).startswith(BILLING)]
    if headers.get("anthropic-beta"):
        out["betas"] = headers["anthropic-beta"].split(",")
    out["messages"] = [_blocks(m) for m in out["messages"]]
    return out


def test_the_session_loads_whole(recorded: tuple[Transcript, list[dict[str, Any]]]) -> None:
    transcript, _ = recorded
    assert transcript.skipped == ()
    assert transcript.unusable_requests == ()
    blocks = [
        b.id if isinstance(b, ToolUseBlock) else b.tool_use_id
        for m in transcript.messages
        for b in m.content
        if isinstance(b, ToolUseBlock | ToolResultBlock)
    ]
    assert blocks == ["toolu_a", "toolu_b", "toolu_a", "toolu_b"]


def test_each_request_is_rebuilt_as_it_was_sent(
    recorded: tuple[Transcript, list[dict[str, Any]]],
) -> None:
    transcript, sent = recorded
    assert len(transcript.requests) == 3
    for request in transcript.requests:
        assert request.verify()
        body = request.body()
        body["messages"] = [_blocks(m) for m in body["messages"]]
        assert body in sent
        assert not any(b.get("text", "").startswith(BILLING) for b in body["system"])


def test_the_last_main_request_is_the_last_one_sent(
    recorded: tuple[Transcript, list[dict[str, Any]]],
) -> None:
    transcript, sent = recorded
    last = transcript.last_main_request()
    assert last is not None
    assert last.query_source == "sdk"
    assert last.model == sent[-1]["model"]
    assert [_blocks(m) for m in last.messages] == sent[-1]["messages"]
    assert last.messages[-1]["content"] == [
        {"type": "text", "text": PROMPTS[1], "cache_control": {"type": "ephemeral"}}
    ]


def test_the_host_model_is_the_one_its_last_request_asked_for(
    recorded: tuple[Transcript, list[dict[str, Any]]],
) -> None:
    transcript, sent = recorded
    # The fake answers as "claude-fake-1": what was asked, not what answered, is the host's.
    answered = [m.extra.get("model") for m in transcript.messages if m.role == "assistant"]
    assert set(answered) == {"claude-fake-1"}
    asked = [body["model"] for body in sent if body.get("tools")]
    assert host_model(transcript) == asked[-1] == "claude-opus-5-5"
