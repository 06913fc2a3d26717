"""``memdir extract`` (and so the Claude Code hook) with the user layer on: installed in
the user's CLAUDE.md, or named by ``$MEMDIR_USER_DIR``, it receives the memories about
the person; off, they stay in the project."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir._cli import cli
from memdir.store import parse_memory_file, user_memory_dir
from tests.cli.conftest import TURNS, write_session


def _extract(tmp_path: Path) -> Path:
    session = write_session(tmp_path / "s.jsonl", TURNS)
    memory = tmp_path / "memory"
    result = CliRunner().invoke(
        cli, ["extract", str(session), "--model", "offline", "--memory-dir", str(memory)]
    )
    assert result.exit_code == 0, result.stderr
    return memory


def _user_memories(root: Path) -> list[str]:
    if not root.is_dir():
        return []
    return sorted(
        p.name
        for p in root.glob("*.md")
        if p.name != "MEMORY.md" and parse_memory_file(p.read_text()).type == "user"
    )


def test_installed_layer_receives_the_memory_about_the_person(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["install", "claude-code", "--user-layer"])
    assert result.exit_code == 0, result.stderr
    layer = user_memory_dir().root
    memory = _extract(tmp_path)
    saved = _user_memories(layer)
    assert saved, "no user memory in the user layer"
    assert _user_memories(memory) == []
    index = (layer / "MEMORY.md").read_text(encoding="utf-8")
    assert all(f"]({name})" in index for name in saved)
    # What is about the project stays in the project.
    assert any(p.name != "MEMORY.md" for p in memory.glob("*.md"))


def test_env_names_the_layer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMDIR_USER_DIR", str(tmp_path / "mine"))
    _extract(tmp_path)
    assert _user_memories(tmp_path / "mine")


def test_layer_off_keeps_everything_in_the_project(tmp_path: Path) -> None:
    memory = _extract(tmp_path)
    assert _user_memories(memory)
    assert not user_memory_dir().root.exists()


def test_install_is_idempotent_and_uninstall_keeps_other_lines(tmp_path: Path) -> None:
    claude_md = Path(str(user_memory_dir().root.parent)) / "CLAUDE.md"
    claude_md.parent.mkdir(parents=True)
    claude_md.write_text("Use British spelling.\n", encoding="utf-8")
    for _ in range(2):
        result = CliRunner().invoke(cli, ["install", "claude-code", "--user-layer"])
        assert result.exit_code == 0, result.stderr
    text = claude_md.read_text(encoding="utf-8")
    assert text.count(f"@{user_memory_dir().entrypoint}") == 1
    assert text.startswith("Use British spelling.\n")
    result = CliRunner().invoke(cli, ["install", "claude-code", "--user-layer", "--uninstall"])
    assert result.exit_code == 0, result.stderr
    assert claude_md.read_text(encoding="utf-8") == "Use British spelling.\n"


def test_a_second_session_updates_the_layer_instead_of_duplicating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layer = tmp_path / "mine"
    monkeypatch.setenv("MEMDIR_USER_DIR", str(layer))
    _extract(tmp_path)
    first = _user_memories(layer)
    later = write_session(tmp_path / "t.jsonl", ["I'm Ana, I lead the ML platform team now."])
    result = CliRunner().invoke(
        cli,
        ["extract", str(later), "--model", "offline", "--memory-dir", str(tmp_path / "memory")],
    )
    assert result.exit_code == 0, result.stderr
    assert _user_memories(layer) == first
    texts = " ".join((layer / name).read_text(encoding="utf-8") for name in first)
    assert "ML platform" in texts


def test_install_json_and_prompt_show_the_layer(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["install", "claude-code", "--user-layer", "--json"])
    assert result.exit_code in (0, 1), result.stderr  # 1: a check found a problem
    shown = json.loads(result.stdout)["user_layer"]
    assert shown["user_dir"] == str(user_memory_dir().root)
    assert shown["written"] is True
    memory = _extract(tmp_path)
    result = CliRunner().invoke(cli, ["prompt", "--memory-dir", str(memory)])
    assert result.exit_code == 0, result.stderr
    assert f"Contents of {user_memory_dir().entrypoint}" in result.stdout
    assert "follow the project memory" in result.stdout
