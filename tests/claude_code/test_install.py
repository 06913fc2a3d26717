"""``memdir install claude-code`` under the real Claude Code CLI: a hook that runs from a
virtual environment Claude Code's PATH knows nothing of, and that stays quiet whenever
Claude Code's own automatic memory is switched off."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import memdir
from memdir.messages import Message, ToolUseBlock
from memdir.store import MemoryDir, default_memory_dir
from memdir.testing import FakeAnthropicServer, Reply
from tests.claude_code._cli import ClaudeCli, CliRun, is_agent_turn, side_reply
from tests.claude_code.test_hook_cli import wait_for_workers

# Claude Code's requests start with this system block; memdir's never do.
BILLING = "x-anthropic-billing-header:"
# The tree this memdir is imported from: the hook must run this code, not another copy.
SOURCE = str(Path(memdir.__file__).resolve().parents[1])
# Claude Code's PATH in these tests: the system's default, which holds no memdir.
BARE_PATH = os.defpath
MEMORY = """---
name: user-role
description: Ana leads the data platform team
metadata:
  type: user
---
Ana leads the data platform team.
"""


def is_claude_codes(body: Mapping[str, Any]) -> bool:
    system = body.get("system")
    first = system[0] if isinstance(system, list) and system else {}
    text = first.get("text", "") if isinstance(first, Mapping) else str(system or "")
    return str(text).startswith(BILLING)


class Model:
    """The fake's answers: Claude Code's turn gets "Noted."; memdir's memory agent writes
    one memory, then stops. Every request of memdir's is kept."""

    def __init__(self, memory_dir: Path) -> None:
        self.memory_dir = memory_dir
        self.memdirs: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        if is_claude_codes(body):
            return "Noted." if is_agent_turn(body) else side_reply(body)
        with self._lock:
            self.memdirs.append(body)
        last = body["messages"][-1].get("content")
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            return "Saved one memory."
        write = ToolUseBlock(
            id="toolu_memdir_write",
            name="Write",
            input={"file_path": str(self.memory_dir / "user_role.md"), "content": MEMORY},
        )
        return Message(role="assistant", content=(write,))


def memdir_cli(
    claude_cli: ClaudeCli, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``memdir ARGS`` as a user would type it: the interpreter of the virtual environment
    memdir is installed in, with the throwaway HOME."""
    env = {"HOME": str(claude_cli.home), "PATH": BARE_PATH, "PYTHONPATH": SOURCE}
    return subprocess.run(
        [sys.executable, "-m", "memdir", *args],
        cwd=cwd or claude_cli.project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def install(claude_cli: ClaudeCli, *args: str) -> str:
    """Install the hook; the command it wrote."""
    done = memdir_cli(claude_cli, "install", "claude-code", "--json", *args)
    assert done.returncode == 0, done.stderr
    command = json.loads(done.stdout)["command"]
    assert isinstance(command, str)
    return command


def session(
    claude_cli: ClaudeCli,
    *,
    env_extra: Mapping[str, str] | None = None,
    args: Sequence[str] = (),
) -> tuple[CliRun, Model, Path]:
    """One ``claude -p`` turn with memdir's hook installed; returns the run, what memdir
    asked the model, and the project's memory folder as Claude Code computes it."""
    env = {"PATH": BARE_PATH, "PYTHONPATH": SOURCE, **(env_extra or {})}
    folder = default_memory_dir(claude_cli.project, env=claude_cli.env(env))
    model = Model(folder)
    with FakeAnthropicServer(handler=model, min_cache_tokens=0) as server:
        run = claude_cli.run(
            "I'm Ana, I lead the data platform team.",
            server=server,
            env_extra=env,
            args=args,
        )
        assert run.transcript is not None
        wait_for_workers(str(run.transcript))
        server.assert_no_errors()
    return run, model, folder


def hook_summaries(run: CliRun) -> list[dict[str, Any]]:
    assert run.transcript is not None
    return [
        json.loads(line)
        for line in run.transcript.read_text().splitlines()
        if '"stop_hook_summary"' in line
    ]


def test_an_installed_hook_saves_memories_with_memdir_off_path(claude_cli: ClaudeCli) -> None:
    command = install(claude_cli)
    program = command.split()[0]
    assert os.path.isabs(program)
    assert command.endswith(" hook claude-code")
    assert all(not os.path.exists(os.path.join(d, "memdir")) for d in BARE_PATH.split(os.pathsep))

    run, model, folder = session(claude_cli)

    run.check()
    assert run.memory_dir == folder  # where Claude Code loads memory from
    [summary] = hook_summaries(run)
    assert summary["hookErrors"] == []
    assert model.memdirs, "memdir's memory agent was never asked"
    saved = MemoryDir(folder).scan()
    assert [h.filename for h in saved] == ["user_role.md"]
    log = (folder / ".memdir" / "hook.log").read_text()
    assert f"memory folder {folder} (Claude Code's folder for" in log
    assert "1 memory(ies) saved" in log, log


def test_a_second_install_changes_nothing(claude_cli: ClaudeCli) -> None:
    install(claude_cli)
    settings = claude_cli.home / ".claude" / "settings.json"
    first = settings.read_bytes()
    done = memdir_cli(claude_cli, "install", "claude-code", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["changed"] is False
    assert settings.read_bytes() == first


@dataclasses.dataclass(frozen=True)
class Off:
    """A way of switching Claude Code's automatic memory off."""

    name: str
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    args: tuple[str, ...] = ()
    user_settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    files: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Files to write in the project (name: JSON content)."""
    hook_runs: bool = True
    """Whether Claude Code still runs the hook (it skips settings hooks in bare and safe mode)."""


SWITCHES = [
    Off("autoMemoryEnabled false (user)", user_settings={"autoMemoryEnabled": False}),
    Off(
        "autoMemoryEnabled false (local)",
        files={".claude/settings.local.json": {"autoMemoryEnabled": False}},
    ),
    Off("claude --settings JSON", args=("--settings", '{"autoMemoryEnabled": false}')),
    Off(
        "claude --settings FILE",
        args=("--settings", "no-memory.json"),
        files={"no-memory.json": {"autoMemoryEnabled": False}},
    ),
    Off("CLAUDE_CODE_DISABLE_AUTO_MEMORY", env={"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"}),
    Off("CLAUDE_CODE_DISABLE_AUTO_MEMORY=true", env={"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "true"}),
    Off("--bare", args=("--bare",), hook_runs=False),
    Off("--safe-mode", args=("--safe-mode",), hook_runs=False),
    Off("CLAUDE_CODE_SAFE_MODE", env={"CLAUDE_CODE_SAFE_MODE": "1"}, hook_runs=False),
]


@pytest.mark.parametrize("off", SWITCHES, ids=[s.name for s in SWITCHES])
def test_with_memory_switched_off_nothing_is_sent_or_written(
    claude_cli: ClaudeCli, off: Off
) -> None:
    install(claude_cli)
    settings = claude_cli.home / ".claude" / "settings.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), **off.user_settings}))
    for name, content in off.files.items():
        path = claude_cli.project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content))

    run, model, folder = session(claude_cli, env_extra=off.env, args=off.args)

    run.check()
    assert run.memory_dir is None  # Claude Code itself loads no memory
    summaries = hook_summaries(run)
    if off.hook_runs:
        # The hook ran, cleanly, and did nothing.
        assert [s["hookErrors"] for s in summaries] == [[]]
        assert summaries[0]["hookCount"] == 1
    else:
        assert all(s.get("hookCount", 0) == 0 for s in summaries)
    assert model.memdirs == []
    assert not os.path.lexists(folder)


def test_with_memory_off_an_existing_folder_gets_only_the_reason(claude_cli: ClaudeCli) -> None:
    install(claude_cli)
    run, _, folder = session(claude_cli)
    run.check()
    before = sorted(p.name for p in folder.iterdir())

    _, model, _ = session(claude_cli, env_extra={"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"})

    assert model.memdirs == []
    assert sorted(p.name for p in folder.iterdir()) == before
    last = (folder / ".memdir" / "hook.log").read_text().splitlines()[-1]
    assert "memory is off" in last
    assert "CLAUDE_CODE_DISABLE_AUTO_MEMORY=1" in last
    log = memdir_cli(claude_cli, "log", "-n", "1")
    assert log.returncode == 0, log.stderr
    assert "OFF" in log.stdout
