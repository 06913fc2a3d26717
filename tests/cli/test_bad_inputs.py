"""Each bad memory directory, state and filesystem condition, through the commands.

Every case asserts the exit status the README gives it, one line on stderr (no
traceback), the ``error`` object with ``--json``, and that nothing was written: the whole
temporary tree is compared before and after.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir._cli import cli
from memdir.store import MemoryDir
from memdir.testing import FakeAnthropicServer, Fault
from tests.cli.conftest import TURNS, write_session


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root``: a file's bytes, None for a folder."""
    found: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        found[key] = None if path.is_dir() else path.read_bytes()
    return found


@dataclass(frozen=True)
class Case:
    id: str
    setup: Callable[[Path], object]
    """Makes the bad condition under the temporary folder."""
    args: tuple[str, ...]
    """The command; ``{tmp}`` and ``{session}`` are filled in."""
    code: int
    line: str
    """Part of the one line on stderr."""
    kind: str
    env: dict[str, str] = field(default_factory=dict)


def _file(name: str) -> Callable[[Path], object]:
    return lambda tmp: (tmp / name).write_text("not a folder\n")


def _state_is_a_file(tmp: Path) -> None:
    (tmp / "m").mkdir()
    (tmp / "m" / ".memdir").write_text("in the way\n")


def _index_is_a_folder(tmp: Path) -> None:
    (tmp / "m" / "MEMORY.md").mkdir(parents=True)


def _nothing(tmp: Path) -> None:
    return None


EXTRACT = ("extract", "{session}", "--model", "offline")
CASES = [
    Case(
        "memory-dir-under-a-file",
        _file("afile"),
        (*EXTRACT, "--memory-dir", "{tmp}/afile/sub"),
        2,
        "afile is a file, not a folder",
        "memory_dir",
    ),
    Case(
        "memory-dir-is-a-file",
        _file("afile"),
        (*EXTRACT, "--memory-dir", "{tmp}/afile"),
        2,
        "it is a file, not a folder",
        "memory_dir",
    ),
    Case(
        "MEMDIR_DIR-is-a-file",
        _file("afile"),
        EXTRACT,
        2,
        "it is a file, not a folder",
        "memory_dir",
        {"MEMDIR_DIR": "{tmp}/afile"},
    ),
    Case(
        "MEMDIR_DIR-relative",
        _nothing,
        EXTRACT,
        2,
        "MEMDIR_DIR='relative/memory' is not usable: give an absolute path",
        "memory_dir",
        {"MEMDIR_DIR": "relative/memory"},
    ),
    Case(
        "state-folder-is-a-file",
        _state_is_a_file,
        (*EXTRACT, "--memory-dir", "{tmp}/m"),
        2,
        ".memdir is a file, but memdir keeps its state in that folder",
        "memory_dir",
    ),
    Case(
        "index-is-a-folder",
        _index_is_a_folder,
        (*EXTRACT, "--memory-dir", "{tmp}/m"),
        2,
        "its index",
        "memory_dir",
    ),
    Case(
        "dream-in-a-file",
        _file("afile"),
        ("dream", "--force", "--model", "offline", "--memory-dir", "{tmp}/afile"),
        2,
        "it is a file, not a folder",
        "memory_dir",
    ),
    Case(
        "dream-state-folder-is-a-file",
        _state_is_a_file,
        ("dream", "--force", "--model", "offline", "--memory-dir", "{tmp}/m"),
        2,
        ".memdir is a file",
        "memory_dir",
    ),
    Case(
        "ls-under-a-file",
        _file("afile"),
        ("ls", "--memory-dir", "{tmp}/afile/sub"),
        2,
        "afile is a file, not a folder",
        "memory_dir",
    ),
    Case(
        "show-in-a-file",
        _file("afile"),
        ("show", "x", "--memory-dir", "{tmp}/afile"),
        2,
        "it is a file, not a folder",
        "memory_dir",
    ),
    Case(
        "forget-in-a-file",
        _file("afile"),
        ("forget", "x", "--yes", "--memory-dir", "{tmp}/afile"),
        2,
        "it is a file, not a folder",
        "memory_dir",
    ),
    Case(
        "forget-undo-state-folder-is-a-file",
        _state_is_a_file,
        ("forget", "--undo", "--memory-dir", "{tmp}/m"),
        2,
        ".memdir is a file",
        "memory_dir",
    ),
    Case(
        "prompt-index-is-a-folder",
        _index_is_a_folder,
        ("prompt", "--memory-dir", "{tmp}/m"),
        2,
        "its index",
        "memory_dir",
    ),
    Case(
        "recall-under-a-file",
        _file("afile"),
        ("recall", "polars", "--memory-dir", "{tmp}/afile/x"),
        2,
        "afile is a file, not a folder",
        "memory_dir",
    ),
    Case(
        "anthropic-without-a-key",
        _nothing,
        (
            "extract",
            "{session}",
            "--model",
            "anthropic:claude-sonnet-5-5",
            "--memory-dir",
            "{tmp}/m",
        ),
        2,
        "needs a key: set ANTHROPIC_API_KEY",
        "credentials",
    ),
    Case(
        "openai-without-a-key",
        _nothing,
        ("extract", "{session}", "--model", "openai:gpt-4o", "--memory-dir", "{tmp}/m"),
        2,
        "needs a key: set OPENAI_API_KEY",
        "credentials",
    ),
    Case(
        "dream-without-a-key",
        _nothing,
        ("dream", "--force", "--model", "anthropic:claude-sonnet-5-5", "--memory-dir", "{tmp}/m"),
        2,
        "needs a key",
        "credentials",
    ),
    Case(
        "recall-without-a-key",
        _nothing,
        ("recall", "polars", "--model", "openai:gpt-4o", "--memory-dir", "{tmp}/m"),
        2,
        "needs a key",
        "credentials",
    ),
    # No key and no --model: the offline engine is not run in place of a model.
    Case(
        "extract-without-any-model",
        _nothing,
        ("extract", "{session}", "--memory-dir", "{tmp}/m"),
        2,
        "no model to run: set MEMDIR_ANTHROPIC_API_KEY, ANTHROPIC_API_KEY or "
        "ANTHROPIC_AUTH_TOKEN (or OPENAI_API_KEY), or pass --model offline",
        "credentials",
    ),
    Case(
        "dream-without-any-model",
        _nothing,
        ("dream", "--force", "--memory-dir", "{tmp}/m"),
        2,
        "or pass --model offline",
        "credentials",
    ),
    Case(
        "retired-model",
        _nothing,
        (
            "extract",
            "{session}",
            "--model",
            "anthropic:claude-sonnet-4-5",
            "--memory-dir",
            "{tmp}/m",
        ),
        2,
        "claude-sonnet-4-5 (Claude Sonnet 4.5) was retired on November 30, 2026; "
        "use anthropic:claude-sonnet-5-5 instead",
        "model_spec",
        env={"ANTHROPIC_API_KEY": "k"},
    ),
    Case(
        "retired-model-from-the-environment",
        _nothing,
        ("dream", "--force", "--memory-dir", "{tmp}/m"),
        2,
        "claude-opus-4-0 (Claude Opus 4) was retired on June 15, 2026; "
        "use anthropic:claude-opus-5-5 instead",
        "model_spec",
        env={"MEMDIR_MODEL": "anthropic:claude-opus-4-0"},
    ),
    Case(
        "unknown-model",
        _nothing,
        ("extract", "{session}", "--model", "nosuch:model", "--memory-dir", "{tmp}/m"),
        2,
        "nosuch",
        "model_spec",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_each_bad_input_is_one_line_its_exit_status_and_nothing_written(
    tmp_path: Path, case: Case, as_json: bool
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    session = write_session(tmp_path / "s.jsonl", TURNS[:2])
    case.setup(work)
    before = snapshot(tmp_path)

    def fill(text: str) -> str:
        return text.replace("{tmp}", str(work)).replace("{session}", str(session))

    args = [fill(a) for a in case.args] + (["--json"] if as_json else [])
    code, out, err = run(*args, env={k: fill(v) for k, v in case.env.items()})
    assert code == case.code, err
    assert err.count("\n") == 1, err
    assert err.startswith("memdir: ")
    assert case.line in err
    if as_json:
        error = json.loads(out)["error"]
        assert error["kind"] == case.kind
        assert error["status"] is None
        assert case.line in error["message"]
    else:
        assert out == ""
    assert snapshot(tmp_path) == before


def _can_mount_read_only(folder: Path) -> bool:
    if shutil.which("unshare") is None or sys.platform != "linux":
        return False
    probe = subprocess.run(
        [
            "unshare",
            "-rm",
            "sh",
            "-c",
            f"mount --bind '{folder}' '{folder}' && mount -o remount,ro,bind '{folder}'",
        ],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


def _memdir_on_read_only(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``memdir ARGS`` in a private mount namespace where ``folder`` is read-only."""
    script = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" && exec "$@"'
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, str(folder), sys.executable, "-m", "memdir", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "MEMDIR_MODEL": "offline"},
    )


def test_a_read_only_filesystem_stops_the_writers_in_one_line_and_readers_still_work(
    tmp_path: Path,
) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS)
    memory = tmp_path / "ro" / "m"
    code, _, err = run("extract", str(session), "--model", "offline", "--memory-dir", str(memory))
    assert code == 0, err
    if not _can_mount_read_only(tmp_path / "ro"):
        pytest.skip("this machine cannot mount a read-only bind in a user namespace")
    more = write_session(tmp_path / "s2.jsonl", ["Remember that the cluster is in eu-west-3."])
    before = snapshot(tmp_path / "ro")
    for args in (
        ("extract", str(more), "--model", "offline", "--memory-dir", str(memory)),
        ("dream", "--force", "--model", "offline", "--memory-dir", str(memory)),
        ("forget", "user_role", "--yes", "--memory-dir", str(memory)),
        ("extract", str(more), "--model", "offline", "--memory-dir", str(memory), "--json"),
    ):
        done = _memdir_on_read_only(tmp_path / "ro", *args)
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert "is on a read-only filesystem" in done.stderr
        if "--json" in args:
            assert json.loads(done.stdout)["error"]["kind"] == "memory_dir"
    listed = _memdir_on_read_only(tmp_path / "ro", "ls", "--memory-dir", str(memory), "--json")
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)["memories"]) == len(MemoryDir(memory).scan())
    assert snapshot(tmp_path / "ro") == before


def test_a_memory_dir_given_with_a_tilde_is_checked_where_it_is_used(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a folder\n")
    before = snapshot(tmp_path)
    env = {"HOME": str(tmp_path)}
    for args in (("ls",), ("dream", "--force", "--model", "offline")):
        code, out, err = run(*args, "--memory-dir=~/afile", "--json", env=env)
        assert code == 2, err
        assert json.loads(out)["error"]["kind"] == "memory_dir"
        assert "is a file, not a folder" in err
    assert snapshot(tmp_path) == before


def test_a_store_error_inside_a_command_is_one_line_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memdir.errors import StoreError

    def broken(self: MemoryDir, limit: int = 200) -> list[object]:
        raise StoreError(f"cannot read {self.root}: Input/output error")

    monkeypatch.setattr(MemoryDir, "scan", broken)
    code, out, err = run("ls", "--memory-dir", str(tmp_path / "m"), "--json")
    assert code == 2
    assert err == f"memdir: cannot read {tmp_path / 'm'}: Input/output error\n"
    assert json.loads(out)["error"] == {
        "kind": "store",
        "status": None,
        "message": f"cannot read {tmp_path / 'm'}: Input/output error",
    }


def test_a_failed_run_gives_an_error_object_with_the_providers_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS[:1])
    refused = Fault(
        status=401,
        body={
            "type": "error",
            "error": {"type": "authentication_error", "message": "invalid x-api-key"},
        },
    )
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-wrong")
    with FakeAnthropicServer(handler=lambda body: refused) as server:
        args = [
            "extract",
            str(session),
            "--model",
            "anthropic:claude-sonnet-5-5",
            "--base-url",
            server.base_url,
            "--memory-dir",
            str(tmp_path / "m"),
        ]
        code, out, err = run(*args, "--json")
        code_quiet, out_quiet, err_quiet = run(*args, "--quiet")
    assert code == 1
    answer = json.loads(out)
    (report,) = answer["transcripts"]
    assert report["error"] == {
        "kind": "model",
        "status": 401,
        "message": "anthropic:claude-sonnet-5-5: HTTP 401: invalid x-api-key",
    }
    assert report["errors_detail"] == [report["error"]]
    assert answer["error"] == report["error"]
    line = "memdir: anthropic:claude-sonnet-5-5: HTTP 401: invalid x-api-key (retried next time)\n"
    assert err == line
    # --quiet prints nothing but errors: the error, in its one line.
    assert (code_quiet, out_quiet, err_quiet) == (1, "", line)


def test_a_refused_connection_is_a_model_error_without_a_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS[:1])
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with FakeAnthropicServer() as server:
        closed = server.base_url  # nothing listens there once the server stopped
    code, out, _ = run(
        "extract",
        str(session),
        "--model",
        "anthropic:claude-sonnet-5-5",
        "--base-url",
        closed,
        "--memory-dir",
        str(tmp_path / "m"),
        "--json",
    )
    assert code == 1
    error = json.loads(out)["transcripts"][0]["error"]
    assert (error["kind"], error["status"]) == ("model", None)
    assert "APIConnectionError" in error["message"] or "Connection" in error["message"]


def test_offline_token_figures_are_labelled_estimates(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS[:2])
    code, out, _ = run(
        "extract", str(session), "--model", "offline", "--memory-dir", str(tmp_path / "m")
    )
    assert code == 0
    assert "tokens estimated ~" in out
    assert "from cache" not in out
    code, out, _ = run(
        "extract", str(session), "--model", "offline", "--memory-dir", str(tmp_path / "n"), "--json"
    )
    assert json.loads(out)["transcripts"][0]["usage_estimated"] is True
