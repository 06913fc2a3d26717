"""memdir's Stop hook inside the Claude Agent SDK, with the SDK driving the real CLI."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from memdir.integrations.claude_agent_sdk import MemdirStopHook
from memdir.messages import Message, ToolUseBlock
from memdir.state import StateFile
from memdir.store import MemoryDir, default_memory_dir
from memdir.testing import FakeAnthropicServer, Reply
from tests.claude_code._cli import ClaudeCli, is_agent_turn, side_reply


def answer(body: dict[str, Any]) -> Reply:
    return "Noted, Ana." if is_agent_turn(body) else side_reply(body)


def test_the_hook_saves_from_a_session_the_sdk_ran(claude_cli: ClaudeCli) -> None:
    from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query

    async def main(base_url: str) -> list[Any]:
        env = claude_cli.env(base_url=base_url)
        # The CLI's HOME is the test's: the hook finds the same folder under that env.
        hook = MemdirStopHook(model="offline", env=env)
        options = ClaudeAgentOptions(
            cli_path=claude_cli.binary,
            cwd=claude_cli.project,
            env=env,
            hooks={"Stop": [hook.matcher()]},
        )
        prompt = "I'm Ana, I lead the data platform team. Always use polars, never pandas."
        seen = [message async for message in query(prompt=prompt, options=options)]
        await hook.drain()
        assert hook.results == [0]
        return seen

    with FakeAnthropicServer(handler=answer) as server:
        seen = asyncio.run(main(server.base_url))
        server.assert_no_errors()
    results = [m for m in seen if isinstance(m, ResultMessage)]
    assert len(results) == 1
    assert not results[0].is_error
    # The folder the CLI loads for that project, computed from the same environment.
    folder = MemoryDir(default_memory_dir(claude_cli.project, env=claude_cli.env()))
    assert {h.filename for h in folder.scan()}  # the role and the preference
    assert StateFile(folder).get(results[0].session_id).cursor is not None
    assert Path(folder.root / ".memdir" / "hook.log").read_text().count("1 run(s)") == 1


def test_the_example_saves_and_the_next_run_loads(claude_cli: ClaudeCli) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "claude_agent_sdk_agent.py"
    with FakeAnthropicServer(handler=answer) as server:
        env = claude_cli.env(base_url=server.base_url)
        for prompt in ("I'm Ana, I lead the data platform team.", "Who am I?"):
            done = subprocess.run(
                [sys.executable, str(example), prompt, "--memory-model", "offline"],
                cwd=claude_cli.project,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            assert "Noted, Ana." in done.stdout
        server.assert_no_errors()
        second_session_first_request = server.requests[-1].body
    folder = MemoryDir(default_memory_dir(claude_cli.project, env=env))
    assert "user_role.md" in {h.filename for h in folder.scan()}
    assert "user_role.md" in str(second_session_first_request["messages"][0])


def test_a_logged_in_sdk_host_saves_through_claude_code_without_a_key(
    claude_cli: ClaudeCli,
) -> None:
    # No model named and no API key: the memory agent runs in Claude Code, with the
    # CLI's own login (tokens in its config folder), not offline.
    from claude_agent_sdk import ClaudeAgentOptions, query

    from tests.claude_code.test_claude_code_backend import (
        MEMORY_TEXT,
        NO_KEYS,
        is_memory_request,
        log_in,
    )

    log_in(claude_cli)

    def reply(body: dict[str, Any]) -> Reply:
        if not is_agent_turn(body):
            return side_reply(body)
        if not is_memory_request(body):
            return "Noted, Ana."
        if any(
            isinstance(b, dict) and b.get("type") == "tool_result"
            for m in body["messages"]
            if isinstance(m.get("content"), list)
            for b in m["content"]
        ):
            return "Saved."
        # The host's SDK session has the SDK's empty system prompt, without Claude Code's
        # memory section: the folder is the one memdir's prompt names.
        folder = default_memory_dir(claude_cli.project, env=claude_cli.env())
        assert str(folder) in json.dumps(body["messages"])
        write = ToolUseBlock(
            id="toolu_mem_1",
            name="Write",
            input={"file_path": str(folder / "user_role.md"), "content": MEMORY_TEXT},
        )
        return Message(role="assistant", content=(write,))

    async def main(base_url: str) -> None:
        env = {**claude_cli.env(base_url=base_url), **NO_KEYS}
        hook = MemdirStopHook(env=env)
        options = ClaudeAgentOptions(
            cli_path=claude_cli.binary,
            cwd=claude_cli.project,
            env=env,
            hooks={"Stop": [hook.matcher()]},
        )
        prompt = "I'm Ana, I lead the data platform team."
        _ = [message async for message in query(prompt=prompt, options=options)]
        await hook.drain()
        folder = default_memory_dir(claude_cli.project, env=env)
        log = (folder / ".memdir" / "hook.log").read_text()
        assert hook.results == [0], log

    with FakeAnthropicServer(handler=reply) as server:
        asyncio.run(main(server.base_url))
        server.assert_no_errors()
        assert any(is_memory_request(r.body) for r in server.requests)
    folder = MemoryDir(default_memory_dir(claude_cli.project, env=claude_cli.env()))
    assert "Ana leads the data platform team." in (folder.root / "user_role.md").read_text()
    log = (folder.root / ".memdir" / "hook.log").read_text()
    assert "1 memory(ies) saved" in log, log
