"""OfflineModel consolidates: duplicates retired, near duplicates merged, the index fixed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from memdir.dream import AutoDream, build_consolidation_prompt
from memdir.messages import Message, ToolResultBlock, ToolUseBlock
from memdir.models import ModelRequest, OfflineModel
from memdir.store import ENTRYPOINT_NAME, MemoryType, format_memory_file, parse_memory_file


def memory(root: Path, name: str, description: str, kind: MemoryType, body: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        format_memory_file(name=path.stem, description=description, type=kind, body=body),
        encoding="utf-8",
    )
    return path


def dream(root: Path) -> bool:
    return asyncio.run(AutoDream(root, OfflineModel(), transcript_dir=None).run())


def memory_files(root: Path) -> list[str]:
    return sorted(
        p.relative_to(root).as_posix() for p in root.rglob("*.md") if p.name != ENTRYPOINT_NAME
    )


def check_tidy(root: Path) -> str:
    for path in root.rglob("*.md"):
        if path.name != ENTRYPOINT_NAME:
            parsed = parse_memory_file(path.read_text(encoding="utf-8"))
            assert parsed.name
            assert parsed.description
            assert not parsed.malformed
    index = (root / ENTRYPOINT_NAME).read_text(encoding="utf-8")
    assert all(len(line) < 150 for line in index.splitlines())
    for name in memory_files(root):
        assert index.count(f"]({name})") == 1, name
    return index


def test_exact_duplicates_keep_the_first_name(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    body = "The user is a data engineer working on the billing pipeline."
    memory(root, "user_role.md", "The user's role", "user", body)
    memory(root, "user_role_copy.md", "Role of the user", "user", f"  {body}\n")
    (root / ENTRYPOINT_NAME).write_text(
        "# Memory\n\n- [user_role](user_role.md) — The user's role\n"
        "- [copy](user_role_copy.md) — Role of the user\n",
        encoding="utf-8",
    )
    assert dream(root)
    assert memory_files(root) == ["user_role.md"]
    index = check_tidy(root)
    assert index == "# Memory\n\n- [user_role](user_role.md) — The user's role\n"


def test_index_drops_dangling_pointers_and_adds_missing_ones(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    memory(root, "project_launch.md", "Launch freeze on 2026-03-05", "project", "Freeze.")
    memory(root, "team/reference_board.md", "Bug tracker board", "reference", "Linear INGEST.")
    (root / ENTRYPOINT_NAME).write_text(
        "- [Gone](gone.md) — a memory deleted by hand\n"
        "- [Launch](project_launch.md) — freeze, keep this wording\n",
        encoding="utf-8",
    )
    assert dream(root)
    index = check_tidy(root)
    assert "gone.md" not in index
    assert "- [Launch](project_launch.md) — freeze, keep this wording" in index
    assert "- [reference_board](team/reference_board.md) — Bug tracker board" in index
    assert memory_files(root) == ["project_launch.md", "team/reference_board.md"]


def test_near_duplicates_merge_into_one_file(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    memory(
        root,
        "feedback_polars.md",
        "Use polars instead of pandas for dataframes",
        "feedback",
        "Use polars, not pandas, for dataframes.\n\n**Why:** pandas is too slow here.",
    )
    memory(
        root,
        "feedback_polars_dataframes.md",
        "Prefer polars over pandas for dataframes",
        "feedback",
        "Use polars, not pandas, for dataframes.\n\n**How to apply:** lazy frames for big files.",
    )
    assert dream(root)
    assert memory_files(root) == ["feedback_polars.md"]
    kept = parse_memory_file((root / "feedback_polars.md").read_text(encoding="utf-8"))
    assert kept.type == "feedback"
    assert "**Why:** pandas is too slow here." in kept.body
    assert "**How to apply:** lazy frames for big files." in kept.body
    assert kept.body.count("Use polars, not pandas") == 1
    check_tidy(root)


def test_different_types_are_not_merged(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    memory(root, "a.md", "Polars dataframes pandas", "feedback", "Polars over pandas.")
    memory(root, "b.md", "Polars dataframes pandas", "project", "Polars migration.")
    assert dream(root)
    assert memory_files(root) == ["a.md", "b.md"]
    check_tidy(root)


def test_a_clean_directory_is_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    paths = [
        memory(root, "user_role.md", "The user's role", "user", "Data engineer."),
        memory(root, "project_launch.md", "Launch freeze", "project", "Freeze on 2026-03-05."),
    ]
    index = root / ENTRYPOINT_NAME
    index.write_text(
        "# Memory\n\n- [Role](user_role.md) — role\n- [Launch](project_launch.md) — freeze\n",
        encoding="utf-8",
    )
    paths.append(index)
    before = {p: p.stat().st_mtime_ns for p in paths}
    assert dream(root) is True
    assert {p: p.stat().st_mtime_ns for p in paths} == before
    check_tidy(root)


def test_an_empty_directory_needs_nothing(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    root.mkdir()
    assert dream(root) is True
    assert not (root / ENTRYPOINT_NAME).exists()


def test_failed_tool_results_get_a_text_answer(tmp_path: Path) -> None:
    prompt = Message.user(build_consolidation_prompt(str(tmp_path)))
    model = OfflineModel()
    for name, arguments in (("Glob", {"pattern": "**/*.md"}), ("Read", {"file_path": "x.md"})):
        asked = Message(
            role="assistant", content=(ToolUseBlock(id="t1", name=name, input=arguments),)
        )
        failed = Message(
            role="user", content=(ToolResultBlock(tool_use_id="t1", content="?", is_error=True),)
        )
        request = ModelRequest(messages=(prompt, asked, failed))
        response = asyncio.run(model.request(request))
        assert response.message.tool_uses == ()
        assert response.message.text


def test_a_memory_directory_reached_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "store" / "memory"
    body = "The user leads the ingest team."
    memory(real, "user_role.md", "The user's role", "user", body)
    memory(real, "user_role_copy.md", "Role of the user", "user", body)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".claude").symlink_to(tmp_path / "store")
    assert dream(tmp_path / "home" / ".claude" / "memory")
    assert memory_files(real) == ["user_role.md"]


def test_distinct_facts_with_the_same_boilerplate_stay_apart(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    why = (
        "\n\n**Why:** Stated by the user on 2026-12-02.\n"
        "**How to apply:** Plan around it; check whether this still holds."
    )
    memory(
        root,
        "ship.md",
        "The ingest migration ships by 2026-12-04",
        "project",
        "The ingest migration ships by 2026-12-04." + why,
    )
    memory(
        root,
        "freeze.md",
        "Code freeze starts on 2026-12-07",
        "project",
        "Code freeze starts on 2026-12-07." + why,
    )
    assert dream(root)
    assert memory_files(root) == ["freeze.md", "ship.md"]
