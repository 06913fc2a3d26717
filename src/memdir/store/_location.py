"""Where a project's memory lives by default — the same folder Claude Code uses.

Claude Code keeps a project's automatic memory in
``<config home>/projects/<sanitized canonical git root>/memory/``. memdir computes the
same path byte for byte, so that both tools read and write one memory.
"""

from __future__ import annotations

import json
import os
import sys
import unicodedata
from collections.abc import Mapping
from pathlib import Path

from memdir.errors import UsageError

__all__ = [
    "MEMDIR_DIR_ENV",
    "canonical_git_root",
    "claude_config_home",
    "default_memory_dir",
    "find_git_root",
    "sanitize_path",
]

MEMDIR_DIR_ENV = "MEMDIR_DIR"
# Claude Code's own full-path override for the memory directory (no ~ expansion there).
_COWORK_OVERRIDE_ENV = "CLAUDE_COWORK_MEMORY_PATH_OVERRIDE"
# Set in Claude Code's remote mode; it then replaces the config home as the base.
_REMOTE_BASE_ENV = "CLAUDE_CODE_REMOTE_MEMORY_DIR"

# 200: Claude Code's MAX_SANITIZED_LENGTH, leaving room under the 255-byte name limit.
_MAX_SANITIZED_LENGTH = 200


def _js_units(text: str) -> list[int]:
    """The UTF-16 code units of ``text``: what JavaScript's ``length`` and indices count."""
    data = text.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]


def _simple_hash(text: str) -> str:
    """Claude Code's fallback hash: ``h = h*31 + unit`` in signed 32 bits, ``abs``, base 36."""
    h = 0
    for unit in _js_units(text):
        h = (h * 31 + unit) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    return _base36(abs(h))


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def sanitize_path(name: str) -> str:
    """A directory name for ``name``: every character outside ``[A-Za-z0-9]`` becomes ``-``.

    Counting is in UTF-16 code units, as in Claude Code (a character outside the Basic
    Multilingual Plane becomes two dashes). A result longer than 200 units is cut to 200
    and suffixed with ``-`` and a base-36 hash of the original name. Claude Code's native
    build hashes with a different function; :func:`default_memory_dir` finds such folders
    by their prefix.
    """
    units = _js_units(name)
    sanitized = "".join(
        chr(u) if (48 <= u <= 57 or 65 <= u <= 90 or 97 <= u <= 122) else "-" for u in units
    )
    if len(sanitized) <= _MAX_SANITIZED_LENGTH:
        return sanitized
    return f"{sanitized[:_MAX_SANITIZED_LENGTH]}-{_simple_hash(name)}"


def claude_config_home(env: Mapping[str, str] | None = None) -> Path:
    """Claude Code's configuration home: ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    env = os.environ if env is None else env
    configured = env.get("CLAUDE_CONFIG_DIR")
    if configured:
        return Path(unicodedata.normalize("NFC", os.path.expanduser(configured)))
    return Path(os.path.expanduser("~")) / ".claude"


def find_git_root(start: str | os.PathLike[str]) -> Path | None:
    """The nearest directory at or above ``start`` that holds a ``.git`` file or folder."""
    current = Path(start)
    for candidate in (current, *current.parents):
        if os.path.lexists(candidate / ".git"):
            return candidate
    return None


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def canonical_git_root(start: str | os.PathLike[str]) -> Path | None:
    """The main repository's working directory for ``start``, following git worktrees.

    A worktree's ``.git`` is a file naming its private git dir; that dir's ``commondir``
    names the shared one, whose parent is the main working tree (a bare repository's
    common dir is used as it is). The private dir must point back at this worktree's
    ``.git`` file, so a stray or forged ``.git`` file cannot redirect memory elsewhere;
    when anything does not check out, the worktree's own root is used.
    """
    root = find_git_root(start)
    if root is None:
        return None
    dot_git = root / ".git"
    if dot_git.is_dir():
        return root
    pointer = _read_text(dot_git)
    if pointer is None or not pointer.startswith("gitdir:"):
        return root
    git_dir = Path(pointer[len("gitdir:") :].strip())
    if not git_dir.is_absolute():
        git_dir = root / git_dir
    git_dir = Path(os.path.realpath(git_dir))
    common = _read_text(git_dir / "commondir")
    if common is None:
        return root  # a submodule or a plain separate git dir: not a worktree
    common_dir = Path(os.path.realpath(git_dir / common))
    back_link = _read_text(git_dir / "gitdir")
    if back_link is None or os.path.realpath(back_link) != os.path.realpath(dot_git):
        return root
    if common_dir.name == ".git":
        return common_dir.parent
    return common_dir


def _valid_override(raw: str | None, *, expand_home: bool) -> Path | None:
    """An override path that passes Claude Code's checks, else ``None``."""
    if not raw or "\0" in raw:
        return None
    if expand_home:
        if raw in ("~", "~/", "~/.", "~/..") or raw.rstrip("/") in ("~", "~/.", "~/.."):
            return None
        raw = os.path.expanduser(raw)
    normalized = os.path.normpath(raw).rstrip("/\\") or "/"
    if not os.path.isabs(normalized) or len(normalized) < 3:
        return None
    if normalized.startswith(("//", "\\\\")):
        return None
    if len(normalized) == 2 and normalized[1] == ":":
        return None
    return Path(unicodedata.normalize("NFC", normalized))


def _settings_override(project_root: Path, config_home: Path) -> Path | None:
    """``autoMemoryDirectory`` from the settings Claude Code trusts for it.

    Policy, then the project's *local* (uncommitted) settings, then the user's settings.
    The project's shared ``.claude/settings.json`` is deliberately not read: a cloned
    repository must never be able to point memory at, say, ``~/.ssh``.
    """
    if sys.platform == "darwin":
        policy = Path("/Library/Application Support/ClaudeCode/managed-settings.json")
    else:
        policy = Path("/etc/claude-code/managed-settings.json")
    for source in (
        policy,
        project_root / ".claude" / "settings.local.json",
        config_home / "settings.json",
    ):
        text = _read_text(source)
        if text is None:
            continue
        try:
            settings = json.loads(text)
        except ValueError:
            continue
        value = settings.get("autoMemoryDirectory") if isinstance(settings, dict) else None
        if isinstance(value, str):
            found = _valid_override(value, expand_home=True)
            if found is not None:
                return found
    return None


def _projects_entry(projects: Path, name: str) -> Path:
    """``projects/<name>``, or for a long name the folder another build made for it.

    Names over 200 characters end in a hash that differs between Claude Code's builds;
    when the exact folder is missing, an existing folder with the same 200-character
    prefix is the one to share.
    """
    exact = projects / name
    if len(name) <= _MAX_SANITIZED_LENGTH or exact.exists():
        return exact
    prefix = name[:_MAX_SANITIZED_LENGTH] + "-"
    try:
        matches = sorted(
            entry.name
            for entry in os.scandir(projects)
            if entry.name.startswith(prefix) and entry.is_dir()
        )
    except OSError:
        return exact
    return projects / matches[0] if matches else exact


def default_memory_dir(
    project_root: str | os.PathLike[str],
    config_home: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> Path:
    """The memory directory for a project, where Claude Code keeps it too.

    In order: ``$MEMDIR_DIR`` (``~`` expanded); Claude Code's own overrides
    (``$CLAUDE_COWORK_MEMORY_PATH_OVERRIDE``, then ``autoMemoryDirectory`` from policy,
    local or user settings — never from the project's shared settings); otherwise
    ``<base>/projects/<sanitize_path(canonical git root or project root)>/memory``, where
    the base is ``config_home`` if given, else ``$CLAUDE_CODE_REMOTE_MEMORY_DIR``, else
    ``$CLAUDE_CONFIG_DIR`` or ``~/.claude``. Git worktrees share their main repository's
    memory. The project root is resolved through symlinks first, as a process's working
    directory is.

    Raises :class:`~memdir.errors.UsageError` when ``$MEMDIR_DIR`` is set but unusable.
    """
    env = os.environ if env is None else env
    explicit = env.get(MEMDIR_DIR_ENV)
    if explicit:
        chosen = _valid_override(explicit, expand_home=True)
        if chosen is None:
            raise UsageError(
                f"{MEMDIR_DIR_ENV}={explicit!r} is not usable: give an absolute path "
                "(or one starting with ~/) other than the filesystem root"
            )
        return chosen
    cowork = _valid_override(env.get(_COWORK_OVERRIDE_ENV), expand_home=False)
    if cowork is not None:
        return cowork

    project = Path(os.path.realpath(os.path.expanduser(os.fspath(project_root))))
    root = Path(unicodedata.normalize("NFC", str(canonical_git_root(project) or project)))
    home = claude_config_home(env) if config_home is None else Path(config_home)
    from_settings = _settings_override(project, home)
    if from_settings is not None:
        return from_settings
    base = home
    if config_home is None and env.get(_REMOTE_BASE_ENV):
        base = Path(os.path.expanduser(env[_REMOTE_BASE_ENV]))
    projects = Path(unicodedata.normalize("NFC", str(base))) / "projects"
    return _projects_entry(projects, sanitize_path(str(root))) / "memory"
