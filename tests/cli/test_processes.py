"""The command as separate processes: the Claude Code hook, watch, and two extractors at once."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

from memdir.state import StateFile
from memdir.store import MemoryDir, default_memory_dir, parse_memory_file
from tests.cli.conftest import TURNS, append_turns, write_session

MEMDIR = [sys.executable, "-m", "memdir"]


def env_for(tmp_path: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "MEMDIR_ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "MEMDIR_MODEL",
            "MEMDIR_DIR",
        )
    }
    env["CLAUDE_CONFIG_DIR"] = str(tmp_path / "claude-home")
    return env


def read_line(stream: IO[str], seconds: float = 60.0) -> str:
    """The next line the process prints; fails rather than hangs if none comes."""
    ready, _, _ = select.select([stream], [], [], seconds)
    assert ready, "the process printed nothing in time"
    return stream.readline()


def test_hook_writes_into_claude_codes_folder_for_the_cwd(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    session = write_session(tmp_path / "abc.jsonl", TURNS[:2], cwd=str(project))
    hook_input = {
        "session_id": "sess-1",
        "transcript_path": str(session),
        "cwd": str(project),
        "stop_hook_active": False,
        "hook_event_name": "Stop",
    }
    done = subprocess.run(
        # The offline engine runs only when asked for (no silent fallback).
        [*MEMDIR, "hook", "claude-code", "--model", "offline", "--timeout", "120"],
        input=json.dumps(hook_input),
        capture_output=True,
        text=True,
        env=env_for(tmp_path),
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # nothing that Claude Code would read as a decision
    env = env_for(tmp_path)
    memory = Path(
        subprocess.run(
            [*MEMDIR, "dir", str(project)], capture_output=True, text=True, env=env, check=True
        ).stdout.strip()
    )
    assert memory.is_relative_to(tmp_path / "claude-home" / "projects")
    assert (memory / "user_role.md").exists()
    assert StateFile(memory).get("sess-1").cursor == "a1"


def test_hook_never_fails_the_session(tmp_path: Path) -> None:
    for stdin in (
        "not json",
        "[]",
        "{}",
        json.dumps({"transcript_path": str(tmp_path / "gone.jsonl"), "cwd": str(tmp_path)}),
    ):
        done = subprocess.run(
            [*MEMDIR, "hook", "claude-code", "--model", "offline", "--timeout", "60"],
            input=stdin,
            capture_output=True,
            text=True,
            env=env_for(tmp_path),
            timeout=120,
            check=False,
        )
        assert done.returncode == 0
        assert done.stdout == ""


def test_hook_ignores_other_events_and_a_stop_already_continuing(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    session = write_session(tmp_path / "abc.jsonl", TURNS[:2], cwd=str(project))
    base = {"session_id": "s", "transcript_path": str(session), "cwd": str(project)}
    for extra in (
        {"hook_event_name": "Stop", "stop_hook_active": True},
        {"hook_event_name": "SubagentStop"},
        {"hook_event_name": "PreToolUse"},
    ):
        done = subprocess.run(
            [*MEMDIR, "hook", "claude-code", "--model", "offline", "--timeout", "60"],
            input=json.dumps({**base, **extra}),
            capture_output=True,
            text=True,
            env=env_for(tmp_path),
            timeout=120,
            check=False,
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert not (tmp_path / "claude-home").exists()  # no memory folder, no log, nothing


def test_the_hooks_log_is_timestamped_and_says_why_a_run_failed(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    hook_input = {
        "session_id": "s",
        "transcript_path": str(tmp_path / "gone.jsonl"),
        "cwd": str(tmp_path),
        "hook_event_name": "Stop",
    }
    done = subprocess.run(
        [
            *MEMDIR,
            "hook",
            "claude-code",
            "--model",
            "offline",
            "--timeout",
            "60",
            "--memory-dir",
            str(memory),
        ],
        input=json.dumps(hook_input),
        capture_output=True,
        text=True,
        env=env_for(tmp_path),
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "")
    lines = (memory / ".memdir" / "hook.log").read_text().splitlines()
    assert len(lines) == 3, lines
    for line in lines:
        stamp = line.split(" ", 1)[0]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp), line
    # Which folder the run used and why, then the run itself.
    assert lines[0].endswith(f"memory folder {memory} (--memory-dir in the hook's command)")
    assert "extraction failed" in lines[2]
    assert "gone.jsonl" in lines[2]


def test_the_hook_starts_without_a_provider_sdk_or_click(tmp_path: Path) -> None:
    # Claude Code waits for the hook: its quick path imports only the standard library
    # and memdir's errors, then leaves the work to a detached process.
    probe = (
        "import sys\n"
        "from memdir.cli import main\n"
        "main(['hook', 'claude-code', '--model', 'offline'])\n"
        "heavy = ('anthropic', 'openai', 'httpx', 'yaml', 'click', 'rich', 'pydantic',\n"
        "         'memdir.extract', 'memdir.models', 'memdir.store', 'memdir.transcripts')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    session = write_session(tmp_path / "abc.jsonl", TURNS[:2], cwd=str(tmp_path))
    hook_input = {"transcript_path": str(session), "cwd": str(tmp_path), "session_id": "s"}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        input=json.dumps(hook_input),
        capture_output=True,
        text=True,
        env=env_for(tmp_path),
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == "[]"
    assert done.stderr == ""


def test_watch_picks_up_an_appended_turn(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS[:1])
    memory = tmp_path / "m"
    with subprocess.Popen(
        [
            *MEMDIR,
            "watch",
            str(tmp_path),
            "--model",
            "offline",
            "--memory-dir",
            str(memory),
            "--interval",
            "0.05",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(tmp_path),
    ) as watcher:
        assert watcher.stdout is not None
        try:
            assert json.loads(read_line(watcher.stdout))["event"] == "watching"
            first = json.loads(read_line(watcher.stdout))
            assert first["event"] == "extracted"
            assert first["turns"] == 1
            append_turns(session, 1, ["Never deploy on Fridays, because the on-call team is thin."])
            second = json.loads(read_line(watcher.stdout))
            assert second["event"] == "extracted"
            assert second["turns"] == 1
            assert second["memories_saved"] >= 1
        finally:
            watcher.send_signal(signal.SIGINT)
        assert json.loads(read_line(watcher.stdout))["event"] == "stopped"
        assert watcher.wait(timeout=60) == 0


def test_watch_repairs_a_memory_folder_before_extracting_into_it(tmp_path: Path) -> None:
    write_session(tmp_path / "s.jsonl", TURNS[:1])
    memory = tmp_path / "m"
    memory.mkdir()
    (memory / "MEMORY.md").write_text("- [Gone](gone.md) — its file was removed\n")
    command = [*MEMDIR, "watch", str(tmp_path), "--model", "offline", "--memory-dir"]
    with subprocess.Popen(
        [*command, str(memory), "--interval", "0.05", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(tmp_path),
    ) as watcher:
        assert watcher.stdout is not None
        try:
            assert json.loads(read_line(watcher.stdout))["event"] == "watching"
            assert json.loads(read_line(watcher.stdout)) == {
                "event": "repaired",
                "memory_dir": str(memory),
                "kind": "unlinked_line",
                "path": "gone.md",
            }
            assert json.loads(read_line(watcher.stdout))["event"] == "extracted"
        finally:
            watcher.send_signal(signal.SIGINT)
        assert json.loads(read_line(watcher.stdout))["event"] == "stopped"
        assert watcher.wait(timeout=60) == 0
    assert "gone.md" not in (memory / "MEMORY.md").read_text()


def test_two_extract_processes_on_one_memory_dir(tmp_path: Path) -> None:
    memory = tmp_path / "m"
    first = write_session(tmp_path / "one.jsonl", TURNS)
    other_turns = [
        "I'm Bo, I run the billing service.",
        "Always pin dependency versions in requirements files.",
        "The billing dashboard is https://grafana.example.com/d/billing",
        "Never force-push to main, because CI deploys from it.",
    ]
    second = write_session(tmp_path / "two.jsonl", other_turns)
    text = second.read_text().replace('"sess-1"', '"sess-2"')
    second.write_text(text)
    procs = [
        subprocess.Popen(
            [
                *MEMDIR,
                "extract",
                str(path),
                "--model",
                "offline",
                "--memory-dir",
                str(memory),
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env_for(tmp_path),
        )
        for path in (first, second)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert json.loads(out)["transcripts"][0]["errors"] == 0
    # Every memory file parses, every pointer resolves, every memory has a pointer.
    headers = MemoryDir(memory).scan(limit=1000)
    assert len(headers) >= 6
    index = (memory / "MEMORY.md").read_text()
    for header in headers:
        parsed = parse_memory_file(header.path.read_text())
        assert parsed.type is not None
        assert not parsed.malformed
        assert f"]({header.filename})" in index
    for line in index.splitlines():
        if "](" in line:
            target = line.split("](", 1)[1].split(")", 1)[0]
            assert (memory / target).exists(), line
    # Both sessions' cursors survived each other's updates.
    states = StateFile(memory).load()
    assert states["sess-1"].cursor == f"a{len(TURNS) - 1}"
    assert states["sess-2"].cursor == f"a{len(other_turns) - 1}"
    json.loads((memory / ".memdir" / "state.json").read_text())
    assert default_memory_dir(tmp_path) != memory


def test_watch_reports_a_project_whose_memory_dir_is_unusable_and_goes_on(
    tmp_path: Path,
) -> None:
    env = env_for(tmp_path)
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    (tmp_path / "proj-a").mkdir()
    (tmp_path / "proj-b").mkdir()
    write_session(sessions / "a.jsonl", TURNS[:1], cwd=str(tmp_path / "proj-a"))
    write_session(sessions / "b.jsonl", TURNS[:1], cwd=str(tmp_path / "proj-b"))
    blocked = default_memory_dir(tmp_path / "proj-a", env=env)
    blocked.parent.mkdir(parents=True)
    blocked.write_text("not a folder\n")
    with subprocess.Popen(
        [*MEMDIR, "watch", str(sessions), "--model", "offline", "--interval", "0.05", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as watcher:
        assert watcher.stdout is not None
        try:
            assert json.loads(read_line(watcher.stdout))["event"] == "watching"
            skipped = json.loads(read_line(watcher.stdout))
            assert skipped["event"] == "unusable"
            assert "is a file, not a folder" in skipped["reason"]
            extracted = json.loads(read_line(watcher.stdout))
            assert (extracted["event"], extracted["turns"]) == ("extracted", 1)
        finally:
            watcher.send_signal(signal.SIGINT)
        assert json.loads(read_line(watcher.stdout))["event"] == "stopped"
        assert watcher.wait(timeout=60) == 0
    assert blocked.read_text() == "not a folder\n"
