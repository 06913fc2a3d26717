"""The extraction prompt: what the memory agent is told, in both variants."""

from __future__ import annotations

import datetime
import itertools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from memdir.errors import UsageError
from memdir.extract._prompts import (
    build_extract_auto_only_prompt,
    build_extract_combined_prompt,
    extract_prompt_parts,
    has_memory_section,
)
from memdir.recall import memory_prompt
from memdir.store import (
    ENTRYPOINT_NAME,
    MAX_ENTRYPOINT_LINES,
    MEMORY_FORMATS,
    MemoryFormat,
    parse_memory_file,
)

Build = Callable[..., str]

MANIFEST = (
    "- [user] user_role.md (2026-03-05T14:03:22.000Z): data engineer, new to the frontend\n"
    "- [feedback] feedback_testing.md (2026-03-04T09:00:00.000Z): run the whole suite first"
)
MEMORY_DIR = "/home/ada/.claude/projects/-src-app/memory"


@dataclass(frozen=True)
class Builder:
    build: Build
    combined: bool


BUILDERS = [
    pytest.param(Builder(build_extract_auto_only_prompt, combined=False), id="auto_only"),
    pytest.param(Builder(build_extract_combined_prompt, combined=True), id="combined"),
]


def section(prompt: str, heading: str) -> str:
    """The text from ``heading`` up to the next heading of the same or a higher level."""
    start = prompt.index(heading)
    level = heading.split(" ", 1)[0]
    pattern = re.compile(rf"^#{{1,{len(level)}}} ", re.MULTILINE)
    following = pattern.search(prompt, start + len(heading))
    return prompt[start : following.start() if following else len(prompt)]


# 1. The role, the ~N newest messages, the directories.


@pytest.mark.parametrize("builder", BUILDERS)
def test_role_and_message_count(builder: Builder) -> None:
    prompt = builder.build(7, MANIFEST)
    assert prompt.startswith("# Memory update\n")
    assert "You are now the memory agent for this conversation." in prompt
    assert "the last ~7 messages above" in prompt
    assert "a previous run handled earlier ones" in prompt
    assert "worth remembering in future conversations" in prompt


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize(
    ("count", "words"), [(1, "~1 message "), (0, "~0 messages "), (2, "~2 messages ")]
)
def test_message_count_is_pluralised(builder: Builder, count: int, words: str) -> None:
    prompt = builder.build(count, "")
    assert words in prompt
    if count == 1:
        assert "1 messages" not in prompt


@pytest.mark.parametrize("builder", BUILDERS)
def test_negative_count_is_refused(builder: Builder) -> None:
    with pytest.raises(UsageError, match="negative"):
        builder.build(-1, "")


def test_auto_only_names_the_directory_when_given() -> None:
    assert f"The memory directory is `{MEMORY_DIR}`." in build_extract_auto_only_prompt(
        3, "", memory_dir=MEMORY_DIR
    )
    assert "The memory directory is" not in build_extract_auto_only_prompt(3, "")


def test_combined_names_both_directories_team_defaulting_inside_private() -> None:
    prompt = build_extract_combined_prompt(3, "", memory_dir=MEMORY_DIR)
    assert f"- Private, for this user alone: `{MEMORY_DIR}`." in prompt
    team = os.path.join(MEMORY_DIR, "team")
    assert f"- Team, shared with everyone who works on this project: `{team}`." in prompt


def test_combined_takes_an_explicit_team_dir() -> None:
    prompt = build_extract_combined_prompt(3, "", memory_dir=MEMORY_DIR, team_dir="/srv/team-mem")
    assert "`/srv/team-mem`" in prompt
    assert f"`{os.path.join(MEMORY_DIR, 'team')}`" not in prompt


def test_combined_without_paths_still_describes_both_directories() -> None:
    prompt = build_extract_combined_prompt(3, "")
    assert "There are two memory directories:" in prompt
    assert "- Private, for this user alone." in prompt
    assert "(`team` inside the private one)" in prompt
    assert "`/" not in prompt


def test_team_appears_only_in_combined() -> None:
    for skip_index in (False, True):
        auto = build_extract_auto_only_prompt(3, MANIFEST, skip_index, memory_dir=MEMORY_DIR)
        assert "team" not in auto.lower()
        assert "Scope:" not in auto
        combined = build_extract_combined_prompt(3, MANIFEST, skip_index, memory_dir=MEMORY_DIR)
        assert "team memory" in combined


# 2. Tools and their limits.


@pytest.mark.parametrize("builder", BUILDERS)
def test_tools_and_their_limits(builder: Builder) -> None:
    tools = section(builder.build(3, ""), "## Tools")
    assert "`Read`, `Grep`, `Glob`: any path." in tools
    assert "`Bash`: read-only (no redirection, no `rm`)." in tools
    where = "the two memory directories" if builder.combined else "the memory directory"
    assert f"`Write`, `Edit`: only inside {where}." in " ".join(tools.split())
    assert "Use absolute paths." in tools


# 3. Two turns; 4. no investigating.


@pytest.mark.parametrize("builder", BUILDERS)
def test_as_few_requests_as_the_work_allows(builder: Builder) -> None:
    turns = " ".join(section(builder.build(3, ""), "## Turns").split())
    nothing = turns.index("Nothing worth saving (the usual case): no tool call.")
    two = turns.index("at most two turns, the calls of each in parallel")
    order = turns.index("first every `Read` you need, then every `Write` and `Edit`")
    assert nothing < two < order
    assert "`Edit`, or `Write` over a file, needs a `Read` of it in this run" in turns
    assert "so new files alone take one turn" in turns
    # Output is billed: a change is a small Edit, not the whole file again.
    assert "Change a file with a small `Edit`, not a whole new `Write`." in turns


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("skip_index", [False, True])
def test_new_memories_add_their_pointer_unless_skipped(builder: Builder, skip_index: bool) -> None:
    prompt = builder.build(3, "", skip_index)
    how = " ".join(section(prompt, "## How to save").split())
    assert ("Index: add a pointer line to" in how) is not skip_index
    assert ("counts as read" in section(prompt, "## Turns")) is not skip_index


def test_the_index_text_is_shown_and_counts_as_read() -> None:
    index = "- [Role](user_role.md) — data engineer\n- [Tests](feedback_testing.md) — whole suite\n"
    prompt = build_extract_auto_only_prompt(3, MANIFEST, index_text=index)
    shown = section(prompt, "## `MEMORY.md` as it is now")
    assert "holds exactly this (it counts as `Read`: `Edit` it directly)" in shown
    assert "```markdown\n- [Role](user_role.md) — data engineer\n- [Tests]" in shown
    assert shown.rstrip().endswith("whole suite\n```")


def test_a_missing_index_is_to_be_written() -> None:
    shown = section(build_extract_auto_only_prompt(3, ""), "## `MEMORY.md` as it is now")
    assert "does not exist yet: create it with `Write`" in shown


def test_an_index_holding_a_fence_keeps_it() -> None:
    index = "- [A](a.md) — see ```code```\n"
    prompt = build_extract_auto_only_prompt(3, "", index_text=index)
    assert "````markdown\n- [A](a.md) — see ```code```\n````" in prompt


def test_combined_shows_both_indexes() -> None:
    prompt = build_extract_combined_prompt(
        3, "", memory_dir=MEMORY_DIR, index_text="- [A](a.md) — a\n", team_index_text=None
    )
    private = section(prompt, "## `MEMORY.md` of the private directory as it is now")
    team = section(prompt, "## `MEMORY.md` of the team directory as it is now")
    assert "- [A](a.md) — a" in private
    assert "does not exist yet" in team


def test_parts_put_what_changes_least_apart() -> None:
    parts = extract_prompt_parts(4, MANIFEST, memory_dir=MEMORY_DIR, index_text="- [A](a.md) — a\n")
    assert parts.request.startswith("# Memory update")
    assert MEMORY_DIR in parts.request
    assert MANIFEST in parts.memory
    assert "- [A](a.md) — a" in parts.memory
    again = extract_prompt_parts(9, "", memory_dir="/elsewhere")
    assert again.instructions == parts.instructions
    assert parts.whole == build_extract_auto_only_prompt(
        4, MANIFEST, memory_dir=MEMORY_DIR, index_text="- [A](a.md) — a\n"
    )


@pytest.mark.parametrize("builder", BUILDERS)
def test_no_investigating_or_verifying(builder: Builder) -> None:
    prompt = " ".join(builder.build(3, "").split())
    assert "Use the conversation alone:" in prompt
    assert "no investigating the codebase, project files or git, no checking facts." in prompt


# 5. The manifest of existing files.


@pytest.mark.parametrize("builder", BUILDERS)
def test_manifest_section_holds_the_manifest_verbatim(builder: Builder) -> None:
    prompt = builder.build(3, MANIFEST)
    existing = section(prompt, "## Existing memory files")
    assert f"\n\n{MANIFEST}\n\n" in existing
    assert "Update a listed file rather than duplicate it" in existing
    assert "fix or remove one the conversation shows is wrong" in " ".join(existing.split())
    # With the request, before the working rules: what memory holds changes between runs.
    assert prompt.index("## Existing memory files") < prompt.index("## Turns")
    assert prompt.index("## Existing memory files") < prompt.index("## Types")


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("manifest", ["", "\n", "  \n"])
def test_empty_manifest_leaves_the_section_out(builder: Builder, manifest: str) -> None:
    prompt = builder.build(3, manifest)
    assert "Existing memory files" not in prompt
    assert "rather than duplicate it" not in prompt
    assert "\n\n\n" not in prompt


@pytest.mark.parametrize("builder", BUILDERS)
def test_manifest_with_braces_and_trailing_newline_is_kept_as_is(builder: Builder) -> None:
    manifest = "- [project] q3_{launch}.md (2026-01-01T00:00:00.000Z): {placeholder} text\n"
    assert manifest in builder.build(3, manifest)


# 6. Explicit requests.


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("skip_index", [False, True])
def test_remember_and_forget_requests(builder: Builder, skip_index: bool) -> None:
    requests = section(builder.build(3, "", skip_index), "## Direct requests")
    remember = next(line for line in requests.splitlines() if "Remember" in line)
    assert "save it now, as the type that fits best" in remember
    forget = " ".join(requests[requests.index('"Forget"') :].split())
    assert "`Edit` it out of its memory" in forget
    assert "no `rm`" in forget
    assert "a file left with nothing is rewritten empty" in forget
    assert ("and its pointer out of" in forget) is not skip_index


# 7. The four types.


@pytest.mark.parametrize("builder", BUILDERS)
def test_four_types_in_order(builder: Builder) -> None:
    prompt = builder.build(3, "")
    bullets = [f"- **{name}**: " for name in ("user", "feedback", "project", "reference")]
    positions = [prompt.index(bullet) for bullet in bullets]
    assert positions == sorted(positions)
    types = section(prompt, "## Types")
    assert "One per memory." in types
    assert "could not learn from the project" in types


def type_text(prompt: str, name: str) -> str:
    """The bullet of one memory type, its lines joined."""
    start = prompt.index(f"- **{name}**: ")
    end = prompt.find("\n- ", start + 1)
    blank = prompt.find("\n\n", start)
    stop = min(e for e in (end, blank, len(prompt)) if e != -1)
    return " ".join(prompt[start:stop].split())


@pytest.mark.parametrize("builder", BUILDERS)
def test_type_guidance(builder: Builder) -> None:
    prompt = builder.build(3, "")
    user = type_text(prompt, "user")
    assert "role, goals, expertise and gaps" in user
    assert "how they like to work and be answered" in user
    assert "Facts, not judgements" in user
    assert "no personal details the work does not need" in user

    feedback = type_text(prompt, "feedback")
    assert "corrections, and confirmed non-obvious choices" in feedback
    assert "saving only mistakes breeds needless caution" in feedback
    assert "Body: the rule, then a `**Why:**` line and a `**How to apply:**` line." in feedback

    project = type_text(prompt, "project")
    assert "what code and git do not record" in project
    assert "decisions and why, deadlines, incidents" in project
    assert "who does what, by when" in project
    assert "Absolute dates (YYYY-MM-DD, from today's date)" in project
    assert "Body: the fact, then `**Why:**` and `**How to apply:**` lines." in project
    assert "Update or remove it when things move on." in project

    reference = type_text(prompt, "reference")
    assert "outside the project" in reference
    for where in ("dashboard", "issue tracker", "chat channel"):
        assert where in reference
    assert "the link or exact name, and when to look there" in reference


def test_combined_gives_each_type_a_scope() -> None:
    scope = " ".join(section(build_extract_combined_prompt(3, ""), "## Types").split())
    assert "Scope: user, private;" in scope
    assert "feedback, private unless clearly a team convention" in scope
    assert "never contradicting team feedback" in scope
    assert "this person overrides the team rule" in scope
    assert "project, team unless it concerns this person alone;" in scope
    assert "reference, usually team." in scope


@pytest.mark.parametrize("skip_index", [False, True])
def test_combined_never_puts_a_secret_in_team_memory(skip_index: bool) -> None:
    prompt = build_extract_combined_prompt(3, "", skip_index)
    team = " ".join(section(prompt, "## Types").split())
    line = team[team.index("**Never** put a secret") :]
    assert "in team memory" in line
    for kind in ("API key", "token", "password", "credential"):
        assert kind in line
    # ...nor in private memory: secrets are on the list of what is never saved.
    never = section(prompt, "## Never save")
    assert "- Secrets: API keys, tokens, passwords, credentials." in never


# 8. What not to save.


@pytest.mark.parametrize("builder", BUILDERS)
def test_what_not_to_save(builder: Builder) -> None:
    excluded = section(builder.build(3, ""), "## Never save, even when asked")
    bullets = [line for line in excluded.splitlines() if line.startswith("- ")]
    expected = (
        "- What the code or git shows: patterns, architecture, paths, structure, history, fixes.",
        "- What CLAUDE.md, AGENTS.md or other instruction files say.",
        "- The task in hand",
        "- Secrets: API keys, tokens, passwords, credentials.",
        "- Details about other people the work does not need.",
    )
    assert len(bullets) == len(expected)
    for bullet, start in zip(bullets, expected, strict=True):
        assert bullet.startswith(start)
    assert "keep only what was surprising" in excluded


# 9. How to save: the file format and the index.


def frontmatter_example(prompt: str) -> str:
    match = re.search(r"```markdown\n(.*?)```", prompt, re.DOTALL)
    assert match is not None
    return match.group(1)


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("skip_index", [False, True])
def test_file_format_is_always_given(builder: Builder, skip_index: bool) -> None:
    # Today's Claude Code layout by default (the old `name: <short title>` and top-level
    # `type` contradicted the host's memory section).
    prompt = builder.build(3, "", skip_index)
    how = section(prompt, "## How to save")
    assert "One fact per file (two facts, two files)" in how
    assert "`user_role.md`" in how
    assert "snake_case" in how
    example = frontmatter_example(how)
    assert example.startswith("---\nname: <short-name-in-kebab-case>\ndescription: <one ")
    assert "\nmetadata:\n  type: <user|feedback|project|reference>\n---\n\n<body>\n" in example
    parsed = parse_memory_file(example)
    assert list(parsed.frontmatter) == ["name", "description", "metadata"]
    assert parsed.type is None  # the placeholder is no type, but it sits where a type goes
    assert parsed.metadata["type"] == "<user|feedback|project|reference>"
    assert parsed.body == "<body>\n"
    joined = " ".join(how.split())
    assert "Be terse: a body of a few lines." in joined
    assert "Link related memories as `[[name]]`" in joined
    assert "keep `name`, `description` and `type` true to the body" in joined
    assert "<short title>" not in prompt


@pytest.mark.parametrize("builder", BUILDERS)
def test_2_1_88_layout_keeps_the_top_level_type(builder: Builder) -> None:
    how = section(builder.build(3, "", memory_format="2.1.88"), "## How to save")
    example = frontmatter_example(how)
    assert example.startswith("---\nname: <short title>\ndescription: <one ")
    assert list(parse_memory_file(example).frontmatter) == ["name", "description", "type"]
    assert "One fact per file" in how
    assert "`[[name]]`" in how


@pytest.mark.parametrize("builder", BUILDERS)
def test_unknown_memory_format_is_refused(builder: Builder) -> None:
    with pytest.raises(UsageError, match="memory format"):
        builder.build(3, "", memory_format="2.0")


@pytest.mark.parametrize("builder", BUILDERS)
def test_index_instructions(builder: Builder) -> None:
    how = " ".join(section(builder.build(3, ""), "## How to save").split())
    # Shorter than the ~150 characters Claude Code asks for: every line is loaded, and written.
    assert "under ~100 characters: `- [Title](file.md) — hook`" in how
    assert f"`{ENTRYPOINT_NAME}` is only an index (no frontmatter, no content)" in how
    assert f"loaded into every conversation and cut at {MAX_ENTRYPOINT_LINES} lines" in how
    assert "by topic, not date" in how
    if builder.combined:
        assert f"a pointer line to the `{ENTRYPOINT_NAME}` of its directory" in how
        assert f"Each directory's `{ENTRYPOINT_NAME}` is only" in how
    else:
        assert f"a pointer line to `{ENTRYPOINT_NAME}`," in how


@pytest.mark.parametrize("builder", BUILDERS)
def test_skip_index_drops_every_index_step(builder: Builder) -> None:
    prompt = builder.build(3, MANIFEST, True, memory_dir=MEMORY_DIR)
    mentions = [line for line in prompt.splitlines() if ENTRYPOINT_NAME in line]
    assert mentions == [f"No index here: do not create, read or change `{ENTRYPOINT_NAME}`."]
    for gone in ("~100", f"{MAX_ENTRYPOINT_LINES} lines", "[Title](file.md)", "pointer"):
        assert gone not in prompt
    assert "## How to save" in prompt
    assert "---\nname: <short-name-in-kebab-case>" in prompt


# 10. The closing summary.


@pytest.mark.parametrize("builder", BUILDERS)
def test_finishes_with_a_one_line_summary(builder: Builder) -> None:
    prompt = builder.build(3, "")
    finish = section(prompt, "## Finish")
    assert prompt.endswith(finish)
    assert "End without a tool call: one line on what you saved or changed" in finish
    assert "or only `Nothing to save.`" in finish


# Shape: stable, compact, well-formed.

GRID = list(
    itertools.product(
        [0, 1, 12],
        ["", MANIFEST],
        [False, True],
        [None, MEMORY_DIR],
    )
)


@pytest.mark.parametrize("builder", BUILDERS)
def test_identical_inputs_give_identical_prompts(builder: Builder) -> None:
    for count, manifest, skip_index, memory_dir in GRID:
        first = builder.build(count, manifest, skip_index, memory_dir=memory_dir)
        second = builder.build(count, manifest, skip_index, memory_dir=memory_dir)
        assert first == second


@pytest.mark.parametrize("builder", BUILDERS)
def test_shape(builder: Builder) -> None:
    for count, manifest, skip_index, memory_dir in GRID:
        prompt = builder.build(count, manifest, skip_index, memory_dir=memory_dir)
        assert max(len(line) for line in prompt.splitlines()) <= 400
        assert not prompt.endswith("\n")
        assert "\n\n\n" not in prompt
        assert all(line == line.rstrip() for line in prompt.splitlines())
        # Nothing that changes between runs: no dates except those in the manifest.
        without_manifest = prompt.replace(manifest, "") if manifest else prompt
        assert re.search(r"\d{4}-\d{2}-\d{2}", without_manifest) is None
        assert "{" not in without_manifest


@pytest.mark.parametrize(
    ("builder", "low", "high"),
    [
        pytest.param(build_extract_auto_only_prompt, 350, 650, id="auto_only"),
        pytest.param(build_extract_combined_prompt, 420, 760, id="combined"),
    ],
)
def test_length_stays_compact(builder: Build, low: int, high: int) -> None:
    words = len(builder(3, MANIFEST, memory_dir=MEMORY_DIR).split())
    assert low <= words <= high


# The turn's date ("next Thursday" needs today's date to become a calendar date).


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("host_memory", [False, True])
def test_the_date_of_the_turn_is_in_the_request(builder: Builder, host_memory: bool) -> None:
    day = datetime.date(2026, 3, 5)
    parts = extract_prompt_parts(
        3,
        MANIFEST,
        memory_dir=MEMORY_DIR,
        team=builder.combined,
        today=day,
        host_memory=host_memory,
    )
    # Claude Code's wording; in the part that is sent last, so no cached prefix holds it.
    assert parts.request.endswith("\n\nToday's date is 2026-03-05.")
    assert "2026-03-05" not in parts.instructions + parts.state.replace(MANIFEST, "")
    assert "Today's date" not in builder.build(3, MANIFEST, memory_dir=MEMORY_DIR)
    assert "(YYYY-MM-DD, from today's date)" in builder.build(3, "")


# The short prompt, for a host whose system prompt has a memory section of its own.


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("skip_index", [False, True])
def test_the_short_prompt_defers_to_the_hosts_memory_section(
    builder: Builder, skip_index: bool
) -> None:
    prompt = builder.build(
        3,
        MANIFEST,
        skip_index,
        memory_dir=MEMORY_DIR,
        index_text="- [A](a.md) — a\n",
        host_memory=True,
    )
    assert prompt.startswith("# Memory update\n")
    assert "the last ~3 messages above" in prompt
    assert MANIFEST in prompt
    joined = " ".join(prompt.split())
    assert "Your system prompt's memory section rules the types, what not to save" in joined
    assert "how memory files and index entries look" in joined
    assert "Save in the directory named above, even where the system prompt names another." in (
        prompt
    )
    unnamed = builder.build(3, "", host_memory=True)
    assert "named above" not in unnamed
    # Nothing that could contradict the host's section: no layout, no types, no rules
    # of memdir's own about what to save.
    assert "```markdown\n---" not in prompt
    assert "<short title>" not in prompt
    assert re.search(r"^(?:type|name|metadata):", prompt, re.M) is None
    for gone in ("## Types", "## Never save", "## How to save", "snake_case"):
        assert gone not in prompt
    assert "First every `Read` at once, then every `Write` and `Edit` at once" in joined
    assert "Change a file with a small `Edit`, not a whole new `Write`." in joined
    assert "Update a listed file rather than duplicate it" in prompt
    assert prompt.endswith(
        "answer only `Nothing to save.`; otherwise end with one line on what you saved or changed."
    )
    if builder.combined:
        assert "**Never** put a secret (API key, token, password, any credential) in team" in (
            prompt
        )
    if skip_index:
        assert "do not create, read or change `MEMORY.md`" in prompt
        assert "Be terse: a few lines a file." in prompt
    else:
        assert "counts as read" in prompt
        assert "Be terse: a few lines a file, index lines under ~100 characters." in prompt


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("host_memory", [False, True])
def test_every_prompt_asks_for_one_fact_per_file_and_links(
    builder: Builder, host_memory: bool
) -> None:
    prompt = builder.build(3, MANIFEST, memory_dir=MEMORY_DIR, host_memory=host_memory)
    assert "One fact per file (two facts, two files)" in prompt
    assert "`[[name]]`" in prompt


@pytest.mark.parametrize("builder", BUILDERS)
def test_the_short_prompt_is_a_fraction_of_the_whole(builder: Builder) -> None:
    def instructions(host_memory: bool) -> int:
        parts = extract_prompt_parts(
            3, MANIFEST, memory_dir=MEMORY_DIR, team=builder.combined, host_memory=host_memory
        )
        return len(parts.instructions.encode())

    # What the run is about and what memory holds are the same in both; the how-to part
    # shrinks to below the ~1.5 KB of Claude Code's own fork prompt.
    assert instructions(True) * 5 < instructions(False) * 2
    assert instructions(True) < 1_200


@pytest.mark.parametrize("builder", BUILDERS)
def test_the_short_prompt_keeps_its_shape(builder: Builder) -> None:
    for count, manifest, skip_index, memory_dir in GRID:
        prompt = builder.build(count, manifest, skip_index, memory_dir=memory_dir, host_memory=True)
        assert prompt == builder.build(
            count, manifest, skip_index, memory_dir=memory_dir, host_memory=True
        )
        assert max(len(line) for line in prompt.splitlines()) <= 400
        assert "\n\n\n" not in prompt
        assert "{" not in (prompt.replace(manifest, "") if manifest else prompt)


CLAUDE_CODE_SECTION = (
    "# Memory\n\nYou have a persistent file-based memory at `/home/ana/.claude/projects/"
    "-src-app/memory/`. Each memory is one file holding one fact, with frontmatter:\n"
)
OLDER_CLAUDE_CODE_SECTION = (
    "# auto memory\n\nYou have a persistent, file-based memory system at "
    "`/home/ana/.claude/projects/-src-app/memory/`.\n"
)


@pytest.mark.parametrize(
    ("system", "found"),
    [
        pytest.param(CLAUDE_CODE_SECTION, True, id="claude-code-2.1.332"),
        pytest.param(OLDER_CLAUDE_CODE_SECTION, True, id="claude-code-older"),
        pytest.param(
            [
                {"type": "text", "text": "You are an agent."},
                {"type": "text", "text": "# Tools\n\n...\n\n" + CLAUDE_CODE_SECTION},
            ],
            True,
            id="in-a-later-block",
        ),
        pytest.param(None, False, id="none"),
        pytest.param("You are a helpful assistant.", False, id="no-section"),
        pytest.param("# Memory\n\nThe server has 64 GB of memory.", False, id="another-memory"),
        pytest.param("Intro. # Memory\nYou have a persistent memory.", False, id="not-a-heading"),
    ],
)
def test_a_hosts_memory_section_is_recognised(system: object, found: bool) -> None:
    assert has_memory_section(system) is found  # type: ignore[arg-type]


@pytest.mark.parametrize("layout", MEMORY_FORMATS)
def test_memdirs_own_memory_section_is_recognised(tmp_path: Path, layout: MemoryFormat) -> None:
    for team in (False, True):
        assert has_memory_section(memory_prompt(tmp_path, team, format=layout))


@pytest.mark.parametrize("team", [False, True], ids=["private", "team"])
@pytest.mark.parametrize("host_memory", [False, True], ids=["whole", "short"])
def test_where_memdir_indexes_the_prompt_asks_for_no_index_edit(
    team: bool, host_memory: bool
) -> None:
    index = "# Notes\n- [Role](user_role.md) — data engineer\n"
    parts = extract_prompt_parts(
        3,
        "",
        memory_dir=MEMORY_DIR,
        team=team,
        index_text=index,
        team_index_text=index,
        host_memory=host_memory,
        memories=[],
        memdir_indexes=True,
    )
    prompt = " ".join(parts.whole.split())
    # The index is not shown, nor counted as read, nor to be edited.
    assert "data engineer" not in prompt
    assert "as it is now" not in prompt
    assert "counts as read" not in prompt
    assert "add a pointer line" not in prompt
    assert "its pointer out of" not in prompt
    assert "index lines under" not in prompt
    assert "index entries" not in prompt
    # It says who keeps it, in words a host's own memory section cannot override.
    assert "memdir writes each memory's" in prompt
    alone = ("leave `MEMORY.md` alone", "leave each directory's `MEMORY.md` alone")
    assert any(words in prompt for words in alone)
    if host_memory:
        assert "whatever the system prompt says" in prompt
