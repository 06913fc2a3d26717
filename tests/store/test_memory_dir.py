"""MemoryDir containment: nothing resolves inside unless the OS would put it inside."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdir.errors import UsageError
from memdir.store import MemoryDir


@pytest.fixture
def md(tmp_path: Path) -> MemoryDir:
    (tmp_path / "memory" / "team").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    return MemoryDir(tmp_path / "memory")


def test_paths_of_the_directory(md: MemoryDir, tmp_path: Path) -> None:
    assert md.root == tmp_path / "memory"
    assert md.entrypoint == tmp_path / "memory" / "MEMORY.md"
    assert md.team_dir == tmp_path / "memory" / "team"
    assert md.team_entrypoint == tmp_path / "memory" / "team" / "MEMORY.md"


@dataclass(frozen=True)
class Case:
    path: str
    inside: bool
    why: str


CASES = [
    Case("memory/user_role.md", True, "a plain file"),
    Case("memory/new/sub/dir.md", True, "missing subfolders"),
    Case("memory/team/x.md", True, "team files are memory too"),
    Case("memory/../outside/x.md", False, "dot-dot out"),
    Case("memory/a/../../outside/x.md", False, "dot-dot through a missing folder"),
    Case("memory/a/../b.md", True, "dot-dot that stays inside"),
    Case("memory-evil/x.md", False, "a sibling sharing the prefix"),
    Case("memory", False, "the directory itself"),
    Case("memory/", False, "the directory itself, with a slash"),
    Case("outside/x.md", False, "elsewhere"),
    Case("/etc/passwd", False, "absolute elsewhere"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.why)
def test_containment_relative_to_cwd(md: MemoryDir, tmp_path: Path, case: Case) -> None:
    assert md.is_memory_path(case.path, cwd=tmp_path) is case.inside
    assert md.is_memory_path(str(tmp_path / case.path)) is case.inside


def test_relative_path_uses_process_cwd_by_default(
    md: MemoryDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path / "memory")
    assert md.is_memory_path("x.md")
    monkeypatch.chdir(tmp_path / "outside")
    assert not md.is_memory_path("x.md")


def test_tilde_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    md = MemoryDir("~/memory")
    assert md.root == tmp_path / "memory"
    assert md.is_memory_path("~/memory/a.md")
    assert not md.is_memory_path("~/a.md")


def test_symlinked_file_pointing_outside_is_outside(md: MemoryDir, tmp_path: Path) -> None:
    (tmp_path / "outside" / "secret.txt").write_text("x")
    (md.root / "leak.md").symlink_to(tmp_path / "outside" / "secret.txt")
    assert not md.is_memory_path(md.root / "leak.md")


def test_dangling_symlink_pointing_outside_is_outside(md: MemoryDir, tmp_path: Path) -> None:
    (md.root / "dangling.md").symlink_to(tmp_path / "outside" / "not-yet.md")
    assert not md.is_memory_path(md.root / "dangling.md")


def test_symlinked_folder_pointing_outside_is_outside(md: MemoryDir, tmp_path: Path) -> None:
    (md.root / "linkdir").symlink_to(tmp_path / "outside")
    assert not md.is_memory_path(md.root / "linkdir" / "x.md")
    assert not md.is_memory_path(md.root / "linkdir" / "new" / "x.md")


def test_dot_dot_after_a_symlink_follows_the_link(md: MemoryDir, tmp_path: Path) -> None:
    deep = tmp_path / "outside" / "deep"
    deep.mkdir()
    (md.root / "hop").symlink_to(deep)
    # Lexically this is memory/x.md; the kernel resolves hop first and lands in outside/.
    assert not md.is_memory_path(str(md.root / "hop" / ".." / "x.md"))


def test_symlink_inside_pointing_inside_is_inside(md: MemoryDir) -> None:
    (md.root / "real.md").write_text("x")
    (md.root / "alias.md").symlink_to(md.root / "real.md")
    assert md.is_memory_path(md.root / "alias.md")


def test_memory_dir_reached_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    (tmp_path / "via").symlink_to(tmp_path / "store")
    md = MemoryDir(tmp_path / "via")
    assert md.is_memory_path(tmp_path / "store" / "a.md")
    assert md.is_memory_path(tmp_path / "via" / "a.md")


def test_symlink_loop_fails_closed(md: MemoryDir) -> None:
    (md.root / "loop1").symlink_to(md.root / "loop2")
    (md.root / "loop2").symlink_to(md.root / "loop1")
    assert not md.is_memory_path(md.root / "loop1" / "x.md")


@pytest.mark.parametrize("bad", ["memory/a\0.md", "", None, 42, b"memory/x.md", ["x"]])
def test_unusable_input_fails_closed(md: MemoryDir, tmp_path: Path, bad: object) -> None:
    assert md.is_memory_path(bad, cwd=tmp_path) is False
    assert md.is_team_path(bad, cwd=tmp_path) is False


def test_team_path(md: MemoryDir, tmp_path: Path) -> None:
    assert md.is_team_path(md.team_dir / "conventions.md")
    assert not md.is_team_path(md.root / "user.md")
    assert not md.is_team_path(md.root / "team-evil" / "x.md")
    assert not md.is_team_path(md.team_dir / ".." / "x.md")
    (md.team_dir / "out").symlink_to(tmp_path / "outside")
    assert not md.is_team_path(md.team_dir / "out" / "x.md")


def test_missing_memory_dir_still_checks(tmp_path: Path) -> None:
    md = MemoryDir(tmp_path / "not" / "yet")
    assert md.is_memory_path(tmp_path / "not" / "yet" / "a.md")
    assert not md.is_memory_path(tmp_path / "not" / "a.md")


@pytest.mark.parametrize("bad", ["", "a\0b"])
def test_bad_root_is_a_usage_error(bad: str) -> None:
    with pytest.raises(UsageError):
        MemoryDir(bad)


def test_write_inside_and_refuse_outside(md: MemoryDir, tmp_path: Path) -> None:
    written = md.write("topic/note.md", "hello\n")
    assert written.read_text() == "hello\n"
    with pytest.raises(UsageError, match="outside the memory directory"):
        md.write("../outside/evil.md", "x")
    with pytest.raises(UsageError):
        md.write(tmp_path / "outside" / "evil.md", "x")
    assert not (tmp_path / "outside" / "evil.md").exists()


def test_scan_delegates(md: MemoryDir) -> None:
    (md.root / "a.md").write_text("---\nname: A\ndescription: d\ntype: user\n---\nbody\n")
    (md.root / "MEMORY.md").write_text("- [A](a.md)\n")
    headers = md.scan()
    assert [h.filename for h in headers] == ["a.md"]
    assert headers[0].type == "user"


_segment = st.sampled_from(["..", ".", "memory", "memory-evil", "team", "x.md", "outside", ""])


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_segment, min_size=1, max_size=7), absolute=st.booleans())
def test_containment_agrees_with_the_kernel(
    tmp_path_factory: pytest.TempPathFactory, parts: list[str], absolute: bool
) -> None:
    base = tmp_path_factory.getbasetemp() / "prop"
    (base / "memory" / "team").mkdir(parents=True, exist_ok=True)
    (base / "outside").mkdir(exist_ok=True)
    md = MemoryDir(base / "memory")
    raw = "/".join(parts)
    candidate = str(base / raw) if absolute else raw
    inside = md.is_memory_path(candidate, cwd=base)
    # Independent oracle: the real path of the deepest existing ancestor, by the kernel.
    full = os.path.join(base, candidate)
    probe = full
    rest: list[str] = []
    while not os.path.lexists(probe):
        probe, name = os.path.split(probe)
        rest.insert(0, name)
    resolved = os.path.normpath(os.path.join(os.path.realpath(probe), *rest))
    root = os.path.realpath(base / "memory")
    expected = resolved != root and resolved.startswith(root + os.sep)
    assert inside is expected
