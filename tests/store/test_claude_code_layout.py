"""Memory files as Claude Code 2.1.332 writes them: read, written and stamped byte for byte.

The fixtures under ``fixtures/`` were recorded from the Claude Code binary bundled in
claude-agent-sdk 0.2.189 (``claude -p`` against memdir's FakeAnthropicServer, its model
calling Write and Edit on files in the memory directory): ``claude_code_writes.json``
holds what was written and what Claude Code stored, ``claude_code_scalars.json`` how its
serialiser printed some thousand description values and fifteen names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdir.errors import UsageError
from memdir.store import (
    MemoryHeader,
    find_links,
    format_manifest,
    format_memory_file,
    memory_slug,
    parse_memory_file,
    replace_links,
    scan_memory_files,
    stamp_memory_file,
    type_of_file_name,
)

FIXTURES = Path(__file__).parent / "fixtures"
SESSION = "3f2c9a4e-7b1d-4c8e-9a55-1d2e3f4a5b6c"
NOW = "2026-12-03T07:22:21.313Z"
LATER = "2026-12-04T09:00:00.000Z"


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
    return data


WRITES = _load("claude_code_writes.json")["cases"]
SCALARS = _load("claude_code_scalars.json")


# --- what Claude Code stored, replayed ------------------------------------------------------


@pytest.mark.parametrize("case", WRITES, ids=[c["file"] for c in WRITES])
def test_stamping_matches_claude_code_byte_for_byte(case: dict[str, Any]) -> None:
    stored = stamp_memory_file(
        case["written"],
        session_id=case["session_id"],
        now=case["modified"] or NOW,
        team=case["file"].startswith("team/"),
    )
    assert stored == case["stored"]


@pytest.mark.parametrize(
    "row", SCALARS["scalars"], ids=[repr(r["text"])[:40] for r in SCALARS["scalars"]]
)
def test_description_quoting_matches_claude_code(row: dict[str, str]) -> None:
    text = format_memory_file(name="n", description=row["text"], type="user", body="")
    assert text.split("\n")[2] == f"description: {row['written']}"
    assert parse_memory_file(text).description == row["text"]


@pytest.mark.parametrize("row", SCALARS["names"], ids=[repr(r["name"]) for r in SCALARS["names"]])
def test_name_slug_matches_claude_code(row: dict[str, str]) -> None:
    text = format_memory_file(name=row["name"], description="d", type="user", body="")
    assert text.split("\n")[1] == f"name: {row['written']}"


# --- the layout, exactly ------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    name: str
    description: str
    body: str
    expected_head: str
    expected_body: str


@pytest.mark.parametrize(
    "case",
    [
        Layout(
            "Always use polars, never pandas",
            "The user wants polars for dataframes",
            "Use polars.\n\n**Why:** speed.",
            "name: always-use-polars-never-pandas\n"
            "description: The user wants polars for dataframes\n",
            "Use polars.\n\n**Why:** speed.\n",
        ),
        Layout(
            "Deploy: v2.3 #1",
            'Note: "quoted", it\'s # not a comment',
            "",
            'name: deploy-v2-3-1\ndescription: "Note: \\"quoted\\", it\'s # not a comment"\n',
            "",
        ),
        Layout(
            "Café crème préféré",
            "Préfère les tirets — toujours ✓",
            "\n\nBody after blank lines\n\n\n",
            "name: caf-cr-me-pr-f-r\ndescription: Préfère les tirets — toujours ✓\n",
            "Body after blank lines\n",
        ),
        Layout("2026", "yes", "x", 'name: "2026"\ndescription: "yes"\n', "x\n"),
        Layout("日本語", "- [ ] todo", "x", 'name: ""\ndescription: "- [ ] todo"\n', "x\n"),
        Layout("n", "two\nlines\tand\u2028more", "x", 'name: "n"\n', "x\n"),
    ],
    ids=["example", "yaml-special", "non-ascii", "keywords", "no-slug", "escapes"],
)
def test_current_layout_is_claude_codes(case: Layout) -> None:
    text = format_memory_file(
        name=case.name,
        description=case.description,
        type="feedback",
        body=case.body,
        origin_session_id=SESSION,
        modified=NOW,
    )
    metadata = (
        "metadata:\n"
        "  node_type: memory\n"
        "  type: feedback\n"
        f"  originSessionId: {SESSION}\n"
        f"  modified: {NOW}\n"
        "---\n"
        "\n"
    )
    if case.name == "n":  # the escapes case: check the description line on its own
        assert text.split("\n")[2] == 'description: "two\\nlines\\tand\\Lmore"'
        return
    assert text == f"---\n{case.expected_head}{metadata}{case.expected_body}"


def test_empty_description_and_unknown_stamps_are_left_out() -> None:
    text = format_memory_file(name="n-1", description="", type=None, body="b")
    assert text == "---\nname: n-1\nmetadata:\n  node_type: memory\n---\n\nb\n"


def test_extra_keys_go_under_metadata_in_javascript_order() -> None:
    text = format_memory_file(
        name="x",
        description="d",
        type="project",
        body="",
        extra={"tags": ["a", "b c"], "nested": {"y": 1, "z": None}, "2": "two", "ratio": 2.0},
        modified="m",
    )
    assert text == (
        "---\nname: x\ndescription: d\nmetadata:\n"
        '  "2": two\n'  # an array-index key comes first, as in a JavaScript object
        "  node_type: memory\n  type: project\n"
        "  tags:\n    - a\n    - b c\n"
        '  nested:\n    "y": 1\n    z: null\n'
        "  ratio: 2\n"
        "  modified: m\n---\n\n"
    )


def test_stamps_given_replace_those_in_extra_in_place() -> None:
    text = format_memory_file(
        name="x",
        description="d",
        type="user",
        body="",
        extra={"originSessionId": "old", "modified": "then", "kept": "k"},
        modified=LATER,
    )
    assert "  originSessionId: old\n  modified: " + LATER + "\n  kept: k\n" in text


def test_a_value_the_serialiser_cannot_write_is_refused() -> None:
    with pytest.raises(UsageError):
        format_memory_file(name="x", description="d", type=None, body="", extra={"s": {1, 2}})


# --- the slug rule ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("Always use polars, never pandas", "always-use-polars-never-pandas"),
        ("already-a-slug", "already-a-slug"),
        ("snake_case_name", "snake_case_name"),  # only [a-z0-9_-]: kept as it is
        ("snake_case with space", "snake-case-with-space"),  # otherwise "_" separates too
        ("Already-A-Slug", "already-a-slug"),
        ("What's the API's rate-limit?!", "what-s-the-api-s-rate-limit"),
        ("  --Leading and trailing--  ", "leading-and-trailing"),
        ("Deploy v2.3 on 2026-03-05", "deploy-v2-3-on-2026-03-05"),
        ("Straße Größe", "stra-e-gr-e"),
        ("Ship it 🚀 now", "ship-it-now"),
        ("日本語のメモ", ""),
        ("", ""),
        ("x" * 300, "x" * 300),  # no length limit
    ],
)
def test_slug_rule(name: str, slug: str) -> None:
    assert memory_slug(name) == slug
    assert memory_slug(slug) == slug


# --- reading Claude Code's files ------------------------------------------------------------

CLAUDE_CODE_FILE = f"""---
name: always-use-polars-never-pandas
description: The user wants polars for dataframes
metadata:
  node_type: memory
  type: feedback
  originSessionId: {SESSION}
  modified: {NOW}
---

Use polars. See [[dataframe-style]] and [[Deploy day|the deploy memory]].
"""


def test_a_claude_code_file_reads_whole() -> None:
    parsed = parse_memory_file(CLAUDE_CODE_FILE)
    assert parsed.type == "feedback"
    assert parsed.name == "always-use-polars-never-pandas"
    assert parsed.description == "The user wants polars for dataframes"
    assert parsed.origin_session_id == SESSION
    assert parsed.modified == NOW  # text, not a datetime
    assert dict(parsed.metadata) == {
        "node_type": "memory",
        "type": "feedback",
        "originSessionId": SESSION,
        "modified": NOW,
    }
    assert dict(parsed.extra_metadata) == {"originSessionId": SESSION, "modified": NOW}
    assert parsed.links == ("dataframe-style", "Deploy day")
    assert not parsed.malformed


@pytest.mark.parametrize(
    ("frontmatter", "kind"),
    [
        ("type: user\nmetadata:\n  type: feedback", "feedback"),  # metadata wins
        ("metadata:\n  type: project\ntype: user", "project"),
        ("type: user\nmetadata:\n  type: opinion", None),  # even when it is not a type
        ("type: user\nmetadata:\n  other: 1", "user"),
        ("type: user\nmetadata: [a, b]", "user"),  # not a map: ignored
        ("type: reference\nmetadata: null", "reference"),
        ("metadata:\n  type: null\ntype: user", None),
        ("metadata: {}", None),
    ],
)
def test_type_precedence(frontmatter: str, kind: str | None) -> None:
    assert parse_memory_file(f"---\nname: n\n{frontmatter}\n---\n").type == kind


def test_name_and_description_fall_back_to_metadata() -> None:
    parsed = parse_memory_file("---\nmetadata:\n  name: inner\n  description: d\n---\n")
    assert (parsed.name, parsed.description) == ("inner", "d")
    outer = parse_memory_file("---\nname: outer\nmetadata:\n  name: inner\n---\n")
    assert outer.name == "outer"


def test_the_manifest_shows_the_type_claude_code_wrote(tmp_path: Path) -> None:
    (tmp_path / "cc.md").write_text(CLAUDE_CODE_FILE, encoding="utf-8")
    (tmp_path / "old.md").write_text("---\nname: Old\ndescription: o\ntype: user\n---\nb\n")
    (tmp_path / "both.md").write_text(
        "---\nname: b\ntype: user\nmetadata:\n  type: project\n---\nb\n", encoding="utf-8"
    )
    headers = {h.filename: h for h in scan_memory_files(tmp_path)}
    assert {f: h.type for f, h in headers.items()} == {
        "cc.md": "feedback",
        "old.md": "user",
        "both.md": "project",
    }
    line = format_manifest([headers["cc.md"]])
    assert line.startswith("- [feedback] cc.md (")
    assert line.endswith("): The user wants polars for dataframes")
    assert isinstance(headers["cc.md"], MemoryHeader)


# --- stamping -------------------------------------------------------------------------------

MEMDIR_2_1_88 = """---
name: Always use polars, never pandas
description: The user wants polars for dataframes
type: feedback
---

Use polars.
"""


def test_a_2_1_88_file_is_migrated() -> None:
    stored = stamp_memory_file(MEMDIR_2_1_88, session_id=SESSION, now=NOW)
    assert stored == CLAUDE_CODE_FILE.replace(
        "Use polars. See [[dataframe-style]] and [[Deploy day|the deploy memory]].", "Use polars."
    )


def test_a_stamped_file_only_changes_its_modified_line() -> None:
    stored = stamp_memory_file(CLAUDE_CODE_FILE, session_id="another-session", now=LATER)
    assert stored == CLAUDE_CODE_FILE.replace(NOW, LATER)


def test_memdirs_output_is_a_fixed_point_of_claude_codes_rewrite() -> None:
    text = format_memory_file(
        name="Always use polars, never pandas",
        description='It\'s "polars": #1',
        type="feedback",
        body="Use polars.\n\n  indented line",
        extra={"tags": ["x"], "n": 3},
        origin_session_id=SESSION,
        modified=NOW,
    )
    assert stamp_memory_file(text, session_id="other", now=LATER) == text.replace(NOW, LATER)
    # Without stamps, Claude Code's rewrite is memdir's own layout with stamps added.
    bare = format_memory_file(name="x", description="d", type="user", body="b")
    stamped = format_memory_file(
        name="x", description="d", type="user", body="b", origin_session_id=SESSION, modified=NOW
    )
    assert stamp_memory_file(bare, session_id=SESSION, now=NOW) == stamped


def test_an_unknown_session_writes_no_origin() -> None:
    stored = stamp_memory_file(MEMDIR_2_1_88, session_id=None, now=NOW)
    assert "originSessionId" not in stored
    assert f"  modified: {NOW}\n" in stored
    # The next writer that knows its session claims the memory; memdir's next write
    # without one only moves the time.
    again = stamp_memory_file(stored, session_id=None, now=LATER)
    assert again == stored.replace(NOW, LATER)
    claimed = stamp_memory_file(stored, session_id=SESSION, now=LATER)
    assert parse_memory_file(claimed).origin_session_id == SESSION


def test_a_missing_name_and_type_come_from_what_the_caller_says_of_the_file() -> None:
    text = "---\ndescription: pytest, plain asserts\n---\n\nUse pytest.\n"
    stored = stamp_memory_file(
        text, session_id=SESSION, now=NOW, default_name="feedback-testing", default_type="feedback"
    )
    parsed = parse_memory_file(stored)
    assert (parsed.name, parsed.type) == ("feedback-testing", "feedback")
    assert stored.index("  type: feedback") < stored.index("  originSessionId:")
    # What the file says wins over what its name says.
    named = "---\nname: Testing\ndescription: d\ntype: user\n---\n\nx\n"
    again = stamp_memory_file(
        named, session_id=SESSION, now=NOW, default_name="feedback-testing", default_type="feedback"
    )
    assert (parse_memory_file(again).name, parse_memory_file(again).type) == ("testing", "user")
    # Empty ones are no answer; and a file not written again in the current layout (a
    # team file, one a rewrite could harm) still gets them, as lines of its own.
    empty = '---\nname: ""\ndescription: d\ntype: ""\n---\n\nx\n'
    filled = stamp_memory_file(
        empty, session_id=SESSION, now=NOW, default_name="feedback-z", default_type="feedback"
    )
    assert (parse_memory_file(filled).name, parse_memory_file(filled).type) == (
        "feedback-z",
        "feedback",
    )
    for team, text in ((True, "---\ndescription: d\n---\n\nx\n"), (False, HAZARD)):
        kept = stamp_memory_file(
            text, session_id=SESSION, now=NOW, team=team, default_name="a-b", default_type="user"
        )
        assert (parse_memory_file(kept).name, parse_memory_file(kept).type) == ("a-b", "user")
        assert kept.endswith(text.split("---\n", 2)[2])  # the rest as it was


HAZARD = "---\ndescription: use `--- ` separators\n---\n\nx\n"


@pytest.mark.parametrize(
    ("filename", "kind"),
    [
        ("feedback_testing.md", "feedback"),
        ("team/project_freeze.md", "project"),
        ("user.md", None),
        ("notes_testing.md", None),
        ("Feedback_x.md", None),
    ],
)
def test_the_type_a_file_name_starts_with(filename: str, kind: str | None) -> None:
    assert type_of_file_name(filename) == kind


@pytest.mark.parametrize(
    "text",
    [
        "Just text, no frontmatter.\n",
        "\ufeff" + MEMDIR_2_1_88,  # Claude Code's pattern does not see past a BOM
        "",
        "---\nnever closed\n",
    ],
    ids=["plain", "bom", "empty", "unclosed"],
)
def test_text_without_frontmatter_is_left_alone(text: str) -> None:
    assert stamp_memory_file(text, session_id=SESSION, now=NOW) == text


def test_team_files_only_get_a_modified_line() -> None:
    stored = stamp_memory_file(MEMDIR_2_1_88, session_id=SESSION, now=NOW, team=True)
    assert stored == MEMDIR_2_1_88.replace("type: feedback\n", f"type: feedback\nmodified: {NOW}\n")


def test_crlf_files_get_an_lf_header_and_keep_their_body() -> None:
    text = "---\r\nname: Crlf\r\ndescription: e\r\ntype: user\r\n---\r\n\r\nLine1\r\nLine2\r\n"
    stored = stamp_memory_file(text, session_id=SESSION, now=NOW)
    assert stored.startswith("---\nname: crlf\ndescription: e\nmetadata:\n")
    assert stored.endswith("---\n\nLine1\r\nLine2\r\n")


@pytest.mark.parametrize(
    "text",
    [
        "---\nname: n\ndescription: d\ntags: [a, b] # kept\n---\n\nb\n",  # a comment to keep
        '---\nname: n\ndescription: "a --- b"\n---\n\nb\n',  # "---" ends the loose split
    ],
    ids=["comment", "dashes"],
)
def test_a_risky_rewrite_only_moves_the_time(text: str) -> None:
    stored = stamp_memory_file(text, session_id=SESSION, now=NOW)
    assert "node_type" not in stored
    assert stored in (text, text.replace("\n---\n\nb", f"\nmodified: {NOW}\n---\n\nb"))


def test_an_existing_modified_line_keeps_its_comment_and_place() -> None:
    text = "---\nname: s\nmodified: old # when\noriginSessionId: s1\ndescription: d\n---\n\nb\n"
    stored = stamp_memory_file(text, session_id=SESSION, now=NOW)
    assert stored == text.replace("modified: old # when", f"modified: {NOW} # when")


def test_modified_is_added_at_the_end_of_the_metadata_block() -> None:
    text = "---\nname: s\nmetadata:\n    type: user\n    originSessionId: s1\nlast: 1\n---\n\nb\n"
    stored = stamp_memory_file(text, session_id=SESSION, now=NOW)
    assert stored == text.replace("s1\n", f"s1\n    modified: {NOW}\n")


# --- links ---------------------------------------------------------------------------------


def test_find_links() -> None:
    body = "See [[a-b]], [[ Spaced Name ]], [[c|label]], [[d#part]], [[a-b]] and [[]] or [x]."
    assert find_links(body) == ("a-b", "Spaced Name", "c", "d")


def test_replace_links_by_slug_keeps_labels() -> None:
    body = "[[Old Name]] and [[old-name|see this]] and [[other]] and [[old-name#x]]"
    assert replace_links(body, {"old-name": "new-name"}) == (
        "[[new-name]] and [[new-name|see this]] and [[other]] and [[new-name#x]]"
    )
    assert replace_links(body, {}) == body


# --- properties of the current layout -------------------------------------------------------

_TRICKY = st.sampled_from(
    ["", "yes", "- x", "a: b", "#c", "1e3", "+1", "0x1F", "2026-03-05", "---", "'", '"', "\t"]
)
_VALUE = _TRICKY | st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=20)
_KIND = st.none() | st.sampled_from(["user", "feedback", "project", "reference"])
_EXTRA_KEY = st.from_regex(r"[a-zA-Z0-9][a-zA-Z0-9_]{0,7}", fullmatch=True).filter(
    lambda key: key not in ("name", "description", "type", "node_type", "metadata")
)
_EXTRA = st.dictionaries(
    _EXTRA_KEY,
    _VALUE | st.integers() | st.booleans() | st.lists(_VALUE, max_size=3),
    max_size=4,
)


@settings(deadline=None, max_examples=200)
@given(name=_VALUE, description=_VALUE, kind=_KIND, body=_VALUE, extra=_EXTRA)
def test_rewriting_what_was_parsed_gives_the_same_file(
    name: str, description: str, kind: Any, body: str, extra: dict[str, Any]
) -> None:
    text = format_memory_file(
        name=name,
        description=description,
        type=kind,
        body=body,
        extra=extra,
        origin_session_id=SESSION,
        modified=NOW,
    )
    parsed = parse_memory_file(text)
    assert not parsed.malformed
    assert parsed.type == kind
    assert dict(parsed.extra_metadata) == {**extra, "originSessionId": SESSION, "modified": NOW}
    again = format_memory_file(
        name=parsed.name or "",
        description=parsed.description or "",
        type=parsed.type,
        body=parsed.body,
        extra=parsed.extra_metadata,
    )
    assert again == text
    # And Claude Code's next write of it changes the time alone, unless a value holds
    # "---": Claude Code's frontmatter pattern stops there, and it leaves the file alone.
    if "---" in text[4 : text.index("\n---\n")]:
        assert stamp_memory_file(text, session_id="other", now=LATER) == text
        return
    assert stamp_memory_file(text, session_id="other", now=LATER) == text.replace(
        f"  modified: {NOW}\n", f"  modified: {LATER}\n"
    )
