"""``memdir ls``, ``show`` and ``dir``: looking after the memory by hand."""

from __future__ import annotations

import time
from pathlib import Path

import click

from memdir._cli._common import (
    choose_memory_dir,
    fail,
    json_option,
    memory_dir_option,
    print_json,
)
from memdir.store import MemoryDir, MemoryHeader


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
    _print_table(headers, time.time())


def age(seconds: float) -> str:
    """How long ago, in the largest whole unit: ``just now``, ``5 min``, ``3 h``,
    ``2 days``, ``7 weeks``."""
    minutes = max(0, int(seconds // 60))
    if minutes < 1:
        return "just now"
    if minutes < 60:
        return f"{minutes} min"
    if minutes < 24 * 60:
        return f"{minutes // 60} h"
    days = minutes // (24 * 60)
    if days < 14:
        return f"{days} day{'s' if days != 1 else ''}"
    return f"{days // 7} weeks"


def _print_table(headers: list[MemoryHeader], now: float) -> None:
    """The memories as a table on stdout: name, type, age and description; a name is
    what ``show`` and ``forget`` take."""
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("name", no_wrap=True, max_width=40, overflow="ellipsis")
    table.add_column("type", no_wrap=True)
    table.add_column("age", justify="right", no_wrap=True)
    table.add_column("description", overflow="fold")
    for h in headers:
        name = h.name or h.filename.removesuffix(".md")
        table.add_row(name, h.type or "?", age(now - h.mtime), h.description or "")
    # Markup off: names and descriptions are the memories' own text, brackets and all.
    Console(highlight=False, markup=False, emoji=False).print(table)


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
