"""``memdir promote`` / ``demote``: a memory and its index line move between the
project, the user layer and the team folder; a credential never leaves the project."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir._cli import cli
from memdir.store._user_layer import user_memory_dir

ROLE = "---\nname: role\ndescription: Ana leads the data platform team\ntype: user\n---\nAna.\n"
TOKEN = "ghp_" + "0123456789abcdefghijklmnopqrstuvwxyz"
INDEX = (
    "# Memory\n"
    "- [Role](user_role.md) — Ana leads the team\n"
    "- [Deploy](project_deploy.md) — how deploys go\n"
)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    root.mkdir()
    (root / "user_role.md").write_text(ROLE, encoding="utf-8")
    (root / "project_deploy.md").write_text(
        f"---\nname: deploy\ndescription: how deploys go\ntype: project\n---\nUse {TOKEN}.\n",
        encoding="utf-8",
    )
    (root / "MEMORY.md").write_text(INDEX, encoding="utf-8")
    return root


def test_promote_to_user_then_demote_moves_file_and_index_line(project: Path) -> None:
    layer = user_memory_dir().root
    code, out, err = run("promote", "user_role", "--to", "user", "--memory-dir", str(project))
    assert code == 0, err
    assert "promoted user_role.md to the user layer" in out
    assert not (project / "user_role.md").exists()
    assert (layer / "user_role.md").read_text(encoding="utf-8") == ROLE
    assert (layer / "MEMORY.md").read_text(encoding="utf-8") == (
        "- [Role](user_role.md) — Ana leads the team\n"
    )
    assert (project / "MEMORY.md").read_text(encoding="utf-8") == (
        "# Memory\n- [Deploy](project_deploy.md) — how deploys go\n"
    )

    code, out, err = run("demote", "role", "--memory-dir", str(project), "--json")
    assert code == 0, err
    assert json.loads(out)["to"] == str(project / "user_role.md")
    assert (project / "user_role.md").read_text(encoding="utf-8") == ROLE
    assert not (layer / "user_role.md").exists()
    assert (layer / "MEMORY.md").read_text(encoding="utf-8") == ""
    assert (
        (project / "MEMORY.md")
        .read_text(encoding="utf-8")
        .endswith("- [Role](user_role.md) — Ana leads the team\n")
    )


def test_promote_to_team_relinks_into_the_team_index(project: Path) -> None:
    code, _, err = run("promote", "role", "--to", "team", "--memory-dir", str(project))
    assert code == 0, err
    assert (project / "team" / "user_role.md").read_text(encoding="utf-8") == ROLE
    assert "user_role.md" in (project / "team" / "MEMORY.md").read_text(encoding="utf-8")
    assert "user_role" not in (project / "MEMORY.md").read_text(encoding="utf-8")
    code, _, err = run("demote", "role", "--from", "team", "--memory-dir", str(project))
    assert code == 0, err
    assert (project / "user_role.md").is_file()


@pytest.mark.parametrize("layer", ["user", "team"])
def test_a_memory_holding_a_secret_is_refused_promotion(project: Path, layer: str) -> None:
    before = (project / "MEMORY.md").read_text(encoding="utf-8")
    code, _, err = run("promote", "project_deploy", "--to", layer, "--memory-dir", str(project))
    assert code == 2
    assert "holds a credential" in err
    assert len(err.strip().splitlines()) == 1
    assert (project / "project_deploy.md").is_file()
    assert (project / "MEMORY.md").read_text(encoding="utf-8") == before
    assert not (user_memory_dir().root / "project_deploy.md").exists()
    assert not (project / "team" / "project_deploy.md").exists()


def test_unknown_or_taken_names_are_refused_in_one_line(project: Path) -> None:
    code, _, err = run("promote", "nothing", "--to", "user", "--memory-dir", str(project))
    assert code == 2
    assert "no memory named 'nothing'" in err
    layer = user_memory_dir()
    layer.ensure()
    (layer.root / "user_role.md").write_text("theirs\n", encoding="utf-8")
    code, _, err = run("promote", "role", "--to", "user", "--memory-dir", str(project))
    assert code == 2
    assert "already exists" in err
    assert len(err.strip().splitlines()) == 1
    assert (layer.root / "user_role.md").read_text(encoding="utf-8") == "theirs\n"
    assert (project / "user_role.md").is_file()
    code, _, err = run("demote", "nothing", "--memory-dir", str(project))
    assert code == 2
    assert "no memory named 'nothing'" in err


def test_user_layer_location_follows_env(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")}
    assert user_memory_dir(env).root == tmp_path / "cfg" / "memdir-user"
    assert user_memory_dir({"HOME": str(tmp_path)}).root == tmp_path / ".claude" / "memdir-user"
    env["MEMDIR_USER_DIR"] = "~/me"
    assert user_memory_dir(env).root == tmp_path / "me"


def test_a_move_is_in_the_history_of_both_scopes(project: Path) -> None:
    from memdir.provenance import history
    from memdir.store import MemoryDir

    layer = user_memory_dir().root
    assert run("promote", "user_role", "--to", "user", "--memory-dir", str(project))[0] == 0
    made = history(MemoryDir(layer), "user_role.md").changes
    assert [(c.what, c.by) for c in made] == [("created", "promote")]
    gone = history(MemoryDir(project), "user_role.md").changes
    assert [(c.what, c.by) for c in gone] == [("removed", "promote")]
    assert run("demote", "role", "--memory-dir", str(project))[0] == 0
    back = history(MemoryDir(project), "user_role.md").changes
    assert [(c.what, c.by) for c in back] == [("removed", "promote"), ("created", "demote")]
