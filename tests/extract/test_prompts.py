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
    assert "already handled by a previous run" in prompt
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
    assert "- `Read`, `Grep` and `Glob` may be used on any path." in tools
    bash = next(line for line in tools.splitlines() if "`Bash`" in line)
    assert "read-only commands only" in bash
    assert "no output redirection" in bash
    assert "no `rm`" in bash
    assert "nothing that creates, moves or changes a file" in bash
    where = "the two memory directories" if builder.combined else "the memory directory"
    assert f"- `Write` and `Edit` only work on files inside {where}." in tools
    assert "- Any other tool call is refused." in tools
    assert "Always use absolute paths." in tools


# 3. Two turns; 4. no investigating.


@pytest.mark.parametrize("builder", BUILDERS)
def test_as_few_requests_as_the_work_allows(builder: Builder) -> None:
    turns = section(builder.build(3, ""), "## One turn, or two")
    nothing = turns.index("Nothing worth saving, which is the usual case: answer in one short")
    assert "call no tool at all" in turns
    new = turns.index("Only new memories: in a single turn, `Write` each new file")
    assert "Once every call of a turn has written successfully, the run is over." in turns
    change = turns.index("A change to a memory that exists: `Edit`, and `Write` over a file")
    assert "only work on a file you have `Read` earlier in this run" in turns
    assert "then, in the next turn, every `Write` and `Edit` at once" in turns
    assert nothing < new < change
    assert "Do not alternate read, write, read over several turns." in turns


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("skip_index", [False, True])
def test_new_memories_add_their_pointer_unless_skipped(builder: Builder, skip_index: bool) -> None:
    turns = section(builder.build(3, "", skip_index), "## One turn, or two")
    new = next(line for line in turns.splitlines() if line.startswith("- Only new memories"))
    assert (ENTRYPOINT_NAME in new) is not skip_index
    assert ("counts as read" in turns) is not skip_index


def test_the_index_text_is_shown_and_counts_as_read() -> None:
    index = "- [Role](user_role.md) — data engineer\n- [Tests](feedback_testing.md) — whole suite\n"
    prompt = build_extract_auto_only_prompt(3, MANIFEST, index_text=index)
    shown = section(prompt, "## `MEMORY.md` as it is now")
    assert "counts as `Read` already, so `Edit` it directly" in shown
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
    assert MANIFEST in parts.state
    assert "- [A](a.md) — a" in parts.state
    again = extract_prompt_parts(9, "", memory_dir="/elsewhere")
    assert again.instructions == parts.instructions
    assert parts.whole == build_extract_auto_only_prompt(
        4, MANIFEST, memory_dir=MEMORY_DIR, index_text="- [A](a.md) — a\n"
    )


@pytest.mark.parametrize("builder", BUILDERS)
def test_no_investigating_or_verifying(builder: Builder) -> None:
    prompt = builder.build(3, "")
    assert "Work from the conversation alone." in prompt
    assert "Do not investigate or verify anything" in prompt
    for banned in ("no grepping the codebase", "no reading project files", "no git commands"):
        assert banned in prompt
    assert "no checking whether what was said is true" in prompt


# 5. The manifest of existing files.


@pytest.mark.parametrize("builder", BUILDERS)
def test_manifest_section_holds_the_manifest_verbatim(builder: Builder) -> None:
    prompt = builder.build(3, MANIFEST)
    existing = section(prompt, "## Existing memory files")
    assert f"\n\n{MANIFEST}\n\n" in existing
    assert "update an existing file instead of writing a duplicate" in existing
    assert "change or remove a memory the conversation shows is wrong" in existing
    # With the request, before the working rules: what memory holds changes between runs.
    assert prompt.index("## Existing memory files") < prompt.index("## One turn, or two")
    assert prompt.index("## Existing memory files") < prompt.index("## The four types")


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("manifest", ["", "\n", "  \n"])
def test_empty_manifest_leaves_the_section_out(builder: Builder, manifest: str) -> None:
    prompt = builder.build(3, manifest)
    assert "Existing memory files" not in prompt
    assert "instead of writing a duplicate" not in prompt
    assert "\n\n\n" not in prompt


@pytest.mark.parametrize("builder", BUILDERS)
def test_manifest_with_braces_and_trailing_newline_is_kept_as_is(builder: Builder) -> None:
    manifest = "- [project] q3_{launch}.md (2026-01-01T00:00:00.000Z): {placeholder} text\n"
    assert manifest in builder.build(3, manifest)


# 6. Explicit requests.


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("skip_index", [False, True])
def test_remember_and_forget_requests(builder: Builder, skip_index: bool) -> None:
    requests = section(builder.build(3, "", skip_index), "## When the user asks directly")
    remember = next(line for line in requests.splitlines() if "remember" in line)
    assert "save it in this run, as the type that fits it best" in remember
    forget = next(line for line in requests.splitlines() if "forget" in line)
    assert "find the memory that holds it and take it out" in forget
    assert "There is no `rm`" in forget
    assert "`Edit` the passage away, or rewrite the whole file without it" in forget
    assert ("remove its line from" in forget) is not skip_index


# 7. The four types.


@pytest.mark.parametrize("builder", BUILDERS)
def test_four_types_in_order(builder: Builder) -> None:
    prompt = builder.build(3, "")
    headings = [f"### {name}\n" for name in ("user", "feedback", "project", "reference")]
    positions = [prompt.index(heading) for heading in headings]
    assert positions == sorted(positions)
    assert "## The four types of memory" in prompt
    assert "could not learn from the project as it stands" in prompt


@pytest.mark.parametrize("builder", BUILDERS)
def test_type_guidance(builder: Builder) -> None:
    prompt = builder.build(3, "")
    user = section(prompt, "### user")
    assert "role, goals and responsibilities" in user
    assert "not judgements about the person" in user
    assert "personal details that have no bearing on the work" in user

    feedback = section(prompt, "### feedback")
    assert "Save corrections" in feedback
    assert "also confirmations" in feedback
    assert "not the obvious one" in feedback
    assert "Body: the rule itself, then a `**Why:**` line" in feedback
    assert "a `**How to apply:**` line" in feedback

    project = section(prompt, "### project")
    assert "neither the code nor the git history records" in project
    assert "who is doing what, why, and by when" in project
    assert "Never leave a date relative" in project
    assert '"next Thursday" becomes a calendar date (YYYY-MM-DD)' in project
    assert "`**Why:**`" in project
    assert "`**How to apply:**`" in project
    assert "go stale fast" in project

    reference = section(prompt, "### reference")
    assert "outside the project" in reference
    for where in ("dashboard", "issue tracker", "chat channel"):
        assert where in reference
    assert "Give the link" in reference


def test_combined_gives_each_type_a_scope() -> None:
    prompt = build_extract_combined_prompt(3, "")
    assert "Scope: always private." in section(prompt, "### user")
    feedback = section(prompt, "### feedback")
    assert "Scope: private, unless it is clearly a convention for the whole team" in feedback
    assert "Private feedback must not contradict team feedback" in feedback
    assert "Scope: lean towards team" in section(prompt, "### project")
    assert "Scope: usually team." in section(prompt, "### reference")


@pytest.mark.parametrize("skip_index", [False, True])
def test_combined_never_puts_a_secret_in_team_memory(skip_index: bool) -> None:
    prompt = build_extract_combined_prompt(3, "", skip_index)
    assert "**Never** put a secret" in section(prompt, "### Secrets")
    line = next(line for line in prompt.splitlines() if line.startswith("**Never** put a secret"))
    assert "in team memory" in line
    for kind in ("API key", "token", "password", "credential"):
        assert kind in line
    assert "Keep secrets out of private memory too." in line


# 8. What not to save.


@pytest.mark.parametrize("builder", BUILDERS)
def test_what_not_to_save(builder: Builder) -> None:
    excluded = section(builder.build(3, ""), "## What not to save")
    assert "Leave these out, even when the user asks you to save them:" in excluded
    bullets = [line for line in excluded.splitlines() if line.startswith("- ")]
    expected = (
        "- Code patterns, conventions, architecture, file paths and project structure",
        "- Git history",
        "- Debugging recipes and fixes",
        "- Anything the project's instruction files (CLAUDE.md, AGENTS.md",
        "- The state of the task in hand",
        "- Secrets of any kind: API keys, tokens, passwords, credentials.",
        "- Information about other people that the work does not need.",
    )
    assert len(bullets) == len(expected)
    for bullet, start in zip(bullets, expected, strict=True):
        assert bullet.startswith(start)
    assert "keep only what was surprising or non-obvious about it" in excluded


# 9. How to save: the file format and the index.


def frontmatter_example(prompt: str) -> str:
    match = re.search(r"```markdown\n(.*?)```", prompt, re.DOTALL)
    assert match is not None
    return match.group(1)


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("skip_index", [False, True])
def test_file_format_is_always_given(builder: Builder, skip_index: bool) -> None:
    # Today's Claude Code layout by default (issue 23: the old `name: <short title>` and
    # top-level `type` contradicted the host's memory section).
    prompt = builder.build(3, "", skip_index)
    how = section(prompt, "## How to save")
    assert "Each memory holds one fact" in how
    assert "two facts make two files" in how
    assert "`user_role.md` or `feedback_testing.md`" in how
    assert "snake_case" in how
    example = frontmatter_example(how)
    assert example.startswith("---\nname: <short-name-in-kebab-case>\ndescription: <one line: ")
    assert "\nmetadata:\n  type: <user|feedback|project|reference>\n---\n\n<body>\n" in example
    parsed = parse_memory_file(example)
    assert list(parsed.frontmatter) == ["name", "description", "metadata"]
    assert parsed.type is None  # the placeholder is no type, but it sits where a type goes
    assert parsed.metadata["type"] == "<user|feedback|project|reference>"
    assert parsed.body == "<body>\n"
    assert "link each related memory as `[[name]]`" in how
    assert "keep its `name`, `description` and `type` true to the new body" in how
    assert "<short title>" not in prompt


@pytest.mark.parametrize("builder", BUILDERS)
def test_2_1_88_layout_keeps_the_top_level_type(builder: Builder) -> None:
    how = section(builder.build(3, "", memory_format="2.1.88"), "## How to save")
    example = frontmatter_example(how)
    assert example.startswith("---\nname: <short title>\ndescription: <one line: ")
    assert list(parse_memory_file(example).frontmatter) == ["name", "description", "type"]
    assert "Each memory holds one fact" in how
    assert "`[[name]]`" in how


@pytest.mark.parametrize("builder", BUILDERS)
def test_unknown_memory_format_is_refused(builder: Builder) -> None:
    with pytest.raises(UsageError, match="memory format"):
        builder.build(3, "", memory_format="2.0")


@pytest.mark.parametrize("builder", BUILDERS)
def test_index_instructions(builder: Builder) -> None:
    how = section(builder.build(3, ""), "## How to save")
    assert "one line, under ~150 characters" in how
    assert "in the form `- [Title](file.md) — one-line hook`" in how
    assert f"`{ENTRYPOINT_NAME}` is only an index: it has no frontmatter" in how
    assert "never holds the content of a memory" in how
    assert f"loaded into every conversation and cut off after {MAX_ENTRYPOINT_LINES} lines" in how
    assert "organised by topic, not by date" in how
    if builder.combined:
        assert "(each directory has its own)" in how
        assert "Both indexes are loaded" in how
    else:
        assert f"`{ENTRYPOINT_NAME}` in the same directory" in how


@pytest.mark.parametrize("builder", BUILDERS)
def test_skip_index_drops_every_index_step(builder: Builder) -> None:
    prompt = builder.build(3, MANIFEST, True, memory_dir=MEMORY_DIR)
    mentions = [line for line in prompt.splitlines() if ENTRYPOINT_NAME in line]
    assert mentions == [
        "Write the memory file and nothing more: memories are found without an index here, "
        f"so do not create, read or change `{ENTRYPOINT_NAME}`."
    ]
    for gone in ("150", f"{MAX_ENTRYPOINT_LINES} lines", "[Title](file.md)", "pointer"):
        assert gone not in prompt
    assert "## How to save" in prompt
    assert "---\nname: <short-name-in-kebab-case>" in prompt


# 10. The closing summary.


@pytest.mark.parametrize("builder", BUILDERS)
def test_finishes_with_a_one_line_summary(builder: Builder) -> None:
    prompt = builder.build(3, "")
    finish = section(prompt, "## Finish")
    assert prompt.endswith(finish)
    assert "When you answer without a tool call, say in one line what you saved" in finish
    assert "or answer only `Nothing to save.`" in finish


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
        pytest.param(build_extract_auto_only_prompt, 700, 1300, id="auto_only"),
        pytest.param(build_extract_combined_prompt, 800, 1500, id="combined"),
    ],
)
def test_length_stays_compact(builder: Build, low: int, high: int) -> None:
    words = len(builder(3, MANIFEST, memory_dir=MEMORY_DIR).split())
    assert low <= words <= high


# The turn's date (issue 23: "next Thursday" needs today's date to become a calendar date).


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
    assert "worked out from today's date" in builder.build(3, "")


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
    assert "Your system prompt already has a section on memory" in prompt
    assert "types of memory, for what is not worth saving, and for how a memory file" in prompt
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
    for gone in ("## The four types", "## What not to save", "## How to save", "snake_case"):
        assert gone not in prompt
    assert "first every `Read` you need, all at once; then every" in prompt
    assert "update the file that already holds a fact rather than adding a duplicate" in prompt
    assert prompt.endswith(
        "answer only `Nothing to save.`; otherwise end with one line on what you saved or changed."
    )
    if builder.combined:
        assert (
            "**Never** put a secret (an API key, token, password or other credential) in team"
            in (prompt)
        )
    if skip_index:
        assert "do not create, read or change `MEMORY.md`" in prompt
    else:
        assert "counts as read" in prompt


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize("host_memory", [False, True])
def test_every_prompt_asks_for_one_fact_per_file_and_links(
    builder: Builder, host_memory: bool
) -> None:
    prompt = builder.build(3, MANIFEST, memory_dir=MEMORY_DIR, host_memory=host_memory)
    assert re.search(r"[Oo]ne fact", prompt)
    assert "two facts make two files" in prompt
    assert "`[[name]]`" in prompt


@pytest.mark.parametrize("builder", BUILDERS)
def test_the_short_prompt_is_a_fraction_of_the_whole(builder: Builder) -> None:
    def instructions(host_memory: bool) -> int:
        parts = extract_prompt_parts(
            3, MANIFEST, memory_dir=MEMORY_DIR, team=builder.combined, host_memory=host_memory
        )
        return len(parts.instructions.encode())

    # What the run is about and what memory holds are the same in both; the how-to part
    # shrinks to near the ~1.5 KB of Claude Code's own fork prompt.
    assert instructions(True) * 4 < instructions(False)
    assert instructions(True) < 1_500


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
