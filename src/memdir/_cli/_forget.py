"""``memdir forget``: take a memory out, asking first, and ``--undo`` to put it back."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

import click

from memdir._cli._common import (
    fail,
    json_option,
    memory_dir_option,
    print_json,
)
from memdir._cli._existing import existing_memory_dir
from memdir._cli._manage import _find
from memdir.errors import MemdirError
from memdir.store import MemoryDir, forget_memory, last_trashed, restore_memory


def _interactive() -> bool:
    """Whether there is someone at a terminal to ask (the tests stand in for them)."""
    stdin = sys.stdin
    return stdin is not None and stdin.isatty()


@click.command("forget")
@click.argument("name", required=False)
@click.option("--yes", "-y", is_flag=True, help="Do not ask first (needed without a terminal).")
@click.option("--undo", is_flag=True, help="Restore the last forgotten memory and its index line.")
@memory_dir_option
@json_option
def forget_command(
    name: str | None, yes: bool, undo: bool, memory_dir: Path | None, as_json: bool
) -> None:
    """Forget the memory NAME and its line in MEMORY.md. NAME is its file name as `memdir
    ls` shows it (with or without .md), or its title (from the file or from MEMORY.md).

    It asks first. --yes skips the question, and is needed when stdin is not a terminal:
    without it nothing is removed. Answering no removes nothing either. Both exit 2, as
    does an --undo refused (nothing written).

    What is forgotten goes to the trash (.memdir/trash/ in the memory directory), where
    `memdir forget --undo` finds it to put it back as it was — file and index line — as
    long as no new memory has taken its name. The trash keeps it a week; `memdir dream`
    empties what is older.
    """
    memory = existing_memory_dir(memory_dir, None, write=True)
    if undo:
        if name is not None:
            fail("--undo takes no NAME: it restores the last forgotten memory")
        _undo(memory, as_json)
        return
    if name is None:
        fail("which memory? give its NAME (see `memdir ls`), or --undo")
    header = _find(memory, name)
    if not yes:
        if not _interactive():
            fail(f"not forgetting {header.filename}: no terminal to ask on; pass --yes")
        about = f" ({header.description})" if header.description else ""
        if not click.confirm(f"Forget {header.filename}{about}?", default=False, err=True):
            fail(f"kept {header.filename}")
    try:
        entry = forget_memory(memory, header.path)
    except (OSError, MemdirError) as exc:
        fail(f"cannot forget {header.filename}: {exc}", kind="store")
    if as_json:
        print_json(
            {
                "forgotten": entry.filename,
                "path": str(header.path),
                "index_lines": [text for _, text in entry.index_lines],
                "trash": str(entry.path),
            }
        )
    else:
        click.echo(f"forgot {entry.filename} (memdir forget --undo puts it back)")


def _undo(memory: MemoryDir, as_json: bool) -> None:
    entry = last_trashed(memory)
    if entry is None:
        fail(f"nothing to undo: the trash of {memory.root} is empty")
    try:
        restore_memory(memory, entry)
    except (OSError, MemdirError) as exc:
        fail(f"cannot undo: {exc}", kind="store")
    if as_json:
        when = datetime.datetime.fromtimestamp(entry.forgotten_at, datetime.UTC)
        print_json(
            {
                "restored": entry.filename,
                "path": str(memory.root / entry.filename),
                "index_lines": [text for _, text in entry.index_lines],
                "forgotten_at": when.isoformat(),
            }
        )
    else:
        click.echo(f"restored {entry.filename}")
