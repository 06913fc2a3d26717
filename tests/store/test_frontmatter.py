"""Memory files: lenient frontmatter parsing and exact formatting."""

from __future__ import annotations

import datetime
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
    assert parsed.frontmatter["name"] == datetime.date(2026, 3, 5)
    assert parsed.name == "2026-03-05"
    assert parsed.description == "42"
    assert parse_memory_file("---\nname: 1.5\ndescription: true\n---\n").description == "True"


def test_non_scalar_values_read_as_none() -> None:
    parsed = parse_memory_file("---\nname: [a, b]\ndescription: {k: v}\n---\n")
    assert parsed.name is None
    assert parsed.description is None
    assert parsed.frontmatter["name"] == ["a", "b"]


def test_invalid_date_falls_back_instead_of_crashing() -> None:
    parsed = parse_memory_file("---\nname: 2024-13-45\n---\n")
    assert parsed.name == "2024-13-45"
    assert parsed.malformed


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
        name="n", description="d", type=None, body="b\n\n\n", extra={"tags": ["x"], "n": "yes"}
    )
    assert text == "---\nname: n\ndescription: d\ntags:\n- x\nn: 'yes'\n---\n\nb\n"
    parsed = parse_memory_file(text)
    assert parsed.type is None
    assert parsed.frontmatter["n"] == "yes"
    assert not parsed.malformed


def test_format_rejects_unknown_type_and_clashing_extra() -> None:
    with pytest.raises(UsageError):
        format_memory_file(name="n", description="d", type="nope", body="")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        format_memory_file(name="n", description="d", type=None, body="", extra={"name": "x"})
    with pytest.raises(UsageError):
        format_memory_file(name="n", description="d", type=None, body="", extra={"o": object()})


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
    )
    parsed = parse_memory_file(text)
    assert parsed.name == name
    assert parsed.description == description
    assert parsed.type == kind
    assert parsed.body == _normalised(body)
    assert not parsed.malformed
    assert text.endswith("\n")
