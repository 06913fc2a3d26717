"""``memdir install claude-code``, ``memdir doctor`` and ``memdir log``, and the switches
that turn Claude Code's memory off, on settings files in a temporary folder."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import memdir._claude_settings as claude_settings
from memdir import _hook_entry, _hook_worker
from memdir._claude_settings import memory_switched_off
from memdir._claude_setup import (
    hook_command,
    hook_memory_off,
    install_hook,
    is_memdir_hook,
    memdir_command,
    read_runs,
    uninstall_hook,
)
from memdir._cli import cli
from memdir.store import default_memory_dir

OLD = "memdir hook claude-code --model offline"


@pytest.fixture(autouse=True)
def _no_switches(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """None of the variables that decide whether memory works, and no managed settings."""
    for name in (
        "ANTHROPIC_AUTH_TOKEN",
        "MEMDIR_ANTHROPIC_API_KEY",
        "CLAUDE_CODE_DISABLE_AUTO_MEMORY",
        "CLAUDE_CODE_SIMPLE",
        "CLAUDE_CODE_SAFE_MODE",
        "CLAUDE_CODE_REMOTE",
    ):
        monkeypatch.delenv(name, raising=False)
    managed = tmp_path / "managed-settings.json"
    monkeypatch.setattr(claude_settings, "managed_settings_files", lambda: [managed])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


@pytest.fixture
def user_settings(tmp_path: Path) -> Path:
    """``settings.json`` of the Claude config home tests/cli/conftest.py sets up."""
    return tmp_path / "claude-home" / "settings.json"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def install(project: Path, *args: str) -> dict[str, Any]:
    code, out, err = run("install", "claude-code", "--project", str(project), "--json", *args)
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def stop_commands(settings: Mapping[str, Any]) -> list[str]:
    return [e["command"] for g in settings["hooks"]["Stop"] for e in g["hooks"]]


# -- install -----------------------------------------------------------------------------------


def test_install_writes_the_absolute_hook_and_a_second_install_changes_nothing(
    project: Path, user_settings: Path
) -> None:
    first = install(project)
    assert first["settings"] == str(user_settings)
    assert first["written"] is True
    command = hook_command()
    assert json.loads(user_settings.read_text()) == {
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": command}]}]}
    }
    assert os.path.isabs(command.split()[0])
    written = user_settings.read_bytes()

    second = install(project)

    assert (second["changed"], second["written"]) == (False, False)
    assert user_settings.read_bytes() == written


def test_install_keeps_every_other_setting_and_hook(project: Path, user_settings: Path) -> None:
    others = {
        "model": "opus",
        "env": {"FOO": "1"},
        "permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        },
    }
    user_settings.parent.mkdir(parents=True)
    user_settings.write_text(json.dumps(others))

    install(project)

    after = json.loads(user_settings.read_text())
    assert {k: v for k, v in after.items() if k != "hooks"} == {
        k: v for k, v in others.items() if k != "hooks"
    }
    assert after["hooks"]["PreToolUse"] == others["hooks"]["PreToolUse"]  # type: ignore[index]
    assert stop_commands(after) == ["notify-send done", hook_command()]


def test_install_replaces_an_older_memdir_hook_where_it_stands(
    project: Path, user_settings: Path
) -> None:
    user_settings.parent.mkdir(parents=True)
    user_settings.write_text(
        json.dumps(
            {
                "hooks": {
                    "Stop": [
                        {
                            "hooks": [
                                {"type": "command", "command": OLD, "timeout": 30},
                                {"type": "command", "command": "notify-send done"},
                            ]
                        },
                        {
                            "hooks": [
                                {"type": "command", "command": "/old/bin/memdir hook claude-code"}
                            ]
                        },
                    ]
                }
            }
        )
    )

    install(project)

    stop = json.loads(user_settings.read_text())["hooks"]["Stop"]
    assert stop == [
        {
            "hooks": [
                # The old hook's own options (--model offline) stay with the new path.
                {"type": "command", "command": f"{hook_command()} --model offline", "timeout": 30},
                {"type": "command", "command": "notify-send done"},
            ]
        }
    ]


def test_uninstall_removes_only_memdirs_entries(project: Path, user_settings: Path) -> None:
    user_settings.parent.mkdir(parents=True)
    user_settings.write_text(json.dumps({"model": "opus"}))
    install(project)
    assert run("install", "claude-code", "--project", str(project), "--uninstall")[0] == 0
    assert json.loads(user_settings.read_text()) == {"model": "opus"}

    kept = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send"}]}]}}
    user_settings.write_text(json.dumps(kept))
    install(project)
    result = install(project, "--uninstall")
    assert result["written"] is True
    assert json.loads(user_settings.read_text()) == kept

    again = install(project, "--uninstall")
    assert (again["changed"], again["written"]) == (False, False)


@pytest.mark.parametrize(
    "text",
    ["{not json", "[1, 2]", '"text"', '{"hooks": []}', '{"hooks": {"Stop": {}}}'],
    ids=["invalid", "list", "string", "hooks-list", "stop-object"],
)
def test_a_settings_file_that_is_not_an_object_is_refused_and_left_alone(
    project: Path, user_settings: Path, text: str
) -> None:
    user_settings.parent.mkdir(parents=True)
    user_settings.write_text(text)
    before = os.stat(user_settings)

    for extra in ((), ("--uninstall",)):
        code, out, err = run("install", "claude-code", "--project", str(project), *extra)
        assert code == 2, (out, err)
        assert str(user_settings) in err
        assert len(err.strip().splitlines()) == 1

    assert user_settings.read_text() == text
    assert os.stat(user_settings).st_mtime_ns == before.st_mtime_ns
    assert sorted(p.name for p in user_settings.parent.iterdir()) == ["settings.json"]


def test_dry_run_writes_nothing(project: Path, user_settings: Path) -> None:
    code, out, _ = run("install", "claude-code", "--project", str(project), "--dry-run")
    assert code == 0
    assert f"would write {user_settings}" in out
    assert not user_settings.parent.exists()


def test_project_scope_and_config_dir(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = install(project, "--scope", "project")
    assert result["settings"] == str(project / ".claude" / "settings.json")
    assert stop_commands(json.loads((project / ".claude" / "settings.json").read_text()))

    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "elsewhere"))
    assert install(project)["settings"] == str(tmp_path / "elsewhere" / "settings.json")


def test_a_linked_settings_file_stays_linked(
    project: Path, user_settings: Path, tmp_path: Path
) -> None:
    real = tmp_path / "dotfiles" / "claude-settings.json"
    real.parent.mkdir()
    real.write_text('{"model": "opus"}')
    user_settings.parent.mkdir(parents=True)
    user_settings.symlink_to(real)

    install(project)

    assert user_settings.is_symlink()
    assert stop_commands(json.loads(real.read_text())) == [hook_command()]


def test_the_command_is_this_environments_memdir(tmp_path: Path) -> None:
    venv = tmp_path / "my venv" / "bin"
    venv.mkdir(parents=True)
    python = venv / "python"
    python.touch()
    assert memdir_command(str(python)) == f"'{python}' -m memdir"
    script = venv / "memdir"
    script.touch()
    script.chmod(0o755)
    assert memdir_command(str(python)) == f"'{script}'"
    assert is_memdir_hook(f"'{script}' hook claude-code")
    assert is_memdir_hook(f"{sys.executable} -m memdir hook claude-code --model offline")
    assert not is_memdir_hook("memdir-notify hook claude-code")
    assert not is_memdir_hook("memdir hook other")


def test_install_reports_what_would_stop_memory(project: Path) -> None:
    code, out, _ = run("install", "claude-code", "--project", str(project))
    assert code == 0
    assert "PROBLEM credentials: no credentials the hook can use" in out
    assert "problem(s) above would stop memory from working" in out


def test_install_on_a_working_setup_says_it_is_done(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    code, out, _ = run("install", "claude-code", "--project", str(project))
    assert code == 0
    assert "PROBLEM" not in out
    assert "Installed: Claude Code saves memories after each answer." in out


# -- doctor ------------------------------------------------------------------------------------


def doctor(project: Path) -> tuple[int, dict[str, dict[str, Any]], str]:
    code, out, _ = run("doctor", "--project", str(project), "--json")
    found = json.loads(out)
    assert found["ok"] is (code == 0)
    text_code, text, _ = run("doctor", "--project", str(project))
    assert text_code == code
    return code, {f["check"]: f for f in found["findings"]}, text


def test_doctor_passes_a_working_setup(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    install(project)
    code, found, text = doctor(project)
    assert code == 0, text
    assert list(found) == [
        "hook",
        "credentials",
        "model",
        "memory folder",
        "switches",
        "last run",
        "repairs",
    ]
    assert "an Anthropic API key in ANTHROPIC_API_KEY" in found["credentials"]["message"]
    assert found["last run"]["message"] == "none logged yet"
    assert found["repairs"]["message"] == "none needed"
    assert "PROBLEM" not in text


@dataclasses.dataclass(frozen=True)
class Broken:
    name: str
    check: str
    says: str


def test_doctor_reports_each_problem_on_a_line(
    project: Path, user_settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, found, text = doctor(project)
    assert code == 1
    assert not found["hook"]["ok"]
    assert "memdir install claude-code" in found["hook"]["message"]
    assert not found["credentials"]["ok"]
    assert [line.split()[1] for line in text.splitlines() if "PROBLEM" in line] == [
        "hook:",
        "credentials:",
    ]

    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "gateway-token")
    user_settings.parent.mkdir(parents=True)
    user_settings.write_text(
        json.dumps(
            {
                "autoMemoryEnabled": False,
                "hooks": {
                    "Stop": [
                        {
                            "hooks": [
                                {
                                    "type": "command",
                                    "command": f"{project}/gone/memdir hook claude-code",
                                }
                            ]
                        }
                    ]
                },
            }
        )
    )
    code, found, _ = doctor(project)
    assert code == 1
    assert "does not exist" in found["hook"]["message"]
    assert found["credentials"]["ok"]
    assert "ANTHROPIC_AUTH_TOKEN" in found["credentials"]["message"]
    assert not found["switches"]["ok"]
    assert f"autoMemoryEnabled is false in {user_settings}" in found["switches"]["message"]


def test_doctor_finds_a_bare_command_claude_code_cannot_start(
    project: Path, user_settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("PATH", os.defpath)
    user_settings.parent.mkdir(parents=True)
    user_settings.write_text(
        json.dumps(
            {
                "hooks": {
                    "Stop": [{"hooks": [{"type": "command", "command": "memdir hook claude-code"}]}]
                }
            }
        )
    )
    code, found, _ = doctor(project)
    assert code == 1
    assert "'memdir' is not on PATH" in found["hook"]["message"]


def test_doctor_sees_a_key_in_the_settings_env_and_disabled_hooks(
    project: Path, user_settings: Path
) -> None:
    install(project)
    settings = json.loads(user_settings.read_text())
    user_settings.write_text(json.dumps({**settings, "env": {"ANTHROPIC_API_KEY": "sk-ant-x"}}))
    code, found, _ = doctor(project)
    assert code == 0, found
    local = project / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_text('{"disableAllHooks": true}')
    code, found, _ = doctor(project)
    assert code == 1
    assert f"disableAllHooks is true in {local}" in found["hook"]["message"]


def test_doctor_reports_a_logged_in_user(project: Path, tmp_path: Path) -> None:
    install(project)
    (tmp_path / "claude-home" / ".credentials.json").write_text("{}")
    _, found, _ = doctor(project)
    message = found["credentials"]["message"]
    assert "your Claude Code login" in message or "no Claude Code CLI" in message


def test_doctor_reports_the_last_runs_failure(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    install(project)
    log = default_memory_dir(project) / ".memdir" / "hook.log"
    log.parent.mkdir(parents=True)
    log.write_text(FAILED_RUN)
    code, found, _ = doctor(project)
    assert code == 1
    assert found["last run"]["message"] == (
        "2026-12-04T05:01:00.000Z: run failed (retried next time): "
        "ModelError: 401 invalid x-api-key"
    )


def test_doctor_reports_what_a_crash_left_and_changes_nothing(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    install(project)
    folder = default_memory_dir(project)
    folder.mkdir(parents=True)
    (folder / "MEMORY.md").write_text("- [Gone](gone.md) — deleted\n")
    (folder / "kept.md").write_text("---\nname: Kept\ndescription: saved, never indexed\n---\nx\n")
    before = sorted(p.name for p in folder.iterdir())
    code, found, text = doctor(project)
    assert code == 0, text  # memory still works: reported, not a problem
    assert found["repairs"]["ok"] is True
    assert found["repairs"]["message"] == (
        "2 left by interrupted runs, repaired by the next extract or dream: remove the "
        "index line of the missing file gone.md; add the missing index line for kept.md"
    )
    assert sorted(p.name for p in folder.iterdir()) == before
    assert (folder / "MEMORY.md").read_text() == "- [Gone](gone.md) — deleted\n"


# -- log ---------------------------------------------------------------------------------------

GOOD_RUN = """\
2026-12-04T05:00:00.000Z memory folder /m (Claude Code's folder for /p (under ~/.claude))
2026-12-04T05:00:00.100Z started for /t.jsonl (pid 1)
2026-12-04T05:00:02.000Z session s1: 1 turn(s), 1 run(s) (standalone), \
2 memory(ies) saved, 0 failed; input 10 + 0 from cache, output 5 tokens
2026-12-04T05:00:02.001Z saved /m/a.md
"""
FAILED_RUN = """\
2026-12-04T05:01:00.000Z started for /t.jsonl (pid 2)
2026-12-04T05:01:00.000Z run failed (retried next time): ModelError: 401 invalid x-api-key
2026-12-04T05:01:01.000Z session s1: 1 turn(s), 1 run(s) (standalone), \
0 memory(ies) saved, 1 failed; input 0 + 0 from cache, output 0 tokens
"""
OFF_RUN = (
    "2026-12-04T05:02:00.000Z memory is off for /p (CLAUDE_CODE_DISABLE_AUTO_MEMORY=1); "
    "nothing sent, nothing saved\n"
)
UNFINISHED_RUN = "2026-12-04T05:03:00.000Z started for /t.jsonl (pid 3)\n"


def test_log_shows_each_run_and_why_one_failed(tmp_path: Path) -> None:
    memory = tmp_path / "m"
    (memory / ".memdir").mkdir(parents=True)
    (memory / ".memdir" / "hook.log").write_text(GOOD_RUN + FAILED_RUN + OFF_RUN + UNFINISHED_RUN)

    assert [r.outcome for r in read_runs(memory)] == ["ok", "failed", "off", "unfinished"]
    code, out, _ = run("log", "--memory-dir", str(memory))
    assert code == 0
    heads = [line for line in out.splitlines() if not line.startswith(" ")]
    assert heads == [
        "2026-12-04T05:00:00.000Z  OK         session s1: 1 turn(s), 1 run(s) (standalone), "
        "2 memory(ies) saved, 0 failed; input 10 + 0 from cache, output 5 tokens",
        "2026-12-04T05:01:00.000Z  FAILED     run failed (retried next time): "
        "ModelError: 401 invalid x-api-key",
        "2026-12-04T05:02:00.000Z  OFF        " + OFF_RUN.partition(" ")[2].strip(),
        "2026-12-04T05:03:00.000Z  UNFINISHED started for /t.jsonl (pid 3)",
    ]
    assert "    started for /t.jsonl (pid 1)" in out
    assert out.count("memory is off") == 1  # a one-line run is not repeated

    code, out, _ = run("log", "--memory-dir", str(memory), "-n", "1")
    assert [line for line in out.splitlines() if not line.startswith(" ")] == [heads[-1]]
    code, out, _ = run("log", "--memory-dir", str(memory), "--failed", "--json")
    runs = json.loads(out)["runs"]
    assert [(r["outcome"], r["reason"]) for r in runs] == [
        ("failed", "run failed (retried next time): ModelError: 401 invalid x-api-key")
    ]


def test_log_without_runs_says_so(tmp_path: Path, project: Path) -> None:
    code, out, _ = run("log", "--memory-dir", str(tmp_path / "none"))
    assert code == 0
    assert f"no hook runs logged in {tmp_path / 'none' / '.memdir' / 'hook.log'}" in out
    code, out, _ = run("log", "--project", str(project))
    assert code == 0
    assert str(default_memory_dir(project)) in out
    assert not default_memory_dir(project).exists()


# -- the switches ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    user: Mapping[str, Any] | None = None
    project: Mapping[str, Any] | None = None
    local: Mapping[str, Any] | None = None
    managed: Mapping[str, Any] | None = None
    off: str | None = None
    """A part of the reason when memory is off; None when it is on."""


CASES = [
    Case("nothing set"),
    Case("user false", user={"autoMemoryEnabled": False}, off="(user settings)"),
    Case("project false", project={"autoMemoryEnabled": False}, off="(project settings)"),
    Case("local false", local={"autoMemoryEnabled": False}, off="(local settings)"),
    Case("managed false", managed={"autoMemoryEnabled": False}, off="(managed settings)"),
    Case(
        "local true over user false",
        user={"autoMemoryEnabled": False},
        local={"autoMemoryEnabled": True},
    ),
    Case(
        "managed false over local true",
        local={"autoMemoryEnabled": True},
        managed={"autoMemoryEnabled": False},
        off="(managed settings)",
    ),
    Case("not a boolean", user={"autoMemoryEnabled": "false"}),
    Case("env 1", env={"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"}, off="=1"),
    Case("env TRUE", env={"CLAUDE_CODE_DISABLE_AUTO_MEMORY": " TRUE "}, off="TRUE"),
    Case("env yes", env={"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "yes"}, off="yes"),
    Case("env 2 is not a switch", env={"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "2"}),
    Case(
        "env 0 overrides the settings",
        env={"CLAUDE_CODE_DISABLE_AUTO_MEMORY": "0"},
        user={"autoMemoryEnabled": False},
    ),
    Case("bare", env={"CLAUDE_CODE_SIMPLE": "1"}, off="bare mode"),
    Case("safe mode", env={"CLAUDE_CODE_SAFE_MODE": "on"}, off="safe mode"),
    Case(
        "safe mode beats env 0",
        env={"CLAUDE_CODE_SAFE_MODE": "1", "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "0"},
        off="safe mode",
    ),
    Case("remote without a folder", env={"CLAUDE_CODE_REMOTE": "1"}, off="remote session"),
    Case(
        "remote with a folder",
        env={"CLAUDE_CODE_REMOTE": "1", "CLAUDE_CODE_REMOTE_MEMORY_DIR": "/r"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_memory_switched_off_reads_claude_codes_switches(
    case: Case, project: Path, tmp_path: Path
) -> None:
    config = tmp_path / "claude-home"
    files = {
        config / "settings.json": case.user,
        project / ".claude" / "settings.json": case.project,
        project / ".claude" / "settings.local.json": case.local,
        tmp_path / "managed-settings.json": case.managed,
    }
    for path, content in files.items():
        if content is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(content))
    env = {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(config), **case.env}

    reason = memory_switched_off(project, env)

    if case.off is None:
        assert reason is None
    else:
        assert reason is not None
        assert case.off in reason


def test_the_hook_starts_nothing_when_memory_is_off(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[object] = []
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: started.append(a))
    payload = {"hook_event_name": "Stop", "transcript_path": "/t.jsonl", "cwd": str(project)}
    env = {**os.environ, "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1"}

    _hook_entry.start(payload, _hook_entry.HookOptions(), env=env)

    assert started == []
    assert not (tmp_path / "claude-home").exists()

    _hook_entry.start(payload, _hook_entry.HookOptions(), env=dict(os.environ))
    assert len(started) == 1


def test_the_worker_writes_nothing_when_memory_is_off(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1")
    job = {"transcript_path": str(tmp_path / "missing.jsonl"), "cwd": str(project)}
    assert _hook_worker.run_job(job) == 0
    assert not (tmp_path / "claude-home").exists()

    # An existing folder is told why, and nothing else changes in it.
    memory = default_memory_dir(project)
    memory.mkdir(parents=True)
    assert _hook_worker.run_job(job) == 0
    [line] = (memory / ".memdir" / "hook.log").read_text().splitlines()
    assert "memory is off" in line
    assert "CLAUDE_CODE_DISABLE_AUTO_MEMORY=1" in line
    assert sorted(p.name for p in memory.rglob("*")) == [".memdir", "hook.log"]
    assert stat.S_IMODE(os.stat(memory / ".memdir" / "hook.log").st_mode) == 0o600


def test_the_worker_logs_which_folder_and_why(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen = tmp_path / "chosen"
    user = tmp_path / "claude-home" / "settings.json"
    user.parent.mkdir(parents=True)
    user.write_text(json.dumps({"autoMemoryDirectory": str(chosen)}))
    job = {"transcript_path": str(tmp_path / "missing.jsonl"), "cwd": str(project)}
    assert hook_memory_off(job, note_folder=True) is False
    first = (chosen / ".memdir" / "hook.log").read_text().splitlines()[0]
    assert first.endswith(f"memory folder {chosen} (autoMemoryDirectory in {user} (user settings))")

    _hook_worker.run_job(job)  # the transcript is missing: it fails, and logs both
    lines = (chosen / ".memdir" / "hook.log").read_text().splitlines()
    assert [line.partition(" ")[2].split(" ")[0] for line in lines[1:3]] == ["memory", "started"]
    runs = read_runs(chosen)
    assert runs[-1].outcome == "failed"
    assert runs[-1].lines[0].partition(" ")[2].startswith("memory folder ")


def test_install_checks_the_switches(project: Path, user_settings: Path) -> None:
    user_settings.parent.mkdir(parents=True)
    user_settings.write_text('{"autoMemoryEnabled": false}')
    result = install(project)
    switches = next(f for f in result["findings"] if f["check"] == "switches")
    assert switches["ok"] is False
    assert "autoMemoryEnabled is false" in switches["message"]
    assert json.loads(user_settings.read_text())["autoMemoryEnabled"] is False
    assert install_hook(user_settings, hook_command()).changed is False


def test_the_readme_installs_from_the_source_tree() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    assert "pip install 'memdir[" not in readme  # memdir is not on a package index
    section = readme.partition("## Use it as Claude Code's Stop hook")[2].partition("\n## ")[0]
    assert "installed from its source tree" in section
    line = section.partition("```bash\n")[2].partition("\n```")[0]
    assert "pip install -e '.[cli," in line
    assert line.endswith(".venv/bin/memdir install claude-code")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
@pytest.mark.parametrize(
    ("args", "off"),
    [
        (["--settings", '{"autoMemoryEnabled": false}'], "claude --settings"),
        (['--settings={"autoMemoryEnabled": false}'], "claude --settings"),
        # Inline settings may hold a key: the reason (logged, printed) names them only.
        (
            ["--settings", '{"autoMemoryEnabled": false, "env": {"ANTHROPIC_API_KEY": "sk-x"}}'],
            "claude --settings <inline JSON>",
        ),
        (["--settings", "off.json"], "off.json (claude --settings)"),
        (["--settings", '{"autoMemoryEnabled": true}'], None),
        (["--", "--settings", '{"autoMemoryEnabled": false}'], None),
        # Managed hooks still run in these modes; --safe-mode leaves no trace in the env.
        (["--safe-mode"], "safe mode (claude --safe-mode)"),
        (["--bare"], "bare mode (claude --bare)"),
        (["--", "--bare"], None),
    ],
)
def test_claudes_command_line_is_read_from_its_process(
    project: Path, args: list[str], off: str | None
) -> None:
    (project / "off.json").write_text('{"autoMemoryEnabled": false}')
    # A stand-in for the Claude Code process: its command line and working directory.
    claude = subprocess.Popen(
        [sys.executable, "-c", "print('ready', flush=True); input()", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=project,
        text=True,
    )
    try:
        assert claude.stdout is not None
        assert claude.stdout.readline() == "ready\n"  # its command line is in place
        env = {"HOME": str(project), "CLAUDE_PID": str(claude.pid)}
        reason = memory_switched_off(project, env)
    finally:
        claude.communicate("\n", timeout=60)
    if off is None:
        assert reason is None
    else:
        assert reason is not None
        assert off in reason
        assert "sk-x" not in reason


def test_doctor_runs_the_hooks_memdir(
    project: Path, user_settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The script is there, but the package behind it is gone (a moved editable clone).
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    script = project / "venv" / "bin" / "memdir"
    script.parent.mkdir(parents=True)
    script.write_text(
        "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'memdir'\" >&2\nexit 1\n"
    )
    script.chmod(0o755)
    install_hook(user_settings, f"{script} hook claude-code")
    code, found, _ = doctor(project)
    assert code == 1
    assert found["hook"]["message"] == (
        f"{user_settings}: {script} does not start: ModuleNotFoundError: No module named 'memdir'"
    )


def test_the_log_name_is_the_workers() -> None:
    from memdir._claude_setup import HOOK_LOG_NAME
    from memdir.state import HOOK_LOG_NAME as WORKERS

    assert HOOK_LOG_NAME == WORKERS


def test_doctor_needs_no_credentials_for_an_offline_hook(
    project: Path, user_settings: Path
) -> None:
    install_hook(user_settings, f"{hook_command()} --model offline")
    code, found, _ = doctor(project)
    assert code == 0, found
    assert found["credentials"]["message"].startswith("none needed")
    assert found["model"]["message"] == "offline (--model in the hook's command)"


def test_doctor_refuses_a_retired_model_naming_its_replacement(
    project: Path, user_settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datetime

    from memdir.models import _table

    monkeypatch.setattr(_table, "_today", lambda: datetime.date(2026, 12, 4))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    install_hook(user_settings, f"{hook_command()} --model anthropic:claude-sonnet-4-5")
    code, found, _ = doctor(project)
    assert code == 1
    assert found["model"]["ok"] is False
    assert (
        "retired on November 30, 2026; use anthropic:claude-sonnet-5-5"
        in (found["model"]["message"])
    )
    uninstall_hook(user_settings)  # a new install keeps the old entry's --model
    install_hook(user_settings, hook_command())
    code, found, _ = doctor(project)
    assert found["model"]["message"].startswith("the session's own model")


def test_doctor_and_install_start_nothing_a_cloned_project_brings(
    project: Path, tmp_path: Path
) -> None:
    """A project's own settings come with the clone: memdir may look at the hook they
    name, never run it, and never start anything with their ``env``."""
    marker = tmp_path / "ran"
    evil = project / "evil"
    evil.write_text(f"#!/bin/sh\ntouch {marker}\n")
    evil.chmod(0o755)
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(
        json.dumps(
            {
                "env": {"PYTHONPATH": str(planted)},
                "hooks": {
                    "Stop": [
                        {"hooks": [{"type": "command", "command": f"{evil} hook claude-code"}]}
                    ]
                },
            }
        )
    )
    doctor(project)
    install(project, "--dry-run")
    assert not marker.exists()


def test_the_log_tells_a_failed_run_by_its_first_words_not_a_memorys_name(tmp_path: Path) -> None:
    from memdir._claude_setup import read_runs

    memory = tmp_path / "memory"
    (memory / ".memdir").mkdir(parents=True)
    (memory / ".memdir" / "hook.log").write_text(
        "2026-12-04T10:00:00Z started for /s.jsonl (pid 1)\n"
        "2026-12-04T10:00:01Z session s: 1 turn(s), 1 run(s) (fork), 1 memory(ies) saved\n"
        f"2026-12-04T10:00:01Z saved {memory}/user-cannot-eat-gluten.md\n"
        "2026-12-04T10:01:00Z started for /s.jsonl (pid 2)\n"
        "2026-12-04T10:01:01Z run failed (retried next time): HTTP 529 overloaded\n"
    )
    first, second = read_runs(memory)
    assert (first.reason, second.reason) == (
        None,
        "run failed (retried next time): HTTP 529 overloaded",
    )
