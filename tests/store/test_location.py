"""Where memory lives by default: the same folder as Claude Code's, byte for byte."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from memdir.errors import UsageError
from memdir.store import canonical_git_root, default_memory_dir, sanitize_path

# Expected values computed with Claude Code's JavaScript algorithm (UTF-16 units, the
# h*31+c hash in signed 32 bits, abs, base 36) run under Node.
PATH_250 = "/home/dev/" + "projects/" * 26 + "my-app"


def test_sanitize_short_paths() -> None:
    assert sanitize_path("/Users/foo/my-project") == "-Users-foo-my-project"
    assert sanitize_path("/home/u/my.app") == "-home-u-my-app"
    assert sanitize_path("plugin:name:server") == "plugin-name-server"


def test_sanitize_counts_utf16_units_like_javascript() -> None:
    # "é" is one unit, the rocket is two (a surrogate pair): five dashes after "caf".
    assert sanitize_path("/tmp/caf\u00e9 \U0001f680") == "-tmp-caf----"


def test_sanitize_250_character_path() -> None:
    assert len(PATH_250) == 250
    result = sanitize_path(PATH_250)
    assert result[:200] == PATH_250.replace("/", "-").replace(".", "-")[:200]
    assert result == result[:200] + "-wjx0zf"
    assert len(result) == 207


def test_sanitize_exactly_200_is_not_hashed() -> None:
    name = "a" * 200
    assert sanitize_path(name) == name
    assert sanitize_path("/x/" + "a" * 300).endswith("-rtseee")


def test_default_dir_uses_config_home(tmp_path: Path) -> None:
    project = tmp_path / "my.app"
    project.mkdir()
    home = tmp_path / "claude"
    got = default_memory_dir(project, home, env={})
    assert got == home / "projects" / sanitize_path(str(project.resolve())) / "memory"


def test_default_dir_reads_claude_config_dir(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    got = default_memory_dir(project, env=env)
    assert got.parent.parent == tmp_path / "cfg" / "projects"


def test_default_dir_without_env_is_under_home_dot_claude(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    got = default_memory_dir(project, env={})
    assert got.parts[-4:-2] == (".claude", "projects")
    assert got.parent.parent.parent == Path.home() / ".claude"


def test_memdir_dir_overrides_everything(tmp_path: Path) -> None:
    env = {"MEMDIR_DIR": str(tmp_path / "mine"), "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    assert default_memory_dir(tmp_path, env=env) == tmp_path / "mine"


def test_memdir_dir_expands_home() -> None:
    got = default_memory_dir("/", env={"MEMDIR_DIR": "~/notes/memory"})
    assert got == Path.home() / "notes" / "memory"


@pytest.mark.parametrize("bad", ["relative/dir", "/", "~", "~/", "a\0b"])
def test_unusable_memdir_dir_is_a_usage_error(bad: str) -> None:
    with pytest.raises(UsageError, match="MEMDIR_DIR"):
        default_memory_dir("/", env={"MEMDIR_DIR": bad})


def test_project_symlink_resolves_to_the_real_directory(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    home = tmp_path / "h"
    assert default_memory_dir(link, home, env={}) == default_memory_dir(real, home, env={})


def test_long_project_path_reuses_a_folder_made_by_another_build(tmp_path: Path) -> None:
    home = tmp_path / "h"
    deep = tmp_path.joinpath(*(["nested-directory-name"] * 12))
    deep.mkdir(parents=True)
    name = sanitize_path(str(deep.resolve()))
    assert len(name) > 200
    assert default_memory_dir(deep, home, env={}) == home / "projects" / name / "memory"
    # Claude Code's native build hashes the tail differently; that folder is shared.
    other = home / "projects" / (name[:200] + "-1a2b3c4d5e")
    other.mkdir(parents=True)
    assert default_memory_dir(deep, home, env={}) == other / "memory"


# --- git roots and worktrees -------------------------------------------------------------

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(cwd: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    main = tmp_path / "main-repo"
    main.mkdir()
    _git(main, "init", "-q", "-b", "main")
    (main / "README").write_text("x\n")
    _git(main, "add", "README")
    _git(main, "commit", "-q", "-m", "init")
    return main


@needs_git
def test_subdirectory_of_a_repo_uses_the_repo_root(repo: Path, tmp_path: Path) -> None:
    sub = repo / "src" / "pkg"
    sub.mkdir(parents=True)
    home = tmp_path / "h"
    assert default_memory_dir(sub, home, env={}) == default_memory_dir(repo, home, env={})
    assert default_memory_dir(repo, home, env={}).parent.name == sanitize_path(str(repo))


@needs_git
def test_worktree_resolves_to_the_main_repository(repo: Path, tmp_path: Path) -> None:
    worktree = tmp_path / "feature-wt"
    _git(repo, "worktree", "add", "-q", str(worktree), "-b", "feature")
    assert (worktree / ".git").is_file()
    assert canonical_git_root(worktree / "README") == repo
    home = tmp_path / "h"
    assert default_memory_dir(worktree, home, env={}) == default_memory_dir(repo, home, env={})


def test_forged_git_file_without_back_link_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    (victim / ".git" / "worktrees" / "x").mkdir(parents=True)
    (victim / ".git" / "worktrees" / "x" / "commondir").write_text("../..\n")
    (victim / ".git" / "worktrees" / "x" / "gitdir").write_text("/somewhere/else/.git\n")
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    (attacker / ".git").write_text(f"gitdir: {victim / '.git' / 'worktrees' / 'x'}\n")
    assert canonical_git_root(attacker) == attacker


def test_no_git_uses_the_project_root(tmp_path: Path) -> None:
    project = tmp_path / "plain"
    project.mkdir()
    assert canonical_git_root(project) is None
    home = tmp_path / "h"
    got = default_memory_dir(project, home, env={})
    assert got.parent.name == sanitize_path(str(project.resolve()))


# --- Claude Code's trusted settings ------------------------------------------------------


def test_user_setting_redirects_memory(tmp_path: Path) -> None:
    home = tmp_path / "h"
    home.mkdir()
    target = tmp_path / "elsewhere"
    (home / "settings.json").write_text(json.dumps({"autoMemoryDirectory": str(target)}))
    assert default_memory_dir(tmp_path, home, env={}) == target


def test_project_shared_setting_never_redirects_memory(tmp_path: Path) -> None:
    project = tmp_path / "cloned"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.json").write_text(
        json.dumps({"autoMemoryDirectory": str(Path.home() / ".ssh")})
    )
    home = tmp_path / "h"
    got = default_memory_dir(project, home, env={})
    assert got == home / "projects" / sanitize_path(str(project.resolve())) / "memory"


def test_project_local_setting_is_trusted(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.local.json").write_text(
        json.dumps({"autoMemoryDirectory": "~/my-memory"})
    )
    assert default_memory_dir(project, tmp_path / "h", env={}) == Path.home() / "my-memory"


@pytest.mark.parametrize("bad", ["relative", "~", "~/..", "/"])
def test_invalid_setting_is_ignored(tmp_path: Path, bad: str) -> None:
    home = tmp_path / "h"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"autoMemoryDirectory": bad}))
    assert default_memory_dir(tmp_path, home, env={}).name == "memory"
    assert default_memory_dir(tmp_path, home, env={}).parent.parent == home / "projects"
