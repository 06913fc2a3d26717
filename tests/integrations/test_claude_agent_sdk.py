"""The Claude Agent SDK Stop hook, called as the SDK calls it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from memdir.integrations.claude_agent_sdk import MemdirStopHook
from memdir.state import StateFile
from tests.cli.conftest import TURNS, append_turns, write_session


def stop(session: Path, cwd: Path, **extra: object) -> dict[str, object]:
    return {
        "hook_event_name": "Stop",
        "session_id": "sess-1",
        "transcript_path": str(session),
        "cwd": str(cwd),
        "stop_hook_active": False,
        **extra,
    }


def test_the_hook_answers_at_once_and_saves_in_the_background(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    session = write_session(tmp_path / "s.jsonl", TURNS[:2], cwd=str(tmp_path))
    hook = MemdirStopHook(memory, model="offline")

    async def main() -> None:
        answer = await hook(stop(session, tmp_path), None, {"signal": None})
        assert answer == {}
        assert not (memory / "user_role.md").exists()  # not yet: it runs as a task
        await hook.drain()
        assert (memory / "user_role.md").exists()
        assert StateFile(memory).get("sess-1").cursor == "a1"
        # The next answer: only the new turns are looked at.
        append_turns(session, 2, TURNS[2:4], cwd=str(tmp_path))
        await hook(stop(session, tmp_path), None, {"signal": None})
        await hook.drain()

    asyncio.run(main())
    assert hook.results == [0, 0]
    assert StateFile(memory).get("sess-1").cursor == "a3"
    log = (memory / ".memdir" / "hook.log").read_text()
    assert "2 turn(s)" in log
    # The offline model spends nothing: its figures are labelled as estimates.
    assert "tokens estimated ~" in log
    assert "from cache" not in log


def test_other_events_and_a_continuing_stop_are_ignored(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    session = write_session(tmp_path / "s.jsonl", TURNS[:2], cwd=str(tmp_path))
    hook = MemdirStopHook(memory, model="offline")

    async def main() -> None:
        for event in (
            stop(session, tmp_path, stop_hook_active=True),
            stop(session, tmp_path, hook_event_name="SubagentStop"),
            stop(session, tmp_path, hook_event_name="PreToolUse"),
            {"hook_event_name": "Stop"},
        ):
            assert await hook(event, None, {"signal": None}) == {}
        await hook.drain()

    asyncio.run(main())
    assert hook.results == []
    assert not memory.exists()


def test_a_missing_transcript_is_logged_not_raised(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    hook = MemdirStopHook(memory, model="offline")

    async def main() -> None:
        await hook(stop(tmp_path / "gone.jsonl", tmp_path), None, {"signal": None})
        await hook.drain()

    asyncio.run(main())
    assert hook.results == [1]
    assert "extraction failed" in (memory / ".memdir" / "hook.log").read_text()


def test_the_matcher_is_the_sdks() -> None:
    from claude_agent_sdk import HookMatcher

    hook = MemdirStopHook(model="offline")
    matcher = hook.matcher(timeout=30)
    assert isinstance(matcher, HookMatcher)
    assert matcher.hooks == [hook]
    assert matcher.timeout == 30


def test_claude_codes_memory_switch_leaves_the_session_alone(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    session = write_session(tmp_path / "s.jsonl", TURNS[:2], cwd=str(tmp_path))
    env = {"HOME": str(tmp_path), "PATH": "", "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"}
    hook = MemdirStopHook(memory, model="offline", env=env)

    async def main() -> dict[str, object]:
        answer = await hook(stop(session, tmp_path), None, {"signal": None})
        await hook.drain()
        return answer

    assert asyncio.run(main()) == {}
    assert hook.results == []  # nothing started
    assert not memory.exists()


def test_a_model_that_cannot_run_is_shown_to_the_user(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    session = write_session(tmp_path / "s.jsonl", TURNS[:2], cwd=str(tmp_path))
    env = {"HOME": str(tmp_path), "PATH": ""}  # no key for the model named
    hook = MemdirStopHook(memory, model="anthropic:claude-opus-5-5", env=env)

    async def main() -> dict[str, object]:
        answer = await hook(stop(session, tmp_path), None, {"signal": None})
        await hook.drain()
        return answer

    answer = asyncio.run(main())
    assert "memdir saved no memories: anthropic:claude-opus-5-5 needs a key" in str(
        answer["systemMessage"]
    )
    assert hook.results == [2]
    assert not (memory / "user_role.md").exists()
