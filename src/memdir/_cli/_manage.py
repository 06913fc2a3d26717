"""``memdir ls``, ``show`` and ``dir``: looking after the memory by hand."""

from __future__ import annotations

import posixpath
import re
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
from memdir._cli._existing import existing_memory_dir
from memdir._cli._why import print_history
from memdir.provenance import read_changes
from memdir.store import MemoryDir, MemoryHeader

# ``[Title](file.md)`` in an index line: the title and where it points.
_INDEX_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def _index_titles(memory: MemoryDir) -> list[tuple[str, str]]:
    """``(title, filename)`` for each link in ``MEMORY.md`` (and the team's index), the
    filename relative to the memory directory as :class:`MemoryHeader` gives it."""
    found: list[tuple[str, str]] = []
    for index in (memory.entrypoint, memory.team_entrypoint):
        try:
            text = index.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        base = index.parent.relative_to(memory.root).as_posix()
        for title, link in _INDEX_LINK.findall(text):
            target = posixpath.normpath(posixpath.join(base, link.strip("<>").split("#")[0]))
            found.append((title.strip(), target))
    return found


def _find(memory: MemoryDir, name: str) -> MemoryHeader:  # noqa: RET503 (fail() exits)
    """The memory called ``name``: its file name as ``ls`` shows it (with or without
    ``.md``), or its title, from its frontmatter or from its line in ``MEMORY.md``."""
    headers = memory.scan(limit=100_000)
    wanted = name.strip().removesuffix(".md")
    for header in headers:
        if header.filename.removesuffix(".md") == wanted:
            return header
    title = " ".join(name.split()).casefold()
    by_file = {h.filename: h for h in headers}
    titled = {h.filename for h in headers if " ".join((h.name or "").split()).casefold() == title}
    titled.update(
        file
        for text, file in _index_titles(memory)
        if file in by_file and " ".join(text.split()).casefold() == title
    )
    if len(titled) == 1:
        return by_file[titled.pop()]
    if len(titled) > 1:
        names = ", ".join(sorted(titled))
        fail(f"{name!r} names several memories ({names}); give the file name")
    fail(f"no memory named {name!r} in {memory.root} (see `memdir ls` for the names)")


@click.command("ls")
@memory_dir_option
@json_option
def ls_command(memory_dir: Path | None, as_json: bool) -> None:
    """List the memories, newest first, with their types and descriptions."""
    memory = existing_memory_dir(memory_dir, None)
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


# Room for the type, the age and some description beside the file name.
_OTHER_COLUMNS = 40


def _print_table(headers: list[MemoryHeader], now: float) -> None:
    """The memories as a table on stdout: file, type, age and description. The file
    name is shown whole, however long: it is what ``show`` and ``forget`` take."""
    from rich.console import Console
    from rich.table import Table

    widest = max(len(h.filename) for h in headers)
    table = Table(box=None, header_style="bold", pad_edge=False)
    # The description gives way before the name is ever cut.
    table.add_column("file", no_wrap=True, min_width=widest, overflow="ignore")
    table.add_column("type", no_wrap=True)
    table.add_column("age", justify="right", no_wrap=True)
    table.add_column("description", overflow="fold")
    for h in headers:
        table.add_row(h.filename, h.type or "?", age(now - h.mtime), h.description or "")
    # Markup off: names and descriptions are the memories' own text, brackets and all.
    console = Console(highlight=False, markup=False, emoji=False)
    if console.width < widest + _OTHER_COLUMNS:
        # Too narrow for the longest name: lines wider than the terminal, which wraps
        # them, rather than a name cut short.
        console = Console(highlight=False, markup=False, emoji=False, width=widest + _OTHER_COLUMNS)
    console.print(table)


@click.command("show")
@click.argument("name")
@click.option(
    "--history",
    "with_history",
    is_flag=True,
    help="Tell where it came from: each run that wrote it, its session and messages.",
)
@memory_dir_option
@json_option
def show_command(name: str, with_history: bool, memory_dir: Path | None, as_json: bool) -> None:
    """Print the memory NAME: its file name as `memdir ls` shows it (with or without
    .md), or its title (from the file or from MEMORY.md)."""
    memory = existing_memory_dir(memory_dir, None)
    if with_history:
        # A forgotten memory has a history but no file: its name is looked up in the
        # records first, its title only among the files there now.
        wanted = name.strip() if name.strip().endswith(".md") else f"{name.strip()}.md"
        if not (memory.root / wanted).is_file() and read_changes(memory, wanted):
            print_history(memory, wanted, as_json)
        else:
            print_history(memory, _find(memory, name).filename, as_json)
        return
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
