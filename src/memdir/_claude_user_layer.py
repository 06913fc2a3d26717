"""The user layer in Claude Code: one import line in the user's own ``CLAUDE.md``.

Claude Code loads ``<config home>/CLAUDE.md`` into every session of every project, and
follows an ``@path`` line in it by loading that file too, shown as the user's global
instructions (checked with 2.1.332: no approval is asked for an import in the user's own
file). Pointing one such line at the user layer's ``MEMORY.md`` makes every project's
session see the user layer's index. The user's file comes before the project's memory in
the request, so the project's index, read later, is the one that stands where the two
disagree; the block says so in words too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from memdir._claude_settings import claude_config_home
from memdir.store import MEMDIR_USER_DIR_ENV, MemoryDir, atomic_write, user_memory_dir

__all__ = [
    "UserLayerChange",
    "claude_md_path",
    "install_user_layer",
    "user_layer_block",
    "user_layer_on",
]

_HEADING = "# memdir user memory"


@dataclass(frozen=True, kw_only=True)
class UserLayerChange:
    """What adding or removing the import did to the user's ``CLAUDE.md``."""

    path: Path
    """The user's ``CLAUDE.md``."""
    changed: bool
    """Whether its text changes."""
    written: bool
    """Whether it was written (False for a dry run or when nothing changed)."""


def claude_md_path(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path:
    """The user's own ``CLAUDE.md``: in ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    config = claude_config_home(env)
    if not config.is_absolute():
        config = (cwd or Path.cwd()) / config
    return config / "CLAUDE.md"


def user_layer_block(user_dir: MemoryDir) -> str:
    """The lines memdir adds: a heading, what the layer is and that the project's memory
    wins, and the ``@`` import of the layer's index."""
    return (
        f"{_HEADING}\n"
        "Memories about me that follow me across projects (memdir's user layer). Where a "
        "project's own memory says otherwise, the project's memory wins.\n"
        f"@{user_dir.entrypoint}\n"
    )


def _without_block(text: str) -> str:
    """``text`` with memdir's block taken out (the heading, up to its import line)."""
    lines = text.splitlines(keepends=True)
    kept: list[str] = []
    skipping = False
    for line in lines:
        if line.rstrip("\n") == _HEADING:
            skipping = True
            continue
        if skipping:
            if line.startswith("@"):
                skipping = False
            continue
        kept.append(line)
    return "".join(kept).rstrip("\n") + ("\n" if kept and "".join(kept).strip() else "")


def install_user_layer(
    user_dir: MemoryDir,
    claude_md: Path,
    *,
    uninstall: bool = False,
    dry_run: bool = False,
) -> UserLayerChange:
    """Add (or with ``uninstall`` remove) the import of ``user_dir``'s index to the
    user's ``CLAUDE.md``, keeping every other line. Running it twice changes nothing; a
    block pointing at another folder is replaced. Installing creates the layer's folder
    and an empty index, so the import finds its file from the first session on."""
    try:
        before = claude_md.read_text(encoding="utf-8")
    except FileNotFoundError:
        before = ""
    rest = _without_block(before)
    after = rest if uninstall else (rest + "\n" if rest else "") + user_layer_block(user_dir)
    changed = after != before
    if dry_run:
        return UserLayerChange(path=claude_md, changed=changed, written=False)
    if not uninstall:
        user_dir.ensure()
        if not os.path.lexists(user_dir.entrypoint):
            atomic_write(user_dir.entrypoint, "")
    if changed:
        # Through a symlink to the file it names: a CLAUDE.md linked from a dotfiles
        # repository stays linked.
        atomic_write(os.path.realpath(claude_md), after)
    return UserLayerChange(path=claude_md, changed=changed, written=changed)


def user_layer_on(env: Mapping[str, str] | None = None) -> MemoryDir | None:
    """The user layer memdir's extraction saves to, or None when it is off.

    On when ``$MEMDIR_USER_DIR`` names one, or when the user's ``CLAUDE.md`` imports the
    default layer's index (``memdir install claude-code --user-layer`` did it): a layer
    that Claude Code loads is worth filling; one that nothing loads is not.
    """
    env = os.environ if env is None else env
    layer = user_memory_dir(env)
    if env.get(MEMDIR_USER_DIR_ENV):
        return layer
    try:
        text = claude_md_path(env).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    wanted = f"@{layer.entrypoint}"
    return layer if any(line.strip() == wanted for line in text.splitlines()) else None
