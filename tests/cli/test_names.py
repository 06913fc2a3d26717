"""Every name ``memdir ls`` prints is one ``show`` and ``forget`` accept.

Before, ``ls`` printed titles cut at 40 characters with an ellipsis, and ``show`` refused
the cut name; titles that only the index (``MEMORY.md``) gave were refused too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir._cli import cli

LONG = "project_ingest_pipeline_backfill_schedule_and_retention_policy_for_2027.md"


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def memory_file(name: str, title: str, description: str, kind: str = "project") -> bytes:
    head = f"---\nname: {title}\ndescription: {description}\ntype: {kind}\n---\n"
    return f"{head}Body of {title}.\n".encode()


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    (root / "team").mkdir(parents=True)
    (root / LONG).write_bytes(
        memory_file(
            LONG,
            "Ingest pipeline backfill schedule and retention policy for 2027",
            "the nightly backfill runs at 02:00 UTC and keeps 400 days of raw events " * 2,
        )
    )
    (root / "user_role.md").write_bytes(memory_file("user_role.md", "role", "Ana leads", "user"))
    # No title in the file: only the index names it.
    (root / "reference_dash.md").write_bytes(b"---\ntype: reference\n---\nThe dashboard.\n")
    (root / "team" / "conventions.md").write_bytes(memory_file("c", "conventions", "commits"))
    (root / "MEMORY.md").write_text(
        "- [Latency dashboard](reference_dash.md) — where p99 lives\n"
        "- [Ana's role](user_role.md) — she leads the team\n",
        encoding="utf-8",
    )
    return root


def listed_names(memory: Path, columns: str) -> list[str]:
    code, out, err = run("ls", "--memory-dir", str(memory), env={"COLUMNS": columns})
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[0] == "file"
    return [line.split()[0] for line in lines[1:] if line and not line.startswith(" ")]


@pytest.mark.parametrize("columns", ["200", "80", "50"])
def test_every_name_ls_prints_is_accepted_by_show_and_forget(memory: Path, columns: str) -> None:
    names = listed_names(memory, columns)
    assert sorted(names) == sorted(
        [LONG, "user_role.md", "reference_dash.md", "team/conventions.md"]
    )
    for name in names:
        code, out, err = run("show", name, "--memory-dir", str(memory), "--json")
        assert code == 0, err
        assert json.loads(out)["file"] == name
    for name in names:
        code, _, err = run("forget", name, "--yes", "--memory-dir", str(memory))
        assert code == 0, err
        assert not (memory / name).exists()


@pytest.mark.parametrize(
    ("name", "file"),
    [
        (LONG.removesuffix(".md"), LONG),  # the stem
        ("user_role", "user_role.md"),
        ("ROLE", "user_role.md"),  # the title in the file, any case
        ("Ana's role", "user_role.md"),  # the title in MEMORY.md
        ("latency dashboard", "reference_dash.md"),  # only MEMORY.md names it
        ("Ingest pipeline backfill schedule and retention policy for 2027", LONG),
        ("team/conventions", "team/conventions.md"),
    ],
)
def test_show_and_forget_take_the_stem_and_either_title(memory: Path, name: str, file: str) -> None:
    code, out, err = run("show", name, "--memory-dir", str(memory), "--json")
    assert code == 0, err
    assert json.loads(out)["file"] == file
    code, _, err = run("forget", name, "--yes", "--memory-dir", str(memory))
    assert code == 0, err
    assert not (memory / file).exists()


def test_a_title_two_memories_share_asks_for_the_file_name(memory: Path) -> None:
    (memory / "feedback_dash.md").write_bytes(memory_file("x", "Latency dashboard", "dup"))
    code, _, err = run("show", "latency dashboard", "--memory-dir", str(memory))
    assert code == 2
    assert "feedback_dash.md, reference_dash.md" in err
    assert "give the file name" in err
