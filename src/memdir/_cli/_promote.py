"""``memdir promote`` and ``memdir demote``: move a memory between the project, the user
layer and the team folder, with its index line."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import click

from memdir._cli._common import fail, json_option, memory_dir_option, print_json
from memdir._cli._existing import existing_memory_dir
from memdir.errors import MemdirError
from memdir.store import MemoryDir, MemoryHeader
from memdir.store._provenance import record_changes
from memdir.store._user_layer import move_memory, user_memory_dir

Layer = Literal["user", "team"]


def _layer_root(memory: MemoryDir, layer: Layer) -> Path:
    return memory.team_dir if layer == "team" else user_memory_dir().root


def _match(root: Path, name: str) -> MemoryHeader | None:
    """The memory directly in ``root`` called ``name`` (its file name, with or without
    ``.md``, or its frontmatter ``name``); a name two memories share stops the command."""
    if not root.is_dir():
        return None
    wanted = name.strip().removesuffix(".md")
    # Directly in root only: the team folder inside a project's is another scope.
    headers = [h for h in MemoryDir(root).scan(limit=100_000) if "/" not in h.filename]
    for header in headers:
        if header.filename.removesuffix(".md") == wanted:
            return header
    folded = " ".join(name.split()).casefold()
    named = [h for h in headers if " ".join((h.name or "").split()).casefold() == folded]
    if len(named) > 1:
        fail(f"{name!r} names several memories in {root}; give the file name")
    return named[0] if named else None


def _move(header: MemoryHeader, from_root: Path, to_root: Path, shared: bool, what: str) -> Path:
    try:
        moved = move_memory(
            header.path, from_index=from_root / "MEMORY.md", to_dir=to_root, shared=shared
        )
    except (OSError, MemdirError) as exc:
        fail(f"not {what} {header.filename}: {exc}", kind="store")
    # Each scope's history tells the move: gone from one, made in the other.
    by = {"promoting": "promote", "demoting": "demote"}.get(what, what)
    record_changes(MemoryDir(from_root), [header.path], by=by, what="removed")
    record_changes(MemoryDir(to_root), [moved], by=by, created=[moved])
    return moved


def _report(as_json: bool, verb: str, header: MemoryHeader, to: Path, scope: str) -> None:
    if as_json:
        print_json({verb: header.filename, "from": str(header.path), "to": str(to), "scope": scope})
    else:
        click.echo(f"{verb} {header.filename} to the {scope} ({to})")


@click.command("promote")
@click.argument("name")
@click.option(
    "--to",
    "layer",
    type=click.Choice(["user", "team"]),
    required=True,
    help="user: the user layer every project loads; team: the project's shared team/ folder.",
)
@memory_dir_option
@json_option
def promote_command(name: str, layer: Layer, memory_dir: Path | None, as_json: bool) -> None:
    """Move the project memory NAME (its file name or its name) to the user layer or the
    team folder, with its line in MEMORY.md.

    The user layer is $MEMDIR_USER_DIR, else memdir-user/ in Claude Code's config home;
    `memdir install claude-code --user-layer` makes Claude Code load it in every project.
    A memory holding a credential stays where it is; so does one whose name is taken
    there. Either way nothing is written, and it exits 2 with the reason.
    """
    memory = existing_memory_dir(memory_dir, None, write=True)
    header = _match(memory.root, name)
    if header is None:
        fail(f"no memory named {name!r} in {memory.root} (see `memdir ls`)")
    to_root = _layer_root(memory, layer)
    moved = _move(header, memory.root, to_root, shared=True, what="promoting")
    scope = "user layer" if layer == "user" else "team folder"
    _report(as_json, "promoted", header, moved, scope)


@click.command("demote")
@click.argument("name")
@click.option(
    "--from",
    "layer",
    type=click.Choice(["user", "team"]),
    default=None,
    help="Where NAME is now (default: wherever it is found, the user layer or the team folder).",
)
@memory_dir_option
@json_option
def demote_command(name: str, layer: Layer | None, memory_dir: Path | None, as_json: bool) -> None:
    """Move the memory NAME from the user layer or the team folder back into this
    project's memory, with its line in MEMORY.md. A name taken in the project, or found
    in neither place, stops it (exit 2, nothing written)."""
    memory = existing_memory_dir(memory_dir, None, write=True)
    layers: tuple[Layer, ...] = (layer,) if layer is not None else ("user", "team")
    found = [
        (each, header)
        for each in layers
        if (header := _match(_layer_root(memory, each), name)) is not None
    ]
    if not found:
        where = " or ".join(f"the {each} layer" for each in layers)
        fail(f"no memory named {name!r} in {where}")
    if len(found) > 1:
        fail(f"{name!r} is in both the user layer and the team folder; say which with --from")
    each, header = found[0]
    moved = _move(header, _layer_root(memory, each), memory.root, shared=False, what="demoting")
    _report(as_json, "demoted", header, moved, "project")
