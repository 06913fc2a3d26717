"""Properties checked against independent oracles: containment, frontmatter, index caps, loader.

Each property compares memdir with something that does not share its code: the kernel
(``os.path.realpath``, a real write), a second YAML parser, a plain reading of the caps as
the reference states them, and the loader's own contract (returns, or raises
``TranscriptError``; never anything else, never without end).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memdir.errors import TranscriptError, UsageError
from memdir.store import (
    MAX_ENTRYPOINT_CHARS,
    MAX_ENTRYPOINT_LINES,
    MEMORY_TYPES,
    MemoryDir,
    atomic_write,
    format_memory_file,
    parse_memory_file,
    scan_memory_files,
    truncate_entrypoint,
)
from memdir.transcripts import load_transcript

_SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@contextlib.contextmanager
def _scratch(factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh directory for one generated example, removed afterwards."""
    with tempfile.TemporaryDirectory(dir=factory.getbasetemp()) as name:
        yield Path(name)


# --- (a) containment ---------------------------------------------------------------------

# Where symlinks may be planted, and what they may point at (relative to the sandbox).
_LINK_SLOTS = ("memory/l0", "memory/team/l1", "outside/l2", "l3")
_LINK_TARGETS = (
    "memory",
    "memory/team",
    "memory/x.md",
    "outside",
    "outside/x.md",
    "memory-evil",
    ".",
    "memory/missing",  # dangling
    "outside/missing",  # dangling
    "memory/l0",  # a loop when planted at memory/l0
    "l3",
)
_SEGMENTS = (
    "memory",
    "memory-evil",
    "outside",
    "team",
    "l0",
    "l1",
    "l2",
    "l3",
    "via",
    "new",
    "x.md",
    "ü.md",
    "日本語",
    "a b",
    "..",
    ".",
    "",  # an empty segment makes a repeated slash
)
_link_specs = st.lists(
    st.tuples(st.sampled_from(_LINK_SLOTS), st.sampled_from(_LINK_TARGETS), st.booleans()),
    max_size=4,
    unique_by=lambda spec: spec[0],
)


def _sandbox(base: Path, links: list[tuple[str, str, bool]]) -> None:
    """memory/ (with team/ and a file), outside/, memory-evil/, via -> memory, and links."""
    for folder in ("memory/team", "outside", "memory-evil"):
        (base / folder).mkdir(parents=True)
    for file in ("memory/x.md", "outside/x.md", "memory-evil/x.md"):
        (base / file).write_text("x")
    (base / "via").symlink_to(base / "memory")
    for slot, target, relative in links:
        link = base / slot
        goal = base / target
        link.symlink_to(os.path.relpath(goal, link.parent) if relative else goal)


def _oracle_inside(full: str, root: Path) -> bool:
    """The kernel's answer: the real path of the would-be file, below the real root."""
    real = os.path.realpath(full)
    real_root = os.path.realpath(root)
    return real != real_root and os.path.commonpath([real, real_root]) == real_root


def _has_broken_link(base: Path) -> bool:
    """Whether any symlink in the sandbox dangles or loops (memdir then fails closed)."""
    for folder, dirs, files in os.walk(base):
        for name in dirs + files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                try:
                    os.path.realpath(path, strict=True)
                except OSError:
                    return True
    return False


@_SETTINGS
@given(
    links=_link_specs,
    parts=st.lists(st.sampled_from(_SEGMENTS), min_size=1, max_size=7),
    absolute=st.booleans(),
    cwd_name=st.sampled_from([".", "memory", "outside", "memory/team", "memory/l0", "via"]),
    root_name=st.sampled_from(["memory", "via"]),
)
@example(
    links=[("memory/l0", "outside", False)],
    parts=["memory", "l0", "x.md"],
    absolute=False,
    cwd_name=".",
    root_name="memory",
)
@example(
    links=[("memory/l0", "outside", True)],
    parts=["l0", "..", "x.md"],
    absolute=False,
    cwd_name="memory",
    root_name="via",
)
def test_containment_matches_realpath_with_planted_symlinks(
    tmp_path_factory: pytest.TempPathFactory,
    links: list[tuple[str, str, bool]],
    parts: list[str],
    absolute: bool,
    cwd_name: str,
    root_name: str,
) -> None:
    with _scratch(tmp_path_factory) as base:
        _sandbox(base, links)
        md = MemoryDir(base / root_name)
        cwd = base / cwd_name
        raw = "/".join(parts)
        candidate = f"{base}/{raw}" if absolute else raw
        full = os.path.join(cwd, candidate)
        inside = md.is_memory_path(candidate, cwd=cwd)
        in_team = md.is_team_path(candidate, cwd=cwd)
        if not candidate:  # no path at all names no file: outside, whatever the cwd
            assert not inside
            assert not in_team
            return
        expected = _oracle_inside(full, md.root)
        expected_team = _oracle_inside(full, md.team_dir)
        # Never inside where the kernel would put the file outside.
        assert not inside or expected, (candidate, cwd)
        assert not in_team or expected_team, (candidate, cwd)
        if not _has_broken_link(base):
            # Without dangling or looping links there is nothing to fail closed on.
            assert inside is expected, (candidate, cwd)
            assert in_team is expected_team, (candidate, cwd)


@_SETTINGS
@given(
    suffix=st.text(
        alphabet=st.characters(exclude_characters="/\0", exclude_categories=["Cs"]),
        min_size=1,
        max_size=6,
    ),
    rest=st.lists(st.sampled_from(["x.md", "team", "new", ".", "", "ü"]), max_size=4),
)
def test_a_sibling_sharing_the_prefix_is_outside(
    tmp_path_factory: pytest.TempPathFactory, suffix: str, rest: list[str]
) -> None:
    with _scratch(tmp_path_factory) as base:
        (base / "memory").mkdir()
        sibling = f"memory{suffix}"
        with contextlib.suppress(OSError):  # a name the file system refuses is fine too
            (base / sibling).mkdir(exist_ok=True)
        md = MemoryDir(base / "memory")
        candidate = "/".join([str(base), sibling, *rest])
        assert md.is_memory_path(candidate) is _oracle_inside(candidate, md.root)
        assert not md.is_memory_path(candidate)


def _escape_sandbox(tmp_path: Path) -> MemoryDir:
    (tmp_path / "memory").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "memory" / "link").symlink_to(tmp_path / "outside")
    return MemoryDir(tmp_path / "memory")


def test_dot_dot_after_a_missing_folder_still_follows_the_symlink(tmp_path: Path) -> None:
    md = _escape_sandbox(tmp_path)
    candidate = str(md.root / "missing" / ".." / "link" / "x.md")
    assert os.path.realpath(candidate) == str(tmp_path / "outside" / "x.md")
    assert not md.is_memory_path(candidate)


def test_memory_dir_write_cannot_escape_through_dot_dot_and_a_symlink(tmp_path: Path) -> None:
    md = _escape_sandbox(tmp_path)
    with contextlib.suppress(UsageError):
        md.write("missing/../link/escaped.md", "x")
    assert not (tmp_path / "outside" / "escaped.md").exists()


# --- (b) frontmatter ---------------------------------------------------------------------

# Strings that YAML reads as something other than themselves when written bare.
_YAML_SPECIAL = (
    "yes",
    "No",
    "ON",
    "off",
    "y",
    "n",
    "true",
    "False",
    "null",
    "Null",
    "~",
    "",
    " ",
    "-",
    "- x",
    "-x",
    "#",
    "# comment",
    "a #b",
    ":",
    "a: b",
    "a:b",
    "? x",
    "[x]",
    "{a: 1}",
    "*ref",
    "&anchor",
    "!tag",
    "!!python/object/apply:os.system",
    "%YAML 1.2",
    "---",
    "...",
    "|",
    ">-",
    "'",
    '"',
    "'quoted'",
    '"double"',
    "0x1F",
    "0o17",
    "017",
    "1e3",
    "1_000",
    ".inf",
    "-.NaN",
    "2026-03-05",
    "2026-03-05 10:00:00",
    "12:30:00",
    "+1",
    "\t",
    "a\tb",
    "  leading",
    "trailing  ",
    "\n",
    "a\nb",
    "a\r\nb",
    "\r",
    "\x85",
    "\u2028",
    "\ufeff",
    "\x00",
    "\x1b[31m",
    "ü",
    "😀",
    "@at",
    "`tick`",
    "%pct",
    "=",
    "<<",
)
_text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=8)
_value = st.sampled_from(_YAML_SPECIAL) | st.lists(
    st.sampled_from(_YAML_SPECIAL) | _text, max_size=4
).map("".join)
_kind = st.none() | st.sampled_from(MEMORY_TYPES)
_BODY_LINES = (
    "---",
    "--- ",
    "---\r",
    "name: injected",
    "type: user",
    "description: other",
    "...",
    "",
    "  ",
    "# heading",
    "- item",
    "\r",
    "\ufeff---",
    "text ü 😀",
)
_body = st.lists(st.sampled_from(_BODY_LINES) | _text, max_size=8).map("\n".join)


def _normalised_body(body: str) -> str:
    core = body.strip("\r\n")
    return f"{core}\n" if core else ""


def _header_lines(text: str) -> str:
    """The block between the first two lines that are exactly ``---`` (written files only)."""
    lines = text.split("\n")
    assert lines[0] == "---"
    return "\n".join(lines[1 : lines.index("---", 1)])


@_SETTINGS
@given(name=_value, description=_value, kind=_kind, body=_body)
def test_yaml_special_strings_round_trip(name: str, description: str, kind: Any, body: str) -> None:
    text = format_memory_file(
        name=name, description=description, type=kind, body=body, format="2.1.88"
    )
    parsed = parse_memory_file(text)
    assert (parsed.name, parsed.description, parsed.type) == (name, description, kind)
    assert parsed.body == _normalised_body(body)
    assert not parsed.malformed
    # Oracle: PyYAML's pure-Python safe loader reads the block as exactly these strings.
    independent = yaml.load(_header_lines(text), Loader=yaml.SafeLoader)
    expected = {"name": name, "description": description}
    if kind is not None:
        expected["type"] = kind
    assert independent == expected
    assert all(type(value) is str for value in independent.values())


@_SETTINGS
@given(name=_value, description=_value, kind=_kind, body=_body)
def test_crlf_and_bom_copies_read_the_same(
    name: str, description: str, kind: Any, body: str
) -> None:
    text = format_memory_file(
        name=name, description=description, type=kind, body=body, format="2.1.88"
    )
    windows = "\ufeff" + text.replace("\n", "\r\n")
    parsed = parse_memory_file(windows)
    assert (parsed.name, parsed.description, parsed.type) == (name, description, kind)
    assert parsed.body.replace("\r\n", "\n") == _normalised_body(body)
    assert not parsed.malformed


@_SETTINGS
@given(name=_value, description=_value, kind=_kind, body=_body)
def test_rendering_what_was_parsed_gives_the_same_file(
    name: str, description: str, kind: Any, body: str
) -> None:
    text = format_memory_file(
        name=name, description=description, type=kind, body=body, format="2.1.88"
    )
    parsed = parse_memory_file(text)
    assert parsed.name is not None
    assert parsed.description is not None
    again = format_memory_file(
        name=parsed.name,
        description=parsed.description,
        type=parsed.type,
        body=parsed.body,
        format="2.1.88",
    )
    assert again == text


_extra_key = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True).filter(
    lambda key: key not in ("name", "description", "type")
)
_extra_value = (
    _value
    | st.integers()
    | st.booleans()
    | st.lists(_value, max_size=3)
    | st.dictionaries(_extra_key, _value, max_size=2)
)


@_SETTINGS
@given(
    name=_value,
    kind=_kind,
    extra=st.dictionaries(_extra_key, _extra_value, max_size=4),
)
def test_extra_fields_round_trip_in_order(name: str, kind: Any, extra: dict[str, Any]) -> None:
    text = format_memory_file(
        name=name, description=name, type=kind, body="b", extra=extra, format="2.1.88"
    )
    parsed = parse_memory_file(text)
    main = ["name", "description"] + (["type"] if kind is not None else [])
    assert list(parsed.frontmatter) == main + list(extra)
    assert {key: parsed.frontmatter[key] for key in extra} == extra
    assert yaml.load(_header_lines(text), Loader=yaml.SafeLoader) == dict(parsed.frontmatter)


@settings(_SETTINGS, max_examples=50)
@given(
    name=_value,
    description=_value,
    kind=_kind,
    body=_body,
    filename=st.sampled_from(["a.md", "ü 1.md", "sub/deep.md", "team/x.md"]),
)
def test_the_manifest_reads_back_what_was_written(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    description: str,
    kind: Any,
    body: str,
    filename: str,
) -> None:
    with _scratch(tmp_path_factory) as base:
        text = format_memory_file(
            name=name, description=description, type=kind, body=body, format="2.1.88"
        )
        atomic_write(base / filename, text)
        (header,) = scan_memory_files(base)
        assert header.filename == filename
        assert (header.name, header.description, header.type) == (name, description, kind)


# --- (c) the MEMORY.md caps ----------------------------------------------------------------

_LINE_CHARS = ("-", "x", "é", "😀", " ", "\t", "\r", "[", "]")
_line = st.tuples(st.integers(0, 1_200), st.sampled_from(_LINE_CHARS)).map(lambda p: p[1] * p[0])
_long_line = st.tuples(st.integers(20_000, 30_000), st.sampled_from(_LINE_CHARS)).map(
    lambda p: p[1] * p[0]
)
_index = st.tuples(
    st.sampled_from(["", "\n", "  \n\t", "\ufeff"]),
    st.lists(_line | _long_line, max_size=60)
    | st.lists(st.sampled_from(["- [A](a.md) — hook", ""]), min_size=150, max_size=260),
    st.sampled_from(["", "\n", "\n\n  ", "\r\n"]),
).map(lambda p: p[0] + "\n".join(p[1]) + p[2])


def _expected_kept(trimmed: str) -> str:
    """The reference's rule, read plainly: whole lines while both caps hold, else a hard cut."""
    lines = trimmed.split("\n")[:MAX_ENTRYPOINT_LINES]
    kept: list[str] = []
    size = -1  # no newline before the first line
    for line in lines:
        if size + 1 + len(line) > MAX_ENTRYPOINT_CHARS:
            break
        kept.append(line)
        size += 1 + len(line)
    if len(kept) == len(lines) or kept:
        return "\n".join(kept)
    return trimmed[:MAX_ENTRYPOINT_CHARS]  # not even the first line fits


@_SETTINGS
@given(raw=_index)
def test_index_caps_hold_and_keep_a_prefix(raw: str) -> None:
    result = truncate_entrypoint(raw)
    trimmed = raw.strip()
    assert result.line_count == (trimmed.count("\n") + 1 if trimmed else 0)
    assert result.byte_count == len(trimmed)
    assert result.was_line_truncated == (result.line_count > MAX_ENTRYPOINT_LINES)
    assert result.was_byte_truncated == (len(trimmed) > MAX_ENTRYPOINT_CHARS)
    if not (result.was_line_truncated or result.was_byte_truncated):
        assert result.content == trimmed
        return
    kept, separator, warning = result.content.rpartition("\n\n")
    assert separator
    assert "\n" not in warning
    assert warning.startswith("> WARNING: MEMORY.md ")
    assert ("200-line" in warning) == result.was_line_truncated
    assert ("entries are too long" in warning) == result.was_byte_truncated
    assert re.search(r"\d+ of its \d+ lines (was|were) left out, from line \d+", warning) or (
        "of line 1 was left out" in warning
    )
    # The caps, on what is kept of the index.
    assert kept.count("\n") + 1 <= MAX_ENTRYPOINT_LINES
    assert len(kept) <= MAX_ENTRYPOINT_CHARS
    # A prefix, cut at a line end unless not even one line fits, and the longest such.
    assert trimmed.startswith(kept)
    assert kept == _expected_kept(trimmed)


@_SETTINGS
@given(raw=_index)
def test_index_caps_are_stable(raw: str) -> None:
    result = truncate_entrypoint(raw)
    if not (result.was_line_truncated or result.was_byte_truncated):
        # An index within the caps is a fixed point.
        assert truncate_entrypoint(result.content) == result
        return
    kept = result.content.rpartition("\n\n")[0]
    # What was kept is within the caps: loading it again cuts nothing more.
    again = truncate_entrypoint(kept)
    assert not again.was_line_truncated
    assert not again.was_byte_truncated
    assert again.content == kept.strip()


# --- the transcript loader -----------------------------------------------------------------

_FIXTURES = Path(__file__).parent.parent / "fixtures" / "claude-code-log"
_SESSION_FILES = sorted(_FIXTURES.rglob("*.jsonl"))
_REAL_LINES = [
    line for file in _SESSION_FILES for line in file.read_bytes().split(b"\n") if line.strip()
]


def _load_quietly(path: Path) -> None:
    """Load ``path``; the only exception allowed out is TranscriptError."""
    with contextlib.suppress(TranscriptError):
        load_transcript(path)


def _load_bytes(factory: pytest.TempPathFactory, data: bytes, name: str = "s.jsonl") -> None:
    with _scratch(factory) as base:
        path = base / name
        path.write_bytes(data)
        _load_quietly(path)


_JUNK = (
    *(b"\x00", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\n", b"\r", b'"', b"\\", b"{", b"}"),
    *(b"[", b"]", b",", b":", b"\\u0000", b"\\udc80", b"\xef\xbb\xbf", b"null", b"\t"),
)
_junk = st.sampled_from(_JUNK) | st.binary(min_size=1, max_size=6)


@_SETTINGS
@given(
    opener=st.sampled_from([b"{", b"[", b"\xef\xbb\xbf{", b" \n\t[", b'{"type":"user",']),
    data=st.binary(max_size=600),
)
def test_random_bytes_behind_a_json_opener(
    tmp_path_factory: pytest.TempPathFactory, opener: bytes, data: bytes
) -> None:
    _load_bytes(tmp_path_factory, opener + data)


@st.composite
def _mutated_session(draw: st.DrawFn) -> bytes:
    """Real lines from every fixture, spliced, then cut, broken and salted byte-wise."""
    lines = draw(st.lists(st.sampled_from(_REAL_LINES), min_size=1, max_size=10))
    data = b"\n".join(lines)
    for _ in range(draw(st.integers(0, 6))):
        position = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["insert", "delete", "flip", "repeat"]))
        if action == "insert":
            data = data[:position] + draw(_junk) + data[position:]
        elif action == "delete":
            data = data[:position] + data[position + draw(st.integers(1, 40)) :]
        elif action == "flip" and position < len(data):
            bit = 1 << draw(st.integers(0, 7))
            data = data[:position] + bytes([data[position] ^ bit]) + data[position + 1 :]
        else:
            data = data[:position] + data[position : position + 200] * 2 + data[position + 200 :]
    return data


@_SETTINGS
@given(data=_mutated_session())
def test_mutated_real_sessions(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    _load_bytes(tmp_path_factory, data)


_json_scalar = (
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.sampled_from(["user", "assistant", "system", "tool_use", "tool_result", "text", ""])
)
_json = st.recursive(
    _json_scalar,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=6,
)


def _replace_somewhere(value: Any, path: list[int], new: Any) -> Any:
    """``value`` with the node reached by following ``path`` (indices mod size) replaced."""
    if not path or not isinstance(value, dict | list) or not value:
        return new
    if isinstance(value, dict):
        key = list(value)[path[0] % len(value)]
        return {**value, key: _replace_somewhere(value[key], path[1:], new)}
    index = path[0] % len(value)
    return [*value[:index], _replace_somewhere(value[index], path[1:], new), *value[index + 1 :]]


@settings(_SETTINGS, max_examples=100)
@given(
    lines=st.lists(st.sampled_from(_REAL_LINES), min_size=1, max_size=6),
    which=st.integers(0, 7),
    path=st.lists(st.integers(0, 50), max_size=6),
    new=_json,
)
def test_real_lines_with_a_nested_value_replaced(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[bytes],
    which: int,
    path: list[int],
    new: Any,
) -> None:
    entries = [json.loads(line) for line in lines]
    index = which % len(entries)
    entries[index] = _replace_somewhere(entries[index], path, new)
    data = "\n".join(json.dumps(entry) for entry in entries).encode()
    _load_bytes(tmp_path_factory, data)


@pytest.mark.parametrize("leaf", [[], {"a": 1}], ids=["list", "object"])
def test_a_summary_with_an_unhashable_leaf_uuid_is_skipped(tmp_path: Path, leaf: Any) -> None:
    summary = json.dumps({"type": "summary", "summary": "s", "leafUuid": leaf})
    path = tmp_path / "s.jsonl"
    path.write_text(f"{summary}\n{_USER_LINE}\n")
    _load_quietly(path)


_block = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "tool_use", "tool_result", "image", "thinking", "x"])},
    optional={
        "text": _json_scalar,
        "id": _json_scalar,
        "name": _json_scalar,
        "input": _json,
        "tool_use_id": _json_scalar,
        "content": _json,
        "is_error": _json_scalar,
        "source": _json,
    },
)
_chat_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "developer", "tool", "x"])},
    optional={
        "content": st.text(max_size=20) | st.none() | st.lists(_block, max_size=3),
        "tool_calls": _json,
        "tool_call_id": _json_scalar,
        "name": _json_scalar,
    },
)


@settings(_SETTINGS, max_examples=100)
@given(
    messages=st.lists(_chat_message, max_size=4),
    wrapped=st.booleans(),
    system=_json,
)
def test_chat_shaped_json(
    tmp_path_factory: pytest.TempPathFactory,
    messages: list[dict[str, Any]],
    wrapped: bool,
    system: Any,
) -> None:
    document: Any = {"system": system, "messages": messages} if wrapped else messages
    _load_bytes(tmp_path_factory, json.dumps(document).encode(), "chat.json")


_USER_LINE = '{"type":"user","uuid":"u1","message":{"role":"user","content":"hi"}}'


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"[" * 100_000, id="deeply-nested-array"),
        pytest.param(b'{"a":' * 100_000, id="deeply-nested-object"),
        pytest.param((_USER_LINE + "\n" + '{"x":' * 5_000 + "\n").encode(), id="deep-second-line"),
    ],
)
def test_deep_nesting_is_a_transcript_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_bytes(data)
    _load_quietly(path)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"[" + b"1" * 5_000 + b"]", id="chat-json"),
        pytest.param(
            b'{"type":"user","uuid":"u","n":' + b"1" * 5_000 + b',"message":{"role":"user",'
            b'"content":"hi"}}\n',
            id="first-session-line",
        ),
    ],
)
def test_a_huge_integer_is_a_transcript_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(data)
    _load_quietly(path)


@pytest.mark.parametrize(
    "document",
    [
        pytest.param([{"role": "user", "content": "\ud800"}], id="openai"),
        pytest.param(
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "a\udc80"}]}]},
            id="anthropic",
        ),
    ],
)
def test_a_lone_surrogate_is_loaded_or_refused(tmp_path: Path, document: Any) -> None:
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(document), encoding="ascii")
    _load_quietly(path)


# A child process loads each file and reports how it went, one JSON line per file. The
# parent only waits, with a generous deadline: a loader that never ends fails the test.
_CHILD = """
import json, sys
from memdir.errors import TranscriptError
from memdir.transcripts import load_transcript
for name in sys.argv[1:]:
    try:
        load_transcript(name)
        outcome = "ok"
    except TranscriptError:
        outcome = "TranscriptError"
    except BaseException as exc:
        outcome = type(exc).__name__
    print(json.dumps([name, outcome]), flush=True)
"""


def _entry(uuid: str, parent: str | None, role: str, content: Any, **extra: Any) -> str:
    message = {"role": role, "content": content, **extra}
    line = {"type": role, "uuid": uuid, "parentUuid": parent, "message": message}
    return json.dumps(line)


def _adversarial_files(folder: Path, scale: int) -> list[Path]:
    """Files built to be slow or strange; ``scale`` multiplies their sizes."""
    rng = random.Random(20260305)
    n = 1_000 * scale
    files: dict[str, bytes] = {
        "random.bin": rng.randbytes(200 * n),
        "nul-after-brace.jsonl": b"{" + b"\x00" * (300 * n),
        "invalid-utf8-lines.jsonl": b"\n".join(
            b"{" + rng.randbytes(rng.randrange(1, 300)) for _ in range(2 * n)
        ),
        "huge-line.jsonl": _entry("u1", None, "user", "x" * 8_000_000).encode(),
        "huge-invalid-line.jsonl": _USER_LINE.encode() + b"\n{" + b"\xff" * 8_000_000,
        "many-empty-objects.jsonl": b"{}\n" * (30 * n),
        "unknown-types.jsonl": (_USER_LINE + "\n").encode()
        + b'{"type":"progress","uuid":"p"}\n' * (10 * n),
        "long-chain.jsonl": "\n".join(
            _entry(f"m{i}", f"m{i - 1}" if i else None, "user" if i % 2 == 0 else "assistant", "t")
            for i in range(5 * n)
        ).encode(),
        "self-parents.jsonl": "\n".join(
            _entry(f"m{i}", f"m{i}", "user", "t") for i in range(2 * n)
        ).encode(),
        "parent-cycle.jsonl": "\n".join(
            _entry(f"m{i}", f"m{(i + 1) % (2 * n)}", "user", "t") for i in range(2 * n)
        ).encode(),
        "one-response-many-blocks.jsonl": "\n".join(
            [_USER_LINE]
            + [
                _entry(
                    f"a{i}",
                    f"a{i - 1}" if i else "u1",
                    "assistant",
                    [{"type": "text", "text": "x"}],
                    id="msg",
                )
                for i in range(n)
            ]
        ).encode(),
        "many-tool-results.jsonl": "\n".join(
            [
                _entry(
                    "a0",
                    None,
                    "assistant",
                    [
                        {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {}}
                        for i in range(n)
                    ],
                ),
                _entry(
                    "r0",
                    "a0",
                    "user",
                    [
                        {"type": "tool_result", "tool_use_id": f"t{i}", "content": "r"}
                        for i in range(n, 0, -1)
                    ],
                ),
            ]
        ).encode(),
        "big-chat.json": json.dumps(
            [
                {"role": "user" if i % 2 == 0 else "assistant", "content": "x" * 100}
                for i in range(5 * n)
            ]
        ).encode(),
    }
    paths = []
    for name, data in files.items():
        path = folder / name
        path.write_bytes(data)
        paths.append(path)
    return paths


@pytest.mark.parametrize(
    "scale", [pytest.param(1, id="small"), pytest.param(10, id="large", marks=pytest.mark.long)]
)
def test_large_and_pathological_files_end_with_a_result_or_transcript_error(
    tmp_path: Path, scale: int
) -> None:
    paths = _adversarial_files(tmp_path, scale)
    limit = 60 * scale
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, *map(str, paths)],
            capture_output=True,
            text=True,
            timeout=limit,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        finished = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout
        pytest.fail(f"the loader did not finish within {limit} s; finished so far:\n{finished}")
    assert done.returncode == 0, done.stderr
    outcomes = dict(json.loads(line) for line in done.stdout.splitlines())
    assert set(outcomes) == set(map(str, paths))
    unexpected = {
        Path(k).name: v for k, v in outcomes.items() if v not in ("ok", "TranscriptError")
    }
    assert unexpected == {}
