"""OfflineModel: rule-based extraction through the real extractor, fork, tools and gate."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Sequence
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdir.extract import (
    ExtractConfig,
    MemoryExtractor,
    TurnContext,
    build_extract_auto_only_prompt,
    build_extract_combined_prompt,
)
from memdir.extract._prompts import changed_section, extract_prompt_parts
from memdir.fork import CacheSafeParams
from memdir.messages import Message, ToolResultBlock, ToolUseBlock
from memdir.models import Model, ModelRequest, ModelResponse, OfflineModel
from memdir.models._offline_request import (
    PROMPT_PATTERNS,
    ExtractionPrompt,
    ManifestEntry,
    parse_extraction_prompt,
    read_results,
)
from memdir.models._offline_rules import Candidate, Forget, find_cues
from memdir.models._offline_text import resolve_dates, similarity
from memdir.store import (
    MemoryDir,
    MemoryHeader,
    contains_secret,
    format_manifest,
    parse_memory_file,
)
from memdir.telemetry import Event
from memdir.tools import builtin_tools

TODAY = date(2026, 12, 2)  # a Wednesday
NOON = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
ANTHROPIC_KEY = "sk-ant-api03-" + ("a1B2c3D4e5" * 10)[:93] + "AA"
OPENAI_KEY = "sk-proj-" + "Zq9x" * 12
# Cue words and their neighbours, for the property test.
WORDS = (
    "I'm", "a", "the", "remember", "that", "forget", "always", "never", "don't", "no,",
    "actually", "by", "Friday", "tomorrow", "https://grafana.x/d", "#ops", "channel",
    "because", "?", ".", "!", "March", "5", "in", "two", "weeks", "prefer", "polars",
    "pandas", "team", "lead", "Ana,", "I", "lead", "\n",
)  # fmt: skip


class Recording:
    """Wraps a model and keeps every request and response, for assertions."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.requests: list[ModelRequest] = []
        self.responses: list[ModelResponse] = []

    @property
    def name(self) -> str:
        return self.inner.name

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        response = await self.inner.request(request)
        self.responses.append(response)
        return response


class Session:
    """A host conversation with an extractor behind it, one user message per turn."""

    def __init__(self, tmp_path: Path, *, shared_cache: bool = False, **config: object) -> None:
        self.memory = tmp_path / "memory"
        self.cwd = str(tmp_path)
        self.model = Recording(OfflineModel(today=TODAY))
        self.events: list[Event] = []
        self.messages: list[Message] = []
        self.config = ExtractConfig(**config)  # type: ignore[arg-type]
        self.params = None
        if shared_cache:
            tools = [t.definition() for t in builtin_tools(tmp_path)]
            self.params = CacheSafeParams(model=self.model, system="Host agent.", tools=tools)
        self.extractor = self.new_extractor()

    def new_extractor(self) -> MemoryExtractor:
        return MemoryExtractor(self.memory, self.model, self.config, sink=self.events.append)

    def say(self, *texts: str, when: datetime = NOON) -> None:
        """One turn per text, each extracted before the next."""

        async def main() -> None:
            for text in texts:
                self.messages += [Message.user(text, timestamp=when), Message.assistant("Done.")]
                await self.end_turn()

        asyncio.run(main())

    async def end_turn(self) -> None:
        turn = TurnContext(messages=tuple(self.messages), params=self.params, cwd=self.cwd)
        self.extractor.on_turn_end(turn)
        await self.extractor.drain()

    def runs(self) -> list[Event]:
        return [e for e in self.events if e.name == "extract.run"]

    def files(self) -> dict[str, str]:
        """Every file in the memory dir by relative name, after checking the store is sound."""
        found = {
            p.relative_to(self.memory).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(self.memory.rglob("*.md"))
        }
        check_store(found)
        return found

    def memories(self, kind: str | None = None) -> dict[str, str]:
        """Non-empty memory files (``MEMORY.md`` left out), optionally of one type."""
        return {
            name: text
            for name, text in self.files().items()
            if not name.endswith("MEMORY.md")
            and text
            and (kind is None or parse_memory_file(text).type == kind)
        }

    def index(self, name: str = "MEMORY.md") -> list[str]:
        return self.files().get(name, "").splitlines()


def check_store(files: dict[str, str]) -> None:
    """What must hold after any run: parseable memories, a short index, no secrets."""
    for name, text in files.items():
        assert not contains_secret(text), name
        if name.endswith("MEMORY.md"):
            assert all(len(line) < 150 for line in text.splitlines()), text
            pointers = [line for line in text.splitlines() if line.startswith("- [")]
            assert len(pointers) == len(set(pointers)), text
            assert not text.startswith("---")
            continue
        if not text:
            continue  # forgotten: emptied, as there is no rm
        parsed = parse_memory_file(text)
        assert not parsed.malformed, name
        assert parsed.name, name
        assert parsed.description, name
        assert parsed.type, name


def pointers_to(lines: Sequence[str], filename: str) -> list[str]:
    return [line for line in lines if f"]({filename})" in line]


# --- what gets saved ----------------------------------------------------------------------


def test_role_is_saved_and_a_later_role_updates_the_same_file(tmp_path: Path) -> None:
    session = Session(tmp_path)
    session.say("I'm a data scientist on the ingest team.")
    first = session.memories("user")
    assert list(first) == ["user_role.md"]
    assert "data scientist on the ingest team" in first["user_role.md"]

    session.say("Actually I'm now the ingest team lead.")
    users = session.memories("user")
    assert list(users) == ["user_role.md"]
    assert "ingest team lead" in parse_memory_file(users["user_role.md"]).body
    assert "ingest team lead" in (parse_memory_file(users["user_role.md"]).description or "")
    assert len(pointers_to(session.index(), "user_role.md")) == 1
    assert "ingest team lead" in pointers_to(session.index(), "user_role.md")[0]


def test_preference_with_a_reason_becomes_feedback_with_why_and_how(tmp_path: Path) -> None:
    session = Session(tmp_path)
    session.say("Always use polars, never pandas, because the cluster images only ship polars.")
    (text,) = session.memories("feedback").values()
    body = parse_memory_file(text).body
    assert "Always use polars, never pandas" in body
    assert "**Why:** The cluster images only ship polars." in body
    assert "**How to apply:**" in body


def test_correction_becomes_feedback(tmp_path: Path) -> None:
    session = Session(tmp_path)
    session.say("No, don't add docstrings to test functions.")
    (text,) = session.memories("feedback").values()
    assert "Don't add docstrings to test functions." in text
    assert "**Why:**" in text
    assert "**How to apply:**" in text


@dataclasses.dataclass(frozen=True)
class DateCase:
    said: str
    expected: str


@pytest.mark.parametrize(
    "case",
    [
        DateCase("The ingest migration must ship by Friday.", "2026-12-04"),
        DateCase("The beta release is in two weeks.", "2026-12-16"),
        DateCase("The demo is tomorrow.", "2026-12-03"),
        DateCase("The code freeze starts March 5.", "2027-03-05"),
        DateCase("Reports are due at the end of the month.", "2026-12-31"),
    ],
    ids=lambda case: case.expected,
)
def test_dated_plans_become_project_memories_with_absolute_dates(
    tmp_path: Path, case: DateCase
) -> None:
    session = Session(tmp_path)
    session.say(case.said)
    (text,) = session.memories("project").values()
    body = parse_memory_file(text).body
    assert case.expected in body.split("\n")[0]
    assert "**Why:**" in body
    assert "**How to apply:**" in body


def test_relative_dates_are_read_from_the_message_timestamp(tmp_path: Path) -> None:
    # A host that shares its request passes messages as they are, timestamps included.
    session = Session(tmp_path, shared_cache=True)
    session.say("The release ships tomorrow.", when=datetime(2026, 11, 30, 9, tzinfo=UTC))
    (text,) = session.memories("project").values()
    assert "2026-12-01" in text


@pytest.mark.parametrize(
    ("said", "link"),
    [
        ("The latency dashboard is https://grafana.example.com/d/ingest", "grafana.example.com"),
        ("Bugs go to https://linear.app/acme/team/ING", "https://linear.app/acme/team/ING"),
        ("Incidents are posted in the #ingest-alerts channel.", "#ingest-alerts"),
    ],
)
def test_links_to_dashboards_and_trackers_become_references(
    tmp_path: Path, said: str, link: str
) -> None:
    session = Session(tmp_path)
    session.say(said)
    (text,) = session.memories("reference").values()
    assert link in text


def test_plain_link_without_a_hint_is_not_a_reference(tmp_path: Path) -> None:
    session = Session(tmp_path)
    session.say("I read https://example.com/blog/post yesterday.")
    assert session.memories() == {}


def test_remember_that_is_saved(tmp_path: Path) -> None:
    session = Session(tmp_path)
    session.say("Remember that the staging DB is read-only on Sundays.")
    (text,) = session.memories().values()
    assert "The staging DB is read-only on Sundays." in text


def test_forget_empties_the_memory_and_drops_its_pointer(tmp_path: Path) -> None:
    session = Session(tmp_path)
    session.say(
        "Always use polars, never pandas, because the cluster images only ship polars.",
        "I prefer short answers.",
    )
    (name,) = [n for n, t in session.memories("feedback").items() if "polars" in t]
    assert pointers_to(session.index(), name)

    session.say("Forget the polars rule.")
    assert session.files()[name] == ""
    assert pointers_to(session.index(), name) == []
    assert not any("polars" in text for text in session.memories().values())
    assert len(session.memories("feedback")) == 1  # the other preference stays


def test_secrets_are_never_saved_but_the_preference_next_to_them_is(tmp_path: Path) -> None:
    assert contains_secret(ANTHROPIC_KEY)
    assert contains_secret(f"export OPENAI_API_KEY={OPENAI_KEY}")
    session = Session(tmp_path)
    session.say(
        f"here's the key: {ANTHROPIC_KEY}\n"
        f"export OPENAI_API_KEY={OPENAI_KEY}\n"
        "Always run the linter before committing, because CI rejects lint errors."
    )
    (text,) = session.memories("feedback").values()
    assert "run the linter before committing" in text
    for path in session.memory.rglob("*"):
        if path.is_file():
            content = path.read_text(encoding="utf-8")
            assert not contains_secret(content), path
            assert "sk-" not in content, path


def test_the_same_preference_twice_gives_one_file(tmp_path: Path) -> None:
    session = Session(tmp_path)
    said = "Always use polars, never pandas, because the cluster images only ship polars."
    session.say(said, said)
    assert len(session.memories("feedback")) == 1
    assert len(session.runs()) == 2
    assert session.runs()[1].fields["files_written"] == 0


def test_a_rerun_over_the_same_conversation_adds_nothing(tmp_path: Path) -> None:
    session = Session(tmp_path)
    session.say(
        "I'm a data scientist on the ingest team.",
        "Always use polars, never pandas, because the cluster images only ship polars.",
        "The ingest migration must ship by Friday.",
        "The latency dashboard is https://grafana.example.com/d/ingest",
        "Actually I'm now the ingest team lead.",
    )
    before = session.files()
    session.extractor = session.new_extractor()  # a fresh cursor: every message is new again

    asyncio.run(session.end_turn())
    assert session.files() == before
    assert session.runs()[-1].fields["files_written"] == 0
    index = session.index()
    assert len(index) == len(set(index)) == len(session.memories())


def test_a_similar_existing_memory_is_updated_instead_of_duplicated(tmp_path: Path) -> None:
    session = Session(tmp_path)
    MemoryDir(session.memory).ensure()
    existing = session.memory / "feedback_dataframes.md"
    existing.write_text(
        "---\nname: Dataframes\ndescription: Use polars for dataframes, not pandas\n"
        "type: feedback\n---\n\nUse polars for dataframes, not pandas.\n",
        encoding="utf-8",
    )
    session.say("Always use polars, never pandas, because the cluster images only ship polars.")
    assert list(session.memories()) == ["feedback_dataframes.md"]
    body = parse_memory_file(existing.read_text(encoding="utf-8")).body
    assert "Use polars for dataframes, not pandas." in body
    assert "Always use polars, never pandas." in body
    assert len(pointers_to(session.index(), "feedback_dataframes.md")) == 1


@pytest.mark.parametrize(
    "said",
    ["can you always do that?", "thanks!", "Hi there.", "I'm a bit lost.", "Don't worry."],
)
def test_questions_and_small_talk_save_nothing(tmp_path: Path, said: str) -> None:
    session = Session(tmp_path)
    session.say(said)
    assert session.files() == {}
    assert session.runs()[0].fields["turn_count"] == 1
    assert session.model.responses[0].message.tool_uses == ()


def test_harness_text_and_meta_messages_are_not_the_users_words(tmp_path: Path) -> None:
    session = Session(tmp_path, shared_cache=True)
    session.messages += [
        Message.user("Always use tabs.", is_meta=True),
        Message.user("Summary: never use mocks.", is_compact_summary=True),
    ]
    session.say("<system-reminder>Always use spaces.</system-reminder> Hello.")
    assert session.files() == {}


def test_team_mode_puts_project_and_reference_memories_in_the_team_dir(tmp_path: Path) -> None:
    session = Session(tmp_path, team=True)
    session.say(
        "I'm a data scientist on the ingest team. The ingest migration must ship by Friday. "
        "The latency dashboard is https://grafana.example.com/d/ingest"
    )
    names = sorted(session.memories())
    assert names == [
        "team/project_ingest_migration_ship.md",
        "team/reference_grafana_latency_dashboard.md",
        "user_role.md",
    ]
    assert len(pointers_to(session.index("team/MEMORY.md"), "project_ingest_migration_ship.md"))
    assert len(pointers_to(session.index(), "user_role.md")) == 1
    assert session.runs()[0].fields["team_memories_saved"] == 2


def test_skip_index_leaves_memory_md_alone(tmp_path: Path) -> None:
    session = Session(tmp_path, skip_index=True)
    session.say("I prefer short answers.")
    assert list(session.files()) == ["feedback_short_answers.md"]


# --- how it talks to the fork ---------------------------------------------------------------


def test_tools_stay_inside_the_memory_dir_and_runs_take_one_request_or_two(
    tmp_path: Path,
) -> None:
    session = Session(tmp_path)
    session.say(
        "I'm a data scientist on the ingest team. Always use polars, never pandas.",
        "Remember that the staging DB is read-only on Sundays. The demo is tomorrow.",
        "Forget the polars rule.",
    )
    # New memories take one request each run: memdir's tools write their index lines,
    # so nothing is read first. Forgetting reads the file it empties, then writes it.
    assert [r.fields["turn_count"] for r in session.runs()] == [1, 1, 2]
    assert all(not r.fields["hit_max_turns"] for r in session.runs())
    root = MemoryDir(session.memory)
    uses = [u for r in session.model.responses for u in r.message.tool_uses]
    assert {u.name for u in uses} == {"Read", "Write"}
    assert all(root.is_memory_path(u.input["file_path"]) for u in uses)
    assert not any(e.name == "permission.denied" for e in session.events)
    # Every run ended on its writes: no request was spent on a summary.
    assert all(r.message.tool_uses for r in session.model.responses)


def test_the_same_request_gets_an_equal_response(tmp_path: Path) -> None:
    session = Session(tmp_path)
    session.say("I'm a data scientist on the ingest team. Always use polars, never pandas.")
    session.say("Forget the polars rule.")
    assert len(session.model.requests) == 3

    async def replay() -> list[ModelResponse]:
        fresh = OfflineModel(today=TODAY)
        return [await fresh.request(r) for r in session.model.requests]

    assert asyncio.run(replay()) == session.model.responses
    # Ids count up within a run: its first request, then the next.
    first_run, *second_run = session.model.responses
    ids = [u.id for u in first_run.message.tool_uses]
    assert ids == [f"toolu_offline_{n}" for n in range(1, len(ids) + 1)]
    ids = [u.id for r in second_run for u in r.message.tool_uses]
    assert ids == [f"toolu_offline_{n}" for n in range(1, len(ids) + 1)]
    assert all(r.usage.input_tokens > 0 for r in session.model.responses)


def test_as_a_plain_chat_model_it_says_what_it_is() -> None:
    request = ModelRequest(messages=(Message.user("What is the capital of France?"),))
    response = asyncio.run(OfflineModel(today=TODAY).request(request))
    assert response.message.tool_uses == ()
    assert "only saves memories" in response.message.text
    assert response.stop_reason == "end_turn"


# --- the prompt, the rules ------------------------------------------------------------------


@pytest.mark.parametrize("host_memory", [False, True])
@pytest.mark.parametrize("skip_index", [False, True])
@pytest.mark.parametrize("team", [False, True])
def test_prompt_parsing_keeps_in_step_with_the_prompt_builders(
    tmp_path: Path, team: bool, skip_index: bool, host_memory: bool
) -> None:
    # The short prompt (a host with a memory section of its own) and the turn's date
    # leave every fact the offline model reads in place.
    md = MemoryDir(tmp_path / "memory")
    md.write("user_role.md", "---\nname: Role\ndescription: The role: a: b\ntype: user\n---\n")
    md.write("team/notes.md", "no frontmatter at all\n")
    os.utime(md.root / "team/notes.md", (1_000_000_000, 1_000_000_000))  # the older one
    manifest = format_manifest(md.scan())
    if team:
        prompt = build_extract_combined_prompt(
            7,
            manifest,
            skip_index,
            memory_dir=str(md.root),
            team_dir=str(md.team_dir),
            host_memory=host_memory,
            today=TODAY,
        )
    else:
        prompt = build_extract_auto_only_prompt(
            7, manifest, skip_index, memory_dir=str(md.root), host_memory=host_memory, today=TODAY
        )
    assert parse_extraction_prompt(prompt) == ExtractionPrompt(
        count=7,
        memory_dir=str(md.root),
        team_dir=str(md.team_dir) if team else None,
        index=not skip_index,
        manifest=(
            ManifestEntry(filename="user_role.md", type="user", description="The role: a: b"),
            ManifestEntry(filename="team/notes.md", type=None, description=""),
        ),
        indexes={}
        if skip_index
        else {str(md.root): None, **({str(md.team_dir): None} if team else {})},
    )
    single = build_extract_auto_only_prompt(
        1,
        "",
        memory_dir=str(md.root),
        index_text="- [A](a.md) — a\n",
        host_memory=host_memory,
        today=TODAY,
    )
    assert parse_extraction_prompt(single) == ExtractionPrompt(
        count=1,
        memory_dir=str(md.root),
        team_dir=None,
        index=True,
        manifest=(),
        indexes={str(md.root): "- [A](a.md) — a\n"},
    )


def test_every_prompt_pattern_matches_some_real_prompt() -> None:
    prompts = [
        build_extract_auto_only_prompt(
            3, "- [user] a.md (2026-01-01T00:00:00.000Z)", skip, memory_dir="/m"
        )
        for skip in (False, True)
    ] + [
        build_extract_combined_prompt(3, "- b.md (2026-01-01T00:00:00.000Z)", skip, memory_dir="/m")
        for skip in (False, True)
    ]
    # The prompt of memdir's own runs, whose tools write the index lines.
    prompts.append(
        extract_prompt_parts(
            3,
            "",
            memory_dir="/m",
            memories=[],
            memdir_indexes=True,
            user_dir="/u",
            user_listing="- [user] role.md (2026-01-01): role",
        ).whole
    )
    # What memdir's own request adds around the prompt: its first message, and the memory
    # files changed since the list in it.
    header = MemoryHeader(
        filename="c.md", path=Path("/m/c.md"), mtime=0.0, name="c", description="c", type="user"
    )
    prompts.append(changed_section([header], ["d.md"]))
    prompts.append("The conversation follows; memdir's request comes after it.")
    for name, pattern in PROMPT_PATTERNS.items():
        assert any(pattern.search(p) for p in prompts), name
    assert parse_extraction_prompt("# Memory update\n\nSomething else") is None


@pytest.mark.parametrize(
    ("a", "b", "alike"),
    [
        ("Always use polars, never pandas", "Use polars for dataframes, not pandas", True),
        ("The user's role: ingest team lead", "The user's role: ingest team data scientist", True),
        ("Always use polars, never pandas", "Run the linter before pushing", False),
        ("Use polars", "Polars is installed", False),  # one shared word is not enough
        ("Deploys go through the ingest pipeline", "The ingest team owns Kafka topics", False),
    ],
)
def test_similarity_rule(a: str, b: str, alike: bool) -> None:
    assert (similarity(a, b) > 0) is alike
    assert similarity(a, b) == similarity(b, a)


@pytest.mark.parametrize(
    ("phrase", "iso"),
    [
        ("on Friday", "2026-12-04"),
        ("this Wednesday", "2026-12-02"),
        ("on Wednesday", "2026-12-09"),
        ("next Friday", "2026-12-11"),
        ("last Monday", "2026-11-30"),
        ("today", "2026-12-02"),
        ("yesterday", "2026-12-01"),
        ("the day after tomorrow", "2026-12-04"),
        ("by EOD", "2026-12-02"),
        ("next week", "2026-12-07"),
        ("next month", "2027-01-01"),
        ("in 3 days", "2026-12-05"),
        ("in a month", "2027-01-02"),
        ("by the end of the week", "2026-12-04"),
        ("2026-03-05", "2026-03-05"),
        ("5 March 2026", "2026-03-05"),
        ("March 5th, 2026", "2026-03-05"),
        ("Jan 10", "2027-01-10"),
        ("November 20", "2026-11-20"),
    ],
)
def test_dates_are_made_absolute(phrase: str, iso: str) -> None:
    dated = resolve_dates(f"It ships {phrase}.", TODAY)
    assert iso in dated.text
    assert [d.isoformat() for d in dated.dates] == [iso]


def test_invalid_and_recurring_days_are_not_dates() -> None:
    assert resolve_dates("February 30 and on Sundays", TODAY).dates == ()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(WORDS),
        max_size=30,
    ).map(" ".join)
)
def test_cues_never_fail_and_slugs_are_file_names(text: str) -> None:
    cues = find_cues(text, TODAY)
    assert cues == find_cues(text, TODAY)
    for cue in cues:
        if isinstance(cue, Candidate):
            assert cue.slug.replace("_", "").isalnum()
            assert cue.slug.islower()
            assert cue.name
            assert cue.description
            assert cue.fact


@pytest.mark.parametrize(
    ("said", "kind"),
    [
        ("I'm Ana, I lead the data platform team.", "user"),
        ("I work as an SRE.", "user"),
        ("I run the tests now.", None),
        ("I'd rather you used tabs.", "feedback"),
        ("I'd like you to fix the build.", None),
        ("We never deploy on Fridays.", "feedback"),
        ("Please use uv instead of pip.", "feedback"),
        ("Stop adding type: ignore comments.", "feedback"),
        ("That's wrong, the fixtures live in tests/data.", "feedback"),
        ("Not the staging cluster but the canary one.", "feedback"),
        ("No.", None),
        ("Remember to rebase before merging.", "feedback"),
        ("Remember that I am colour-blind.", "user"),
        ("Note that the demo is on March 5.", "project"),
        ("See https://github.com/acme/ingest/issues/12 for the tracker.", "reference"),
        ("The repo is https://github.com/acme/ingest.", None),
        ("I'm tired today.", None),
        ("Forget about the staging rule.", "forget"),
        ("Forget it.", None),
        ("```\nalways use pandas\n```", None),
        ("Always use polars " + "and not pandas " * 100, None),  # a paste, not a statement
    ],
)
def test_cue_rules(said: str, kind: str | None) -> None:
    cues = find_cues(said, TODAY)
    assert len(cues) == (0 if kind is None else 1), cues
    if kind == "forget":
        assert isinstance(cues[0], Forget)
    elif kind is not None:
        assert isinstance(cues[0], Candidate)
        assert cues[0].type == kind


def test_role_keeps_the_name_given_with_it() -> None:
    (cue,) = find_cues("I'm Ana, I lead the data platform team.", TODAY)
    assert isinstance(cue, Candidate)
    assert cue.slug == "user_role"
    assert cue.fact == "The user (Ana) leads the data platform team."


def test_read_results_keep_only_whole_files() -> None:
    paths = ["/m/a.md", "/m/b.md", "/m/c.md", "/m/d.md", "/m/e.md"]
    uses = tuple(
        ToolUseBlock(id=f"r{n}", name="Read", input={"file_path": p}) for n, p in enumerate(paths)
    )
    results = (
        ToolResultBlock(tool_use_id="r0", content="     1\t---\n     2\tname: A"),
        ToolResultBlock(
            tool_use_id="r1", content="Read: file does not exist: /m/b.md", is_error=True
        ),
        ToolResultBlock(tool_use_id="r2", content="(/m/c.md is empty)"),
        ToolResultBlock(
            tool_use_id="r3",
            content="     1\tx\n\n(the file continues; Read again with offset=2 to see more)",
        ),
        ToolResultBlock(tool_use_id="r4", content="Read: permission denied", is_error=True),
    )
    own = [Message(role="assistant", content=uses), Message(role="user", content=results)]
    assert read_results(own) == {"/m/a.md": "---\nname: A\n", "/m/b.md": None, "/m/c.md": ""}


def test_a_standalone_requests_changes_since_its_list_update_the_list() -> None:
    text = (
        "# Memory update\n\nYou are now the memory agent for this conversation. Look at the "
        "last ~2 messages above.\n\nThe memory directory is `/m`.\n\n"
        "## Memory files changed since the list above\n\n"
        "- [user] a.md (2026-01-02T00:00:00.000Z): the new a\n"
        "- [project] c.md (2026-01-02T00:00:00.000Z): c\n- removed: b.md\n\n"
        "Each line here replaces the list's line for its file.\n\n"
        "The conversation follows; memdir's request comes after it.\n\n"
        "## Existing memory files\n\n"
        "- [user] a.md (2026-01-01T00:00:00.000Z): the old a\n"
        "- [user] b.md (2026-01-01T00:00:00.000Z): b\n"
    )
    parsed = parse_extraction_prompt(text)
    assert parsed is not None
    assert {e.filename: e.description for e in parsed.manifest} == {
        "a.md": "the new a",
        "c.md": "c",
    }
