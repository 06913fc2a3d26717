"""What the commands share: choosing the model and the memory directory, and failing well."""

from __future__ import annotations

import contextlib
import datetime
import functools
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn, ParamSpec, TypeVar

import click

from memdir.errors import MemdirError, error_info
from memdir.models import (
    DEFAULT_ANTHROPIC_MODEL,
    DEFAULT_OPENAI_MODEL,
    Model,
    in_service,
    provider_of,
    resolve_model,
    retirement,
    upcoming_retirement,
)
from memdir.models._anthropic import MEMDIR_ANTHROPIC_API_KEY_ENV
from memdir.store import ENTRYPOINT_NAME, MEMDIR_DIR_ENV, MemoryDir, default_memory_dir
from memdir.store._atomic import STATE_DIR_NAME
from memdir.transcripts import Transcript, host_model

P = ParamSpec("P")
R = TypeVar("R")


# Exit codes: 0 done, 1 an extraction failed, 2 bad usage or unreadable input.
EXIT_FAILED = 1
EXIT_USAGE = 2


def json_requested() -> bool:
    """Whether the running command was given ``--json``."""
    context = click.get_current_context(silent=True)
    while context is not None:
        if context.params.get("as_json"):
            return True
        context = context.parent
    return False


def fail(
    message: str, code: int = EXIT_USAGE, *, kind: str = "usage", status: int | None = None
) -> NoReturn:
    """Stop with a one-line reason on stderr; with ``--json``, also an ``error`` object
    (``kind``, the provider's ``status``, ``message``) on stdout."""
    line = " ".join(message.split())
    if json_requested():
        print_json({"error": {"kind": kind, "status": status, "message": line}})
    click.echo(f"memdir: {line}", err=True)
    sys.exit(code)


def fail_with(exc: BaseException, what: str | None = None) -> NoReturn:
    """Stop because of ``exc``: exit 1 for a provider's failure (it may pass), 2 for
    anything else (misconfiguration, an unusable memory directory), one line either way."""
    info = error_info(exc)
    message = str(info["message"]) if what is None else f"{what}: {info['message']}"
    status = info["status"]
    code = EXIT_FAILED if info["kind"] == "model" else EXIT_USAGE
    # A bare OSError is the filesystem refusing the memory directory; memdir's own errors
    # say themselves who is at fault.
    bare = isinstance(exc, OSError) and not isinstance(exc, MemdirError)
    kind = "memory_dir" if bare else str(info["kind"])
    fail(message, code, kind=kind, status=status if isinstance(status, int) else None)


MEMDIR_MODEL_ENV = "MEMDIR_MODEL"

NO_MODEL = (
    "no model to run: set MEMDIR_ANTHROPIC_API_KEY, ANTHROPIC_API_KEY or "
    "ANTHROPIC_AUTH_TOKEN (or OPENAI_API_KEY), or pass --model offline for the "
    "rule-based engine"
)
"""Why a command that needs a model stops when no provider is configured: the offline
engine runs only when asked for, never in place of a model the user meant to have."""

_ANTHROPIC_CREDENTIALS = (MEMDIR_ANTHROPIC_API_KEY_ENV, "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


def _can_reach(provider: str | None, env: Mapping[str, str]) -> bool:
    """Whether ``env`` holds what memdir's own client for ``provider`` needs."""
    if provider == "anthropic":
        return any(env.get(name) for name in _ANTHROPIC_CREDENTIALS)
    if provider == "openai":
        return bool(env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"))
    return False


def model_spec(
    option: str | None,
    env: Mapping[str, str] | None = None,
    *,
    host: str | None = None,
    today: datetime.date | None = None,
) -> str | None:
    """The model spec to use, or None when nothing names one and no provider is set up.

    ``--model``, else ``$MEMDIR_MODEL``, else the host's own model (``host``, a name such
    as :func:`~memdir.transcripts.host_model` reads from a transcript; a retired one
    replaced by its successor) when memdir has credentials for its provider, else
    Anthropic's default when ``$MEMDIR_ANTHROPIC_API_KEY``, ``$ANTHROPIC_API_KEY`` or
    ``$ANTHROPIC_AUTH_TOKEN`` is set, else OpenAI's when ``$OPENAI_API_KEY`` or
    ``$OPENAI_BASE_URL`` is. Never ``offline`` unless asked for: None is the caller's to
    report (:data:`NO_MODEL`).
    """
    env = os.environ if env is None else env
    if option:
        return option
    if env.get(MEMDIR_MODEL_ENV):
        return env[MEMDIR_MODEL_ENV]
    if host:
        provider = provider_of(host)
        if provider is not None and _can_reach(provider, env):
            spec = host if host.startswith(f"{provider}:") else f"{provider}:{host}"
            return in_service(spec, today=today)
    if _can_reach("anthropic", env):
        return f"anthropic:{DEFAULT_ANTHROPIC_MODEL}"
    if _can_reach("openai", env):
        return f"openai:{DEFAULT_OPENAI_MODEL}"
    return None


def default_spec_for(transcript: Transcript, env: Mapping[str, str] | None = None) -> str | None:
    """The model spec for extracting ``transcript`` when the user named none on the
    command line: :func:`model_spec` with the model of the host's own last request in it
    (``$MEMDIR_MODEL`` still first); None when no provider is set up."""
    return model_spec(None, env, host=host_model(transcript))


def choose_model(
    option: str | None,
    base_url: str | None,
    *,
    transcript: Transcript | None = None,
    quiet: bool = False,
) -> Model:
    """The model for a command, or stop with one line when there is none to run
    (:data:`NO_MODEL`). With ``transcript``, the default is its host's own model; when
    that one is retired, its replacement, said on stderr unless ``quiet``, as is the day
    a model still served will be retired."""
    host = host_model(transcript) if transcript is not None else None
    spec = model_spec(option, host=host)
    if spec is None:
        fail(NO_MODEL, kind="credentials")
    named = option or os.environ.get(MEMDIR_MODEL_ENV)
    if host is not None and not named and not quiet and retirement(host) is not None:
        click.echo(f"memdir: the session's model {host} is retired; using {spec}", err=True)
    model = model_for(spec, base_url)
    soon = upcoming_retirement(spec) if ":" in spec else None
    if soon is not None and not quiet:
        click.echo(f"memdir: {soon}", err=True)
    return model


class ModelChoice:
    """The models of a command that extracts several transcripts: the one the user named,
    else each transcript's host model (:func:`choose_model`), one model per spec, all
    closed together (:meth:`aclose`)."""

    def __init__(self, option: str | None, base_url: str | None, *, quiet: bool) -> None:
        self._option = option
        self._base_url = base_url
        self._quiet = quiet
        self._by_spec: dict[str, Model] = {}

    def check(self) -> None:
        """Stop with one line now, before any work, when the model a transcript without
        a host model would get cannot run (none configured, retired, no key)."""
        model = choose_model(self._option, self._base_url, quiet=self._quiet)
        self._by_spec[model.name] = model

    def for_transcript(self, transcript: Transcript) -> Model:
        """The model for ``transcript`` (stopping the command when there is none)."""
        host = host_model(transcript)
        spec = model_spec(self._option, host=host)
        model = self._by_spec.get(spec) if spec is not None else None
        if model is None:
            model = choose_model(
                self._option, self._base_url, transcript=transcript, quiet=self._quiet
            )
            self._by_spec[model.name] = model
            if spec is not None:
                self._by_spec[spec] = model
        return model

    async def aclose(self) -> None:
        """Close every model chosen."""
        for model in {id(m): m for m in self._by_spec.values()}.values():
            await close_model(model)


def model_for(spec: str, base_url: str | None) -> Model:
    """The model ``spec`` names, or stop: a retired model first (naming its replacement),
    then missing credentials (before the SDK's own complaint), then a spec no provider
    knows."""
    retired = retirement(spec) if ":" in spec else None
    if retired is not None:
        fail(retired, kind="model_spec")
    missing = missing_credentials(spec, base_url)
    if missing is not None:
        fail(missing, kind="credentials")
    try:
        return resolve_model(spec, base_url=base_url)
    except MemdirError as exc:
        fail(str(exc), kind="model_spec")


def missing_credentials(
    spec: str, base_url: str | None, env: Mapping[str, str] | None = None
) -> str | None:
    """Why ``spec`` cannot reach its provider for lack of credentials, or None.

    Checked before anything is written, the same way for each provider: a run that could
    only fail would otherwise leave state behind and report failures to retry.
    """
    env = os.environ if env is None else env
    provider = spec.partition(":")[0]
    if provider == "anthropic" and not _can_reach("anthropic", env):
        return (
            f"{spec} needs a key: set ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, "
            f"or {MEMDIR_ANTHROPIC_API_KEY_ENV} for a key memdir alone uses"
        )
    if provider == "openai" and not (env.get("OPENAI_API_KEY") or base_url):
        return f"{spec} needs a key: set OPENAI_API_KEY, or --base-url for a local server"
    return None


def _first_existing(path: Path) -> Path | None:
    """``path`` or its nearest ancestor that exists (as anything, a dangling link too)."""
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return None


def usable_memory_dir(path: Path, *, write: bool = False) -> str | None:
    """Why ``path`` cannot be a memory directory, or None.

    Checked before a command reads or writes anything, so that a folder that cannot work
    costs one line and no half-done work: a file where a folder must be, memdir's own
    ``.memdir`` folder or the ``MEMORY.md`` index being something else, and, for a
    command that writes (``write``), a read-only filesystem or a folder this user may
    not write to. Permissions are checked with :func:`os.access`, which a superuser
    passes; a read-only mount stops everyone and is checked on its own.
    """
    existing = _first_existing(path)
    if existing is None:
        return None
    if not existing.is_dir():
        what = "it" if existing == path else str(existing)
        return f"{path} cannot be a memory directory: {what} is a file, not a folder"
    if existing == path:
        state = path / STATE_DIR_NAME
        if os.path.lexists(state) and not state.is_dir():
            return (
                f"{path} cannot be used: {state} is a file, but memdir keeps its state "
                "in that folder; move the file away"
            )
        index = path / ENTRYPOINT_NAME
        if os.path.lexists(index) and not index.is_file():
            return f"{path} cannot be used: its index {index} is not a file"
    if not write:
        return None
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    if read_only:
        return f"{path} cannot be written: {existing} is on a read-only filesystem"
    folders = [existing] if existing != path else [path, path / STATE_DIR_NAME]
    for folder in folders:
        if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
            return f"{path} cannot be written: no permission to write in {folder}"
    return None


def find_memory_dir(
    option: Path | None, project: str | None, *, write: bool = False
) -> MemoryDir | str:
    """``--memory-dir``, else ``$MEMDIR_DIR``, else Claude Code's folder for ``project``;
    or, when that cannot be used (:func:`usable_memory_dir`), the reason in one line."""
    try:
        chosen = option if option is not None else default_memory_dir(project or os.getcwd())
        memory = MemoryDir(chosen)
    except MemdirError as exc:
        return str(exc)
    # The path MemoryDir will use (``~`` expanded, absolute), not the one as typed.
    return usable_memory_dir(memory.root, write=write) or memory


def choose_memory_dir(
    option: Path | None, project: str | None, *, write: bool = False
) -> MemoryDir:
    """:func:`find_memory_dir`, stopping the command with its reason when there is one."""
    found = find_memory_dir(option, project, write=write)
    if isinstance(found, str):
        fail(found, kind="memory_dir")
    return found


def guarded(callback: Callable[P, R]) -> Callable[P, R]:
    """``callback`` (a command's), with any memdir or filesystem error it lets out turned
    into one line and an exit status (:func:`fail_with`) instead of a traceback."""

    @functools.wraps(callback)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return callback(*args, **kwargs)
        except (MemdirError, OSError) as exc:
            fail_with(exc)

    return run


def print_json(value: Any) -> None:
    """One JSON document on stdout."""
    click.echo(json.dumps(value, indent=2, default=str, ensure_ascii=False))


memory_dir_option = click.option(
    "--memory-dir",
    # Checked by choose_memory_dir, which says what is wrong in one line.
    type=click.Path(path_type=Path),
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
