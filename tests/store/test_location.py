"""Where memory lives by default: the same folder as Claude Code's, byte for byte."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from memdir.errors import UsageError
from memdir.store import (
    canonical_git_root,
    claude_config_home,
    default_memory_dir,
    find_git_root,
    sanitize_path,
)

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


def test_default_dir_is_under_the_env_home(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    home = tmp_path / "home"
    got = default_memory_dir(project, env={"HOME": str(home)})
    assert got == home / ".claude" / "projects" / sanitize_path(str(project)) / "memory"


def test_without_home_the_password_database_gives_the_home(tmp_path: Path) -> None:
    # As Node's os.homedir: an empty or missing HOME falls back to the user's entry.
    pw_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    for env in ({}, {"HOME": ""}):
        assert claude_config_home(env) == pw_home / ".claude"


def test_memdir_dir_overrides_everything(tmp_path: Path) -> None:
    env = {"MEMDIR_DIR": str(tmp_path / "mine"), "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    assert default_memory_dir(tmp_path, env=env) == tmp_path / "mine"


def test_memdir_dir_expands_the_env_home(tmp_path: Path) -> None:
    env = {"MEMDIR_DIR": "~/notes/memory", "HOME": str(tmp_path)}
    assert default_memory_dir("/", env=env) == tmp_path / "notes" / "memory"


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
    env = {"HOME": str(tmp_path / "home")}
    assert default_memory_dir(project, tmp_path / "h", env=env) == tmp_path / "home" / "my-memory"


@pytest.mark.parametrize("bad", ["relative", "~", "~/..", "/"])
def test_invalid_setting_is_ignored(tmp_path: Path, bad: str) -> None:
    home = tmp_path / "h"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"autoMemoryDirectory": bad}))
    assert default_memory_dir(tmp_path, home, env={}).name == "memory"
    assert default_memory_dir(tmp_path, home, env={}).parent.parent == home / "projects"


# --- what Claude Code does not normalise -------------------------------------------------


def test_sanitize_keeps_the_letter_of_a_decomposed_accent() -> None:
    # Claude Code 2.1.332: "cafe" + U+0301 gives "-cafe-", "caf" + U+00E9 gives "-caf-".
    assert sanitize_path("/tmp/cafe\u0301") == "-tmp-cafe-"
    assert sanitize_path("/tmp/caf\u00e9") == "-tmp-caf-"


@pytest.mark.parametrize(("form", "tail"), [("NFD", "-cafe--p"), ("NFC", "-caf--p")])
def test_project_is_keyed_as_the_file_system_spells_it(
    tmp_path: Path, form: Literal["NFD", "NFC"], tail: str
) -> None:
    project = tmp_path / unicodedata.normalize(form, "caf\u00e9") / "p"
    project.mkdir(parents=True)
    got = default_memory_dir(project, tmp_path / "h", env={})
    assert got.parent.name == sanitize_path(str(project))
    assert got.parent.name.endswith(tail)


def test_config_home_is_nfc_normalised(tmp_path: Path) -> None:
    # The CLI then writes under the composed spelling, even when HOME is decomposed.
    home = str(tmp_path / "ho\u0301me")
    composed = unicodedata.normalize("NFC", home)
    assert str(claude_config_home({"HOME": home})) == composed + "/.claude"
    assert str(claude_config_home({"CLAUDE_CONFIG_DIR": home})) == composed


# --- CLAUDE_CONFIG_DIR is taken literally -------------------------------------------------


def test_config_dir_is_not_expanded() -> None:
    assert claude_config_home({"CLAUDE_CONFIG_DIR": "~/x", "HOME": "/h"}) == Path("~/x")
    assert claude_config_home({"CLAUDE_CONFIG_DIR": "", "HOME": "/h"}) == Path(".")


@dataclass(frozen=True)
class ConfigDirCase:
    value: str
    projects: Callable[[Path], Path]
    """The projects folder, given the project directory."""


CONFIG_DIR_CASES = {
    "tilde-is-a-folder-name": ConfigDirCase("~/x", lambda p: p / "~" / "x" / "projects"),
    "empty-is-the-working-directory": ConfigDirCase("", lambda p: p / "projects"),
    "relative-is-normalised": ConfigDirCase("a/../cfg", lambda p: p / "cfg" / "projects"),
    "blanks-are-kept": ConfigDirCase(" cfg", lambda p: p / " cfg" / "projects"),
    "absolute-is-normalised": ConfigDirCase("/tmp/a/../cfg", lambda p: Path("/tmp/cfg/projects")),
}


@pytest.mark.parametrize("case", CONFIG_DIR_CASES.values(), ids=CONFIG_DIR_CASES.keys())
def test_config_dir_values_as_the_cli_reads_them(tmp_path: Path, case: ConfigDirCase) -> None:
    project = tmp_path / "p"
    project.mkdir()
    env = {"CLAUDE_CONFIG_DIR": case.value, "HOME": str(tmp_path / "home")}
    got = default_memory_dir(project, env=env)
    assert got == case.projects(project) / sanitize_path(str(project)) / "memory"


def test_relative_config_dir_and_its_settings_are_read_from_the_working_directory(
    tmp_path: Path,
) -> None:
    project = tmp_path / "p"
    (project / "cfg").mkdir(parents=True)
    target = tmp_path / "elsewhere"
    (project / "cfg" / "settings.json").write_text(json.dumps({"autoMemoryDirectory": str(target)}))
    assert default_memory_dir(project, env={"CLAUDE_CONFIG_DIR": "cfg"}) == target


# --- the remote base and the project folder name ------------------------------------------


def test_remote_base_is_taken_literally(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    env = {"CLAUDE_CODE_REMOTE_MEMORY_DIR": "~/r", "HOME": str(tmp_path / "home")}
    expected = project / "~" / "r" / "projects" / sanitize_path(str(project)) / "memory"
    assert default_memory_dir(project, env=env) == expected
    env["CLAUDE_CODE_REMOTE_MEMORY_DIR"] = ""
    assert default_memory_dir(project, env=env).parents[2] == tmp_path / "home" / ".claude"


@pytest.mark.parametrize(
    ("extra", "folder"),
    [
        ({"CLAUDE_CONFIG_DIR": "{cfg}", "CLAUDE_CODE_PROJECT_DIR_NAME": "my_proj-1"}, "my_proj-1"),
        ({"CLAUDE_CODE_PROJECT_DIR_NAME": "my_proj"}, None),  # needs CLAUDE_CONFIG_DIR
        ({"CLAUDE_CONFIG_DIR": "{cfg}", "CLAUDE_CODE_PROJECT_DIR_NAME": "a.b"}, None),
        ({"CLAUDE_CONFIG_DIR": "{cfg}", "CLAUDE_CODE_PROJECT_DIR_NAME": "x" * 65}, None),
        ({"CLAUDE_CONFIG_DIR": "{cfg}", "CLAUDE_CODE_PROJECT_DIR_NAME": "COM1"}, None),
        (
            {
                "CLAUDE_CONFIG_DIR": "{cfg}",
                "CLAUDE_CODE_PROJECT_DIR_NAME": "my_proj",
                "CLAUDE_CODE_REMOTE_MEMORY_DIR": "{cfg}/remote",
            },
            None,
        ),
    ],
    ids=["used", "without-config-dir", "bad-character", "too-long", "device-name", "remote"],
)
def test_project_dir_name(tmp_path: Path, extra: dict[str, str], folder: str | None) -> None:
    project = tmp_path / "p"
    project.mkdir()
    env = {k: v.replace("{cfg}", str(tmp_path / "cfg")) for k, v in extra.items()}
    got = default_memory_dir(project, env={"HOME": str(tmp_path / "home"), **env})
    assert got.parent.name == (folder or sanitize_path(str(project)))


# --- override paths -----------------------------------------------------------------------


@dataclass(frozen=True)
class OverrideCase:
    value: str
    expected: Callable[[Path], Path] | None
    """The folder used, given the home directory; None: the value is refused."""


OVERRIDE_CASES = {
    "home-relative": OverrideCase("~/mem", lambda h: h / "mem"),
    "climbs-out-of-home": OverrideCase("~/../escape", None),
    "climbs-out-later": OverrideCase("~/a/../../escape", None),
    "home-itself": OverrideCase("~/.", None),
    "bare-tilde": OverrideCase("~", None),
    "relative": OverrideCase("relative/dir", None),
    "root": OverrideCase("/", None),
    "too-short": OverrideCase("/a", None),
    "double-slash-collapses": OverrideCase("//srv/mem", lambda h: Path("/srv/mem")),
    "dot-dot-normalised": OverrideCase("/srv/x/../mem/", lambda h: Path("/srv/mem")),
    "network-mount": OverrideCase("/net/host/mem", None),
    "network-servers": OverrideCase("/Network/Servers/host/mem", None),
}


@pytest.mark.parametrize("case", OVERRIDE_CASES.values(), ids=OVERRIDE_CASES.keys())
def test_setting_override_checks(tmp_path: Path, case: OverrideCase) -> None:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(json.dumps({"autoMemoryDirectory": case.value}))
    project = tmp_path / "p"
    project.mkdir()
    got = default_memory_dir(project, env={"HOME": str(home)})
    default = home / ".claude" / "projects" / sanitize_path(str(project)) / "memory"
    assert got == (default if case.expected is None else case.expected(home))


def test_first_setting_that_names_a_folder_decides_even_when_invalid(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(
        json.dumps({"autoMemoryDirectory": str(tmp_path / "from-user")})
    )
    project = tmp_path / "p"
    (project / ".claude").mkdir(parents=True)
    env = {"HOME": str(home)}
    assert default_memory_dir(project, env=env) == tmp_path / "from-user"
    (project / ".claude" / "settings.local.json").write_text(
        json.dumps({"autoMemoryDirectory": "relative"})
    )
    assert default_memory_dir(project, env=env).parent.parent == home / ".claude" / "projects"


def test_cowork_override_is_not_home_expanded(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    env = {"HOME": str(tmp_path / "home"), "CLAUDE_COWORK_MEMORY_PATH_OVERRIDE": "~/cw"}
    assert default_memory_dir(project, env=env).name == "memory"
    env["CLAUDE_COWORK_MEMORY_PATH_OVERRIDE"] = "/" + str(tmp_path / "cw")
    assert default_memory_dir(project, env=env) == tmp_path / "cw"


# --- worktrees that are not what they claim -----------------------------------------------


def _forged_commondir(tmp_path: Path) -> tuple[Path, Path]:
    """A tree whose own "worktree" git dir names another repository as its common dir."""
    victim = tmp_path / "victim"
    (victim / ".git").mkdir(parents=True)
    tree = tmp_path / "cloned"
    (tree / "fake").mkdir(parents=True)
    (tree / ".git").write_text("gitdir: fake\n")
    (tree / "fake" / "commondir").write_text(f"{victim / '.git'}\n")
    (tree / "fake" / "gitdir").write_text(f"{tree / '.git'}\n")  # a valid back-link
    return tree, victim


def test_forged_commondir_outside_the_worktrees_folder_is_refused(tmp_path: Path) -> None:
    tree, victim = _forged_commondir(tmp_path)
    assert canonical_git_root(tree) == tree
    home = tmp_path / "h"
    assert default_memory_dir(tree, home, env={}) != default_memory_dir(victim, home, env={})


def test_forged_commondir_passes_the_back_link_check(tmp_path: Path) -> None:
    # So a back-link check alone (memdir's rule before) follows the forgery to the victim:
    # only the private dir's place, outside <victim>/.git/worktrees/, gives it away.
    tree, victim = _forged_commondir(tmp_path)
    git_dir = Path(os.path.realpath(tree / "fake"))
    common = Path(os.path.realpath(git_dir / (git_dir / "commondir").read_text().strip()))
    back = os.path.realpath((git_dir / "gitdir").read_text().strip())
    assert back == os.path.realpath(tree / ".git")
    assert common.parent == victim


@needs_git
def test_dot_git_symlinked_to_another_checkout_is_refused(repo: Path, tmp_path: Path) -> None:
    worktree = tmp_path / "feature-wt"
    _git(repo, "worktree", "add", "-q", str(worktree), "-b", "feature")
    tree = tmp_path / "cloned"
    tree.mkdir()
    (tree / ".git").symlink_to(worktree / ".git")
    # The old rule compared the back-link with the symlink's target, and matched.
    assert os.path.realpath(tree / ".git") == str(worktree / ".git")
    assert canonical_git_root(tree) == tree
    assert canonical_git_root(worktree) == repo


@needs_git
def test_worktree_with_a_relative_gitdir_is_followed(repo: Path, tmp_path: Path) -> None:
    worktree = tmp_path / "wt"
    _git(repo, "worktree", "add", "-q", str(worktree), "-b", "feature")
    private = repo / ".git" / "worktrees" / "wt"
    (worktree / ".git").write_text(f"gitdir: {os.path.relpath(private, worktree)}\n")
    assert canonical_git_root(worktree) == repo


@needs_git
@pytest.mark.parametrize("name", ["commondir", "gitdir"])
def test_worktree_pointer_files_must_not_be_symlinks(repo: Path, tmp_path: Path, name: str) -> None:
    worktree = tmp_path / "wt"
    _git(repo, "worktree", "add", "-q", str(worktree), "-b", "feature")
    pointer = repo / ".git" / "worktrees" / "wt" / name
    copy = tmp_path / f"{name}.copy"
    copy.write_bytes(pointer.read_bytes())
    pointer.unlink()
    pointer.symlink_to(copy)
    assert canonical_git_root(worktree) == worktree


def test_private_git_dir_must_sit_directly_in_worktrees(tmp_path: Path) -> None:
    main = tmp_path / "main"
    private = main / ".git" / "worktrees" / "nested" / "x"
    private.mkdir(parents=True)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / ".git").write_text(f"gitdir: {private}\n")
    (private / "commondir").write_text("../../..\n")
    (private / "gitdir").write_text(f"{tree / '.git'}\n")
    assert canonical_git_root(tree) == tree
    # Moved up one level, the same layout is a worktree of main.
    moved = main / ".git" / "worktrees" / "x"
    private.rename(moved)
    (moved / "commondir").write_text("../..\n")
    (tree / ".git").write_text(f"gitdir: {moved}\n")
    assert canonical_git_root(tree) == main


@needs_git
def test_bare_repository_worktree_uses_the_bare_folder(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    _git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    worktree = tmp_path / "bare-wt"
    _git(bare, "worktree", "add", "-q", str(worktree), "-b", "other")
    assert canonical_git_root(worktree) == bare
    # A "bare" common dir that holds a .git of its own is not one.
    (bare / ".git").mkdir()
    assert canonical_git_root(worktree) == worktree


def test_a_git_entry_that_is_neither_file_nor_folder_does_not_count(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    (outer / ".git").mkdir(parents=True)
    broken = outer / "broken"
    broken.mkdir()
    (broken / ".git").symlink_to(tmp_path / "missing")
    fifo = outer / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / ".git")
    assert find_git_root(broken) == outer
    assert find_git_root(fifo) == outer


@needs_git
def test_relative_config_dir_is_relative_to_the_subdirectory_run_in(
    repo: Path, tmp_path: Path
) -> None:
    sub = repo / "src"
    sub.mkdir()
    got = default_memory_dir(sub, env={"CLAUDE_CONFIG_DIR": "cfg"})
    assert got == sub / "cfg" / "projects" / sanitize_path(str(repo)) / "memory"
