"""What the commands promise: ``recall`` for a person, ``dream``'s reasons, ``ls``'s table,
and the README's sentence about which options each command takes."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir._cli import cli
from memdir.store import MemoryDir, format_memory_file
from memdir.testing import FakeAnthropicServer, Fault
from tests.cli.conftest import TURNS, offline, write_session

README = Path(__file__).resolve().parents[2] / "README.md"


def run(*args: str) -> tuple[int, str, str]:
    """The command, on the offline engine where it runs a model and names none."""
    result = CliRunner().invoke(cli, offline(args))
    return result.exit_code, result.stdout, result.stderr


def _memories(root: Path, count: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        (root / f"project_service_{n}.md").write_text(
            format_memory_file(
                name=f"service {n}",
                description=f"The kafka consumer service number {n}",
                type="project",
                body=f"Service {n} reads the kafka topic ingest-{n}.",
            ),
            encoding="utf-8",
        )
    return root


def test_recall_answers_a_one_word_query(tmp_path: Path) -> None:
    memory = tmp_path / "m"
    run("extract", str(write_session(tmp_path / "s.jsonl", TURNS)), "--memory-dir", str(memory))
    code, out, _ = run("recall", "polars", "--memory-dir", str(memory), "--json")
    assert code == 0
    files = [m["filename"] for m in json.loads(out)["memories"]]
    assert files
    assert "polars" in files[0]


def test_recall_with_the_offline_model_is_the_lexical_ranking(tmp_path: Path) -> None:
    memory = _memories(tmp_path / "m", 3)
    code, out, err = run("recall", "kafka", "--memory-dir", str(memory), "--model", "offline")
    assert code == 0, err
    assert "kafka" in out


def test_recall_limit_goes_past_five_and_stops_at_the_session_budget(tmp_path: Path) -> None:
    memory = _memories(tmp_path / "m", 12)
    code, out, _ = run(
        "recall", "kafka service", "--memory-dir", str(memory), "--limit", "8", "--json"
    )
    assert code == 0
    assert len(json.loads(out)["memories"]) == 8
    # Forty files of ~4 KiB each: surfacing stops once 60 KiB are shown, as in a session.
    big = tmp_path / "big"
    big.mkdir()
    for n in range(40):
        (big / f"reference_kafka_{n}.md").write_text(
            format_memory_file(
                name=f"kafka {n}",
                description="kafka notes",
                type="reference",
                body="\n".join(f"kafka partition {i} of topic {n}" for i in range(150)),
            )
        )
    code, out, _ = run("recall", "kafka", "--memory-dir", str(big), "--limit", "40", "--json")
    surfaced = json.loads(out)["memories"]
    assert 10 <= len(surfaced) < 40
    assert sum(len(m["text"].encode()) for m in surfaced[:-1]) < 60 * 1024


def test_recall_with_a_failing_model_says_so_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = _memories(tmp_path / "m", 3)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-wrong")
    refused = Fault(
        status=401,
        body={"type": "error", "error": {"type": "authentication_error", "message": "bad key"}},
    )
    with FakeAnthropicServer(handler=lambda body: refused) as server:
        args = [
            "recall",
            "which kafka service",
            "--memory-dir",
            str(memory),
            "--model",
            "anthropic:claude-haiku-4-5",
            "--base-url",
            server.base_url,
        ]
        code, out, err = run(*args)
        code_json, out_json, _ = run(*args, "--json")
    assert code == 1
    assert "no relevant memories" not in out
    assert err.count("\n") == 1
    assert "recall failed" in err
    assert "HTTP 401: bad key" in err
    assert code_json == 1
    assert json.loads(out_json)["error"]["status"] == 401


def test_dream_says_which_gate_is_closed(tmp_path: Path) -> None:
    memory = _memories(tmp_path / "m", 2)
    code, out, _ = run("dream", "--memory-dir", str(memory), "--transcripts", str(tmp_path))
    assert code == 0
    assert out.startswith("not yet: 0 of 5 sessions since the last pass")
    code, out, _ = run(
        "dream", "--memory-dir", str(memory), "--transcripts", str(tmp_path), "--json"
    )
    answer = json.loads(out)
    assert (answer["ran"], answer["failed"]) == (False, False)
    assert answer["reason"] == "not yet: 0 of 5 sessions since the last pass"


def test_dream_that_could_not_run_says_why_apart_from_not_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = _memories(tmp_path / "m", 2)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-wrong")
    refused = Fault(
        status=403,
        body={"type": "error", "error": {"type": "permission_error", "message": "no access"}},
    )
    with FakeAnthropicServer(handler=lambda body: refused) as server:
        args = [
            "dream",
            "--force",
            "--memory-dir",
            str(memory),
            "--model",
            "anthropic:claude-sonnet-5-5",
            "--base-url",
            server.base_url,
        ]
        code, out, err = run(*args)
        code_json, out_json, _ = run(*args, "--json")
    assert code == 1
    assert "not yet" not in out + err
    assert err == (
        "memdir: consolidation could not run: anthropic:claude-sonnet-5-5: HTTP 403: no access\n"
    )
    assert code_json == 1
    assert json.loads(out_json)["error"] == {
        "kind": "model",
        "status": 403,
        "message": "anthropic:claude-sonnet-5-5: HTTP 403: no access",
    }


def test_dream_while_another_pass_holds_the_lock_is_not_called_not_yet(tmp_path: Path) -> None:
    memory = _memories(tmp_path / "m", 2)
    # The parent of this test process is alive and is not this process: a live holder.
    (memory / ".consolidate-lock").write_text(str(os.getppid()))
    code, out, err = run("dream", "--force", "--model", "offline", "--memory-dir", str(memory))
    assert code == 0
    assert "not yet" not in out
    assert err == "memdir: consolidation did not run: another consolidation pass is running\n"


def test_ls_is_a_table_of_file_type_age_and_description(tmp_path: Path) -> None:
    memory = _memories(tmp_path / "m", 2)
    old = memory / "project_service_0.md"
    three_days = old.stat().st_mtime - 3 * 86400
    os.utime(old, (three_days, three_days))
    code, out, _ = run("ls", "--memory-dir", str(memory))
    assert code == 0
    lines = out.splitlines()
    # The file name, whole: what show and forget take.
    assert lines[0].split() == ["file", "type", "age", "description"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert rows["project_service_0.md"].split()[1:5] == ["project", "3", "days", "The"]
    assert rows["project_service_1.md"].split()[1:4] == ["project", "just", "now"]
    assert "The kafka consumer service number 0" in rows["project_service_0.md"]
    code, out, _ = run("ls", "--memory-dir", str(memory), "--json")
    listed = json.loads(out)
    assert set(listed) == {"memory_dir", "memories"}
    assert {tuple(sorted(m)) for m in listed["memories"]} == {
        ("description", "file", "modified", "name", "type")
    }


def test_ls_shows_brackets_in_descriptions_as_written(tmp_path: Path) -> None:
    memory = tmp_path / "m"
    memory.mkdir()
    (memory / "reference_links.md").write_text(
        format_memory_file(
            name="links",
            description="[bold]not markup[/bold] see [[other]]",
            type="reference",
            body="x",
        )
    )
    code, out, _ = run("ls", "--memory-dir", str(memory))
    assert code == 0
    assert "[bold]not markup[/bold] see [[other]]" in out


def test_the_readme_says_which_commands_take_json_and_memory_dir() -> None:
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert "Every command takes `--help`, `--json` and `--memory-dir`" not in text
    one_dir = [
        "extract",
        "watch",
        "ls",
        "show",
        "forget",
        "dream",
        "prompt",
        "recall",
        "search",
        "why",
    ]
    assert "(" + ", ".join(f"`{c}`" for c in one_dir) + ") take `--memory-dir` and `--json`" in text
    assert "`hook claude-code` takes `--memory-dir` but not `--json`" in text

    def options(*path: str) -> set[str]:
        code, out, _ = run(*path, "--help")
        assert code == 0
        return set(re.findall(r"--[a-z-]+", out))

    expected: dict[tuple[str, ...], set[str]] = {
        **{(c,): {"--memory-dir", "--json"} for c in one_dir},
        ("dir",): {"--json"},
        ("hook", "claude-code"): {"--memory-dir"},
        ("worker",): {"--db"},
        ("queue", "init"): {"--db"},
        ("queue", "status"): {"--db", "--json"},
        ("queue", "retry"): {"--db", "--json"},
        ("queue", "prune"): {"--db", "--json"},
        ("sync",): {"--db", "--json"},
    }
    for command, wanted in expected.items():
        found = options(*command) & {"--json", "--memory-dir", "--db"}
        assert found == wanted, command


def test_a_relative_memory_dir_option_is_relative_to_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    session = write_session(tmp_path / "s.jsonl", TURNS[:2])
    code, _, _ = run("extract", str(session), "--model", "offline", "--memory-dir", "rel/m")
    assert code == 0
    assert MemoryDir(tmp_path / "rel" / "m").scan()
