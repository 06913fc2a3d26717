"""memdir.recall: the system-prompt section, the index reminder, relevant-memory surfacing."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memdir.errors import ModelError, UsageError
from memdir.models import ModelRequest
from memdir.recall import (
    MAX_SURFACED,
    SESSION_SURFACE_BUDGET,
    SURFACE_MAX_LINES,
    SurfaceBudget,
    SurfacedMemory,
    memory_prompt,
    memory_reminder,
    memory_reminder_message,
    select_relevant_memories,
)
from memdir.store import MemoryDir
from memdir.testing import ScriptedModel

NOW = datetime(2031, 7, 9, 12, 0, tzinfo=UTC)


def write_memory(
    root: Path,
    filename: str,
    description: str,
    body: str = "",
    *,
    age: timedelta = timedelta(hours=1),
    kind: str = "project",
) -> Path:
    path = root / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    name = Path(filename).stem.replace("_", " ")
    path.write_text(
        f"---\nname: {name}\ndescription: {description}\ntype: {kind}\n---\n\n{body}\n",
        encoding="utf-8",
    )
    stamp = (NOW - age).timestamp()
    os.utime(path, (stamp, stamp))
    return path


def select(query: str, root: Path, **kwargs: Any) -> list[SurfacedMemory]:
    kwargs.setdefault("now", NOW)
    return asyncio.run(select_relevant_memories(query, root, **kwargs))


def selection(*names: str) -> str:
    return json.dumps({"selected_memories": list(names)})


@pytest.fixture
def memories(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    write_memory(root, "polars.md", "dataframes: the team uses polars, not pandas")
    write_memory(root, "deploys.md", "release train leaves every Tuesday")
    write_memory(root, "user_role.md", "user is a data engineer", kind="user")
    return root


# --- memory_prompt -----------------------------------------------------------------------


def test_prompt_names_the_directory_types_index_and_rules(tmp_path: Path) -> None:
    text = memory_prompt(tmp_path / "memory")

    assert f"{tmp_path / 'memory'}{os.sep}" in text
    for kind in ("**user**", "**feedback**", "**project**", "**reference**"):
        assert kind in text
    assert "MEMORY.md" in text
    assert "one-line pointer" in text
    assert "behave as if MEMORY.md were empty" in text
    assert "MUST look" in text
    assert "Before recommending from memory" in text
    assert "check that the file exists" in text
    assert "grep for it" in text
    assert "git log" in text
    assert "Secrets" in text
    assert "team/" not in text


def test_prompt_accepts_a_memory_dir(tmp_path: Path) -> None:
    assert memory_prompt(MemoryDir(tmp_path)) == memory_prompt(str(tmp_path))


def test_team_prompt_names_both_directories_and_sharing(tmp_path: Path) -> None:
    text = memory_prompt(tmp_path, team=True)

    assert f"{tmp_path}{os.sep}" in text
    assert f"{tmp_path / 'team'}{os.sep}" in text
    assert "shared with everyone who collaborates" in text
    assert "Both indexes are loaded" in text


def test_skip_index_prompt_has_no_pointer_step(tmp_path: Path) -> None:
    text = memory_prompt(tmp_path, skip_index=True)

    assert "one-line pointer" not in text
    assert "150 characters" not in text
    assert "frontmatter" in text
    assert "one-line pointer" not in memory_prompt(tmp_path, team=True, skip_index=True)


@pytest.mark.parametrize(("team", "skip_index"), [(False, False), (True, False), (True, True)])
def test_prompt_is_stable_and_undated(tmp_path: Path, team: bool, skip_index: bool) -> None:
    first = memory_prompt(tmp_path, team=team, skip_index=skip_index)
    # A saved memory must not change the section: it sits in a cached prefix.
    write_memory(tmp_path, "x.md", "something new")
    (tmp_path / "MEMORY.md").write_text("- [x](x.md) — new\n", encoding="utf-8")
    second = memory_prompt(tmp_path, team=team, skip_index=skip_index)

    assert first == second
    today = datetime.now().date()
    outside_path = first.replace(str(tmp_path), "")
    for stamp in (today.isoformat(), str(today.year), today.strftime("%d/%m"), "202"):
        assert stamp not in outside_path


# --- memory_reminder ---------------------------------------------------------------------


def test_reminder_wraps_the_index(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text(
        "---\ntitle: stray\n---\n<!-- hidden note -->\n- [Polars](polars.md) — dataframes\n",
        encoding="utf-8",
    )
    text = memory_reminder(tmp_path)

    assert text.startswith("<system-reminder>\n")
    assert text.endswith("\n</system-reminder>")
    assert str(tmp_path / "MEMORY.md") in text
    assert "memory index, kept across conversations" in text
    assert "- [Polars](polars.md) — dataframes" in text
    assert "hidden note" not in text
    assert "stray" not in text
    assert "team-memory-content" not in text


def test_reminder_applies_the_line_cap_with_its_warning(tmp_path: Path) -> None:
    lines = [f"- [m{i}](m{i}.md) — entry {i}" for i in range(250)]
    (tmp_path / "MEMORY.md").write_text("\n".join(lines), encoding="utf-8")
    text = memory_reminder(tmp_path)

    assert "entry 199" in text
    assert "entry 200" not in text
    assert "WARNING: MEMORY.md is 250 lines (limit: 200)" in text


def test_team_reminder_wraps_the_team_index_apart(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("- [Mine](mine.md) — private\n", encoding="utf-8")
    (tmp_path / "team").mkdir()
    (tmp_path / "team" / "MEMORY.md").write_text("- [Ours](ours.md) — shared\n", encoding="utf-8")
    text = memory_reminder(tmp_path, team=True)

    opening = '<team-memory-content source="shared">'
    assert text.count("<system-reminder>") == 1
    team_part = text[text.index(opening) : text.index("</team-memory-content>")]
    assert "- [Ours](ours.md) — shared" in team_part
    assert "Mine" not in team_part
    assert text.index("- [Mine](mine.md)") < text.index(opening)
    assert str(tmp_path / "team" / "MEMORY.md") in text
    # Without team mode the shared index stays out.
    assert "Ours" not in memory_reminder(tmp_path)


def test_team_reminder_with_only_the_team_index(tmp_path: Path) -> None:
    (tmp_path / "team").mkdir(parents=True)
    (tmp_path / "team" / "MEMORY.md").write_text("- [Ours](ours.md) — shared\n", encoding="utf-8")
    text = memory_reminder(tmp_path, team=True)

    assert "private memory index" in text
    assert "currently empty" in text
    assert "- [Ours](ours.md) — shared" in text


@pytest.mark.parametrize("index", [None, "", "  \n\n", "<!-- only a comment -->\n"])
def test_empty_or_missing_index_gives_an_empty_reminder(tmp_path: Path, index: str | None) -> None:
    if index is not None:
        (tmp_path / "MEMORY.md").write_text(index, encoding="utf-8")
    text = memory_reminder(tmp_path)

    assert text.startswith("<system-reminder>\n")
    assert text.endswith("\n</system-reminder>")
    assert "currently empty" in text
    assert "currently empty" in memory_reminder(tmp_path, team=True)


def test_reminder_message_is_a_meta_user_message(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("- [A](a.md) — a\n", encoding="utf-8")
    message = memory_reminder_message(tmp_path)

    assert message.role == "user"
    assert message.is_meta
    assert message.text == memory_reminder(tmp_path)


# --- select_relevant_memories with a model -----------------------------------------------


def test_model_choice_is_surfaced_in_its_order(memories: Path) -> None:
    model = ScriptedModel([selection("deploys.md", "polars.md")])
    found = select("what do we ship on tuesday?", memories, model=model)

    assert [m.filename for m in found] == ["deploys.md", "polars.md"]
    assert found[0].path == memories / "deploys.md"
    assert "release train" in found[0].content
    assert found[0].text.startswith("<system-reminder>\n")
    assert found[0].header in found[0].text
    model.assert_all_used()


def test_unknown_names_are_dropped_and_limit_holds(memories: Path) -> None:
    model = ScriptedModel(
        [selection("nope.md", "polars.md", "polars.md", "deploys.md", "user_role.md")]
    )
    found = select("tell me about the setup", memories, model=model, limit=2)

    assert [m.filename for m in found] == ["polars.md", "deploys.md"]


@pytest.mark.parametrize(
    "answer",
    [
        "```json\n" + selection("polars.md") + "\n```",
        "Here you go: " + selection("polars.md") + " Hope that helps.",
    ],
)
def test_fenced_or_wrapped_json_is_understood(memories: Path, answer: str) -> None:
    found = select("which dataframe library?", memories, model=ScriptedModel([answer]))
    assert [m.filename for m in found] == ["polars.md"]


@pytest.mark.parametrize(
    "answer",
    [
        "polars.md seems right",
        "{not json",
        json.dumps({"chosen": ["polars.md"]}),
        json.dumps({"selected_memories": "polars.md"}),
        json.dumps({"selected_memories": [1, 2]}),
        json.dumps(["polars.md"]),
    ],
)
def test_answer_of_the_wrong_shape_surfaces_nothing(memories: Path, answer: str) -> None:
    assert select("which dataframe library?", memories, model=ScriptedModel([answer])) == []


def test_model_error_surfaces_nothing(memories: Path) -> None:
    model = ScriptedModel([ModelError("overloaded")])
    assert select("which dataframe library?", memories, model=model) == []
    model.assert_all_used()


def test_selector_request_is_small(memories: Path) -> None:
    model = ScriptedModel([selection()])
    select("which dataframe library?", memories, model=model, recent_tools=["Bash"])

    [request] = model.requests
    assert isinstance(request, ModelRequest)
    assert dict(request.params) == {"max_tokens": 256}
    assert request.tools == ()
    assert isinstance(request.system, str)
    assert "selected_memories" in request.system
    assert f"at most {MAX_SURFACED}" in request.system
    [message] = request.messages
    assert message.role == "user"
    assert message.text.startswith("Query: which dataframe library?\n\nAvailable memories:\n")
    assert "] polars.md (" in message.text
    assert ": dataframes: the team uses polars" in message.text
    assert message.text.endswith("Recently used tools: Bash")


def test_already_surfaced_files_are_not_offered(memories: Path) -> None:
    model = ScriptedModel([selection("polars.md", "deploys.md")])
    found = select(
        "which dataframe library?",
        memories,
        model=model,
        already_surfaced={"polars.md", str(memories / "user_role.md")},
    )

    assert [m.filename for m in found] == ["deploys.md"]
    offered = model.requests[0].messages[0].text
    assert "polars.md" not in offered
    assert "user_role.md" not in offered


def test_no_candidates_means_no_request(memories: Path) -> None:
    model = ScriptedModel([])
    exclude = {"polars.md", "deploys.md", "user_role.md"}
    assert select("anything at all", memories, model=model, already_surfaced=exclude) == []
    assert select("anything at all", memories / "missing", model=model) == []
    assert model.requests == []


# --- select_relevant_memories without a model (BM25) -------------------------------------


def test_bm25_finds_the_polars_memory(tmp_path: Path) -> None:
    write_memory(
        tmp_path, "polars.md", "dataframe library choice", "We use polars for all dataframes."
    )
    write_memory(tmp_path, "style.md", "code review etiquette", "Be kind in reviews.")
    write_memory(tmp_path, "oncall.md", "who carries the pager", "Rotation is weekly.")

    found = select("which dataframe library do we use with polars?", tmp_path)
    assert [m.filename for m in found][:1] == ["polars.md"]

    assert "polars.md" not in [m.filename for m in select("what is the deploy schedule?", tmp_path)]


def test_bm25_ranks_by_relevance_and_honours_limit(tmp_path: Path) -> None:
    write_memory(tmp_path, "a.md", "deploy notes", "deploy deploy schedule friday")
    write_memory(tmp_path, "b.md", "schedule", "the meeting schedule")
    write_memory(tmp_path, "c.md", "unrelated", "nothing in common here")

    found = select("what is the deploy schedule?", tmp_path)
    assert [m.filename for m in found] == ["a.md", "b.md"]
    assert [m.filename for m in select("deploy schedule please", tmp_path, limit=1)] == ["a.md"]


def test_bm25_reads_the_body(tmp_path: Path) -> None:
    write_memory(tmp_path, "misc.md", "assorted notes", "The staging database is Postgres 16.")
    write_memory(tmp_path, "other.md", "assorted notes", "Nothing about databases.")
    found = select("which postgres version on staging?", tmp_path)
    assert [m.filename for m in found] == ["misc.md"]


@pytest.mark.parametrize("query", ["polars", "  polars  ", "", "dataframe?"])
def test_single_word_queries_surface_nothing(memories: Path, query: str) -> None:
    model = ScriptedModel([])
    assert select(query, memories) == []
    assert select(query, memories, model=model) == []
    assert model.requests == []


def test_limit_below_one_is_a_usage_error(memories: Path) -> None:
    with pytest.raises(UsageError):
        select("which dataframe library?", memories, limit=0)


# --- headers and reading -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("age", "expected"),
    [
        (timedelta(hours=3), "Memory (saved today): {path}:"),
        (timedelta(hours=30), "Memory (saved yesterday): {path}:"),
        (timedelta(days=3), "This memory is 3 days old."),
        (timedelta(days=40, hours=5), "This memory is 40 days old."),
    ],
)
def test_header_says_how_old_the_memory_is(tmp_path: Path, age: timedelta, expected: str) -> None:
    path = write_memory(tmp_path, "polars.md", "polars dataframes", age=age)
    [found] = select("polars dataframes please", tmp_path)

    assert expected.format(path=path) in found.header
    if age > timedelta(days=2):
        assert "verify" in found.header
        assert found.header.endswith(f"Memory: {path}:")


def test_long_file_is_cut_at_the_line_cap_with_a_note(tmp_path: Path) -> None:
    body = "\n".join(f"{i}" for i in range(10_000))
    path = write_memory(tmp_path, "polars.md", "polars dataframes", body)
    [found] = select("polars dataframes please", tmp_path)

    # Six lines of frontmatter and blank line come first, then the numbers.
    shown = found.content.split("\n\n[Only the start")[0]
    assert len(shown.splitlines()) == SURFACE_MAX_LINES
    assert shown.splitlines()[-1] == str(SURFACE_MAX_LINES - 7)
    assert f"Use the Read tool on {path}" in found.content


def test_wide_file_is_cut_at_the_byte_cap_on_a_line_end(tmp_path: Path) -> None:
    body = "\n".join("é" * 300 for _ in range(40))  # 600 bytes a line, few lines
    write_memory(tmp_path, "polars.md", "polars dataframes", body)
    [found] = select("polars dataframes please", tmp_path)

    shown = found.content.split("\n\n[Only the start")[0]
    assert len(shown.encode("utf-8")) <= 4096
    assert shown.splitlines()[-1] == "é" * 300
    assert "Read tool" in found.content


def test_short_file_is_shown_whole(tmp_path: Path) -> None:
    write_memory(tmp_path, "polars.md", "polars dataframes", "Use polars.")
    [found] = select("polars dataframes please", tmp_path)
    assert found.content.endswith("Use polars.")
    assert "Read tool" not in found.content


def test_surfaced_memory_as_a_message(memories: Path) -> None:
    [found] = select("which dataframe library, polars?", memories, limit=1)
    message = found.message()
    assert message.is_meta
    assert message.text == found.text


# --- the session budget ------------------------------------------------------------------


def test_budget_stops_surfacing_and_reset_reopens_it(tmp_path: Path) -> None:
    body = "polars notes here\n" * 300  # about 5 KB, so each file is cut to the byte cap
    for i in range(30):
        write_memory(tmp_path, f"polars_{i:02d}.md", "polars notes", body)
    budget = SurfaceBudget()
    assert budget.limit_bytes == SESSION_SURFACE_BUDGET == 60 * 1024

    seen: list[str] = []
    rounds = 0
    while found := select("polars notes please", tmp_path, budget=budget):
        rounds += 1
        seen += [m.filename for m in found]
        assert rounds < 10
    assert budget.exhausted
    assert budget.used >= 60 * 1024
    # Nothing twice, and no more than one file past the limit.
    assert len(seen) == len(set(seen)) == len(budget.surfaced)
    assert budget.used - 60 * 1024 < 5 * 1024
    assert select("polars notes please", tmp_path, budget=budget) == []

    budget.reset()
    assert budget.used == 0
    assert budget.surfaced == set()
    assert len(select("polars notes please", tmp_path, budget=budget)) == MAX_SURFACED


def test_exhausted_budget_asks_no_model(memories: Path) -> None:
    model = ScriptedModel([])
    budget = SurfaceBudget(used=SESSION_SURFACE_BUDGET)
    assert select("which dataframe library?", memories, model=model, budget=budget) == []
    assert model.requests == []


def test_budget_records_what_the_model_surfaced(memories: Path) -> None:
    budget = SurfaceBudget()
    model = ScriptedModel([selection("polars.md"), selection("polars.md", "deploys.md")])
    first = select("which dataframe library?", memories, model=model, budget=budget)
    second = select("and the deploy days?", memories, model=model, budget=budget)

    assert [m.filename for m in first] == ["polars.md"]
    assert [m.filename for m in second] == ["deploys.md"]
    assert budget.surfaced == {"polars.md", "deploys.md"}
    assert budget.used == sum(len(m.text.encode()) for m in first + second)


# --- links between memories --------------------------------------------------------------


@pytest.fixture
def linked(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    write_memory(root, "polars.md", "dataframes use polars", "Polars only. See [[deploy-day]].")
    # Linked by its name (a slug of "deploy day", the helper's name for deploy_day.md).
    write_memory(root, "deploy_day.md", "release train", "Tuesdays. Also [[user-role]].")
    write_memory(root, "user_role.md", "data engineer", kind="user")
    write_memory(root, "unrelated.md", "nothing to do with it")
    return root


def test_a_chosen_memory_brings_the_memories_it_links_to(linked: Path) -> None:
    model = ScriptedModel([selection("polars.md")])
    found = select("which dataframe library?", linked, model=model)
    # One step only: deploy_day.md's own link to user_role.md is not followed.
    assert [m.filename for m in found] == ["polars.md", "deploy_day.md"]


def test_links_are_followed_for_the_lexical_ranking_too(linked: Path) -> None:
    found = select("which dataframes library", linked)
    assert [m.filename for m in found] == ["polars.md", "deploy_day.md"]


def test_linked_memories_stay_within_the_limit_and_after_the_chosen(linked: Path) -> None:
    model = ScriptedModel([selection("polars.md", "unrelated.md")])
    found = select("which dataframe library?", linked, model=model, limit=2)
    assert [m.filename for m in found] == ["polars.md", "unrelated.md"]


def test_links_resolve_by_file_name_and_skip_what_was_surfaced(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    write_memory(root, "a.md", "dataframes use polars", "See [[b]], [[c]] and [[missing]].")
    write_memory(root, "b.md", "b")
    write_memory(root, "c.md", "c")
    model = ScriptedModel([selection("a.md")])
    found = select("which dataframe library?", root, model=model, already_surfaced={"b.md"})
    assert [m.filename for m in found] == ["a.md", "c.md"]


def test_links_are_not_followed_when_asked_not_to(linked: Path) -> None:
    model = ScriptedModel([selection("polars.md")])
    found = select("which dataframe library?", linked, model=model, follow_links=False)
    assert [m.filename for m in found] == ["polars.md"]


def test_prompt_shows_the_current_layout_and_links(tmp_path: Path) -> None:
    text = memory_prompt(tmp_path)
    assert "metadata:\n  type: <user | feedback | project | reference>" in text
    assert "[[name]]" in text
    old = memory_prompt(tmp_path, format="2.1.88")
    assert "\ntype: <user | feedback | project | reference>\n" in old
    assert "[[name]]" not in old
    with pytest.raises(UsageError):
        memory_prompt(tmp_path, format="v3")  # type: ignore[arg-type]
