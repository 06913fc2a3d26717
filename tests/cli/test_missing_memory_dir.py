"""A command that works on saved memory, given a memory directory that does not exist,
says so in one line (exit 2) and creates nothing.

Before, ``dream --force --memory-dir typo`` created the folder and reported
"consolidated"; ``ls``, ``recall`` and ``prompt`` reported an empty memory; ``show`` and
``forget`` said no memory had that name. The commands that save (``extract``, ``watch``,
the hook) still create it, and ``dir`` still prints where it would be.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir._cli import cli
from tests.cli.conftest import TURNS, write_session

COMMANDS = [
    ("ls",),
    ("show", "user_role"),
    ("forget", "user_role", "--yes"),
    ("forget", "--undo"),
    ("recall", "who leads the team"),
    ("prompt",),
    ("dream", "--force", "--model", "offline"),
]


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_missing_memory_dir_is_one_line_and_nothing_is_created(
    tmp_path: Path, command: tuple[str, ...], as_json: bool
) -> None:
    typo = tmp_path / "memroy"
    before = tree(tmp_path)
    args = [*command, "--memory-dir", str(typo), *(["--json"] if as_json else [])]
    code, out, err = run(*args)
    assert code == 2, (out, err)
    assert err.count("\n") == 1, err
    assert f"no memory directory at {typo}: it does not exist" in err
    if as_json:
        assert json.loads(out)["error"]["kind"] == "memory_dir"
    else:
        assert out == ""
    assert tree(tmp_path) == before
    assert not typo.exists()


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_missing_memdir_dir_variable_is_refused_too(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    typo = tmp_path / "nowhere"
    code, _, err = run(*command, env={"MEMDIR_DIR": str(typo)})
    assert code == 2, err
    assert "does not exist" in err
    assert not typo.exists()


def test_the_commands_that_save_still_create_it_and_dir_prints_it(tmp_path: Path) -> None:
    memory = tmp_path / "new" / "memory"
    code, out, _ = run("dir", "--json", env={"MEMDIR_DIR": str(memory)})
    assert code == 0
    assert json.loads(out)["exists"] is False
    assert not memory.exists()
    session = write_session(tmp_path / "s.jsonl", TURNS[:1])
    code, _, err = run(
        "extract", str(session), "--memory-dir", str(memory), "--model", "offline", "-q"
    )
    assert code == 0, err
    assert memory.is_dir()
    code, out, err = run("ls", "--memory-dir", str(memory))
    assert code == 0, err
    assert "user_role.md" in out
