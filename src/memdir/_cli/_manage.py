"""``memdir ls``, ``show``, ``forget`` and ``dir``: looking after the memory by hand."""

from __future__ import annotations

import os
import re
from pathlib import Path

import click

from memdir._cli._common import (
    choose_memory_dir,
    fail,
    json_option,
    memory_dir_option,
    print_json,
)
from memdir.errors import MemdirError
from memdir.store import MemoryDir, MemoryHeader, update_file

_POINTER = re.compile(r"\]\(([^)]+)\)")


def _find(memory: MemoryDir, name: str) -> MemoryHeader:  # noqa: RET503 (fail() exits)
    """The memory called ``name``: its file name (with or without .md) or its title."""
    headers = memory.scan(limit=100_000)
    wanted = name.removesuffix(".md")
    for header in headers:
        if header.filename.removesuffix(".md") == wanted:
            return header
    by_title = [h for h in headers if (h.name or "").casefold() == name.casefold()]
    if len(by_title) == 1:
        return by_title[0]
    if len(by_title) > 1:
        names = ", ".join(h.filename for h in by_title)
        fail(f"{name!r} names several memories ({names}); give the file name")
    fail(f"no memory named {name!r} in {memory.root}")


@click.command("ls")
@memory_dir_option
@json_option
def ls_command(memory_dir: Path | None, as_json: bool) -> None:
    """List the memories, newest first, with their types and descriptions."""
    memory = choose_memory_dir(memory_dir, None)
    headers = memory.scan(limit=100_000)
    if as_json:
        print_json(
            {
                "memory_dir": str(memory.root),
                "memories": [
                    {
                        "file": h.filename,
                        "name": h.name,
                        "type": h.type,
                        "description": h.description,
                        "modified": h.mtime,
                    }
                    for h in headers
                ],
            }
        )
        return
    if not headers:
        click.echo(f"no memories in {memory.root}")
        return
    width = max(len(h.filename) for h in headers)
    for h in headers:
        kind = f"[{h.type}]" if h.type else "[?]"
        click.echo(f"{kind:<12} {h.filename:<{width}}  {h.description or h.name or ''}")


@click.command("show")
@click.argument("name")
@memory_dir_option
@json_option
def show_command(name: str, memory_dir: Path | None, as_json: bool) -> None:
    """Print the memory NAME (its file name, or its title)."""
    memory = choose_memory_dir(memory_dir, None)
    header = _find(memory, name)
    try:
        text = header.path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        fail(f"cannot read {header.path}: {exc.strerror or exc}")
    if as_json:
        print_json({"file": header.filename, "path": str(header.path), "content": text})
    else:
        click.echo(text, nl=not text.endswith("\n"))


@click.command("forget")
@click.argument("name")
@memory_dir_option
@json_option
def forget_command(name: str, memory_dir: Path | None, as_json: bool) -> None:
    """Delete the memory NAME and its line in MEMORY.md."""
    memory = choose_memory_dir(memory_dir, None)
    header = _find(memory, name)
    index = header.path.parent / "MEMORY.md"
    target = header.path.name

    def drop_pointer(text: str | None) -> str:
        if text is None:
            return ""
        kept = [
            line
            for line in text.splitlines(keepends=True)
            if not any(os.path.basename(p) == target for p in _POINTER.findall(line))
        ]
        return "".join(kept)

    try:
        if index.exists():
            update_file(index, drop_pointer)
        header.path.unlink()
    except (OSError, MemdirError) as exc:
        fail(f"cannot forget {header.filename}: {exc}")
    if as_json:
        print_json({"forgotten": header.filename, "path": str(header.path)})
    else:
        click.echo(f"forgot {header.filename}")


@click.command("dir")
@click.argument("project", required=False, type=click.Path(file_okay=False, path_type=Path))
@json_option
def dir_command(project: Path | None, as_json: bool) -> None:
    """Print the memory directory of PROJECT (default: the current directory).

    This is the folder Claude Code uses for the project: under the Claude config home
    ($CLAUDE_CONFIG_DIR or ~/.claude), keyed by the main repository's root, so every git
    worktree shares it. $MEMDIR_DIR overrides it.
    """
    memory = choose_memory_dir(None, str(project) if project else None)
    if as_json:
        count = len(memory.scan(limit=100_000)) if memory.root.is_dir() else 0
        print_json(
            {
                "memory_dir": str(memory.root),
                "exists": memory.root.is_dir(),
                "entrypoint": str(memory.entrypoint),
                "memories": count,
            }
        )
    else:
        click.echo(str(memory.root))
