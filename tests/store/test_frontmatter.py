"""Memory files: lenient frontmatter parsing and exact formatting."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdir.errors import UsageError
from memdir.store._frontmatter import (
    MEMORY_TYPES,
    MemoryFile,
    format_memory_file,
    memory_slug,
    parse_memory_file,
)

VALID = """---
name: Testing policy
description: Integration tests hit a real database, never mocks
type: feedback
---

Use the real database in integration tests.
**Why:** a mocked migration hid a broken schema last quarter.
"""


def test_valid_file() -> None:
    parsed = parse_memory_file(VALID)
    assert parsed.name == "Testing policy"
    assert parsed.description == "Integration tests hit a real database, never mocks"
    assert parsed.type == "feedback"
    assert parsed.body.startswith("Use the real database")
    assert parsed.body.endswith("last quarter.\n")
    assert not parsed.malformed
    assert dict(parsed.frontmatter) == {
        "name": "Testing policy",
        "description": "Integration tests hit a real database, never mocks",
        "type": "feedback",
    }


def test_memory_types_are_claude_codes() -> None:
    assert MEMORY_TYPES == ("user", "feedback", "project", "reference")


def test_frontmatter_is_read_only() -> None:
    parsed = parse_memory_file(VALID)
    with pytest.raises(TypeError):
        parsed.frontmatter["name"] = "changed"  # type: ignore[index]


def test_colon_in_description_is_retried_with_quotes() -> None:
    parsed = parse_memory_file("---\nname: n\ndescription: note: has colon\ntype: user\n---\nb\n")
    assert parsed.description == "note: has colon"
    assert parsed.name == "n"
    assert parsed.type == "user"
    assert parsed.malformed


def test_bad_yaml_retry_keeps_already_quoted_and_block_values() -> None:
    text = '---\nname: "quoted: fine"\ndescription: a: b\nnotes: |\n  line one\n  line two\n---\n'
    parsed = parse_memory_file(text)
    assert parsed.name == "quoted: fine"
    assert parsed.description == "a: b"
    assert parsed.frontmatter["notes"] == "line one\nline two\n"
    assert parsed.malformed


def test_line_wise_fallback_when_quoting_is_not_enough() -> None:
    # The unclosed flow sequence stays broken after quoting (it is not a key line),
    # so only the line-wise reading recovers the keys.
    text = "---\nname: 'kept'\n  [broken\ndescription: d: e\n---\nbody"
    parsed = parse_memory_file(text)
    assert parsed.name == "kept"
    assert parsed.description == "d: e"
    assert parsed.body == "body"
    assert parsed.malformed


def test_hopeless_yaml_gives_empty_malformed_frontmatter() -> None:
    parsed = parse_memory_file("---\n[unclosed\n{{{ nothing: here\n---\nthe body\n")
    assert dict(parsed.frontmatter) == {}
    assert parsed.malformed
    assert parsed.name is None
    assert parsed.description is None
    assert parsed.type is None
    assert parsed.body == "the body\n"


def test_non_mapping_yaml_is_not_frontmatter() -> None:
    parsed = parse_memory_file("---\n- just\n- a list\n---\nbody")
    assert dict(parsed.frontmatter) == {}
    assert parsed.malformed


@pytest.mark.parametrize("value", ["bogus", "User", "' user'", "[user]", "null", "3"])
def test_unknown_type_is_none(value: str) -> None:
    parsed = parse_memory_file(f"---\nname: n\ntype: {value}\n---\n")
    assert parsed.type is None
    assert parsed.name == "n"


@pytest.mark.parametrize("kind", MEMORY_TYPES)
def test_each_known_type(kind: str) -> None:
    assert parse_memory_file(f"---\ntype: {kind}\n---\n").type == kind


def test_missing_fence_means_no_frontmatter() -> None:
    text = "name: not frontmatter\n\nJust a note.\n"
    parsed = parse_memory_file(text)
    assert dict(parsed.frontmatter) == {}
    assert parsed.body == text
    assert not parsed.malformed


def test_unclosed_fence_means_no_frontmatter() -> None:
    text = "---\nname: n\ndescription: d\n\nno closing fence here\n"
    parsed = parse_memory_file(text)
    assert dict(parsed.frontmatter) == {}
    assert parsed.body == text
    assert parsed.name is None
    assert not parsed.malformed


def test_empty_frontmatter_block() -> None:
    parsed = parse_memory_file("---\n---\nbody")
    assert dict(parsed.frontmatter) == {}
    assert parsed.body == "body"
    assert not parsed.malformed


def test_crlf_and_fence_trailing_spaces() -> None:
    text = "---  \r\nname: n\r\ndescription: d\r\ntype: project\r\n--- \t\r\n\r\nbody\r\n"
    parsed = parse_memory_file(text)
    assert (parsed.name, parsed.description, parsed.type) == ("n", "d", "project")
    assert parsed.body == "body\r\n"
    assert not parsed.malformed


def test_bom_is_tolerated() -> None:
    parsed = parse_memory_file("\ufeff" + VALID)
    assert parsed.name == "Testing policy"
    assert parse_memory_file("\ufeffplain").body == "plain"


def test_fence_must_be_the_first_line() -> None:
    parsed = parse_memory_file("\n---\nname: n\n---\n")
    assert dict(parsed.frontmatter) == {}


def test_only_a_bare_fence_line_closes() -> None:
    parsed = parse_memory_file("---\nname: n\ndescription: a --- b\n----\n---\nbody")
    # "----" is not a fence, so it is part of the block: a plain scalar continuation.
    assert parsed.name == "n"
    assert parsed.body == "body"


def test_non_string_scalars_are_coerced() -> None:
    text = "---\nname: 2026-03-05\ndescription: 42\ntype: user\nflag: yes\n---\n"
    parsed = parse_memory_file(text)
    # YAML 1.2, as Claude Code reads it: a date and "yes" stay text.
    assert parsed.frontmatter["name"] == "2026-03-05"
    assert parsed.frontmatter["flag"] == "yes"
    assert parsed.name == "2026-03-05"
    assert parsed.description == "42"
    assert parse_memory_file("---\nname: 1.5\ndescription: true\n---\n").description == "True"


@pytest.mark.parametrize(
    ("value", "read"),
    [
        ("1_000", "1_000"),
        ("1:30", "1:30"),
        ("0b101", "0b101"),
        ("on", "on"),
        ("017", 17),
        ("09", 9),
        ("0o17", 15),
        ("0x1F", 31),
        ("1e3", 1000.0),
        ("+.inf", float("inf")),
        ("~", None),
        ("TRUE", True),
        ("<<", "<<"),
    ],
)
def test_plain_scalars_resolve_by_yaml_1_2(value: str, read: object) -> None:
    parsed = parse_memory_file(f"---\nname: n\nk: {value}\n---\n")
    assert parsed.frontmatter["k"] == read
    assert type(parsed.frontmatter["k"]) is type(read)
    assert not parsed.malformed


def test_a_comment_after_a_plain_value_is_part_of_it() -> None:
    # Claude Code reads a top-level plain value whole; YAML alone would stop at " #".
    parsed = parse_memory_file("---\nname: n\ndescription: use uv # not pip\nk: #x\n---\n")
    assert parsed.description == "use uv # not pip"
    assert parsed.frontmatter["k"] == "#x"
    assert not parsed.malformed
    quoted = parse_memory_file('---\ndescription: "kept" # a real comment\n---\n')
    assert quoted.description == "kept"


def test_characters_libyaml_refuses_still_read() -> None:
    # Claude Code writes U+0080 and U+FFFE raw, and reads "\\ud83d\\ude80" as one emoji.
    text = '---\nname: n\ndescription: a\x80b\ufffe\nk: "ship \\ud83d\\ude80"\n---\n'
    parsed = parse_memory_file(text)
    assert parsed.description == "a\x80b\ufffe"
    assert parsed.frontmatter["k"] == "ship \U0001f680"
    assert not parsed.malformed


def test_non_scalar_values_read_as_none() -> None:
    parsed = parse_memory_file("---\nname: [a, b]\ndescription: {k: v}\n---\n")
    assert parsed.name is None
    assert parsed.description is None
    assert parsed.frontmatter["name"] == ["a", "b"]


def test_an_impossible_date_is_plain_text() -> None:
    parsed = parse_memory_file("---\nname: 2024-13-45\n---\n")
    assert parsed.name == "2024-13-45"
    assert not parsed.malformed


def test_python_tags_are_not_executed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = f'---\nname: !!python/object/apply:os.system ["touch {marker}"]\ntype: user\n---\nb'
    parsed = parse_memory_file(text)
    assert not marker.exists()
    assert parsed.type == "user"
    assert isinstance(parsed.name, str)
    assert parsed.name.startswith("!!python/object")


def test_format_layout() -> None:
    text = format_memory_file(
        name="User role",
        description="Data scientist focused on logging",
        type="user",
        body="The user is a data scientist.",
        origin_session_id="3f2c9a4e-7b1d-4c8e-9a55-1d2e3f4a5b6c",
        modified="2026-03-05T14:03:22.120Z",
    )
    assert text == (
        "---\n"
        "name: user-role\n"
        "description: Data scientist focused on logging\n"
        "metadata:\n"
        "  node_type: memory\n"
        "  type: user\n"
        "  originSessionId: 3f2c9a4e-7b1d-4c8e-9a55-1d2e3f4a5b6c\n"
        "  modified: 2026-03-05T14:03:22.120Z\n"
        "---\n"
        "\n"
        "The user is a data scientist.\n"
    )
    parsed = parse_memory_file(text)
    assert (parsed.name, parsed.type) == ("user-role", "user")
    assert parsed.origin_session_id == "3f2c9a4e-7b1d-4c8e-9a55-1d2e3f4a5b6c"
    assert parsed.modified == "2026-03-05T14:03:22.120Z"


def test_format_layout_2_1_88() -> None:
    text = format_memory_file(
        name="User role",
        description="Data scientist focused on logging",
        type="user",
        body="The user is a data scientist.",
        format="2.1.88",
    )
    assert text == (
        "---\n"
        "name: User role\n"
        "description: Data scientist focused on logging\n"
        "type: user\n"
        "---\n"
        "\n"
        "The user is a data scientist.\n"
    )


def test_format_without_type_and_with_extra() -> None:
    text = format_memory_file(
        name="n",
        description="d",
        type=None,
        body="b\n\n\n",
        extra={"tags": ["x"], "n": "yes", "gone": None},
    )
    assert text == (
        '---\nname: "n"\ndescription: d\nmetadata:\n  node_type: memory\n  tags:\n    - x\n'
        '  "n": "yes"\n---\n\nb\n'
    )
    parsed = parse_memory_file(text)
    assert parsed.type is None
    assert parsed.metadata["n"] == "yes"
    assert "gone" not in parsed.metadata
    assert not parsed.malformed


def test_format_without_type_and_with_extra_2_1_88() -> None:
    text = format_memory_file(
        name="n",
        description="d",
        type=None,
        body="b\n\n\n",
        extra={"tags": ["x"], "n": "yes"},
        format="2.1.88",
    )
    assert text == "---\nname: n\ndescription: d\ntags:\n- x\nn: 'yes'\n---\n\nb\n"
    parsed = parse_memory_file(text)
    assert parsed.type is None
    assert parsed.frontmatter["n"] == "yes"
    assert not parsed.malformed


def test_2_1_88_quotes_what_yaml_1_2_would_read_otherwise() -> None:
    # Plain text under PyYAML's YAML 1.1, a number under YAML 1.2: written quoted.
    text = format_memory_file(name="1e3", description="0o17", type=None, body="", format="2.1.88")
    assert text == '---\nname: "1e3"\ndescription: "0o17"\n---\n\n'
    parsed = parse_memory_file(text)
    assert (parsed.name, parsed.description) == ("1e3", "0o17")


def test_format_rejects_unknown_type_and_clashing_extra() -> None:
    with pytest.raises(UsageError):
        format_memory_file(name="n", description="d", type="nope", body="")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        format_memory_file(name="n", description="d", type=None, body="", extra={"name": "x"})
    with pytest.raises(UsageError):
        format_memory_file(name="n", description="d", type=None, body="", extra={"o": object()})
    for key in ("node_type", "metadata"):
        with pytest.raises(UsageError):
            format_memory_file(name="n", description="d", type=None, body="", extra={key: "x"})
    with pytest.raises(UsageError):
        format_memory_file(name="n", description="d", type=None, body="", format="v3")  # type: ignore[arg-type]


@dataclass(frozen=True)
class Tricky:
    value: str


@pytest.mark.parametrize(
    "case",
    [
        Tricky("note: has colon"),
        Tricky('"quoted"'),
        Tricky("'single'"),
        Tricky("- looks like a list"),
        Tricky("# looks like a comment"),
        Tricky("two\nlines"),
        Tricky("ünïcødé ✓ 🧠"),
        Tricky(""),
        Tricky("  padded  "),
        Tricky("---"),
        Tricky("yes"),
        Tricky("2026-03-05"),
        Tricky("null"),
        Tricky("a\u2028b\x85c\ufeffd\x00e"),
    ],
    ids=repr,
)
def test_tricky_strings_round_trip(case: Tricky) -> None:
    text = format_memory_file(name=case.value, description=case.value, type="project", body="b")
    parsed = parse_memory_file(text)
    assert parsed.name == memory_slug(case.value)
    # An empty description is left out, as Claude Code leaves it out.
    assert parsed.description == (case.value or None)
    assert parsed.type == "project"
    assert not parsed.malformed
    old = format_memory_file(
        name=case.value, description=case.value, type="project", body="b", format="2.1.88"
    )
    parsed = parse_memory_file(old)
    assert parsed.name == case.value
    assert parsed.description == case.value
    assert not parsed.malformed


_TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]))


@settings(deadline=None)
@given(_TEXT)
def test_parse_never_raises(text: str) -> None:
    assert isinstance(parse_memory_file(text), MemoryFile)


@settings(deadline=None)
@given(st.lists(st.sampled_from(["---", "name: x", "a: b: c", "  - y", "[", "'", "!!x", "\r"])))
def test_parse_never_raises_on_frontmatter_like_text(parts: list[str]) -> None:
    assert isinstance(parse_memory_file("---\n" + "\n".join(parts)), MemoryFile)


def _normalised(body: str) -> str:
    core = body.strip("\r\n")
    return core + "\n" if core else ""


@settings(deadline=None)
@given(
    name=_TEXT,
    description=_TEXT,
    kind=st.none() | st.sampled_from(MEMORY_TYPES),
    body=_TEXT,
)
def test_format_then_parse_round_trips(
    name: str, description: str, kind: str | None, body: str
) -> None:
    text = format_memory_file(
        name=name,
        description=description,
        type=kind,  # type: ignore[arg-type]
        body=body,
        origin_session_id=description,
        modified=name,
    )
    parsed = parse_memory_file(text)
    assert parsed.name == memory_slug(name)
    assert parsed.description == (description or None)
    assert parsed.type == kind
    assert parsed.metadata["originSessionId"] == description
    assert parsed.metadata["modified"] == name
    assert parsed.body == _normalised(body)
    assert not parsed.malformed
    assert text.endswith("\n")


@settings(deadline=None)
@given(
    name=_TEXT,
    description=_TEXT,
    kind=st.none() | st.sampled_from(MEMORY_TYPES),
    body=_TEXT,
)
def test_format_then_parse_round_trips_2_1_88(
    name: str, description: str, kind: str | None, body: str
) -> None:
    text = format_memory_file(
        name=name,
        description=description,
        type=kind,  # type: ignore[arg-type]
        body=body,
        format="2.1.88",
    )
    parsed = parse_memory_file(text)
    assert parsed.name == name
    assert parsed.description == description
    assert parsed.type == kind
    assert parsed.body == _normalised(body)
    assert not parsed.malformed
    assert text.endswith("\n")
