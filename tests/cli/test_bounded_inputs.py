"""What the command line and the Stop hook are given is read within bounds, and what they
cannot use is refused in one line that lands somewhere a person looks.

Before: hook stdin of nested brackets ended in a ``RecursionError`` traceback, 1 GB of
stdin took 2 GB, a ``CLAUDE_CONFIG_DIR`` holding a line break saved into a folder no one
would find, one naming a file left the hook without a log anywhere, and one 50 MB line
became one request of ~13 M tokens. The hook runs in its own process with a timeout, as
Claude Code runs it; where memory is the point, it runs here under tracemalloc.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir._cli import cli
from memdir._hook_entry import STDIN_MAX_BYTES, fallback_log_path
from memdir._hook_entry import run as hook_quick_path
from memdir._hook_worker import run_job
from memdir.errors import UsageError
from memdir.store import default_memory_dir
from memdir.transcripts import LINE_MAX_BYTES
from tests.cli.conftest import TURNS, write_session
from tests.cli.test_processes import env_for, read_line
from tests.transcripts.test_claude_code import Session

MiB = 2**20
HOOK = [sys.executable, "-m", "memdir", "hook", "claude-code", "--model", "offline"]


def run_hook(
    args: list[str], stdin: bytes, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """The hook in its own process, as Claude Code runs it; past 60 s the test fails."""
    return subprocess.run(
        args, input=stdin.decode(), capture_output=True, text=True, env=env, timeout=60, check=False
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The hook's environment, with memdir's own log folder inside ``tmp_path``."""
    environ = env_for(tmp_path)
    environ["HOME"] = str(tmp_path / "home")
    environ["XDG_STATE_HOME"] = str(tmp_path / "state")
    return environ


def own_log(env: dict[str, str]) -> list[str]:
    path = fallback_log_path(env)
    return path.read_text().splitlines() if path.exists() else []


def test_deeply_nested_stdin_is_refused_in_one_line(env: dict[str, str]) -> None:
    ran = run_hook(HOOK, b"[" * 1_000_000, env)
    assert ran.returncode == 0
    assert ran.stderr == (
        "memdir hook: stdin nests deeper than the hook's JSON can; nothing done\n"
    ), ran.stderr
    assert own_log(env)[-1].endswith("stdin nests deeper than the hook's JSON can; nothing done")


def test_the_full_command_refuses_nested_stdin_too(env: dict[str, str]) -> None:
    # ``memdir hook claude-code --help``'s command, reached when the quick path declines.
    result = CliRunner().invoke(cli, ["hook", "claude-code"], input="[" * 1_000_000, env=env)
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        "memdir hook: stdin nests deeper than the hook's JSON can; nothing done\n"
    )


def test_stdin_over_the_cap_is_refused_in_bounded_memory(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # In this process, measured with tracemalloc: a child's peak memory (wait4) also
    # counts what it inherited from this process before it started the hook.
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    data = b'{"x": "' + b"a" * (8 * STDIN_MAX_BYTES) + b'"}'
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    tracemalloc.start()
    try:
        assert hook_quick_path(["--model", "offline"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert capsys.readouterr().err == (
        "memdir hook: stdin is over 8 MiB, not the hook's input; nothing done\n"
    )
    # One byte past the cap is read, then no more: before, all 64 MiB, decoded whole.
    assert peak < 2 * STDIN_MAX_BYTES, f"peak {peak / MiB:.0f} MiB"
    assert own_log(env)[-1].endswith("stdin is over 8 MiB, not the hook's input; nothing done")


@pytest.mark.parametrize("bad", ["line\nbreak", "a-file"])
def test_an_unusable_config_dir_is_refused_told_and_logged(
    bad: str, env: dict[str, str], tmp_path: Path
) -> None:
    if bad == "a-file":
        config = tmp_path / "a-file"
        config.write_text("not a folder")
        reason = f"CLAUDE_CONFIG_DIR={str(config)!r}: it is a file, not a folder"
    else:
        config = tmp_path / bad
        reason = f"CLAUDE_CONFIG_DIR={str(config)!r} holds a line break or control character"
    env["CLAUDE_CONFIG_DIR"] = str(config)
    session = write_session(tmp_path / "s.jsonl", TURNS[:1])
    stdin = {"hook_event_name": "Stop", "transcript_path": str(session), "cwd": str(tmp_path)}
    ran = run_hook([*HOOK, "--timeout", "60"], json.dumps(stdin).encode(), env)
    assert ran.returncode == 0
    # Claude Code shows the user a hook's systemMessage.
    (shown,) = ran.stdout.splitlines()
    assert json.loads(shown)["systemMessage"].startswith(f"memdir saved no memories: {reason}")
    assert ran.stderr.count("\n") == 1
    assert reason in ran.stderr
    (logged,) = own_log(env)
    assert reason in logged
    assert not (tmp_path / "line").exists()  # no folder made where no one would look


def test_the_worker_logs_where_it_can_when_the_folder_is_unusable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker started before the setting broke, or by hand: its stderr reaches no one.
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "a-file"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    job = {"transcript_path": str(tmp_path / "s.jsonl"), "cwd": str(tmp_path)}
    assert run_job(job) == 2
    (logged,) = (tmp_path / "state" / "memdir" / "hook.log").read_text().splitlines()
    assert "it is a file, not a folder" in logged


@pytest.mark.parametrize("name", ["CLAUDE_CONFIG_DIR", "MEMDIR_DIR"])
def test_the_memory_folder_is_never_placed_by_a_broken_variable(name: str, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="holds a line break or control character"):
        default_memory_dir(tmp_path, env={"HOME": str(tmp_path), name: f"{tmp_path}/x\ny"})
    (tmp_path / "f").write_text("")
    with pytest.raises(UsageError, match="it is a file, not a folder"):
        default_memory_dir(tmp_path, env={"HOME": str(tmp_path), name: str(tmp_path / "f")})


def test_a_relative_or_empty_config_dir_stays_as_claude_code_reads_it(tmp_path: Path) -> None:
    # Claude Code reads both from its working directory (tests/claude_code/test_location_cli.py).
    for value, base in (("cfg", tmp_path / "cfg"), ("", tmp_path)):
        found = default_memory_dir(tmp_path, env={"HOME": "/h", "CLAUDE_CONFIG_DIR": value})
        assert found.parent.parent == base.resolve() / "projects"


def test_extract_cuts_one_huge_message_instead_of_sending_it(tmp_path: Path) -> None:
    session = Session()
    session.user("u0", None, "Remember that I deploy on Fridays.")
    session.assistant("a0", "u0", "m0", [{"type": "text", "text": "Noted."}])
    session.user("u1", "a0", "log line\n" * 1_000_000)  # 9 MB of pasted log
    session.assistant("a1", "u1", "m1", [{"type": "text", "text": "That is a long log."}])
    file = session.write(tmp_path / "s.jsonl")
    memory = tmp_path / "memory"
    args = ["extract", "--model", "offline", "--json", "--memory-dir", str(memory), str(file)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    (report,) = json.loads(result.stdout)["transcripts"]
    # The offline engine counts what it was sent (characters / 4): before, 2.25 M tokens.
    assert report["input_tokens"] < 100_000, report["input_tokens"]
    assert report["memories_saved"] == 1


def test_extract_lists_a_line_over_the_cap_and_goes_on(tmp_path: Path) -> None:
    session = Session()
    session.user("u0", None, "Remember that I deploy on Fridays.")
    session.assistant("a0", "u0", "m0", [{"type": "text", "text": "Noted."}])
    session.user("u1", "a0", "z" * (LINE_MAX_BYTES + MiB))
    file = session.write(tmp_path / "s.jsonl")
    del session
    memory = tmp_path / "memory"
    result = CliRunner().invoke(
        cli, ["extract", "--model", "offline", "--memory-dir", str(memory), str(file)]
    )
    assert result.exit_code == 0, result.output
    assert (
        "skipped line 3: 33.0 MiB, longer than the 32.0 MiB a line may hold; skipped unread"
        in result.stdout
    )


needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")


@needs_fifo
def test_the_hook_worker_refuses_a_fifo_and_ends(env: dict[str, str], tmp_path: Path) -> None:
    # The worker Claude Code leaves behind after a Stop: it must end, and say why.
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    memory = tmp_path / "memory"
    stdin = {"hook_event_name": "Stop", "transcript_path": str(fifo), "cwd": str(tmp_path)}
    args = [*HOOK, "--memory-dir", str(memory), "--timeout", "50"]
    ran = run_hook(args, json.dumps(stdin).encode(), env)
    assert ran.returncode == 0
    log = (memory / ".memdir" / "hook.log").read_text()
    assert "extraction failed:" in log
    assert "is a named pipe (FIFO), not a regular file" in log


@needs_fifo
def test_watch_reports_a_fifo_once_and_keeps_watching(env: dict[str, str], tmp_path: Path) -> None:
    folder = tmp_path / "projects"
    folder.mkdir()
    os.mkfifo(folder / "pipe.jsonl")
    write_session(folder / "real.jsonl", TURNS[:1])
    args = [sys.executable, "-m", "memdir", "watch", str(folder), "--json", "--interval", "0.05"]
    args += ["--model", "offline", "--memory-dir", str(tmp_path / "memory")]
    with subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as child:
        assert child.stdout is not None
        try:
            events = [json.loads(read_line(child.stdout))["event"] for _ in range(3)]
        finally:
            child.terminate()
            child.communicate(timeout=60)
    # Sorted by name, the pipe first: refused in one line, then the real session is read.
    assert events == ["watching", "unreadable", "extracted"]


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_extract_refuses_a_link_to_dev_zero_at_once(tmp_path: Path) -> None:
    (tmp_path / "s.jsonl").symlink_to("/dev/zero")
    result = CliRunner().invoke(cli, ["extract", "--model", "offline", str(tmp_path / "s.jsonl")])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "is a character device, not a regular file" in result.stderr


def test_memdir_log_points_at_the_log_of_a_hook_that_could_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "a-file"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    result = CliRunner().invoke(cli, ["log", "--project", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "it is a file, not a folder" in result.stderr
    assert f"(the hook logs to {tmp_path / 'state' / 'memdir' / 'hook.log'})" in result.stderr
