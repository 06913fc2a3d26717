"""``memdir forget``: it asks first, and ``--undo`` puts back exactly what it took."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir._cli import cli
from memdir.store import (
    TRASH_DIR_NAME,
    MemoryDir,
    empty_trash,
    forget_memory,
    last_trashed,
    restore_memory,
    trash_entries,
)
from tests.cli.conftest import TURNS, offline, write_session

DAY = 86400.0

ROLE = b"---\nname: role\ndescription: Ana leads the data platform team\ntype: user\n---\nAna.\n"
STYLE = b"---\nname: style\ndescription: small commits\ntype: feedback\n---\nSmall commits.\n"
# CRLF lines and no newline at the end: the index is given back byte for byte all the same.
INDEX = (
    b"# Memory\r\n"
    b"- [Role](user_role.md) \xe2\x80\x94 Ana leads the team\r\n"
    b"- [Style](feedback_style.md) \xe2\x80\x94 small commits"
)


def run(*args: str, input: str | None = None) -> tuple[int, str, str]:
    """The command, on the offline engine where it runs a model and names none."""
    result = CliRunner().invoke(cli, offline(args), input=input)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    root.mkdir()
    (root / "user_role.md").write_bytes(ROLE)
    (root / "feedback_style.md").write_bytes(STYLE)
    (root / "MEMORY.md").write_bytes(INDEX)
    os.chmod(root / "user_role.md", 0o600)
    os.utime(root / "user_role.md", (1_700_000_000.5, 1_700_000_000.5))
    return root


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Someone at a terminal to answer the question."""
    monkeypatch.setattr("memdir._cli._forget._interactive", lambda: True)


def trash(root: Path) -> list[Path]:
    folder = root / TRASH_DIR_NAME
    return sorted(folder.iterdir()) if folder.is_dir() else []


def test_on_a_terminal_it_asks_and_yes_forgets(memory: Path, terminal: None) -> None:
    code, out, err = run("forget", "user_role", "--memory-dir", str(memory), input="y\n")
    assert code == 0, err
    assert "Forget user_role.md (Ana leads the data platform team)? [y/N]" in err
    assert "forgot user_role.md" in out
    assert not (memory / "user_role.md").exists()
    assert b"user_role.md" not in (memory / "MEMORY.md").read_bytes()
    assert (memory / "feedback_style.md").read_bytes() == STYLE
    assert len(trash(memory)) == 1


def test_answering_no_removes_nothing(memory: Path, terminal: None) -> None:
    code, out, err = run("forget", "user_role.md", "--memory-dir", str(memory), input="n\n")
    assert code == 2
    assert out == ""
    assert err.strip().splitlines()[-1] == "memdir: kept user_role.md"
    assert (memory / "user_role.md").read_bytes() == ROLE
    assert (memory / "MEMORY.md").read_bytes() == INDEX
    assert trash(memory) == []


def test_an_empty_answer_means_no(memory: Path, terminal: None) -> None:
    code, _, _ = run("forget", "user_role", "--memory-dir", str(memory), input="\n")
    assert code == 2
    assert (memory / "user_role.md").read_bytes() == ROLE


@pytest.mark.parametrize("flag", ["--yes", "-y"])
def test_yes_forgets_without_asking(memory: Path, terminal: None, flag: str) -> None:
    code, out, err = run("forget", "user_role", flag, "--memory-dir", str(memory))
    assert code == 0, err
    assert "Forget" not in err
    assert not (memory / "user_role.md").exists()


def test_without_a_terminal_or_yes_it_refuses_and_removes_nothing(memory: Path) -> None:
    code, out, err = run("forget", "user_role", "--memory-dir", str(memory), input="y\n")
    assert code == 2
    assert out == ""
    assert err == "memdir: not forgetting user_role.md: no terminal to ask on; pass --yes\n"
    assert (memory / "user_role.md").read_bytes() == ROLE
    assert (memory / "MEMORY.md").read_bytes() == INDEX
    assert trash(memory) == []


def test_undo_restores_the_file_and_its_index_line_byte_for_byte(memory: Path) -> None:
    before = os.stat(memory / "user_role.md")
    assert run("forget", "user_role", "--yes", "--memory-dir", str(memory))[0] == 0
    assert (memory / "MEMORY.md").read_bytes() == (
        b"# Memory\r\n- [Style](feedback_style.md) \xe2\x80\x94 small commits"
    )
    code, out, err = run("forget", "--undo", "--memory-dir", str(memory))
    assert code == 0, err
    assert out == "restored user_role.md\n"
    assert (memory / "user_role.md").read_bytes() == ROLE
    assert (memory / "MEMORY.md").read_bytes() == INDEX
    after = os.stat(memory / "user_role.md")
    assert after.st_mode == before.st_mode
    assert after.st_mtime_ns == before.st_mtime_ns
    assert trash(memory) == []


def test_undo_restores_the_last_forgotten_first(memory: Path) -> None:
    run("forget", "user_role", "--yes", "--memory-dir", str(memory))
    run("forget", "feedback_style", "--yes", "--memory-dir", str(memory))
    assert (memory / "MEMORY.md").read_bytes() == b"# Memory\r\n"
    _, out, _ = run("forget", "--undo", "--memory-dir", str(memory))
    assert out == "restored feedback_style.md\n"
    assert not (memory / "user_role.md").exists()
    _, out, _ = run("forget", "--undo", "--memory-dir", str(memory))
    assert out == "restored user_role.md\n"
    assert (memory / "MEMORY.md").read_bytes() == INDEX


def test_undo_puts_a_team_memory_back_in_the_team_index(memory: Path) -> None:
    team = memory / "team"
    team.mkdir()
    (team / "project_deploy.md").write_bytes(b"Deploys go out on Tuesdays.\n")
    team_index = b"- [Deploys](project_deploy.md) \xe2\x80\x94 Tuesdays\n"
    (team / "MEMORY.md").write_bytes(team_index)
    code, _, err = run("forget", "team/project_deploy.md", "--yes", "--memory-dir", str(memory))
    assert code == 0, err
    assert (team / "MEMORY.md").read_bytes() == b""
    assert (memory / "MEMORY.md").read_bytes() == INDEX
    assert run("forget", "--undo", "--memory-dir", str(memory))[0] == 0
    assert (team / "project_deploy.md").read_bytes() == b"Deploys go out on Tuesdays.\n"
    assert (team / "MEMORY.md").read_bytes() == team_index


def test_undo_refuses_when_a_new_memory_took_the_name(memory: Path) -> None:
    run("forget", "user_role", "--yes", "--memory-dir", str(memory))
    newer = b"---\nname: role\ndescription: Ana moved to search\ntype: user\n---\nAna.\n"
    (memory / "user_role.md").write_bytes(newer)
    index_now = (memory / "MEMORY.md").read_bytes()
    code, out, err = run("forget", "--undo", "--memory-dir", str(memory))
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("memdir: cannot undo: user_role.md is taken by a newer memory")
    assert (memory / "user_role.md").read_bytes() == newer
    assert (memory / "MEMORY.md").read_bytes() == index_now
    assert len(trash(memory)) == 1  # still there, to restore once the name is free


def test_undo_with_an_empty_trash_refuses(memory: Path) -> None:
    code, out, err = run("forget", "--undo", "--memory-dir", str(memory))
    assert code == 2
    assert out == ""
    assert err == f"memdir: nothing to undo: the trash of {memory} is empty\n"
    assert (memory / "MEMORY.md").read_bytes() == INDEX


def test_json_for_forget_and_undo(memory: Path) -> None:
    code, out, _ = run("forget", "user_role", "--yes", "--json", "--memory-dir", str(memory))
    assert code == 0
    forgotten = json.loads(out)
    assert forgotten["forgotten"] == "user_role.md"
    assert forgotten["path"] == str(memory / "user_role.md")
    assert forgotten["index_lines"] == ["- [Role](user_role.md) — Ana leads the team\r\n"]
    assert Path(forgotten["trash"]).parent == memory / TRASH_DIR_NAME
    code, out, _ = run("forget", "--undo", "--json", "--memory-dir", str(memory))
    assert code == 0
    restored = json.loads(out)
    assert restored["restored"] == "user_role.md"
    assert restored["path"] == str(memory / "user_role.md")
    assert restored["index_lines"] == forgotten["index_lines"]
    assert restored["forgotten_at"].endswith("+00:00")


def test_undo_takes_no_name_and_forget_needs_one(memory: Path) -> None:
    code, _, err = run("forget", "user_role", "--undo", "--memory-dir", str(memory))
    assert code == 2
    assert "--undo takes no NAME" in err
    code, _, err = run("forget", "--yes", "--memory-dir", str(memory))
    assert code == 2
    assert "which memory?" in err
    assert (memory / "user_role.md").read_bytes() == ROLE


def test_the_trash_is_neither_listed_nor_indexed(memory: Path) -> None:
    run("forget", "user_role", "--yes", "--memory-dir", str(memory))
    assert trash(memory)
    assert [h.filename for h in MemoryDir(memory).scan()] == ["feedback_style.md"]
    code, out, _ = run("ls", "--json", "--memory-dir", str(memory))
    assert code == 0
    assert [m["file"] for m in json.loads(out)["memories"]] == ["feedback_style.md"]
    assert b"trash" not in (memory / "MEMORY.md").read_bytes()
    # Nothing in the trash reads as text, so a memory agent's Grep never finds it.
    for file in (memory / TRASH_DIR_NAME).rglob("*"):
        assert file.suffix != ".md"
    stored = next((memory / TRASH_DIR_NAME).rglob("memory.gz")).read_bytes()
    assert b"Ana leads" not in stored
    assert b"\0" in stored[:8000]


def test_dream_empties_the_trash_of_what_is_older_than_a_week(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    run("extract", str(write_session(tmp_path / "s.jsonl", TURNS)), "--memory-dir", str(memory))
    names = sorted(h.filename for h in MemoryDir(memory).scan())
    assert len(names) >= 2
    old = forget_memory(MemoryDir(memory), names[0], now=time.time() - 8 * DAY)
    code, _, err = run("forget", names[1], "--yes", "--memory-dir", str(memory))
    assert code == 0, err
    assert len(trash(memory)) == 2
    code, _, err = run(
        "dream", "--force", "--model", "offline", "--memory-dir", str(memory),
        "--transcripts", str(tmp_path),
    )  # fmt: skip
    assert code == 0, err
    assert not old.path.exists()
    assert [e.filename for e in trash_entries(MemoryDir(memory))] == [names[1]]
    assert run("forget", "--undo", "--memory-dir", str(memory))[0] == 0
    assert (memory / names[1]).exists()


def test_a_forget_that_cannot_remove_the_file_loses_nothing(
    memory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    md = MemoryDir(memory)

    def fail_unlink(self: Path, missing_ok: bool = False) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "unlink", fail_unlink)
    code, _, err = run("forget", "user_role", "--yes", "--memory-dir", str(memory))
    monkeypatch.undo()
    assert code != 0
    assert "cannot forget user_role.md" in err
    assert (memory / "user_role.md").read_bytes() == ROLE
    assert (memory / "MEMORY.md").read_bytes() == INDEX
    assert last_trashed(md) is None


def test_an_interrupted_undo_is_finished_by_the_next(memory: Path) -> None:
    """A crash after the file was put back, before the entry was removed: undo again."""
    md = MemoryDir(memory)
    entry = forget_memory(md, "user_role.md")
    (memory / "user_role.md").write_bytes(ROLE)  # what the interrupted undo had restored
    assert restore_memory(md).path == entry.path
    assert (memory / "MEMORY.md").read_bytes() == INDEX
    assert last_trashed(md) is None


def test_entries_are_kept_a_week(memory: Path) -> None:
    md = MemoryDir(memory)
    now = time.time()
    week_old = forget_memory(md, "user_role.md", now=now - 7 * DAY - 1)
    recent = forget_memory(md, "feedback_style.md", now=now - 6 * DAY)
    (memory / TRASH_DIR_NAME / "not-an-entry").mkdir()
    assert empty_trash(md, now=now) == [week_old.path]
    assert [e.path for e in trash_entries(md)] == [recent.path]
    assert (memory / TRASH_DIR_NAME / "not-an-entry").is_dir()


def test_the_memory_agent_may_not_write_in_the_trash(memory: Path) -> None:
    from memdir.permissions import memory_write_guard

    entry = forget_memory(MemoryDir(memory), "user_role.md")
    guard = memory_write_guard(memory)
    for name in ("entry.json", "memory.gz", "forged.md"):
        refusal = guard(entry.path / name, "{}")
        assert refusal is not None
        assert "bookkeeping" in refusal


def test_a_team_memory_listed_in_the_main_index_loses_that_line_and_gets_it_back(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "m"
    (memory / "team").mkdir(parents=True)
    board = b"---\nname: board\ndescription: the team board\ntype: reference\n---\nBoard.\n"
    (memory / "team" / "board.md").write_bytes(board)
    index = (
        b"- [Board](team/board.md) \xe2\x80\x94 the team board\n"
        b"- [Role](user_role.md) \xe2\x80\x94 Ana\n"
    )
    (memory / "user_role.md").write_bytes(ROLE)
    (memory / "MEMORY.md").write_bytes(index)
    code, _, err = run("forget", "team/board.md", "--yes", "--memory-dir", str(memory))
    assert code == 0, err
    assert (memory / "MEMORY.md").read_bytes() == b"- [Role](user_role.md) \xe2\x80\x94 Ana\n"
    code, _, err = run("forget", "--undo", "--memory-dir", str(memory))
    assert code == 0, err
    assert (memory / "MEMORY.md").read_bytes() == index
    assert (memory / "team" / "board.md").read_bytes() == board


def test_a_memory_dir_reached_through_a_symlink_is_refused_cleanly(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "user_role.md").write_bytes(ROLE)
    (tmp_path / "link").symlink_to(real)
    from memdir.errors import StoreError

    with pytest.raises(StoreError):
        forget_memory(MemoryDir(tmp_path / "link"), real.resolve() / "user_role.md")
    assert (real / "user_role.md").read_bytes() == ROLE
