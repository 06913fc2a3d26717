"""``memdir hook pre-tool-use`` answers Claude Code's PreToolUse protocol: deny with the
memory's words, warn with context, say nothing otherwise, record each firing, and never
stop a call because it broke itself."""

from __future__ import annotations

import io
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import memdir
from memdir.rules import read_firings
from memdir.rules._hook import hook_main
from tests.rules._memories import PNPM, feedback, write_memory

SOURCE = str(Path(memdir.__file__).resolve().parents[1])


def payload(tool: str = "Bash", **tool_input: Any) -> dict[str, Any]:
    return {
        "session_id": "s-1",
        "transcript_path": "/nowhere.jsonl",
        "cwd": "/p",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": "toolu_1",
    }


def ask(memory: Path, body: object) -> tuple[bool, str]:
    out = io.StringIO()
    text = body if isinstance(body, str) else json.dumps(body)
    handled = hook_main(["--memory-dir", str(memory)], io.StringIO(text), out)
    return handled, out.getvalue()


def test_a_denying_rule_answers_deny_with_the_memorys_words(tmp_path: Path) -> None:
    write_memory(tmp_path, "feedback_pnpm.md", PNPM)
    handled, out = ask(tmp_path, payload(command="cd web && npm install"))
    assert handled
    answer = json.loads(out)["hookSpecificOutput"]
    assert answer["hookEventName"] == "PreToolUse"
    assert answer["permissionDecision"] == "deny"
    reason = answer["permissionDecisionReason"]
    assert "We use pnpm in this repo, never npm" in reason
    assert "Instead: pnpm install" in reason
    assert "feedback_pnpm.md" in reason
    (firing,) = read_firings(tmp_path)
    assert firing["memory"] == "feedback_pnpm.md"
    assert firing["stopped"] == "cd web && npm install"
    assert firing["action"] == "deny"
    assert firing["session_id"] == "s-1"


def test_an_allowed_call_gets_no_answer(tmp_path: Path) -> None:
    write_memory(tmp_path, "feedback_pnpm.md", PNPM)
    assert ask(tmp_path, payload(command="pnpm install")) == (True, "")
    assert ask(tmp_path, payload("Read", file_path="/p/package.json")) == (True, "")
    assert read_firings(tmp_path) == []


def test_a_warning_rule_lets_the_call_run_and_tells_the_model(tmp_path: Path) -> None:
    write_memory(
        tmp_path,
        "feedback_dist.md",
        feedback("{tool: Edit, match: 'dist/**', action: warn}", "dist/ is generated"),
    )
    _, out = ask(tmp_path, payload("Write", file_path="/p/dist/app.js", content="x"))
    answer = json.loads(out)["hookSpecificOutput"]
    assert "permissionDecision" not in answer
    assert "dist/ is generated" in answer["additionalContext"]
    assert read_firings(tmp_path)[0]["action"] == "warn"


def test_other_events_are_not_answered(tmp_path: Path) -> None:
    write_memory(tmp_path, "feedback_pnpm.md", PNPM)
    assert ask(tmp_path, {**payload(command="npm i"), "hook_event_name": "PostToolUse"}) == (
        True,
        "",
    )


def test_a_broken_input_lets_the_call_through(tmp_path: Path) -> None:
    write_memory(tmp_path, "feedback_pnpm.md", PNPM)
    assert ask(tmp_path, "{not json") == (True, "")
    assert ask(tmp_path, "[1, 2]") == (True, "")


def test_unknown_options_go_to_the_full_command_line() -> None:
    assert not hook_main(["--help"], io.StringIO(""), io.StringIO())


def test_the_command_answers_as_claude_code_runs_it(tmp_path: Path) -> None:
    write_memory(tmp_path, "feedback_pnpm.md", PNPM)
    command = (
        f"PYTHONPATH={shlex.quote(SOURCE)} {shlex.quote(sys.executable)} -m memdir "
        f"hook pre-tool-use --memory-dir {shlex.quote(str(tmp_path))}"
    )
    done = subprocess.run(
        command,
        shell=True,
        input=json.dumps(payload(command="sudo /usr/bin/npm ci")),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_the_click_command_answers_the_same(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from memdir._cli import cli

    write_memory(tmp_path, "feedback_pnpm.md", PNPM)
    result = CliRunner().invoke(
        cli,
        ["hook", "pre-tool-use", "--memory-dir", str(tmp_path)],
        input=json.dumps(payload(command="npm i")),
    )
    assert result.exit_code == 0
    assert json.loads(result.output)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_no_rule_applies_where_claude_codes_memory_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memdir.store import default_memory_dir

    monkeypatch.delenv("MEMDIR_DIR", raising=False)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    project = tmp_path / "project"
    project.mkdir()
    write_memory(default_memory_dir(project), "feedback_pnpm.md", PNPM)
    asked = json.dumps({**payload(command="npm i"), "cwd": str(project)})

    def answer() -> str:
        out = io.StringIO()
        assert hook_main([], io.StringIO(asked), out)
        return out.getvalue()

    assert "deny" in answer()  # the folder found as Claude Code finds it
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1")
    assert answer() == ""


def test_the_user_layers_rules_apply_in_every_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMDIR_DIR", raising=False)
    monkeypatch.delenv("CLAUDE_CODE_DISABLE_AUTO_MEMORY", raising=False)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    layer = tmp_path / "user-layer"
    write_memory(layer, "feedback_pnpm.md", PNPM)
    project = tmp_path / "elsewhere"
    project.mkdir()
    asked = json.dumps({**payload(command="npm install"), "cwd": str(project)})

    def answer() -> str:
        out = io.StringIO()
        assert hook_main([], io.StringIO(asked), out)
        return out.getvalue()

    assert answer() == ""  # the layer is off: its rules are not looked at
    monkeypatch.setenv("MEMDIR_USER_DIR", str(layer))
    assert json.loads(answer())["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_memdir_why_shows_the_rules_that_fired_in_a_session(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from memdir._cli import cli
    from memdir.provenance import why

    write_memory(tmp_path, "feedback_pnpm.md", PNPM)
    ask(tmp_path, payload(command="npm install"))
    (fired,) = why(tmp_path, "s-1").rules_fired
    assert (fired["memory"], fired["action"], fired["stopped"]) == (
        "feedback_pnpm.md",
        "deny",
        "npm install",
    )
    result = CliRunner().invoke(cli, ["why", "s-1", "--memory-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "rule deny at" in result.output
    assert "'npm install'" in result.output
    assert "feedback_pnpm.md" in result.output
