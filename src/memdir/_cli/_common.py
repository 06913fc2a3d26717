"""What the commands share: choosing the model and the memory directory, and failing well."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

import click

from memdir.errors import MemdirError
from memdir.models import Model, resolve_model
from memdir.store import MEMDIR_DIR_ENV, MemoryDir, default_memory_dir

DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"
DEFAULT_OPENAI_MODEL = "gpt-4.1-mini"

# Exit codes: 0 done, 1 an extraction failed, 2 bad usage or unreadable input.
EXIT_FAILED = 1
EXIT_USAGE = 2


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Stop with a one-line reason on stderr."""
    click.echo(f"memdir: {message}", err=True)
    sys.exit(code)


def model_spec(option: str | None, env: Mapping[str, str] | None = None) -> tuple[str, bool]:
    """The model spec to use, and whether it fell back to offline for lack of a provider.

    ``--model``, else ``$MEMDIR_MODEL``, else Anthropic when ``$ANTHROPIC_API_KEY`` is
    set, else OpenAI when ``$OPENAI_API_KEY`` or ``$OPENAI_BASE_URL`` is, else offline.
    """
    env = os.environ if env is None else env
    if option:
        return option, False
    if env.get("MEMDIR_MODEL"):
        return env["MEMDIR_MODEL"], False
    if env.get("ANTHROPIC_API_KEY"):
        return f"anthropic:{DEFAULT_ANTHROPIC_MODEL}", False
    if env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"):
        return f"openai:{DEFAULT_OPENAI_MODEL}", False
    return "offline", True


def choose_model(option: str | None, base_url: str | None, *, quiet: bool = False) -> Model:
    """The model for a command, announcing the offline fallback on stderr."""
    spec, fell_back = model_spec(option)
    try:
        model = resolve_model(spec, base_url=base_url)
    except MemdirError as exc:
        fail(str(exc))
    missing = missing_credentials(spec, base_url)
    if missing is not None:
        fail(missing)
    if fell_back and not quiet:
        click.echo(
            "memdir: no model provider configured (set ANTHROPIC_API_KEY or OPENAI_API_KEY, "
            "or pass --model); using the offline rule-based model",
            err=True,
        )
    return model


def missing_credentials(
    spec: str, base_url: str | None, env: Mapping[str, str] | None = None
) -> str | None:
    """Why ``spec`` cannot reach its provider for lack of credentials, or None.

    Checked before anything is written, the same way for each provider: a run that could
    only fail would otherwise leave state behind and report failures to retry.
    """
    env = os.environ if env is None else env
    provider = spec.partition(":")[0]
    if provider == "anthropic" and not (
        env.get("ANTHROPIC_API_KEY") or env.get("ANTHROPIC_AUTH_TOKEN")
    ):
        return f"{spec} needs a key: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)"
    if provider == "openai" and not (env.get("OPENAI_API_KEY") or base_url):
        return f"{spec} needs a key: set OPENAI_API_KEY, or --base-url for a local server"
    return None


def usable_memory_dir(path: Path) -> str | None:
    """Why ``path`` cannot be a memory directory (a file in the way), or None."""
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            if not candidate.is_dir():
                what = "it" if candidate == path else str(candidate)
                return f"{path} cannot be a memory directory: {what} is a file, not a folder"
            return None
    return None


def choose_memory_dir(option: Path | None, project: str | None) -> MemoryDir:
    """``--memory-dir``, else ``$MEMDIR_DIR``, else Claude Code's folder for ``project``;
    stops with one line when that cannot be a folder."""
    try:
        chosen = option if option is not None else default_memory_dir(project or os.getcwd())
    except MemdirError as exc:
        fail(str(exc))
    problem = usable_memory_dir(Path(chosen))
    if problem is not None:
        fail(problem)
    return MemoryDir(chosen)


def print_json(value: Any) -> None:
    """One JSON document on stdout."""
    click.echo(json.dumps(value, indent=2, default=str, ensure_ascii=False))


memory_dir_option = click.option(
    "--memory-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help=f"The memory directory (default: ${MEMDIR_DIR_ENV}, else Claude Code's for the project).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for machines.")


async def close_model(model: Model) -> None:
    """Close the connections a model holds for the running loop, if it has any."""
    closer = getattr(model, "aclose", None)
    if closer is None:
        closer = getattr(getattr(model, "client", None), "close", None)
    if closer is not None:
        with contextlib.suppress(Exception):  # tidiness; it must not change the outcome
            await closer()


model_option = click.option(
    "--model", "model_option", help="offline, anthropic:MODEL or openai:MODEL."
)
base_url_option = click.option(
    "--base-url", help="The provider's endpoint (for OpenAI-compatible servers)."
)
every_option = click.option(
    "--every",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Run after every Nth completed turn, as a live session would.",
)
team_option = click.option("--team", is_flag=True, help="Also save shared team memory in team/.")
