"""The project's instruction files, found as Claude Code 2.1.332 finds them.

The order and the kinds below are those ``claude -p`` sent in its first request for the
same layout (user files, then every folder from the root down, each folder's
``CLAUDE.md``, ``.claude/CLAUDE.md``, ``.claude/rules/*.md``, ``CLAUDE.local.md``).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from memdir.extract._instructions import (
    MAX_INSTRUCTION_CHARS,
    InstructionFile,
    format_instruction_files,
    load_instruction_files,
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def under(root: Path, files: tuple[InstructionFile, ...]) -> list[tuple[str, str, str]]:
    """The files below ``root`` (the walk reaches the file system's root too)."""
    return [
        (str(f.path.relative_to(root)), f.kind, f.content)
        for f in files
        if f.path.is_relative_to(root)
    ]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


def test_files_come_in_claude_codes_order_with_their_kinds(tmp_path: Path, home: Path) -> None:
    repo = tmp_path / "repo"
    cwd = repo / "sub" / "deeper"
    cwd.mkdir(parents=True)
    (repo / ".git").mkdir()
    write(tmp_path / "CLAUDE.md", "above the repository")
    write(home / ".claude" / "CLAUDE.md", "user")
    write(home / ".claude" / "rules" / "r.md", "user rule")
    write(repo / "CLAUDE.md", "root")
    write(repo / ".claude" / "CLAUDE.md", "dot claude")
    write(repo / ".claude" / "rules" / "b.md", "rule b")
    write(repo / ".claude" / "rules" / "a" / "x.md", "rule a/x")
    write(repo / "CLAUDE.local.md", "local")
    write(repo / "sub" / "CLAUDE.md", "sub")
    write(cwd / "CLAUDE.md", "deeper")
    write(repo / "AGENTS.md", "not read by Claude Code")

    files = load_instruction_files(cwd, {"HOME": str(home)})

    assert under(tmp_path, files) == [
        ("home/.claude/CLAUDE.md", "user", "user"),
        ("home/.claude/rules/r.md", "user", "user rule"),
        ("CLAUDE.md", "project", "above the repository"),
        ("repo/CLAUDE.md", "project", "root"),
        ("repo/.claude/CLAUDE.md", "project", "dot claude"),
        ("repo/.claude/rules/a/x.md", "project", "rule a/x"),
        ("repo/.claude/rules/b.md", "project", "rule b"),
        ("repo/CLAUDE.local.md", "local", "local"),
        ("repo/sub/CLAUDE.md", "project", "sub"),
        ("repo/sub/deeper/CLAUDE.md", "project", "deeper"),
    ]


def test_the_config_home_follows_claude_config_dir(tmp_path: Path, home: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    write(home / ".claude" / "CLAUDE.md", "default home")
    write(tmp_path / "elsewhere" / "CLAUDE.md", "configured")
    write(project / "cfg" / "CLAUDE.md", "relative to the project")
    absolute = {"HOME": str(home), "CLAUDE_CONFIG_DIR": str(tmp_path / "elsewhere")}
    relative = {"HOME": str(home), "CLAUDE_CONFIG_DIR": "cfg"}
    assert [f.content for f in load_instruction_files(project, absolute) if f.kind == "user"] == [
        "configured"
    ]
    assert [f.content for f in load_instruction_files(project, relative) if f.kind == "user"] == [
        "relative to the project"
    ]


def test_comments_are_removed_empty_files_skipped_and_imports_kept(
    tmp_path: Path, home: Path
) -> None:
    project = tmp_path / "project"
    write(project / "CLAUDE.md", "<!-- a note\nover lines -->\nUse uv.\n@notes.md\n")
    write(project / "notes.md", "imported text")
    write(project / "CLAUDE.local.md", "  <!-- only a comment -->\n\n")
    files = load_instruction_files(project, {"HOME": str(home)})
    # `claude -p` sends @imports as written, unexpanded; so does memdir.
    assert under(tmp_path, files) == [("project/CLAUDE.md", "project", "Use uv.\n@notes.md")]


def test_a_rule_scoped_to_paths_waits_for_those_paths(tmp_path: Path, home: Path) -> None:
    project = tmp_path / "project"
    rules = project / ".claude" / "rules"
    write(rules / "always.md", "---\ndescription: everywhere\n---\nAlways this.")
    write(rules / "scoped.md", '---\npaths: "src/**/*.ts"\n---\nOnly for TypeScript.')
    files = load_instruction_files(project, {"HOME": str(home)})
    assert [f.content for f in files if f.path.is_relative_to(tmp_path)] == ["Always this."]


def test_a_file_reached_twice_is_loaded_once(tmp_path: Path, home: Path) -> None:
    # A project inside HOME reaches HOME/.claude/CLAUDE.md as the user's file and again
    # as the home folder's .claude/CLAUDE.md; a symlinked CLAUDE.md is the same file.
    project = home / "work"
    write(home / ".claude" / "CLAUDE.md", "user")
    write(project / "CLAUDE.md", "project")
    (project / "CLAUDE.local.md").symlink_to(project / "CLAUDE.md")
    files = load_instruction_files(project, {"HOME": str(home)})
    assert under(tmp_path, files) == [
        ("home/.claude/CLAUDE.md", "user", "user"),
        ("home/work/CLAUDE.md", "project", "project"),
    ]


def test_a_fifo_is_not_read(tmp_path: Path, home: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    os.mkfifo(project / "CLAUDE.md")
    write(project / "CLAUDE.local.md", "local")
    done: list[tuple[InstructionFile, ...]] = []
    worker = threading.Thread(
        target=lambda: done.append(load_instruction_files(project, {"HOME": str(home)})),
        daemon=True,
    )
    worker.start()
    worker.join(timeout=30)
    assert done, "a FIFO named CLAUDE.md blocked the loader"
    assert [f.content for f in done[0] if f.path.is_relative_to(tmp_path)] == ["local"]


@pytest.mark.parametrize("switch", ["CLAUDE_CODE_DISABLE_CLAUDE_MDS", "CLAUDE_CODE_SIMPLE"])
def test_claude_codes_switches_turn_loading_off(tmp_path: Path, home: Path, switch: str) -> None:
    project = tmp_path / "project"
    write(project / "CLAUDE.md", "project")
    assert load_instruction_files(project, {"HOME": str(home)}) != ()
    assert load_instruction_files(project, {"HOME": str(home), switch: "1"}) == ()


def test_a_huge_file_is_cut(tmp_path: Path, home: Path) -> None:
    project = tmp_path / "project"
    write(project / "CLAUDE.md", "a" * (MAX_INSTRUCTION_CHARS + 500))
    [file] = [f for f in load_instruction_files(project, {"HOME": str(home)}) if f.kind != "user"]
    assert file.content.startswith("a" * MAX_INSTRUCTION_CHARS + "\n[… 500 more characters")


def test_the_section_frames_the_files_as_known_context(tmp_path: Path) -> None:
    assert format_instruction_files(()) == ""
    files = (
        InstructionFile(path=tmp_path / "CLAUDE.md", kind="project", content="Use uv."),
        InstructionFile(path=tmp_path / "CLAUDE.local.md", kind="local", content="Mine."),
    )
    text = format_instruction_files(files)
    assert text.startswith("## The project's instruction files\n\n")
    assert "do not save it as a memory" in text
    assert "not to you" in text
    assert f"Contents of {tmp_path / 'CLAUDE.md'} (project instructions" in text
    assert text.index("Use uv.") < text.index("Mine.")
