"""The MEMORY.md load caps and the noise stripped before loading."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from memdir.store._entrypoint import (
    ENTRYPOINT_NAME,
    MAX_ENTRYPOINT_CHARS,
    MAX_ENTRYPOINT_LINES,
    EntrypointContent,
    strip_entrypoint_noise,
    truncate_entrypoint,
)

ADVICE = (
    "Read MEMORY.md for the rest, and keep the index short: one line of under ~200"
    " characters per entry, with the details in the topic files."
)


def _index(lines: int, width: int = 40) -> str:
    """``lines`` index entries, each exactly ``width`` characters long."""
    entries = []
    for i in range(lines):
        entry = f"- [Entry {i}](entry_{i}.md) — hook "
        entries.append((entry + "x" * width)[:width])
    return "\n".join(entries)


def _split_warning(result: EntrypointContent) -> tuple[str, str]:
    kept, separator, warning = result.content.rpartition("\n\n")
    assert separator, "no blank line before the warning"
    return kept, warning


def test_constants() -> None:
    assert ENTRYPOINT_NAME == "MEMORY.md"
    assert MAX_ENTRYPOINT_LINES == 200
    assert MAX_ENTRYPOINT_CHARS == 25_000


def test_small_index_is_unchanged() -> None:
    text = "- [Role](user_role.md) — data scientist\n- [Tests](feedback_tests.md) — real DB\n"
    result = truncate_entrypoint(text)
    assert result == EntrypointContent(
        content=text.strip(),
        line_count=2,
        byte_count=len(text.strip()),
        was_line_truncated=False,
        was_byte_truncated=False,
    )


def test_surrounding_whitespace_is_trimmed() -> None:
    result = truncate_entrypoint("\n\n   - [A](a.md) — hook\n- [B](b.md)  \n\n\t\n")
    assert result.content == "- [A](a.md) — hook\n- [B](b.md)"
    assert result.line_count == 2
    assert result.byte_count == len(result.content)


def test_empty_index() -> None:
    result = truncate_entrypoint("  \n\n ")
    assert result.content == ""
    assert result.line_count == 0
    assert result.byte_count == 0
    assert not result.was_line_truncated
    assert not result.was_byte_truncated


def test_exactly_200_lines_is_unchanged() -> None:
    text = _index(200)
    result = truncate_entrypoint(text)
    assert result.content == text
    assert result.line_count == 200
    assert not result.was_line_truncated
    assert not result.was_byte_truncated


def test_201_lines_fires_the_line_cap() -> None:
    text = _index(201)
    result = truncate_entrypoint(text)
    kept, warning = _split_warning(result)
    assert kept == _index(200)
    # How many lines were cut, from which line (quoted), and where to read them.
    assert warning == (
        "> WARNING: MEMORY.md has 201 lines, over the 200-line limit, so only part of it"
        " was loaded: 1 of its 201 lines was left out, from line 201"
        ' ("- [Entry 200](entry_200.md) — hook xxxxx") on. ' + ADVICE
    )
    assert result.line_count == 201
    assert result.byte_count == len(text)
    assert result.was_line_truncated
    assert not result.was_byte_truncated


def test_char_cap_cuts_at_a_newline() -> None:
    text = _index(150, width=200)  # 150 * 200 + 149 newlines = 30,149 chars
    assert len(text) == 30_149
    result = truncate_entrypoint(text)
    kept, warning = _split_warning(result)
    # 124 full lines take 124 * 201 - 1 = 24,923 chars; the 125th would pass 25,000.
    assert kept == _index(124, width=200)
    assert len(kept) <= MAX_ENTRYPOINT_CHARS
    preview = _index(125, width=200).splitlines()[-1][:79] + "…"
    assert warning == (
        "> WARNING: MEMORY.md is 29.4 KB, over the 24.4 KB limit (its entries are too"
        " long), so only part of it was loaded: 26 of its 150 lines were left"
        f' out, from line 125 ("{preview}") on. ' + ADVICE
    )
    assert result.line_count == 150
    assert result.byte_count == 30_149
    assert not result.was_line_truncated
    assert result.was_byte_truncated


def test_both_caps_fire_and_are_both_named() -> None:
    text = _index(300, width=150)  # 300 * 151 - 1 = 45,299 chars; 200 lines = 30,199
    result = truncate_entrypoint(text)
    kept, warning = _split_warning(result)
    # After the line cap, 200 lines are still too long, so the char cap cuts further:
    # 165 lines take 165 * 151 - 1 = 24,914 chars.
    assert kept == _index(165, width=150)
    assert warning.startswith(
        "> WARNING: MEMORY.md has 300 lines and is 44.2 KB, over the 200-line and 24.4 KB"
        " limits (its entries are too long), so only part of it was loaded: 135"
        " of its 300 lines were left out, from line 166 ("
    )
    assert warning.endswith(ADVICE)
    assert result.line_count == 300
    assert result.byte_count == 45_299
    assert result.was_line_truncated
    assert result.was_byte_truncated


def test_char_flag_follows_the_original_length_even_when_lines_fix_it() -> None:
    # 210 lines of 120 chars: 25,409 chars in all, but the first 200 lines (24,199) fit,
    # so nothing is cut by characters; the flag still reports the oversized file.
    text = _index(210, width=120)
    assert len(text) > MAX_ENTRYPOINT_CHARS
    result = truncate_entrypoint(text)
    kept, warning = _split_warning(result)
    assert kept == _index(200, width=120)
    assert result.was_line_truncated
    assert result.was_byte_truncated
    assert "has 210 lines and is 24.8 KB, over the 200-line and 24.4 KB limits" in warning
    assert "10 of its 210 lines were left out, from line 201" in warning


def test_one_long_line_is_hard_cut() -> None:
    text = "x" * 30_000
    result = truncate_entrypoint(text)
    kept, warning = _split_warning(result)
    assert kept == "x" * MAX_ENTRYPOINT_CHARS
    assert "is 29.3 KB, over the 24.4 KB limit" in warning
    assert "everything after the first 25000 characters of line 1 was left out" in warning
    assert result.line_count == 1
    assert result.byte_count == 30_000
    assert not result.was_line_truncated
    assert result.was_byte_truncated


def test_newline_exactly_at_the_limit_is_used() -> None:
    text = "a" * MAX_ENTRYPOINT_CHARS + "\n" + "b" * 10
    kept, _ = _split_warning(truncate_entrypoint(text))
    assert kept == "a" * MAX_ENTRYPOINT_CHARS


def test_characters_not_bytes_are_counted() -> None:
    text = "é" * 20_000  # 40,000 UTF-8 bytes, but 20,000 characters: under the cap
    result = truncate_entrypoint(text)
    assert result.content == text
    assert result.byte_count == 20_000
    assert not result.was_byte_truncated


@dataclass(frozen=True)
class Noise:
    raw: str
    clean: str


@pytest.mark.parametrize(
    "case",
    [
        Noise("- [A](a.md) — hook\n", "- [A](a.md) — hook\n"),
        Noise("---\ntitle: index\n---\n- [A](a.md)\n", "- [A](a.md)\n"),
        Noise("\ufeff---\r\ntitle: x\r\n---\r\n- [A](a.md)", "- [A](a.md)"),
        Noise("- [A](a.md) <!-- why A --> — hook\n", "- [A](a.md)  — hook\n"),
        Noise("<!--\nmulti\nline\n-->\n- [A](a.md)\n", "\n- [A](a.md)\n"),
        Noise("<!-- a -->keep<!-- b -->", "keep"),
        Noise(
            "- [A](a.md)\n<!-- never closed\n- [B](b.md)",
            "- [A](a.md)\n<!-- never closed\n- [B](b.md)",
        ),
        Noise(
            "- [A](a.md)\n---\nnot: frontmatter\n---\n", "- [A](a.md)\n---\nnot: frontmatter\n---\n"
        ),
    ],
    ids=repr,
)
def test_strip_entrypoint_noise(case: Noise) -> None:
    assert strip_entrypoint_noise(case.raw) == case.clean


def test_warning_names_the_file_to_read_the_rest_in() -> None:
    result = truncate_entrypoint(_index(250), "/home/u/.claude/projects/p/memory/MEMORY.md")
    _, warning = _split_warning(result)
    assert "from line 201 (" in warning
    assert "Read /home/u/.claude/projects/p/memory/MEMORY.md for the rest" in warning


def test_a_long_first_line_left_out_is_quoted_short() -> None:
    text = _index(200) + "\n" + "- [Long](long.md) — " + "y" * 300
    _, warning = _split_warning(truncate_entrypoint(text))
    quoted = warning.split('("', 1)[1].split('")', 1)[0]
    assert len(quoted) == 80
    assert quoted.startswith("- [Long](long.md) — yyy")
    assert quoted.endswith("…")
