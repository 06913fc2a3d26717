"""``memdir search`` and ``memdir recall --fallback`` on a project laid out as Claude Code's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir._cli import cli
from tests.search._sessions import append, entry, write_session

FACT = "The staging database password rotates every Tuesday at noon."


@pytest.fixture(autouse=True)
def _no_memdir_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMDIR_DIR", raising=False)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_search_prints_the_passage_with_its_session_and_time(project: Path) -> None:
    write_session(project, "s-1", [entry("u1", "user", "hello"), entry("u2", "user", FACT)])
    code, out, err = run("search", "staging password", "--memory-dir", str(project / "memory"))
    assert code == 0, err
    first = out.split("\n\n")[0]
    assert first.splitlines()[0] == "session s-1 · user · 2026-03-01 10:00 · message u2"
    assert FACT in first


def test_search_json_indexes_what_was_added_since(project: Path) -> None:
    memory = str(project / "memory")
    path = write_session(project, "s-1", [entry("u1", "user", "nothing to see")])
    code, out, _ = run("search", "staging password", "--memory-dir", memory, "--json")
    assert (code, json.loads(out)["hits"]) == (0, [])
    append(path, entry("u2", "user", FACT))
    code, out, _ = run("search", "staging password", "--memory-dir", memory, "--json")
    hit = json.loads(out)["hits"][0]
    assert code == 0
    assert {k: hit[k] for k in ("kind", "session_id", "uuid", "role", "memory_file")} == {
        "kind": "turn",
        "session_id": "s-1",
        "uuid": "u2",
        "role": "user",
        "memory_file": None,
    }
    assert hit["timestamp"] == "2026-03-01T10:00:00+00:00"
    assert hit["path"] == str(path)


def test_search_sessions_only_and_memories_only(project: Path) -> None:
    memory = project / "memory"
    (memory / "pw.md").write_text("---\nname: pw\n---\nThe password manager is 1Password.\n")
    write_session(project, "s-1", [entry("u2", "user", FACT)])

    def kinds(*flags: str) -> list[str]:
        code, out, err = run("search", "password", "--memory-dir", str(memory), "--json", *flags)
        assert code == 0, err
        return sorted(h["kind"] for h in json.loads(out)["hits"])

    assert kinds() == ["memory", "turn"]
    assert kinds("--sessions-only") == ["turn"]
    assert kinds("--memories-only") == ["memory"]
    code, _, err = run(
        "search", "x", "--memory-dir", str(memory), "--sessions-only", "--memories-only"
    )
    assert code == 2
    assert "exclude each other" in err


def test_search_with_nothing_to_search_says_so(tmp_path: Path) -> None:
    code, _, err = run("search", "anything", "--memory-dir", str(tmp_path / "nowhere" / "memory"))
    assert code == 2
    assert err.startswith("memdir: nothing to search")
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "nowhere").exists()


def test_search_an_explicit_transcript_folder(tmp_path: Path) -> None:
    sessions = tmp_path / "elsewhere"
    sessions.mkdir()
    write_session(sessions, "s-9", [entry("u9", "user", FACT)])
    memory = tmp_path / "memory"
    memory.mkdir()
    args = ("search", "staging", "--memory-dir", str(memory), "--json")
    code, out, _ = run(*args, "--transcripts", str(sessions))
    assert code == 0
    assert [h["uuid"] for h in json.loads(out)["hits"]] == ["u9"]
    code, _, err = run(*args, "--transcripts", str(tmp_path / "missing"))
    assert code == 2
    assert "no transcript folder" in err


def test_recall_fallback_shows_the_passage(project: Path) -> None:
    write_session(project, "s-1", [entry("u2", "user", FACT)])
    memory = str(project / "memory")
    code, out, _ = run("recall", "staging password", "--memory-dir", memory)
    assert (code, out.strip()) == (0, "no relevant memories")
    code, out, _ = run("recall", "staging password", "--memory-dir", memory, "--fallback")
    assert code == 0
    assert "Said by the user in session s-1" in out
    assert FACT in out
