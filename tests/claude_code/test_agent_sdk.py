"""memdir's Stop hook inside the Claude Agent SDK, with the SDK driving the real CLI."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

from memdir.integrations.claude_agent_sdk import MemdirStopHook
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
