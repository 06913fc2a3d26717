"""``memdir extract`` and the memory commands, through click's runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir._cli import cli
from memdir.state import StateFile
from memdir.store import MemoryDir, contains_secret, default_memory_dir, parse_memory_file
from memdir.testing import FakeAnthropicServer, Fault
from tests.cli.conftest import TURNS, append_turns, offline, report, write_session


def run(*args: str) -> tuple[int, str, str]:
    """The command, on the offline engine where it runs a model and names none."""
    result = CliRunner().invoke(cli, offline(args))
    return result.exit_code, result.stdout, result.stderr


def test_extract_saves_memories_and_a_rerun_does_nothing(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s1.jsonl", TURNS)
    memory = tmp_path / "memory"
    code, out, err = run("extract", str(session), "--memory-dir", str(memory), "--json")
    assert code == 0, err
    first = report(out)
    assert first["turns"] == len(TURNS)
    assert first["runs"] == len(TURNS)
    assert first["memories_saved"] >= 3
    assert err == ""
    names = {h.filename for h in MemoryDir(memory).scan()}
    assert "user_role.md" in names
    # The same file again: nothing new, no fork run.
    code, out, _ = run("extract", str(session), "--memory-dir", str(memory), "--json")
    assert code == 0
    again = report(out)
    assert again["turns"] == 0
    assert again["runs"] == 0


def test_the_offline_engine_runs_when_asked(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s1.jsonl", TURNS[:1])
    code, out, err = run("extract", str(session), "--memory-dir", str(tmp_path / "m"))
    assert code == 0
    assert err == ""
    assert "turns 1 · runs 1" in out


def test_appended_turns_are_the_only_ones_covered(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS[:2])
    memory = tmp_path / "memory"
    run("extract", str(session), "--memory-dir", str(memory), "--json")
    append_turns(session, 2, TURNS[2:5])
    code, out, _ = run("extract", str(session), "--memory-dir", str(memory), "--json")
    assert code == 0
    assert report(out)["turns"] == 3
    assert report(out)["runs"] == 3
    state = StateFile(memory).get("sess-1")
    assert state.cursor == "a4"


def test_every_3_batches_turns(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS)  # six turns
    code, out, _ = run(
        "extract", str(session), "--memory-dir", str(tmp_path / "m"), "--every", "3", "--json"
    )
    assert code == 0
    assert report(out)["turns"] == 6
    assert report(out)["runs"] == 2


def test_every_counts_across_processes(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS[:2])
    memory = tmp_path / "m"
    _, out, _ = run("extract", str(session), "--memory-dir", str(memory), "--every", "3", "--json")
    assert report(out)["runs"] == 0
    append_turns(session, 2, TURNS[2:3])
    _, out, _ = run("extract", str(session), "--memory-dir", str(memory), "--every", "3", "--json")
    assert report(out)["runs"] == 1  # the third turn overall


def test_batch_covers_everything_in_one_run(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS)
    code, out, _ = run(
        "extract", str(session), "--memory-dir", str(tmp_path / "m"), "--batch", "--json"
    )
    assert code == 0
    assert report(out)["runs"] == 1
    assert report(out)["memories_saved"] >= 3


def test_malformed_lines_are_reported_and_the_rest_processed(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS[:2])
    lines = session.read_text().splitlines()
    lines.insert(1, "{broken json")
    lines.insert(3, "[1, 2, 3]")
    session.write_text("\n".join(lines) + "\n")
    code, out, _ = run("extract", str(session), "--memory-dir", str(tmp_path / "m"))
    assert code == 0
    assert "skipped line 2: not JSON" in out
    assert "skipped line 4: not a JSON object" in out
    assert "turns 2 · runs 2" in out


def test_unreadable_transcript_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    good = write_session(tmp_path / "good.jsonl", TURNS[:1])
    memory = tmp_path / "m"
    code, out, err = run(
        "extract", str(good), str(tmp_path / "missing.jsonl"), "--memory-dir", str(memory)
    )
    assert code == 2
    assert err.count("\n") == 1
    assert "missing.jsonl: no such file" in err
    assert not memory.exists()
    (tmp_path / "notes.txt").write_text("just some text\n")
    code, _, err = run("extract", str(tmp_path / "notes.txt"), "--memory-dir", str(memory))
    assert code == 2
    assert "no known transcript format" in err
    assert not memory.exists()


def test_bad_model_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS[:1])
    memory = tmp_path / "m"
    code, _, err = run("extract", str(session), "--memory-dir", str(memory), "--model", "gpt-7")
    assert code == 2
    assert err.startswith("memdir: unknown model spec 'gpt-7'")
    assert err.count("\n") == 1
    assert not memory.exists()


def test_default_memory_dir_follows_the_session_cwd(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    session = write_session(tmp_path / "s.jsonl", TURNS[:1], cwd=str(project))
    code, _, _ = run("extract", str(session))
    assert code == 0
    expected = default_memory_dir(project)
    assert expected.is_relative_to(tmp_path / "claude-home")
    assert (expected / "user_role.md").exists()


def test_ls_show_forget(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS)
    memory = tmp_path / "m"
    run("extract", str(session), "--memory-dir", str(memory))
    code, out, _ = run("ls", "--memory-dir", str(memory))
    assert code == 0
    assert out.split("\n")[0].split() == ["name", "type", "age", "description"]
    row = next(line for line in out.splitlines() if line.startswith("user-role "))
    assert row.split()[1:4] == ["user", "just", "now"]
    code, out, _ = run("ls", "--memory-dir", str(memory), "--json")
    listed = json.loads(out)["memories"]
    assert {"user_role.md"} <= {m["file"] for m in listed}
    assert all(m["type"] in ("user", "feedback", "project", "reference") for m in listed)
    code, out, _ = run("show", "user_role", "--memory-dir", str(memory))
    assert code == 0
    assert parse_memory_file(out).type == "user"
    code, out, _ = run("forget", "user_role.md", "--yes", "--memory-dir", str(memory))
    assert code == 0
    assert not (memory / "user_role.md").exists()
    assert "user_role.md" not in (memory / "MEMORY.md").read_text()
    code, _, err = run("show", "user_role", "--memory-dir", str(memory))
    assert code == 2
    assert "no memory named 'user_role'" in err


def test_no_secret_reaches_memory(tmp_path: Path) -> None:
    key = "sk-ant-api03-" + "Qz8_" * 23 + "x" + "AA"
    turns = [f"Always run the linter before committing. Here's the staging key: {key}"]
    session = write_session(tmp_path / "s.jsonl", turns)
    memory = tmp_path / "m"
    code, _, _ = run("extract", str(session), "--memory-dir", str(memory))
    assert code == 0
    for file in memory.rglob("*"):
        if file.is_file() and file.suffix == ".md":
            assert not contains_secret(file.read_text())
            assert key not in file.read_text()


def test_help_for_every_command() -> None:
    for args in (
        ["--help"],
        ["extract", "--help"],
        ["watch", "--help"],
        ["hook", "claude-code", "--help"],
        ["ls", "--help"],
        ["show", "--help"],
        ["forget", "--help"],
        ["dir", "--help"],
    ):
        code, out, _ = run(*args)
        assert code == 0
        assert "Usage:" in out


def test_bundled_session_offline_saves_memories_and_never_the_key(tmp_path: Path) -> None:
    bundled = Path(__file__).parent.parent.parent / "examples" / "sessions"
    session = next(bundled.glob("*.jsonl"))
    memory = tmp_path / "m"
    code, out, _ = run("extract", str(session), "--model", "offline", "--memory-dir", str(memory))
    assert code == 0
    assert "saved " in out
    code, out, _ = run("ls", "--memory-dir", str(memory), "--json")
    kinds = {m["type"] for m in json.loads(out)["memories"]}
    assert kinds == {"user", "feedback", "project", "reference"}
    files = [f for f in memory.rglob("*") if f.is_file()]
    assert files
    for file in files:
        assert "sk-ant-" not in file.read_text(errors="replace"), file
        if file.suffix == ".md":
            assert not contains_secret(file.read_text())


def test_dream_waits_for_its_gates_and_force_runs_it(tmp_path: Path) -> None:
    memory = tmp_path / "m"
    session = write_session(tmp_path / "s.jsonl", TURNS[:2])
    run("extract", str(session), "--memory-dir", str(memory))
    code, out, _ = run(
        "dream", "--memory-dir", str(memory), "--transcripts", str(tmp_path), "--json"
    )
    assert code == 0
    assert json.loads(out)["ran"] is False
    code, out, _ = run("dream", "--memory-dir", str(memory), "--force", "--json")
    assert code == 0
    assert json.loads(out)["ran"] is True
    assert (memory / ".consolidate-lock").exists()


def test_prompt_and_recall(tmp_path: Path) -> None:
    memory = tmp_path / "m"
    session = write_session(tmp_path / "s.jsonl", TURNS)
    run("extract", str(session), "--memory-dir", str(memory))
    code, out, _ = run("prompt", "--memory-dir", str(memory))
    assert code == 0
    assert str(memory) in out
    assert "<system-reminder>" in out
    assert "user_role.md" in out
    code, out, _ = run(
        "recall",
        "which dataframe library, polars or pandas?",
        "--memory-dir",
        str(memory),
        "--json",
    )
    assert code == 0
    files = [m["filename"] for m in json.loads(out)["memories"]]
    assert files
    assert "polars" in files[0]
    code, out, _ = run("recall", "nothing matches zebra unicorn", "--memory-dir", str(memory))
    assert code == 0
    assert "no relevant memories" in out


def test_team_memory_end_to_end(tmp_path: Path) -> None:
    memory = tmp_path / "m"
    key = "sk-ant-api03-" + "Zt4_" * 23 + "y" + "AA"
    turns = [
        *TURNS,
        "The release freeze starts next week, because the audit is due then.",
        f"Bugs go to https://linear.example.com/acme/team/ING and the key is {key}",
    ]
    session = write_session(tmp_path / "s.jsonl", turns)
    code, out, err = run("extract", str(session), "--memory-dir", str(memory), "--team", "--json")
    assert code == 0, err
    team_files = sorted(p.name for p in (memory / "team").glob("*.md") if p.name != "MEMORY.md")
    private_files = sorted(p.name for p in memory.glob("*.md") if p.name != "MEMORY.md")
    assert team_files  # shared facts went to team/
    assert "user_role.md" in private_files  # the person stays private
    assert (memory / "team" / "MEMORY.md").exists()
    for file in (memory / "team").rglob("*"):
        if file.is_file():
            assert key not in file.read_text()
            assert not contains_secret(file.read_text())
    code, out, _ = run("prompt", "--memory-dir", str(memory), "--team")
    assert code == 0
    assert '<team-memory-content source="shared">' in out
    assert str(memory / "team") in out
    for name in team_files:
        assert f"]({name})" in out


def test_memory_files_are_stored_as_claude_code_does_unless_told_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS[:1])
    current, legacy = tmp_path / "current", tmp_path / "legacy"
    assert run("extract", str(session), "--memory-dir", str(current))[0] == 0
    monkeypatch.setenv("MEMDIR_MEMORY_FORMAT", "2.1.88")
    assert run("extract", str(session), "--memory-dir", str(legacy))[0] == 0
    stamped = parse_memory_file((current / "user_role.md").read_text())
    assert stamped.metadata.get("node_type") == "memory"
    assert stamped.type == "user"
    assert stamped.origin_session_id == "sess-1"  # the session it came from
    kept = parse_memory_file((legacy / "user_role.md").read_text())
    assert kept.frontmatter.get("type") == "user"
    assert "metadata" not in kept.frontmatter


def test_a_failed_run_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS[:1])
    refused = Fault(
        status=401,
        body={
            "type": "error",
            "error": {"type": "authentication_error", "message": "invalid x-api-key"},
        },
    )
    with FakeAnthropicServer(handler=lambda body: refused) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-wrong")
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
        code, out, _ = run(*args)
        code_json, out_json, _ = run(*args, "--json")
    assert code == 1
    assert "1 run(s) failed: " in out
    assert "HTTP 401: invalid x-api-key" in out
    assert code_json == 1
    (report,) = json.loads(out_json)["transcripts"]
    assert report["errors"] == 1
    assert report["error_reasons"] == ["anthropic:claude-sonnet-5-5: HTTP 401: invalid x-api-key"]


@pytest.mark.parametrize(
    ("model", "needs"),
    [("anthropic:claude-sonnet-5-5", "ANTHROPIC_API_KEY"), ("openai:gpt-4o", "OPENAI_API_KEY")],
)
def test_a_provider_without_credentials_is_refused_before_anything_is_written(
    tmp_path: Path, model: str, needs: str
) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS[:1])
    memory = tmp_path / "m"
    code, out, err = run("extract", str(session), "--model", model, "--memory-dir", str(memory))
    assert code == 2
    assert out == ""
    assert err.strip().count("\n") == 0
    assert needs in err
    assert not memory.exists()


def test_a_memory_dir_that_cannot_be_a_folder_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = write_session(tmp_path / "s.jsonl", TURNS[:1])
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder")
    code, _, err = run(
        "extract", str(session), "--model", "offline", "--memory-dir", str(blocker / "sub")
    )
    assert (code, err.count("\n")) == (2, 1)
    assert "is a file, not a folder" in err
    monkeypatch.setenv("MEMDIR_DIR", str(blocker))
    code, _, err = run("extract", str(session), "--model", "offline")
    assert (code, err.count("\n")) == (2, 1)
    assert blocker.read_text() == "not a folder"
