"""memdir.recall: the system-prompt section, the index reminder, relevant-memory surfacing."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memdir._cli import cli
from memdir.errors import ModelError, UsageError
from memdir.models import (
    AnthropicModel,
    ModelRequest,
    OfflineModel,
    OpenAIModel,
    RetryPolicy,
)
from memdir.recall import (
    DEFAULT_SELECTOR_MODEL,
    MAX_SURFACED,
    SELECTION_SCHEMA,
    SELECTOR_MAX_TOKENS,
    SESSION_SURFACE_BUDGET,
    SURFACE_MAX_LINES,
    MemoryStamp,
    SurfaceBudget,
    SurfacedMemory,
    memory_change_notice,
    memory_prompt,
    memory_reminder,
    memory_reminder_message,
    memory_stamp,
    select_relevant_memories,
)
from memdir.store import MemoryDir
from memdir.testing import FakeAnthropicServer, FakeOpenAIServer, Fault, ScriptedModel

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
    # Line 201 is quoted in the warning, to say where the rest starts; nothing after it.
    assert "entry 200\n" not in text
    assert "entry 201" not in text
    assert "WARNING: MEMORY.md has 250 lines, over the 200-line limit" in text
    assert '50 of its 250 lines were left out, from line 201 ("- [m200]' in text
    assert f"Read {tmp_path / 'MEMORY.md'} for the rest" in text


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


def test_selector_request_puts_the_list_first_and_the_query_after(memories: Path) -> None:
    model = ScriptedModel([selection()])
    select("which dataframe library?", memories, model=model, recent_tools=["Bash"])

    [request] = model.requests
    assert isinstance(request, ModelRequest)
    assert request.tools == ()
    # The list is a message of its own and ends a cached prefix; the query comes after.
    listed, asked = request.messages
    assert listed.role == asked.role == "user"
    assert listed.text.startswith("Memory files:\n- [")
    assert "] polars.md (" in listed.text
    assert ": dataframes: the team uses polars" in listed.text
    assert "which dataframe" not in listed.text
    assert request.cache_points == (0,)
    assert asked.text.startswith("Which memories will help with this request?\n")
    assert "which dataframe library?" in asked.text
    assert asked.text.endswith("Tools used just now: Bash")


def test_selector_asks_for_structured_output_with_room_to_think(memories: Path) -> None:
    model = ScriptedModel([selection()])
    select("which dataframe library?", memories, model=model)

    [request] = model.requests
    assert SELECTOR_MAX_TOKENS == 2560
    assert dict(request.params) == {
        "max_tokens": 2560,
        "output_config": {"format": {"type": "json_schema", "schema": SELECTION_SCHEMA}},
    }
    assert SELECTION_SCHEMA["required"] == ["selected_memories"]
    assert SELECTION_SCHEMA["additionalProperties"] is False


def test_selector_states_todays_rules(memories: Path) -> None:
    model = ScriptedModel([selection()])
    select("which dataframe library?", memories, model=model)

    system = model.requests[0].system
    assert isinstance(system, str)
    assert f"at most {MAX_SURFACED}" in system
    assert '{"selected_memories": ["<filename>", ...]}' in system
    # Sparing with [user] and [project] memories, by what the request is about, and no
    # file named twice in one conversation.
    assert "Be most sparing with [user] and [project] memories" in system
    assert "Decide by the subject of the request" in system
    assert "Do not name a file again that you named for an earlier request" in system


def test_already_surfaced_files_stay_listed_but_are_not_surfaced_again(
    memories: Path,
) -> None:
    model = ScriptedModel([selection("polars.md", "deploys.md", "user_role.md")])
    found = select(
        "which dataframe library?",
        memories,
        model=model,
        already_surfaced={"polars.md", str(memories / "user_role.md")},
    )

    assert [m.filename for m in found] == ["deploys.md"]
    # Still in the list, so that the list is the same bytes from one query to the next.
    listed = model.requests[0].messages[0].text
    assert "polars.md" in listed
    assert "user_role.md" in listed


def test_a_sessions_queries_extend_one_selector_conversation(memories: Path) -> None:
    budget = SurfaceBudget()
    first_answer = selection("polars.md")
    model = ScriptedModel([first_answer, selection("polars.md", "deploys.md")])
    first = select("which dataframe library?", memories, model=model, budget=budget)
    second = select("and when do we deploy?", memories, model=model, budget=budget)

    assert [m.filename for m in first] == ["polars.md"]
    # polars.md was surfaced for the first query: picked again, it is dropped.
    assert [m.filename for m in second] == ["deploys.md"]
    one, two = model.requests
    assert [m.role for m in two.messages] == ["user", "user", "assistant", "user"]

    # The second request starts with the first one, byte for byte, then its answer.
    def said(messages: Any) -> list[tuple[str, str]]:
        return [(m.role, m.text) for m in messages]

    assert said(two.messages[:2]) == said(one.messages)
    assert two.messages[2].text == first_answer
    assert "and when do we deploy?" in two.messages[3].text
    assert two.cache_points == (0,)
    assert len(budget.exchanges) == 2

    budget.reset()
    assert budget.exchanges == []


def test_type_tags_copied_from_the_list_are_understood(memories: Path) -> None:
    model = ScriptedModel([selection("[project] polars.md")])
    found = select("which dataframe library?", memories, model=model)
    assert [m.filename for m in found] == ["polars.md"]


def test_the_offline_model_ranks_lexically(memories: Path) -> None:
    found = select("which dataframe library, polars?", memories, model=OfflineModel())
    assert [m.filename for m in found] == ["polars.md"]


def wide_memories(root: Path, count: int = 60) -> None:
    """Enough memories that their list is worth caching (over 1,024 tokens)."""
    for i in range(count):
        write_memory(
            root,
            f"topic_{i:02d}.md",
            f"notes on subsystem {i}: how its queue, retries and dashboards fit together",
        )


def test_selector_request_on_the_wire_caches_the_list(tmp_path: Path) -> None:
    """Through the real Anthropic SDK: the list first with its breakpoint, the query
    after, structured output; a second query of the session reads the list (and the
    first exchange) from the cache."""
    wide_memories(tmp_path)
    answers = iter([selection("topic_07.md"), selection("topic_09.md")])

    async def two_queries(url: str) -> None:
        model = AnthropicModel(
            "claude-test", api_key="k", base_url=url, retry=RetryPolicy(max_retries=0)
        )
        budget = SurfaceBudget()
        try:
            for query in ("how does subsystem 7 retry?", "and subsystem 9's dashboards?"):
                await select_relevant_memories(
                    query, tmp_path, model, now=NOW, budget=budget, follow_links=False
                )
        finally:
            await model.aclose()

    with FakeAnthropicServer(handler=lambda body: next(answers)) as server:
        asyncio.run(two_queries(server.base_url))
        first, second = (r.body for r in server.requests)
        usage = [r.usage or {} for r in server.requests]

    for body in (first, second):
        assert body["max_tokens"] == 2560
        assert body["output_config"] == {
            "format": {"type": "json_schema", "schema": SELECTION_SCHEMA}
        }
        listed = body["messages"][0]["content"][0]
        assert listed["text"].startswith("Memory files:\n")
        assert listed["cache_control"] == {"type": "ephemeral"}
        assert body["messages"][-1]["role"] == "user"
        assert body["messages"][-1]["content"][0]["text"].startswith("Which memories")
        assert "Be most sparing with [user] and [project]" in json.dumps(body["system"])
    assert "subsystem 7" in first["messages"][1]["content"][0]["text"]
    assert json.dumps(second["messages"][0]) == json.dumps(first["messages"][0])
    assert [m["role"] for m in second["messages"]] == ["user", "user", "assistant", "user"]
    assert usage[1]["cache_read_input_tokens"] > 1024


def test_selector_asks_an_openai_server_for_a_json_schema(memories: Path) -> None:
    async def one_query(url: str) -> list[SurfacedMemory]:
        model = OpenAIModel("gpt-test", api_key="k", base_url=url, retry=RetryPolicy(max_retries=0))
        try:
            return await select_relevant_memories("which dataframe library?", memories, model)
        finally:
            await model.aclose()

    with FakeOpenAIServer([selection("polars.md")]) as server:
        found = asyncio.run(one_query(server.base_url))
        [body] = (r.body for r in server.requests)

    assert [m.filename for m in found] == ["polars.md"]
    assert body["max_tokens"] == 2560
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "memory_selection", "schema": SELECTION_SCHEMA, "strict": True},
    }
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "user"]
    assert "Memory files:" in json.dumps(body["messages"][1])
    assert "which dataframe library?" in json.dumps(body["messages"][2])


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
        (timedelta(hours=3), "Memory: {path} (saved today):"),
        (timedelta(hours=30), "Memory: {path} (saved yesterday):"),
        (timedelta(days=3), "Memory: {path} (saved 3 days ago):"),
        (timedelta(days=40, hours=5), "Memory: {path} (saved 40 days ago):"),
    ],
)
def test_header_says_how_old_the_memory_is(tmp_path: Path, age: timedelta, expected: str) -> None:
    path = write_memory(tmp_path, "polars.md", "polars dataframes", age=age)
    [found] = select("polars dataframes please", tmp_path)

    # The header ends with the path and the age; an old memory is cautioned first.
    assert found.header.endswith(expected.format(path=path))
    if age > timedelta(days=2):
        days = age.days
        assert found.header.startswith(f"This memory is {days} days old.")
        assert "check it against the current state" in found.header
    else:
        assert found.header == expected.format(path=path)


def test_surfaced_memory_is_framed_as_possibly_relevant(tmp_path: Path) -> None:
    path = write_memory(tmp_path, "polars.md", "polars dataframes", "Use polars.")
    [found] = select("polars dataframes please", tmp_path)

    assert found.text == (
        "<system-reminder>\n"
        "Recalled from memory as possibly relevant to this request. Use it only if it "
        "really bears on what the user asked; otherwise leave it aside.\n\n"
        f"Memory: {path} (saved today):\n\n{found.content}\n</system-reminder>"
    )


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


# --- memdir recall -----------------------------------------------------------------------


def test_recall_command_asks_the_selector_model_by_default(
    memories: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with FakeAnthropicServer([selection("polars.md")]) as server:
        args = ["recall", "which dataframe library?", "--memory-dir", str(memories)]
        result = CliRunner().invoke(
            cli, [*args, "--model", "anthropic", "--base-url", server.base_url]
        )
        [body] = (r.body for r in server.requests)

    assert result.exit_code == 0, result.output
    assert body["model"] == DEFAULT_SELECTOR_MODEL == "claude-sonnet-5-5"
    assert "Recalled from memory as possibly relevant" in result.stdout
    assert f"Memory: {memories / 'polars.md'} (saved " in result.stdout


# --- memory changed during a conversation ------------------------------------------------


def test_a_stamp_sees_files_saved_rewritten_and_deleted(tmp_path: Path) -> None:
    write_memory(tmp_path, "polars.md", "polars dataframes")
    write_memory(tmp_path, "deploys.md", "release train")
    (tmp_path / "MEMORY.md").write_text("- [Polars](polars.md) — dataframes\n", "utf-8")
    (tmp_path / ".memdir").mkdir()
    before = memory_stamp(tmp_path)
    assert memory_stamp(tmp_path) == before
    assert memory_change_notice(tmp_path, before, memory_stamp(tmp_path)) is None
    # memdir's own bookkeeping is not memory.
    (tmp_path / ".memdir" / "state.md").write_text("x", "utf-8")
    assert memory_stamp(tmp_path) == before

    write_memory(tmp_path, "team/oncall.md", "pager rota")
    (tmp_path / "deploys.md").unlink()
    (tmp_path / "polars.md").write_text("---\nname: polars\n---\n\nPolars 2.\n", "utf-8")
    notice = memory_change_notice(tmp_path, before, memory_stamp(tmp_path))

    assert notice is not None
    assert notice.startswith("<system-reminder>\n")
    assert notice.endswith("\n</system-reminder>")
    assert f"Memory in {tmp_path}{os.sep} changed since this conversation loaded it" in notice
    assert "saved team/oncall.md; updated polars.md; deleted deploys.md." in notice
    # The index itself did not change: memories read earlier may be stale.
    assert "MEMORY.md loaded at the start" not in notice
    assert "read it again before relying on it" in notice


def test_a_changed_index_makes_the_loaded_copy_stale(tmp_path: Path) -> None:
    index = tmp_path / "MEMORY.md"
    index.write_text("- [Polars](polars.md) — dataframes\n", "utf-8")
    before = memory_stamp(tmp_path)
    write_memory(tmp_path, "deploys.md", "release train")
    index.write_text("- [Polars](polars.md) — dataframes\n- [Deploys](deploys.md) — days\n")
    notice = memory_change_notice(tmp_path, before, memory_stamp(tmp_path))

    assert notice is not None
    assert "saved deploys.md; updated MEMORY.md." in notice
    assert (
        "The copy of MEMORY.md loaded at the start of this conversation is out of date. "
        f"Read {index} again if you need what it says now."
    ) in notice
    assert "mention it to the user only if it bears on what they asked" in notice


def test_a_notice_names_ten_files_and_counts_the_rest(tmp_path: Path) -> None:
    before = memory_stamp(tmp_path / "memory")  # a folder not there yet: nothing in it
    assert before == MemoryStamp()
    for i in range(14):
        write_memory(tmp_path / "memory", f"m{i:02d}.md", f"memory {i}")
    notice = memory_change_notice(tmp_path / "memory", before, memory_stamp(tmp_path / "memory"))

    assert notice is not None
    assert "saved m00.md, m01.md" in notice
    assert "m09.md and 4 more." in notice
    assert "m10.md" not in notice


def test_a_server_that_refuses_structured_output_is_asked_in_plain_text(memories: Path) -> None:
    def answer(body: dict[str, Any]) -> Fault | str:
        if "output_config" in body:
            return Fault(
                status=400,
                body={
                    "type": "error",
                    "error": {
                        "type": "invalid_request_error",
                        "message": "output_config: unknown field",
                    },
                },
            )
        return "Sure: " + selection("polars.md")

    async def one_query(url: str) -> list[SurfacedMemory]:
        model = AnthropicModel(
            "claude-test", api_key="k", base_url=url, retry=RetryPolicy(max_retries=0)
        )
        try:
            return await select_relevant_memories("which dataframe library?", memories, model)
        finally:
            await model.aclose()

    with FakeAnthropicServer(handler=answer) as server:
        found = asyncio.run(one_query(server.base_url))
        refused, plain = (r.body for r in server.requests)

    assert [m.filename for m in found] == ["polars.md"]
    assert "output_config" in refused
    assert "output_config" not in plain
    assert plain["max_tokens"] == 2560
    assert plain["messages"] == refused["messages"]
