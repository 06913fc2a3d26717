"""Bash: output, exit status, timeouts that kill the whole process group, the output cap."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from memdir.tools._base import ToolContext, ToolError, ToolOutput
from memdir.tools._bash import MAX_OUTPUT_CHARS, BashTool


def bash(cwd: Path, tool_input: dict[str, Any]) -> ToolOutput:
    return asyncio.run(BashTool(cwd).run(tool_input, ToolContext()))


def gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie nobody reaped yet counts as exited)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def assert_gone(pid: int) -> None:
    # SIGKILL is delivered by the kernel on its own schedule; poll, without sleeping,
    # for a bounded time.
    deadline = time.monotonic() + 10
    while not gone(pid):
        assert time.monotonic() < deadline, f"process {pid} is still running"
        os.sched_yield()


def test_echo(tmp_path: Path) -> None:
    out = bash(tmp_path, {"command": "echo hello", "description": "Say hello"})
    assert out == ToolOutput(content="hello")


def test_no_output(tmp_path: Path) -> None:
    assert bash(tmp_path, {"command": "true"}) == ToolOutput(content="(no output)")


def test_exit_code_is_an_error_with_the_code_shown(tmp_path: Path) -> None:
    out = bash(tmp_path, {"command": "echo before; exit 3"})
    assert out.is_error
    assert out.content == "before\nExit code 3"


def test_stderr_is_merged_in_order(tmp_path: Path) -> None:
    out = bash(tmp_path, {"command": "echo out; echo err >&2; echo out2"})
    assert out.content == "out\nerr\nout2"
    assert not out.is_error


def test_runs_in_cwd_with_no_stdin(tmp_path: Path) -> None:
    (tmp_path / "marker.txt").write_text("x")
    assert bash(tmp_path, {"command": "pwd; ls"}).content == f"{tmp_path}\nmarker.txt"
    assert bash(tmp_path, {"command": "cat"}).content == "(no output)"  # /dev/null, no hang


def test_timeout_kills_the_command_and_its_children(tmp_path: Path) -> None:
    started = time.monotonic()
    out = bash(tmp_path, {"command": "sleep 30 & echo $!; wait", "timeout": 200})
    assert time.monotonic() - started < 20
    assert out.is_error
    pid_line, note = out.content.split("\n")
    assert note == "Command timed out after 200 ms and was killed"
    assert_gone(int(pid_line))


def test_background_jobs_do_not_outlive_the_call(tmp_path: Path) -> None:
    out = bash(tmp_path, {"command": "sleep 30 & echo $!", "timeout": 60_000})
    assert not out.is_error
    assert_gone(int(out.content))


def test_output_is_capped_keeping_the_head(tmp_path: Path) -> None:
    out = bash(tmp_path, {"command": "printf 'ab%.0s' $(seq 1 20000)"})
    head, note = out.content.rsplit("\n", 1)
    assert head == "ab" * (MAX_OUTPUT_CHARS // 2)
    assert note == f"… ({40_000 - MAX_OUTPUT_CHARS:,} more characters of output cut)"
    assert not out.is_error


def test_output_split_inside_a_character_decodes(tmp_path: Path) -> None:
    out = bash(tmp_path, {"command": "printf 'caf\\303'; printf '\\251 \\377\\n'"})
    assert out.content == "café \ufffd"


def test_killed_by_a_signal(tmp_path: Path) -> None:
    out = bash(tmp_path, {"command": "kill -TERM $$"})
    assert out.is_error
    assert re.fullmatch(r"Command was killed by signal 15", out.content)


def test_falls_back_to_sh_without_bash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_which = shutil.which

    def which(name: str, *args: Any, **kwargs: Any) -> str | None:
        return None if name == "bash" else real_which(name, *args, **kwargs)

    monkeypatch.setattr(shutil, "which", which)
    tool = BashTool(tmp_path)
    out = asyncio.run(tool.run({"command": "echo via sh"}, ToolContext()))
    assert out.content == "via sh"


def test_missing_cwd_is_a_tool_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="cannot run the command"):
        bash(tmp_path / "gone", {"command": "echo x"})


def test_nul_in_command_is_a_tool_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="NUL"):
        bash(tmp_path, {"command": "echo \0"})
