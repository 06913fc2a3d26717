"""``memdir rules``: list, test, switch off and on; ``install claude-code --rules``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir._cli import cli
from memdir.rules import load_rules
from memdir.rules._settings import RULES_MATCHER, rules_hook_command
from tests.rules._memories import PNPM, write_memory


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMDIR_DIR", raising=False)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_list_test_off_on(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    write_memory(memory, "feedback_pnpm.md", PNPM)
    (rule,) = load_rules(memory)
    where = ("--memory-dir", str(memory))

    code, out = run("rules", *where)
    assert code == 0
    assert rule.id in out
    assert "deny" in out
    assert "feedback_pnpm.md" in out
    code, out = run("rules", *where, "--json")
    assert code == 0
    (listed,) = json.loads(out)
    assert listed["match"] == "npm"
    assert listed["enabled"]
    assert listed["fired"] == 0

    code, out = run("rules", "test", "sudo npm install", *where)
    assert code == 1
    assert rule.id in out
    assert "never npm" in out
    assert run("rules", "test", "pnpm install", *where) == (0, "No rule fires.\n")

    code, out = run("rules", "off", rule.id, *where)
    assert code == 0
    assert " off " in out
    assert run("rules", "test", "npm install", *where)[0] == 0
    assert run("rules", "--memory-dir", str(memory), "on", rule.id)[0] == 0
    assert run("rules", "test", "npm install", *where)[0] == 1

    code, out = run("rules", "off", "nope", *where)
    assert code == 2
    assert "no rule" in out


def test_install_offers_the_pre_tool_use_hook(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    args = ("install", "claude-code", "--scope", "project", "--project", str(project))
    assert run(*args, "--rules")[0] == 0
    assert run(*args, "--rules")[0] == 0  # twice: still one entry
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    (group,) = settings["hooks"]["PreToolUse"]
    assert group["matcher"] == RULES_MATCHER
    assert group["hooks"] == [{"type": "command", "command": rules_hook_command()}]
    assert settings["hooks"]["Stop"]

    assert run(*args, "--uninstall")[0] == 0
    assert "hooks" not in json.loads((project / ".claude" / "settings.json").read_text())


def test_install_without_rules_adds_no_pre_tool_use_hook(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    run("install", "claude-code", "--scope", "project", "--project", str(project))
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    assert "PreToolUse" not in settings["hooks"]
