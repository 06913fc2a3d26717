"""Scanning the memory directory and formatting the manifest."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from memdir.errors import UsageError
from memdir.store import _scan
from memdir.store._scan import (
    FRONTMATTER_MAX_LINES,
    MemoryHeader,
    format_manifest,
    scan_memory_files,
)

BASE_TIME = 1_772_719_402.0  # 2026-03-05T14:03:22Z


def _memory(
    root: Path,
    relative: str,
    *,
    mtime: float,
    name: str = "n",
    description: str | None = "d",
    kind: str | None = "user",
    body: str = "body\n",
) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["---", f"name: {name}"]
    if description is not None:
        lines.append(f"description: {description}")
    if kind is not None:
        lines.append(f"type: {kind}")
    lines += ["---", "", body]
    path.write_text("\n".join(lines), encoding="utf-8")
    os.utime(path, (mtime, mtime))
    return path


def test_newest_first_with_explicit_mtimes(tmp_path: Path) -> None:
    _memory(tmp_path, "old.md", mtime=BASE_TIME - 100, name="old")
    _memory(tmp_path, "new.md", mtime=BASE_TIME, name="new", kind="feedback")
    _memory(tmp_path, "mid.md", mtime=BASE_TIME - 50, name="mid", description=None, kind=None)
    headers = scan_memory_files(tmp_path)
    assert [h.filename for h in headers] == ["new.md", "mid.md", "old.md"]
    newest = headers[0]
    assert newest == MemoryHeader(
        filename="new.md",
        path=tmp_path / "new.md",
        mtime=BASE_TIME,
        name="new",
        description="d",
        type="feedback",
    )
    assert headers[1].description is None
    assert headers[1].type is None


def test_ties_go_by_filename(tmp_path: Path) -> None:
    for name in ["b.md", "c.md", "a.md"]:
        _memory(tmp_path, name, mtime=BASE_TIME)
    assert [h.filename for h in scan_memory_files(tmp_path)] == ["a.md", "b.md", "c.md"]


def test_indexes_excluded_subdirectories_included(tmp_path: Path) -> None:
    _memory(tmp_path, "MEMORY.md", mtime=BASE_TIME)
    _memory(tmp_path, "team/MEMORY.md", mtime=BASE_TIME)
    _memory(tmp_path, "team/x.md", mtime=BASE_TIME - 1)
    _memory(tmp_path, "team/deep/y.md", mtime=BASE_TIME - 2)
    _memory(tmp_path, "top.md", mtime=BASE_TIME - 3)
    headers = scan_memory_files(tmp_path)
    assert [h.filename for h in headers] == ["team/x.md", "team/deep/y.md", "top.md"]
    assert headers[0].path == tmp_path / "team" / "x.md"


def test_non_markdown_files_are_ignored(tmp_path: Path) -> None:
    _memory(tmp_path, "keep.md", mtime=BASE_TIME)
    for name in ["notes.txt", "keep.md.bak", "upper.MD", "md", ".lock"]:
        (tmp_path / name).write_text("---\nname: no\n---\n", encoding="utf-8")
    (tmp_path / "folder.md").mkdir()  # a directory with a .md name is not a file
    assert [h.filename for h in scan_memory_files(tmp_path)] == ["keep.md"]


def test_symlinks_are_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    outside = tmp_path / "outside"
    _memory(root, "inside.md", mtime=BASE_TIME)
    _memory(outside, "secret.md", mtime=BASE_TIME)
    _memory(outside, "dir/other.md", mtime=BASE_TIME)
    (root / "link.md").symlink_to(outside / "secret.md")
    (root / "linked_dir").symlink_to(outside / "dir", target_is_directory=True)
    (root / "inner_link.md").symlink_to(root / "inside.md")
    assert [h.filename for h in scan_memory_files(root)] == ["inside.md"]


def test_a_symlinked_root_is_followed(tmp_path: Path) -> None:
    real = tmp_path / "real"
    _memory(real, "a.md", mtime=BASE_TIME)
    link = tmp_path / "memory"
    link.symlink_to(real, target_is_directory=True)
    headers = scan_memory_files(link)
    assert [h.path for h in headers] == [link / "a.md"]


def test_missing_root_gives_nothing(tmp_path: Path) -> None:
    assert scan_memory_files(tmp_path / "nope") == []
    file_root = tmp_path / "file"
    file_root.write_text("x", encoding="utf-8")
    assert scan_memory_files(file_root) == []


def test_limit_below_one_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        scan_memory_files(tmp_path, limit=0)
    with pytest.raises(ValueError, match="limit"):
        scan_memory_files(tmp_path, limit=-3)


def test_relative_root_gives_absolute_paths(tmp_path: Path, monkeypatch: Any) -> None:
    _memory(tmp_path, "mem/a.md", mtime=BASE_TIME)
    monkeypatch.chdir(tmp_path)
    [header] = scan_memory_files(Path("mem"))
    assert header.path == tmp_path / "mem" / "a.md"
    assert header.path.is_absolute()


class _CountingFile:
    """Wraps a text file, counting the lines handed out and refusing whole-file reads."""

    def __init__(self, inner: Any, counter: Counter[str], key: str) -> None:
        self._inner = inner
        self._counter = counter
        self._key = key

    def __enter__(self) -> _CountingFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._inner.close()

    def readline(self, *args: Any) -> str:
        line: str = self._inner.readline(*args)
        if line:
            self._counter[self._key] += 1
        return line

    def read(self, *args: Any) -> str:
        raise AssertionError("the scanner must read heads line by line")

    def __iter__(self) -> _CountingFile:
        return self

    def __next__(self) -> str:
        line = self.readline()
        if not line:
            raise StopIteration
        return line


@pytest.fixture
def counted_open(monkeypatch: pytest.MonkeyPatch) -> tuple[Counter[str], Counter[str]]:
    """Route the scanner's ``open`` through a wrapper: (opens per path, lines per path)."""
    opens: Counter[str] = Counter()
    lines: Counter[str] = Counter()

    def counting_open(path: Any, *args: Any, **kwargs: Any) -> _CountingFile:
        key = os.fspath(path)
        opens[key] += 1
        return _CountingFile(open(path, *args, **kwargs), lines, key)

    monkeypatch.setattr(_scan, "open", counting_open, raising=False)
    return opens, lines


def test_over_1000_files_only_the_newest_heads_are_read(
    tmp_path: Path, counted_open: tuple[Counter[str], Counter[str]]
) -> None:
    opens, _ = counted_open
    total = 1_050
    for i in range(total):
        _memory(tmp_path, f"m{i:04d}.md", mtime=BASE_TIME + i, description=f"memory {i}")
    headers = scan_memory_files(tmp_path)
    assert len(headers) == 200
    newest = [f"m{i:04d}.md" for i in range(total - 1, total - 201, -1)]
    assert [h.filename for h in headers] == newest
    assert headers[0].description == f"memory {total - 1}"
    assert set(opens) == {str(tmp_path / name) for name in newest}
    assert set(opens.values()) == {1}


def test_only_the_head_of_a_long_file_is_read(
    tmp_path: Path, counted_open: tuple[Counter[str], Counter[str]]
) -> None:
    _, lines = counted_open
    long_file = tmp_path / "long.md"
    # Frontmatter that starts after line 30 is outside the head, so it is never seen.
    filler = [f"line {i}" for i in range(FRONTMATTER_MAX_LINES)]
    rest = ["---", "name: too late", "---"] + [f"body {i}" for i in range(10_000)]
    long_file.write_text("\n".join(filler + rest) + "\n", encoding="utf-8")
    short = _memory(tmp_path, "short.md", mtime=BASE_TIME, body="\n".join(["x"] * 10_000))
    os.utime(long_file, (BASE_TIME + 1, BASE_TIME + 1))

    headers = scan_memory_files(tmp_path)
    assert [h.filename for h in headers] == ["long.md", "short.md"]
    assert headers[0].name is None
    assert headers[1].name == "n"
    assert lines[str(long_file)] == FRONTMATTER_MAX_LINES
    assert lines[str(short)] == FRONTMATTER_MAX_LINES


def test_head_of_a_file_without_line_breaks_is_bounded(
    tmp_path: Path, counted_open: tuple[Counter[str], Counter[str]]
) -> None:
    huge = tmp_path / "huge.md"
    huge.write_text("---\nname: n\n---\n" + "x" * 1_000_000, encoding="utf-8")
    [header] = scan_memory_files(tmp_path)
    assert header.name == "n"


def test_file_deleted_after_listing_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _memory(tmp_path, "a.md", mtime=BASE_TIME)
    gone_before_stat = _memory(tmp_path, "b.md", mtime=BASE_TIME - 1)
    gone_before_read = _memory(tmp_path, "c.md", mtime=BASE_TIME - 2)
    real_stat, real_read = _scan._stat_mtime, _scan._read_head

    def stat_after_delete(path: str) -> float:
        if path == str(gone_before_stat):
            gone_before_stat.unlink()
        return real_stat(path)

    def read_after_delete(path: str) -> str:
        if path == str(gone_before_read):
            gone_before_read.unlink()
        return real_read(path)

    monkeypatch.setattr(_scan, "_stat_mtime", stat_after_delete)
    monkeypatch.setattr(_scan, "_read_head", read_after_delete)
    assert [h.filename for h in scan_memory_files(tmp_path)] == ["a.md"]


def test_unreadable_file_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _memory(tmp_path, "ok.md", mtime=BASE_TIME)
    locked = _memory(tmp_path, "locked.md", mtime=BASE_TIME - 1)
    real_read = _scan._read_head

    def deny(path: str) -> str:
        if path == str(locked):
            raise PermissionError(13, "Permission denied", path)
        return real_read(path)

    monkeypatch.setattr(_scan, "_read_head", deny)
    assert [h.filename for h in scan_memory_files(tmp_path)] == ["ok.md"]


def test_unlistable_directory_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _memory(tmp_path, "ok.md", mtime=BASE_TIME)
    _memory(tmp_path, "closed/hidden.md", mtime=BASE_TIME)
    real_scandir = os.scandir

    def scandir(path: Any) -> Any:
        if Path(path) == tmp_path / "closed":
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert [h.filename for h in scan_memory_files(tmp_path)] == ["ok.md"]


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root can read any file"
)
def test_chmod_000_file_and_directory_are_skipped(tmp_path: Path) -> None:
    _memory(tmp_path, "ok.md", mtime=BASE_TIME)
    locked = _memory(tmp_path, "locked.md", mtime=BASE_TIME)
    _memory(tmp_path, "closed/hidden.md", mtime=BASE_TIME)
    locked.chmod(0)
    (tmp_path / "closed").chmod(0)
    try:
        assert [h.filename for h in scan_memory_files(tmp_path)] == ["ok.md"]
    finally:
        locked.chmod(0o644)
        (tmp_path / "closed").chmod(0o755)


def test_bad_utf8_is_replaced_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "bad.md"
    path.write_bytes(b"---\nname: caf\xe9\ntype: user\n---\nbody \xff\n")
    [header] = scan_memory_files(tmp_path)
    assert header.name == "caf\ufffd"
    assert header.type == "user"


def test_crlf_file_is_parsed(tmp_path: Path) -> None:
    (tmp_path / "crlf.md").write_bytes(b"---\r\nname: n\r\ndescription: d\r\n---\r\nbody\r\n")
    [header] = scan_memory_files(tmp_path)
    assert (header.name, header.description) == ("n", "d")


def _header(**overrides: Any) -> MemoryHeader:
    fields: dict[str, Any] = {
        "filename": "user_role.md",
        "path": Path("/m/user_role.md"),
        "mtime": BASE_TIME,
        "name": "Role",
        "description": "Data scientist focused on logging",
        "type": "user",
    }
    fields.update(overrides)
    return MemoryHeader(**fields)


def test_manifest_line_format() -> None:
    headers = [
        _header(),
        _header(filename="team/ci.md", type=None, mtime=BASE_TIME + 0.5),
        _header(filename="old.md", description=None, mtime=0.0),
        _header(filename="e.md", description="", type="reference", mtime=BASE_TIME + 0.0019),
    ]
    assert format_manifest(headers) == (
        "- [user] user_role.md (2026-03-05T14:03:22.000Z): Data scientist focused on logging\n"
        "- team/ci.md (2026-03-05T14:03:22.500Z): Data scientist focused on logging\n"
        "- [user] old.md (1970-01-01T00:00:00.000Z)\n"
        "- [reference] e.md (2026-03-05T14:03:22.001Z)"
    )


def test_manifest_edge_cases() -> None:
    assert format_manifest([]) == ""
    one_line = format_manifest([_header(description="first\n  second\r\nthird")])
    assert one_line.endswith(": first second third")
    assert "\n" not in one_line
    # A float just under a millisecond boundary still shows that millisecond.
    assert "22.123Z" in format_manifest([_header(mtime=BASE_TIME + 0.123)])
    assert "9999-12-31T23:59:59.999Z" in format_manifest([_header(mtime=1e300)])


def test_manifest_of_a_scan(tmp_path: Path) -> None:
    _memory(tmp_path, "a.md", mtime=BASE_TIME, description="note: has colon", kind="project")
    assert format_manifest(scan_memory_files(tmp_path)) == (
        "- [project] a.md (2026-03-05T14:03:22.000Z): note: has colon"
    )
