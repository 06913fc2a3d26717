"""The memory folder's location: memdir's answer against the folder the real CLI uses.

Each case builds a project (and, where it matters, an environment) with one property,
runs the CLI there, reads the folder its system prompt names, and checks that it is both
the folder the rule says and the one :func:`memdir.store.default_memory_dir` computes
for the same directory and environment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from memdir.store import default_memory_dir
from tests.claude_code._cli import ClaudeCli


def _key(path: Path) -> str:
    """A project's folder name by the rule itself: each non-ASCII-alphanumeric -> ``-``."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(path))


def _git(cwd: Path, *args: str) -> None:
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(cwd),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def _repo(path: Path) -> Path:
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    (path / "README").write_text("x\n")
    _git(path, "add", "README")
    _git(path, "commit", "-q", "-m", "init")
    return path


@dataclass(frozen=True)
class Setup:
    """Where the CLI runs and what it is given."""

    cwd: Path
    env: dict[str, str]
    expected: Path
    """The memory folder the rule gives (what Claude Code 2.1.332 was seen to use)."""


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[Path, ClaudeCli], Setup]
    needs_git: bool = False


def _default(cli: ClaudeCli, root: Path) -> Path:
    return cli.home / ".claude" / "projects" / _key(root) / "memory"


def _plain(tmp: Path, name: str) -> Path:
    project = tmp / name
    project.mkdir(parents=True)
    return project


def decomposed_accent(tmp: Path, cli: ClaudeCli) -> Setup:
    # "e" + U+0301 stays two characters: the folder name holds "-cafe--p".
    project = _plain(tmp, "cafe\u0301/p")
    return Setup(project, {}, _default(cli, project))


def composed_accent(tmp: Path, cli: ClaudeCli) -> Setup:
    # U+00E9 is one character: "-caf--p".
    project = _plain(tmp, "caf\u00e9/p")
    return Setup(project, {}, _default(cli, project))


def config_dir_tilde(tmp: Path, cli: ClaudeCli) -> Setup:
    # No ~ expansion: a folder literally named "~" under the working directory.
    project = _plain(tmp, "p")
    expected = project / "~" / "x" / "projects" / _key(project) / "memory"
    return Setup(project, {"CLAUDE_CONFIG_DIR": "~/x"}, expected)


def config_dir_empty(tmp: Path, cli: ClaudeCli) -> Setup:
    # An empty value is the working directory itself.
    project = _plain(tmp, "p")
    expected = project / "projects" / _key(project) / "memory"
    return Setup(project, {"CLAUDE_CONFIG_DIR": ""}, expected)


def config_dir_relative(tmp: Path, cli: ClaudeCli) -> Setup:
    project = _plain(tmp, "p")
    expected = project / "cfg2" / "projects" / _key(project) / "memory"
    return Setup(project, {"CLAUDE_CONFIG_DIR": "cfg/../cfg2"}, expected)


def project_dir_name(tmp: Path, cli: ClaudeCli) -> Setup:
    project = _plain(tmp, "p")
    env = {"CLAUDE_CONFIG_DIR": str(tmp / "cfg"), "CLAUDE_CODE_PROJECT_DIR_NAME": "my_proj"}
    return Setup(project, env, tmp / "cfg" / "projects" / "my_proj" / "memory")


def remote_dir_tilde(tmp: Path, cli: ClaudeCli) -> Setup:
    project = _plain(tmp, "p")
    expected = project / "~" / "r" / "projects" / _key(project) / "memory"
    return Setup(project, {"CLAUDE_CODE_REMOTE_MEMORY_DIR": "~/r"}, expected)


def setting_climbing_out_of_home(tmp: Path, cli: ClaudeCli) -> Setup:
    project = _plain(tmp, "p")
    settings = cli.home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"autoMemoryDirectory": "~/../escape"}))
    return Setup(project, {}, _default(cli, project))


def invalid_local_setting_hides_user_setting(tmp: Path, cli: ClaudeCli) -> Setup:
    project = _plain(tmp, "p")
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.local.json").write_text(
        json.dumps({"autoMemoryDirectory": "relative/dir"})
    )
    settings = cli.home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"autoMemoryDirectory": str(tmp / "from-user")}))
    return Setup(project, {}, _default(cli, project))


def git_worktree(tmp: Path, cli: ClaudeCli) -> Setup:
    main = _repo(tmp / "main-repo")
    worktree = tmp / "feature-wt"
    _git(main, "worktree", "add", "-q", str(worktree), "-b", "feature")
    return Setup(worktree, {}, _default(cli, main))


def bare_repository_worktree(tmp: Path, cli: ClaudeCli) -> Setup:
    main = _repo(tmp / "origin")
    bare = tmp / "bare.git"
    _git(tmp, "clone", "-q", "--bare", str(main), str(bare))
    worktree = tmp / "bare-wt"
    _git(bare, "worktree", "add", "-q", str(worktree), "-b", "other")
    return Setup(worktree, {}, _default(cli, bare))


def forged_commondir(tmp: Path, cli: ClaudeCli) -> Setup:
    # The tree carries its own "worktree" git dir whose commondir names another repository
    # and whose back-link is right; the git dir is not in that repository's worktrees/.
    victim = _repo(tmp / "victim")
    tree = tmp / "cloned"
    (tree / "fake").mkdir(parents=True)
    (tree / ".git").write_text("gitdir: fake\n")
    (tree / "fake" / "commondir").write_text(f"{victim / '.git'}\n")
    (tree / "fake" / "gitdir").write_text(f"{tree / '.git'}\n")
    return Setup(tree, {}, _default(cli, tree))


def symlinked_dot_git(tmp: Path, cli: ClaudeCli) -> Setup:
    # A .git that is a symlink to another checkout's worktree .git file: the back-link is
    # that checkout's, not this tree's.
    victim = _repo(tmp / "victim")
    worktree = tmp / "victim-wt"
    _git(victim, "worktree", "add", "-q", str(worktree), "-b", "feature")
    tree = tmp / "cloned"
    tree.mkdir()
    (tree / ".git").symlink_to(worktree / ".git")
    return Setup(tree, {}, _default(cli, tree))


CASES = [
    Case("decomposed-accent", decomposed_accent),
    Case("composed-accent", composed_accent),
    Case("config-dir-tilde", config_dir_tilde),
    Case("config-dir-empty", config_dir_empty),
    Case("config-dir-relative", config_dir_relative),
    Case("project-dir-name", project_dir_name),
    Case("remote-dir-tilde", remote_dir_tilde),
    Case("setting-climbing-out-of-home", setting_climbing_out_of_home),
    Case("invalid-local-setting-hides-user-setting", invalid_local_setting_hides_user_setting),
    Case("git-worktree", git_worktree, needs_git=True),
    Case("bare-repository-worktree", bare_repository_worktree, needs_git=True),
    Case("forged-commondir", forged_commondir, needs_git=True),
    Case("symlinked-dot-git", symlinked_dot_git, needs_git=True),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_memdir_finds_the_folder_the_cli_uses(
    case: Case, claude_cli: ClaudeCli, tmp_path: Path
) -> None:
    if case.needs_git and shutil.which("git") is None:
        pytest.skip("git is not installed")
    setup = case.build(tmp_path.resolve() / "layout", claude_cli)

    run = claude_cli.run("hi", cwd=setup.cwd, env_extra=setup.env)

    assert run.memory_dir == setup.expected
    assert default_memory_dir(setup.cwd, env=run.env) == setup.expected
