"""Grep (both engines give the same output) and Glob."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdir.errors import UsageError
from memdir.tools import _search
from memdir.tools._base import ToolContext, ToolError
from memdir.tools._search import GlobTool, GrepTool

# The `rg` extra installs ripgrep into the environment's bin directory, not always on PATH.
RG = shutil.which("rg", path=os.pathsep.join([os.environ.get("PATH", ""), f"{sys.prefix}/bin"]))
needs_rg = pytest.mark.skipif(RG is None, reason="ripgrep is not installed")


def grep(root: Path, engine: Literal["rg", "python"], tool_input: dict[str, Any]) -> str:
    tool = GrepTool(root, engine=engine, rg_path=RG)
    return asyncio.run(tool.run(tool_input, ToolContext())).content


def glob(root: Path, tool_input: dict[str, Any]) -> str:
    return asyncio.run(GlobTool(root).run(tool_input, ToolContext())).content


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    files = {
        "a.md": "# Alpha\nhello world\nsecond line\nHELLO again\n",
        "sub/b.md": "one\ntwo\nhello from b\nthree\nfour\nfive\nsix\nhello at the end",
        ".hidden/c.md": "hidden hello\n",
        ".git/config": "hello from git\n",
        "x.py": "def hello():\n    return 'hello'\n",
        "notes.txt": "l1\nl2\nl3\nhello\nl5\nl6\nl7\nl8\nhello\nl10\n",
        "sub-x/d.md": "hello dash\n",
        "crlf.md": "hello\r\nbye\r\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, newline="")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01hello binary\n")
    (tmp_path / "link.md").symlink_to(tmp_path / "a.md")
    return tmp_path


@dataclass(frozen=True)
class Query:
    name: str
    tool_input: dict[str, Any]
    path: str | None = None
    expect: list[str] = field(default_factory=list)
    """Lines (with ``{root}`` for the root) the python engine's output must start with."""


QUERIES = [
    Query("files", {"pattern": "hello"}),
    Query("content", {"pattern": "hello", "output_mode": "content"}),
    Query("count", {"pattern": "hello", "output_mode": "count"}),
    Query("ignore-case", {"pattern": "hello", "-i": True, "output_mode": "count"}),
    Query("no-numbers", {"pattern": "hello", "output_mode": "content", "-n": False}),
    Query("after", {"pattern": "hello", "output_mode": "content", "-A": 2}),
    Query("before", {"pattern": "hello", "output_mode": "content", "-B": 3}),
    Query("context", {"pattern": "hello", "output_mode": "content", "-C": 1}),
    Query("context-overrides", {"pattern": "o", "output_mode": "content", "-C": 1, "-A": 0}),
    Query("glob", {"pattern": "hello", "glob": "*.md"}),
    Query("glob-anchored", {"pattern": "hello", "glob": "sub/*.md"}),
    Query("glob-braces", {"pattern": "hello", "glob": "*.{py,txt}"}),
    Query("glob-negated", {"pattern": "hello", "glob": "!*.md"}),
    Query("type-md", {"pattern": "hello", "type": "md"}),
    Query("type-py", {"pattern": "hello", "type": "py", "output_mode": "content"}),
    Query("head-limit", {"pattern": "hello", "output_mode": "content", "head_limit": 3}),
    Query("head-limit-files", {"pattern": "hello", "head_limit": 2}),
    Query("path-file", {"pattern": "hello", "output_mode": "content"}, path="notes.txt"),
    Query("path-dir", {"pattern": "hello", "output_mode": "count"}, path="sub"),
    Query("path-hidden-dir", {"pattern": "hello"}, path=".hidden"),
    Query("no-match", {"pattern": "zebra"}, expect=["No matches found"]),
    Query("anchors", {"pattern": "^hello$", "output_mode": "content"}),
    Query("dollar-before-cr", {"pattern": "hello$", "output_mode": "content"}),
    Query("multiline", {"pattern": "world\nsecond", "multiline": True, "output_mode": "content"}),
    Query("multiline-dotall", {"pattern": "two.*?three", "multiline": True, "-C": 1}),
    Query("multiline-count", {"pattern": "l\\d\nhello", "multiline": True, "output_mode": "count"}),
    Query("empty-pattern", {"pattern": "", "output_mode": "count", "glob": "*.txt"}),
    Query("classes", {"pattern": r"\bhello\s+\w+", "output_mode": "content", "-i": True}),
]


def _input(query: Query) -> dict[str, Any]:
    return query.tool_input if query.path is None else {**query.tool_input, "path": query.path}


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.name)
def test_python_engine_leaves_out_git_binaries_and_symlinks(tree: Path, query: Query) -> None:
    python = grep(tree, "python", _input(query))
    for line in query.expect:
        assert line.format(root=tree) in python.split("\n")
    assert ".git" not in python
    assert "blob.bin" not in python
    assert "link.md" not in python


@needs_rg
@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.name)
def test_rg_engine_gives_the_same_output(tree: Path, query: Query) -> None:
    assert grep(tree, "rg", _input(query)) == grep(tree, "python", _input(query))


def test_python_engine_output_format(tree: Path) -> None:
    files = grep(tree, "python", {"pattern": "hello"}).split("\n")
    assert files == [
        f"{tree}/.hidden/c.md",
        f"{tree}/a.md",
        f"{tree}/crlf.md",
        f"{tree}/notes.txt",
        f"{tree}/sub/b.md",
        f"{tree}/sub-x/d.md",
        f"{tree}/x.py",
    ]
    content = grep(
        tree,
        "python",
        {"pattern": "hello", "path": "notes.txt", "-C": 1, "-n": True, "output_mode": "content"},
    )
    assert content.split("\n") == [
        f"{tree}/notes.txt-3-l3",
        f"{tree}/notes.txt:4:hello",
        f"{tree}/notes.txt-5-l5",
        "--",
        f"{tree}/notes.txt-8-l8",
        f"{tree}/notes.txt:9:hello",
        f"{tree}/notes.txt-10-l10",
    ]
    count = grep(tree, "python", {"pattern": "hello", "path": "sub", "output_mode": "count"})
    assert count == f"{tree}/sub/b.md:2"
    plain = grep(tree, "python", {"pattern": "bye", "output_mode": "content", "-n": False})
    assert plain == f"{tree}/crlf.md:bye"


def test_head_limit_and_output_cap_notes(tmp_path: Path) -> None:
    (tmp_path / "many.txt").write_text("match\n" * 5000)
    limited = grep(
        tmp_path, "python", {"pattern": "match", "output_mode": "content", "head_limit": 2}
    )
    assert limited.split("\n")[:2] == [
        f"{tmp_path}/many.txt:1:match",
        f"{tmp_path}/many.txt:2:match",
    ]
    assert "head_limit 2 reached" in limited
    capped = grep(tmp_path, "python", {"pattern": "match", "output_mode": "content"})
    assert len(capped) < 20_200
    assert capped.endswith("(output cut at 20,000 characters; narrow the search)")


@needs_rg
@pytest.mark.parametrize("head_limit", [None, 2])
def test_rg_engine_stops_at_the_same_place(tmp_path: Path, head_limit: int | None) -> None:
    (tmp_path / "many.txt").write_text("match\n" * 5000)
    (tmp_path / "more.txt").write_text("match\n")
    tool_input = {"pattern": "match", "output_mode": "content", "head_limit": head_limit}
    assert grep(tmp_path, "rg", tool_input) == grep(tmp_path, "python", tool_input)


@pytest.mark.parametrize("engine", ["python", pytest.param("rg", marks=needs_rg)])
@pytest.mark.parametrize(
    ("tool_input", "message"),
    [
        ({"pattern": "a("}, "invalid regular expression"),
        ({"pattern": "[[a]"}, "invalid regular expression"),
        ({"pattern": "a\\nb"}, "set multiline to true"),
        ({"pattern": "a", "path": "missing"}, "path does not exist"),
        ({"pattern": "a", "glob": "[z-a]"}, "invalid glob"),
    ],
)
def test_grep_errors(
    tree: Path, engine: Literal["rg", "python"], tool_input: dict[str, Any], message: str
) -> None:
    with pytest.raises(ToolError, match=message):
        grep(tree, engine, tool_input)


@needs_rg
def test_rg_rejecting_a_pattern_is_a_tool_error(tree: Path) -> None:
    # Look-ahead is Python syntax that ripgrep's regex engine does not have.
    with pytest.raises(ToolError, match="ripgrep rejected the search"):
        grep(tree, "rg", {"pattern": "hel(?=lo)"})


def test_engine_selection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert GrepTool(tmp_path, engine="python").engine == "python"
    monkeypatch.setattr(_search, "find_rg", lambda: None)
    assert GrepTool(tmp_path).engine == "python"
    with pytest.raises(UsageError, match="no rg binary"):
        GrepTool(tmp_path, engine="rg")
    assert GrepTool(tmp_path, engine="rg", rg_path="/opt/rg").engine == "rg"


_TEXT = st.text(alphabet="abAB \n\ré", max_size=40)
_PATTERNS = st.sampled_from(
    ["a", "b+", "^a", "a$", "^$", "a b", ".", "a.b", "x*", r"\s", "é", "[^a]", "a|^b", r"\bb", ".*"]
)


@needs_rg
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    files=st.lists(_TEXT, min_size=1, max_size=3),
    pattern=_PATTERNS,
    multiline=st.booleans(),
    mode=st.sampled_from(["content", "files_with_matches", "count"]),
    ignore_case=st.booleans(),
    before=st.integers(0, 2),
    after=st.integers(0, 2),
)
def test_engines_agree_on_generated_files(
    tmp_path_factory: pytest.TempPathFactory,
    files: list[str],
    pattern: str,
    multiline: bool,
    mode: str,
    ignore_case: bool,
    before: int,
    after: int,
) -> None:
    root = tmp_path_factory.mktemp("gen")
    for index, text in enumerate(files):
        (root / f"f{index}.txt").write_bytes(text.encode())
    (root / "binary.txt").write_bytes(files[0].encode() + b"\0")
    if multiline:
        pattern = pattern.replace("a b", "a\\s+b")
    tool_input = {
        "pattern": pattern,
        "output_mode": mode,
        "-B": before,
        "-A": after,
        "multiline": multiline,
        "-i": ignore_case,
    }
    assert grep(root, "rg", tool_input) == grep(root, "python", tool_input)


# Glob


def _files(root: Path, names: list[str]) -> None:
    for offset, name in enumerate(names):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)
        os.utime(path, (1_700_000_000 + offset, 1_700_000_000 + offset))


def test_glob_newest_first_ties_by_path(tmp_path: Path) -> None:
    _files(tmp_path, ["old.md", "mid.md", "new.md"])
    os.utime(tmp_path / "mid.md", (1_700_000_000, 1_700_000_000))  # ties with old.md
    assert glob(tmp_path, {"pattern": "*.md"}).split("\n") == [
        f"{tmp_path}/new.md",
        f"{tmp_path}/mid.md",
        f"{tmp_path}/old.md",
    ]


def test_glob_recursion_hidden_files_and_brace(tmp_path: Path) -> None:
    _files(tmp_path, ["top.md", "a/b/deep.md", ".hidden/h.md", "a/x.txt", ".git/HEAD.md"])
    (tmp_path / "a" / "dir.md").mkdir()
    found = set(glob(tmp_path, {"pattern": "**/*.md"}).split("\n"))
    assert found == {f"{tmp_path}/{n}" for n in ("top.md", "a/b/deep.md", ".hidden/h.md")}
    assert glob(tmp_path, {"pattern": "*.md"}) == f"{tmp_path}/top.md"
    assert glob(tmp_path, {"pattern": "a/**/*.{md,txt}"}).split("\n") == [
        f"{tmp_path}/a/x.txt",
        f"{tmp_path}/a/b/deep.md",
    ]
    assert glob(tmp_path, {"pattern": "a/b/deep.md"}) == f"{tmp_path}/a/b/deep.md"
    assert glob(tmp_path / "a", {"pattern": f"{tmp_path}/*.md"}) == f"{tmp_path}/top.md"
    assert glob(tmp_path, {"pattern": "*.md", "path": "a/b"}) == f"{tmp_path}/a/b/deep.md"


def test_glob_truncates_at_100(tmp_path: Path) -> None:
    _files(tmp_path, [f"n{i:03}.md" for i in range(101)])
    lines = glob(tmp_path, {"pattern": "*.md"}).split("\n")
    assert len(lines) == 101
    assert lines[0] == f"{tmp_path}/n100.md"
    assert f"{tmp_path}/n000.md" not in lines
    assert lines[-1].startswith("(more results truncated")


def test_glob_nothing_found_and_errors(tmp_path: Path) -> None:
    (tmp_path / "f.md").write_text("x")
    assert glob(tmp_path, {"pattern": "*.txt"}) == "No files found"
    assert glob(tmp_path, {"pattern": "nope/*.md"}) == "No files found"
    with pytest.raises(ToolError, match="not a directory"):
        glob(tmp_path, {"pattern": "*", "path": "f.md"})
    with pytest.raises(ToolError, match="path does not exist"):
        glob(tmp_path, {"pattern": "*", "path": "missing"})
