"""Claude Code's settings files and the switches that turn its automatic memory off.

Standard library only: the Stop hook's quick path (:mod:`memdir._hook_entry`) asks
:func:`memory_switched_off` before it starts anything, and must stay quick.

What Claude Code 2.1.332 does, read from its bundle (the ``isAutoMemoryEnabled`` chain):
safe mode (``CLAUDE_CODE_SAFE_MODE`` or ``--safe-mode``) turns memory off; then
``CLAUDE_CODE_DISABLE_AUTO_MEMORY`` decides when it is truthy (off) or falsy (on, whatever
the settings say); then ``CLAUDE_CODE_SIMPLE`` (what ``--bare`` sets) and a remote session
with no memory folder turn it off; otherwise ``autoMemoryEnabled`` in the merged settings
(policy over ``--settings`` over local over project over user), true by default. ``--bare``
and safe mode also skip every hook from the settings files, so the hook sees those two
only when an organisation's managed settings install it. ``--safe-mode``, and settings
given with ``claude --settings``, reach a hook through nothing but the Claude Code
process's own command line, which is read where the system shows it (Linux's ``/proc``).
"""

from __future__ import annotations

import json
import os
import posixpath
import stat
import sys
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DISABLE_AUTO_MEMORY_ENV",
    "SAFE_MODE_ENV",
    "SIMPLE_ENV",
    "SettingsSource",
    "claude_config_home",
    "falsy",
    "home_dir",
    "managed_settings_files",
    "memory_switched_off",
    "path_env_problem",
    "read_settings",
    "settings_files",
    "settings_sources",
    "truthy",
]

DISABLE_AUTO_MEMORY_ENV = "CLAUDE_CODE_DISABLE_AUTO_MEMORY"
SAFE_MODE_ENV = "CLAUDE_CODE_SAFE_MODE"
SIMPLE_ENV = "CLAUDE_CODE_SIMPLE"
"""What ``claude --bare`` sets in its own environment, which its hooks inherit."""
_REMOTE_ENV = "CLAUDE_CODE_REMOTE"
_REMOTE_BASE_ENV = "CLAUDE_CODE_REMOTE_MEMORY_DIR"
_COWORK_OVERRIDE_ENV = "CLAUDE_COWORK_MEMORY_PATH_OVERRIDE"
_CONFIG_DIR_ENV = "CLAUDE_CONFIG_DIR"

# Claude Code's two readings of a switch variable (its ``isEnvTruthy`` / ``isEnvDefinedFalsy``).
_TRUTHY = frozenset({"1", "true", "yes", "on"})
_FALSY = frozenset({"0", "false", "no", "off"})
# A settings file is JSON of a few KiB; past 1 MiB it is not one.
_SETTINGS_MAX_BYTES = 1 << 20


def truthy(value: str | None) -> bool:
    """Whether Claude Code reads ``value`` as on: 1, true, yes or on, in any case."""
    return value is not None and value.strip().lower() in _TRUTHY


def falsy(value: str | None) -> bool:
    """Whether Claude Code reads ``value`` as explicitly off: 0, false, no or off."""
    return value is not None and value.strip().lower() in _FALSY


def home_dir(env: Mapping[str, str]) -> str:
    """The home directory as Node's ``os.homedir`` finds it in ``env``.

    A non-empty ``HOME``; otherwise the password database's entry for this user.
    """
    home = env.get("HOME")
    if home:
        return home
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError, OSError):
        return os.path.expanduser("~")


def claude_config_home(env: Mapping[str, str] | None = None) -> Path:
    """Claude Code's configuration home: ``$CLAUDE_CONFIG_DIR``, else ``<HOME>/.claude``.

    ``$CLAUDE_CONFIG_DIR`` is used exactly as given (NFC-normalised, as Claude Code does):
    ``~`` is not expanded, and a relative value is relative to the working directory of
    the process that reads it; an empty one names that directory itself (``Path(".")``).
    ``HOME`` comes from ``env`` (default: this process's environment).
    """
    env = os.environ if env is None else env
    configured = env.get(_CONFIG_DIR_ENV)
    if configured is not None:
        return Path(unicodedata.normalize("NFC", configured))
    return Path(unicodedata.normalize("NFC", posixpath.join(home_dir(env), ".claude")))


def path_env_problem(name: str, value: str | None) -> str | None:
    """Why the environment's ``name``, a folder path, cannot be used, or None when it can
    (or is unset).

    Refused: a control character (a line break pasted into a shell profile, a NUL) --
    the folder it names is not the one anyone meant, and memory saved there would be
    found by no one; and a path that exists but is not a folder, where nothing can be
    saved at all. A relative or empty ``CLAUDE_CONFIG_DIR`` is not refused: Claude Code
    reads it from its working directory, and so does memdir, to share that memory.
    """
    if value is None:
        return None
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        return f"{name}={value!r} holds a line break or control character; fix or unset it"
    if not os.path.isabs(value):
        return None  # relative to a project folder the caller knows; checked on use
    try:
        st = os.stat(value)
    except (OSError, ValueError):
        return None  # missing (made when memory is first saved) or unreadable: said later
    if not stat.S_ISDIR(st.st_mode):
        return f"{name}={value!r}: it is a file, not a folder; fix or unset it"
    return None


def managed_settings_files() -> list[Path]:
    """The organisation's settings: ``managed-settings.json``, then its drop-in folder
    ``managed-settings.d/*.json`` in name order (a later file overrides an earlier)."""
    if sys.platform == "darwin":
        base = Path("/Library/Application Support/ClaudeCode")
    else:
        base = Path("/etc/claude-code")
    try:
        drop_ins = sorted(p for p in (base / "managed-settings.d").glob("*.json") if p.is_file())
    except OSError:
        drop_ins = []
    return [base / "managed-settings.json", *drop_ins]


def read_settings(path: Path) -> dict[str, Any] | None:
    """The JSON object in the settings file ``path``, or None when there is none to read
    (missing, unreadable, too large, not JSON, not an object). Never blocks on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError):
        return None
    try:
        with os.fdopen(fd, "rb") as stream:
            if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                return None
            data = stream.read(_SETTINGS_MAX_BYTES + 1)
    except OSError:
        return None
    if len(data) > _SETTINGS_MAX_BYTES:
        return None
    try:
        value = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def settings_files(
    project: str | os.PathLike[str], env: Mapping[str, str] | None = None
) -> list[tuple[str, Path]]:
    """Claude Code's settings files for a session in ``project``, strongest first, each
    with the name of its scope: managed (policy), local, project, user."""
    env = os.environ if env is None else env
    root = Path(os.path.realpath(os.path.expanduser(os.fspath(project))))
    config = claude_config_home(env)
    if not config.is_absolute():
        config = root / config
    # Policy files: a later drop-in overrides an earlier one, so the last is strongest.
    managed = [("managed", p) for p in reversed(managed_settings_files())]
    return [
        *managed,
        ("local", root / ".claude" / "settings.local.json"),
        ("project", root / ".claude" / "settings.json"),
        ("user", config / "settings.json"),
    ]


@dataclass(frozen=True)
class SettingsSource:
    """One of Claude Code's settings that exists and holds a JSON object."""

    scope: str
    """managed, flag (``claude --settings``), local, project or user."""
    where: str
    """The file it was read from, or the ``--settings`` argument when that is JSON."""
    settings: dict[str, Any]
    """What it holds."""


def _claude_args(env: Mapping[str, str]) -> tuple[list[str], str] | None:
    """The command-line arguments (up to a ``--``) of the Claude Code process running
    this hook, and its ``/proc`` folder; None where they cannot be read.

    Nothing in a hook's input or environment carries Claude Code's flags, but the
    environment names the process (``CLAUDE_PID``), whose command line and working
    directory Linux shows under ``/proc``; elsewhere, or outside a hook, there is
    nothing to read.
    """
    pid = env.get("CLAUDE_PID", "")
    if not pid.isdigit():
        return None
    proc = f"/proc/{pid}"
    try:
        args = Path(proc, "cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return None
    return (args[: args.index("--")] if "--" in args else args), proc


def _flag_switch(env: Mapping[str, str]) -> str | None:
    """``--bare`` or ``--safe-mode`` when the Claude Code process was started with it.

    Both skip the hooks of the settings files, but an organisation's managed hooks still
    run, and ``--safe-mode`` (unlike ``--bare``) sets nothing in the environment.
    """
    found = _claude_args(env)
    if found is None:
        return None
    args = found[0]
    for flag, what in (("--safe-mode", "safe mode"), ("--bare", "bare mode")):
        if flag in args:
            return f"{what} (claude {flag})"
    return None


def _flag_settings(env: Mapping[str, str]) -> SettingsSource | None:
    """``claude --settings FILE_OR_JSON`` of the Claude Code process running this hook
    (see :func:`_claude_args`). The last ``--settings`` counts; a relative file is
    relative to that process's working directory."""
    found = _claude_args(env)
    if found is None:
        return None
    args, proc = found
    value = None
    for i, arg in enumerate(args):
        if arg == "--settings" and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("--settings="):
            value = arg.partition("=")[2]
    if value is None:
        return None
    if value.strip().startswith("{"):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return None
        settings = parsed if isinstance(parsed, dict) else None
        # Not the JSON itself: it may carry keys (an ``env`` block), and ``where`` goes
        # into the hook's log and doctor's report.
        where = "claude --settings <inline JSON>"
    else:
        try:
            cwd = os.readlink(f"{proc}/cwd")
        except OSError:
            return None
        path = Path(cwd, os.path.expanduser(value))
        settings, where = read_settings(path), f"{path} (claude --settings)"
    return SettingsSource("flag", where, settings) if settings is not None else None


def settings_sources(
    project: str | os.PathLike[str], env: Mapping[str, str] | None = None
) -> list[SettingsSource]:
    """The settings Claude Code merges for a session in ``project``, strongest first:
    managed (policy), ``claude --settings`` (only where it can be read, see
    :func:`_flag_settings`), local, project, user; those that do not exist left out."""
    env = os.environ if env is None else env
    found = []
    for scope, path in settings_files(project, env):
        if scope == "local":
            flag = _flag_settings(env)
            if flag is not None:
                found.append(flag)
        settings = read_settings(path)
        if settings is not None:
            found.append(SettingsSource(scope, str(path), settings))
    return found


def memory_switched_off(
    cwd: str | os.PathLike[str], env: Mapping[str, str] | None = None
) -> str | None:
    """Why Claude Code's automatic memory is off for a session in ``cwd`` run with
    ``env`` (default: this process's environment), or None when it is on.

    The order and the readings are Claude Code's own (see the module notes), so memdir
    writes memory exactly when Claude Code would load it.
    """
    env = os.environ if env is None else env
    if truthy(env.get(SAFE_MODE_ENV)):
        return f"safe mode ({SAFE_MODE_ENV}={env[SAFE_MODE_ENV]})"
    flag = _flag_switch(env)
    if flag is not None and flag.startswith("safe"):
        return flag
    switch = env.get(DISABLE_AUTO_MEMORY_ENV)
    if truthy(switch):
        return f"{DISABLE_AUTO_MEMORY_ENV}={switch}"
    if falsy(switch):
        return None  # forced on: Claude Code then ignores the settings below
    if truthy(env.get(SIMPLE_ENV)):
        return f"bare mode ({SIMPLE_ENV}={env[SIMPLE_ENV]}, set by claude --bare)"
    if flag is not None:
        return flag
    if env.get(_REMOTE_ENV) and not env.get(_REMOTE_BASE_ENV) and not env.get(_COWORK_OVERRIDE_ENV):
        return f"a remote session ({_REMOTE_ENV}) with no {_REMOTE_BASE_ENV}"
    for source in settings_sources(cwd, env):
        value = source.settings.get("autoMemoryEnabled")
        if isinstance(value, bool):
            if value:
                return None
            return f"autoMemoryEnabled is false in {source.where} ({source.scope} settings)"
    return None
