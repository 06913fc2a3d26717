"""OfflineModel consolidates: duplicates retired, near duplicates merged, the index fixed."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

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


# --- a newer memory replaces the fact it contradicts ----------------------------------------

OLD_STAMP, NEW_STAMP = "2026-11-20T10:00:00.000Z", "2026-11-27T10:00:00.000Z"
EARLIER, LATER = 1_795_000_000.0, 1_795_600_000.0  # modification times, a week apart
REASONS = (
    "\n\n**Why:** Stated by the user on {day}.\n"
    "**How to apply:** Plan around {date}; once that date has passed, check whether it holds."
)


def dated(
    root: Path,
    name: str,
    fact: str,
    *,
    modified: str | None,
    mtime: float,
    kind: MemoryType = "project",
    extra: str = "",
) -> Path:
    """A memory stating ``fact`` (title, description and first line), dated twice over."""
    when = fact.rstrip(".").rsplit(" ", 1)[-1]
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    body = fact + extra + REASONS.format(day=(modified or "2026-11-01")[:10], date=when)
    path.write_text(
        format_memory_file(
            name=fact.rstrip("."),
            description=fact.rstrip("."),
            type=kind,
            body=body,
            origin_session_id="s-" + path.stem if modified else None,
            modified=modified,
            format="current" if modified else "2.1.88",
        ),
        encoding="utf-8",
    )
    os.utime(path, (mtime, mtime))
    return path


def fact_lines(body: str) -> list[str]:
    return [line for line in body.splitlines() if line.strip() and not line.startswith("**")]


# Today's wording, whose lines share too few words to look alike, and one that looks alike.
WORDINGS = [
    ("Release ships by 2026-12-04.", "The ship date moved to 2026-12-07."),
    (
        "The ingest release ships by 2026-12-04.",
        "The ingest release ship date moved to 2026-12-07.",
    ),
]
# How the newer one is known: its stamp (the file times say otherwise), its file time (no
# stamps, the 2.1.88 layout), its file time again (equal stamps tell nothing).
DATINGS = {
    "stamp": ((OLD_STAMP, LATER), (NEW_STAMP, EARLIER)),
    "mtime": ((None, EARLIER), (None, LATER)),
    "equal stamps": ((OLD_STAMP, EARLIER), (OLD_STAMP, LATER)),
}


@pytest.mark.parametrize(("older_fact", "newer_fact"), WORDINGS)
@pytest.mark.parametrize("dating", sorted(DATINGS))
@pytest.mark.parametrize(
    ("older_name", "newer_name"),
    [("a_release.md", "b_ship_date.md"), ("b_release.md", "a_ship_date.md")],
    ids=["older-sorts-first", "newer-sorts-first"],
)
def test_the_newer_statement_wins_title_description_and_index_line(
    tmp_path: Path,
    older_fact: str,
    newer_fact: str,
    dating: str,
    older_name: str,
    newer_name: str,
) -> None:
    root = tmp_path / "memory"
    (old_stamp, old_time), (new_stamp, new_time) = DATINGS[dating]
    dated(root, older_name, older_fact, modified=old_stamp, mtime=old_time)
    dated(root, newer_name, newer_fact, modified=new_stamp, mtime=new_time)
    unrelated = memory(root, "user_role.md", "The user's role", "user", "Data engineer.")
    (root / ENTRYPOINT_NAME).write_text(
        f"# Memory\n\n- [Ship by 2026-12-04]({older_name}) — ship by 2026-12-04\n"
        f"- [Ship date moved]({newer_name}) — moved to 2026-12-07\n"
        "- [Role](user_role.md) — data engineer\n",
        encoding="utf-8",
    )
    untouched = (unrelated.read_bytes(), unrelated.stat().st_mtime_ns)

    assert dream(root)

    assert memory_files(root) == sorted([newer_name, "user_role.md"])
    kept = parse_memory_file((root / newer_name).read_text(encoding="utf-8"))
    assert kept.description == newer_fact.rstrip(".")
    assert kept.name is not None
    assert "2026-12-07" in kept.name
    assert fact_lines(kept.body) == [newer_fact]
    # The old date survives only as history, above the reasons, which end the body.
    for line in kept.body.splitlines():
        assert "2026-12-04" not in line or line.startswith("**History:**"), line
    assert "**History:** was 2026-12-04 until it changed to 2026-12-07" in kept.body
    assert (
        kept.body.rstrip().splitlines()[-1].startswith("**How to apply:** Plan around 2026-12-07")
    )
    assert kept.body.count("**Why:**") == 1
    index = check_tidy(root)
    assert index == (
        f"# Memory\n\n- [Ship date moved]({newer_name}) — moved to 2026-12-07\n"
        "- [Role](user_role.md) — data engineer\n"
    )
    assert (unrelated.read_bytes(), unrelated.stat().st_mtime_ns) == untouched


def test_a_second_change_keeps_both_as_history_and_a_rerun_changes_nothing(
    tmp_path: Path,
) -> None:
    root = tmp_path / "memory"
    dated(root, "release.md", "Release ships by 2026-12-04.", modified=None, mtime=EARLIER)
    dated(root, "moved.md", "The ship date moved to 2026-12-07.", modified=None, mtime=LATER)
    dated(root, "again.md", "The ship date moved to 2026-12-09.", modified=None, mtime=LATER + 60)
    assert dream(root)
    assert memory_files(root) == ["again.md"]
    kept = parse_memory_file((root / "again.md").read_text(encoding="utf-8"))
    assert fact_lines(kept.body) == ["The ship date moved to 2026-12-09."]
    history = [line for line in kept.body.splitlines() if line.startswith("**History:**")]
    assert len(history) == 2
    assert all("until it changed to 2026-12-09" in line for line in history)
    assert {"2026-12-04", "2026-12-07"} == {line.split()[2].strip(",") for line in history}
    check_tidy(root)
    before = {p: p.stat().st_mtime_ns for p in root.glob("*.md")}
    assert dream(root)
    assert {p: p.stat().st_mtime_ns for p in root.glob("*.md")} == before


def test_a_change_that_fits_several_memories_replaces_none(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    ingest = dated(
        root, "ingest.md", "The ingest migration ships by 2026-12-04.", modified=None, mtime=EARLIER
    )
    board = dated(
        root, "board.md", "The billing board ships by 2026-12-10.", modified=None, mtime=EARLIER
    )
    moved = dated(
        root, "moved.md", "The ship date moved to 2026-12-07.", modified=None, mtime=LATER
    )
    texts = {p: p.read_bytes() for p in (ingest, board, moved)}
    assert dream(root)
    assert memory_files(root) == ["board.md", "ingest.md", "moved.md"]
    assert {p: p.read_bytes() for p in texts} == texts


def test_facts_that_only_share_words_are_not_replaced(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    ingest = dated(
        root, "ingest.md", "The ingest migration ships by 2026-12-04.", modified=None, mtime=EARLIER
    )
    board = dated(
        root, "board.md", "The billing board ships by 2026-12-10.", modified=None, mtime=LATER
    )
    texts = {p: p.read_bytes() for p in (ingest, board)}
    assert dream(root)
    assert {p: p.read_bytes() for p in texts} == texts
    assert "**History:**" not in (root / ENTRYPOINT_NAME).read_text(encoding="utf-8")


def test_weekdays_are_values_too_and_other_facts_are_kept(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    dated(
        root,
        "deploy_tuesday.md",
        "Deploys happen on Tuesdays.",
        modified=OLD_STAMP,
        mtime=EARLIER,
        extra="\nThe deploy runbook is in docs/deploy.md.",
    )
    dated(
        root, "deploy_thursday.md", "Deploys moved to Thursdays.", modified=NEW_STAMP, mtime=LATER
    )
    assert dream(root)
    assert memory_files(root) == ["deploy_thursday.md"]
    kept = parse_memory_file((root / "deploy_thursday.md").read_text(encoding="utf-8"))
    assert fact_lines(kept.body) == [
        "Deploys moved to Thursdays.",
        "The deploy runbook is in docs/deploy.md.",
    ]
    assert "**History:** was tuesday until it changed to thursday" in kept.body


def test_a_private_memory_does_not_replace_a_team_one(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    team = dated(
        root, "team/release.md", "Release ships by 2026-12-04.", modified=None, mtime=EARLIER
    )
    dated(root, "ship_date.md", "The ship date moved to 2026-12-07.", modified=None, mtime=LATER)
    text = team.read_bytes()
    assert dream(root)
    assert memory_files(root) == ["ship_date.md", "team/release.md"]
    assert team.read_bytes() == text


def test_links_to_a_replaced_memory_and_to_its_copy_name_the_newer_one(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    dated(root, "release.md", "Release ships by 2026-12-04.", modified=None, mtime=EARLIER)
    dated(root, "release_copy.md", "Release ships by 2026-12-04.", modified=None, mtime=EARLIER)
    dated(root, "ship_date.md", "The ship date moved to 2026-12-07.", modified=None, mtime=LATER)
    memory(
        root,
        "reference_demo.md",
        "The customer demo",
        "reference",
        "See [[release_copy]] and [[Release ships by 2026-12-04]].",
    )
    assert dream(root)
    assert memory_files(root) == ["reference_demo.md", "ship_date.md"]
    demo = parse_memory_file((root / "reference_demo.md").read_text(encoding="utf-8"))
    assert demo.links == ("the-ship-date-moved-to-2026-12-07",)


def test_a_memory_that_links_to_another_is_not_taken_for_its_copy(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    memory(
        root,
        "project_ingest_release.md",
        "The ingest release ships on the staging cluster",
        "project",
        "The ingest release ships on the staging cluster.",
    )
    memory(
        root,
        "project_demo.md",
        "The customer demo",
        "project",
        "The customer demo waits for [[the-ingest-release-ships-on-the-staging-cluster]].",
    )
    assert dream(root)
    assert memory_files(root) == ["project_demo.md", "project_ingest_release.md"]
    demo = parse_memory_file((root / "project_demo.md").read_text(encoding="utf-8"))
    assert demo.links == ("the-ingest-release-ships-on-the-staging-cluster",)


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        # A rule and another rule: "never" is not "always" restated.
        ("Never deploy on Fridays.", "Always deploy on Tuesdays."),
        # Two sprints, two releases: the number says which.
        ("Sprint 12 ends 2026-12-04.", "Sprint 13 ends 2026-12-18."),
        ("Release 2.3 ships 2026-12-04.", "Release 2.4 ships 2026-12-18."),
        # Two values on the older line: which changed is not for wording to say.
        ("Standup on Mondays and retro on Fridays.", "Standup moved to Tuesdays."),
    ],
    ids=["negation", "sprint-numbers", "release-numbers", "two-values"],
)
def test_facts_that_differ_in_what_they_are_about_are_not_superseded(
    tmp_path: Path, older: str, newer: str
) -> None:
    root = tmp_path / "memory"
    dated(root, "older.md", older, modified=OLD_STAMP, mtime=EARLIER)
    dated(root, "newer.md", newer, modified=NEW_STAMP, mtime=LATER)
    assert dream(root)
    texts = " ".join(p.read_text(encoding="utf-8") for p in root.rglob("*.md"))
    assert "**History:**" not in texts
    for fact in (older, newer):
        assert fact.rstrip(".") in texts
