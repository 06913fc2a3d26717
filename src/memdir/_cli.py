"""The click application behind ``memdir`` (imported only when click is installed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from memdir import __version__
from memdir.errors import MemdirError
from memdir.store import MemoryDir, default_memory_dir


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="memdir")
def cli() -> None:
    """Automatic long-term memory for LLM agents.

    memdir keeps an agent's memories as Markdown files in a memory directory, indexed by
    MEMORY.md, in the same place Claude Code keeps its own, so both share one memory.
    """


@cli.command("dir")
@click.argument(
    "project",
    required=False,
    type=click.Path(file_okay=False, path_type=Path),
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object instead of a path.")
def dir_command(project: Path | None, as_json: bool) -> None:
    """Print the memory directory of PROJECT (default: the current directory).

    This is the folder Claude Code uses for the project: under the Claude config home
    ($CLAUDE_CONFIG_DIR or ~/.claude), keyed by the main repository's root, so every git
    worktree shares it. $MEMDIR_DIR overrides it.
    """
    try:
        path = default_memory_dir(project or Path(os.getcwd()))
    except MemdirError as exc:
        raise click.UsageError(str(exc)) from exc
    if as_json:
        md = MemoryDir(path)
        click.echo(
            json.dumps(
                {
                    "memory_dir": str(path),
                    "exists": path.is_dir(),
                    "entrypoint": str(md.entrypoint),
                    "memories": len(md.scan(limit=10_000)) if path.is_dir() else 0,
                }
            )
        )
    else:
        click.echo(str(path))
