"""Where a project's memory lives by default — the same folder Claude Code uses.

Claude Code keeps a project's automatic memory in
``<config home>/projects/<sanitized canonical git root>/memory/``. memdir computes the
same path byte for byte, so that both tools read and write one memory. The rules below
are those of Claude Code 2.1.332, each checked against that build:

- The project key is the working directory's canonical git root (a worktree counts as
  its main repository) as the file system spells it: a decomposed accent stays
  decomposed, so ``cafe`` + U+0301 gives ``-cafe-`` and ``café`` (U+00E9) gives ``-caf-``.
- ``$CLAUDE_CONFIG_DIR`` is taken literally: ``~`` is not expanded and a relative value,
  the empty one included, is relative to the working directory.
- The home directory is that of the environment in question (its ``HOME``).
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
import unicodedata
from collections.abc import Mapping
from pathlib import Path

from memdir._claude_settings import (
    claude_config_home,
    home_dir,
    managed_settings_files,
    path_env_problem,
    read_settings,
)
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
_CONFIG_DIR_ENV = "CLAUDE_CONFIG_DIR"
# Claude Code's own full-path override for the memory directory (no ~ expansion there).
_COWORK_OVERRIDE_ENV = "CLAUDE_COWORK_MEMORY_PATH_OVERRIDE"
# Set in Claude Code's remote mode; it then replaces the config home as the base.
_REMOTE_BASE_ENV = "CLAUDE_CODE_REMOTE_MEMORY_DIR"
# Names the project's folder under projects/ instead of the sanitized path; Claude Code
# honours it only while CLAUDE_CONFIG_DIR is set to a non-empty value.
_PROJECT_DIR_NAME_ENV = "CLAUDE_CODE_PROJECT_DIR_NAME"
_PROJECT_DIR_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_WINDOWS_DEVICE_NAME = re.compile(r"(?:con|prn|aux|nul|com[0-9]|lpt[0-9])", re.IGNORECASE)

# 200: Claude Code's MAX_SANITIZED_LENGTH, leaving room under the 255-byte name limit.
_MAX_SANITIZED_LENGTH = 200
# 64 KiB: the most Claude Code reads of a worktree's commondir and gitdir files.
_GIT_POINTER_MAX_BYTES = 65536
# A .git file is one line; Claude Code reads it whole, memdir gives up past 1 MiB.
_DOT_GIT_MAX_BYTES = 1 << 20
# What JavaScript's String.prototype.trim removes: white space, line ends and the BOM.
_JS_TRIM = re.compile(
    "^[\\s\ufeff\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+"
    "|[\\s\ufeff\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$"
)
# First path components Claude Code treats as network mounts (/net, /network/servers)
# or macOS special roots (/.vol, /.file, /.nofollow, /.resolve): never a memory folder.
_NETWORK_ROOTS = frozenset({"net", "network", ".vol", ".file", ".nofollow", ".resolve"})


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
    Multilingual Plane becomes two dashes). Nothing is normalised first, so a decomposed
    accent (a letter followed by a combining mark) keeps its letter. A result longer than
    200 units is cut to 200 and suffixed with ``-`` and a base-36 hash of the original
    name. Claude Code's native build hashes with a different function;
    :func:`default_memory_dir` finds such folders by their prefix.
    """
    units = _js_units(name)
    sanitized = "".join(
        chr(u) if (48 <= u <= 57 or 65 <= u <= 90 or 97 <= u <= 122) else "-" for u in units
    )
    if len(sanitized) <= _MAX_SANITIZED_LENGTH:
        return sanitized
    return f"{sanitized[:_MAX_SANITIZED_LENGTH]}-{_simple_hash(name)}"


def _js_trim(text: str) -> str:
    return _JS_TRIM.sub("", text)


def _js_normalize(path: str) -> str:
    """Node's ``path.posix.normalize``: lexical, and leading slashes collapse to one."""
    normalized = posixpath.normpath(path)
    if normalized.startswith("//"):
        normalized = "/" + normalized.lstrip("/")
    return normalized


def _js_resolve(base: str, path: str) -> str:
    """Node's ``path.resolve(base, path)`` for an absolute ``base``: no symlinks followed."""
    return _js_normalize(path if path.startswith("/") else f"{base}/{path}")


def _is_git_entry(dot_git: Path) -> bool:
    """Whether ``dot_git`` marks a repository: a file or a folder, through a symlink or not."""
    try:
        mode = os.stat(dot_git).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISDIR(mode) or stat.S_ISREG(mode)


def find_git_root(start: str | os.PathLike[str]) -> Path | None:
    """The nearest directory at or above ``start`` whose ``.git`` is a file or a folder.

    A ``.git`` that is neither (a broken symlink, a FIFO) does not count and the search
    goes on upwards, as in Claude Code. ``start`` is made absolute lexically.
    """
    current = Path(os.path.abspath(os.fspath(start)))
    for candidate in (current, *current.parents):
        if _is_git_entry(candidate / ".git"):
            return candidate
    return None


def _read_plain_file(path: str) -> str | None:
    """The text of ``path`` if it is a regular file (not a symlink) of at most 64 KiB."""
    return _read_capped(path, _GIT_POINTER_MAX_BYTES, follow=False)


def _read_capped(path: str, limit: int, *, follow: bool) -> str | None:
    """The text of the regular file ``path`` if it holds at most ``limit`` bytes.

    Without ``follow``, a symlink in the last component is refused. Invalid UTF-8 reads
    as U+FFFD, as Node decodes it. Never blocks on a FIFO.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError):
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, limit + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    if size > limit:
        return None
    return b"".join(chunks).decode("utf-8", errors="replace")


def _worktree_main(root: str) -> str | None:
    """The main repository's folder for the worktree at ``root``, or ``None`` to stay.

    Claude Code 2.1.332 follows a ``.git`` file only through a layout ``git worktree add``
    makes: the file names a private git dir (``gitdir: <dir>``); that dir holds a plain
    ``commondir`` file naming the shared git dir; the private dir sits directly in the
    shared one's ``worktrees/`` folder (compared as written, no symlinks followed); and
    the private dir's plain ``gitdir`` file points back, through the real path, at this
    worktree's ``.git``. The ``.git`` file itself is compared by the real path of
    ``root``, never by following a symlink in its place, so a ``.git`` linked to another
    checkout's cannot borrow that checkout's back-link.
    """
    text = _read_capped(os.path.join(root, ".git"), _DOT_GIT_MAX_BYTES, follow=True)
    if text is None:
        return None  # a folder, unreadable, or far too large to be a pointer
    pointer = _js_trim(text)
    if not pointer.startswith("gitdir:"):
        return None
    git_dir = _js_resolve(root, _js_trim(pointer[len("gitdir:") :]))
    common_text = _read_plain_file(os.path.join(git_dir, "commondir"))
    if common_text is None:
        return None  # a submodule or a plain separate git dir: not a worktree
    common_dir = _js_resolve(git_dir, _js_trim(common_text))
    if posixpath.dirname(git_dir) != _js_normalize(f"{common_dir}/worktrees"):
        return None
    back_text = _read_plain_file(os.path.join(git_dir, "gitdir"))
    if back_text is None:
        return None
    back_link = _js_trim(back_text)
    if os.sep == "/" and any("\\" in part for part in (root, git_dir, back_link, common_dir)):
        return None
    try:
        linked = os.path.realpath(_js_resolve(git_dir, back_link), strict=True)
        own = os.path.join(os.path.realpath(root, strict=True), ".git")
    except (OSError, ValueError):
        return None
    if linked != own:
        return None
    if posixpath.basename(common_dir) == ".git":
        return posixpath.dirname(common_dir)
    # A bare repository's worktree: the shared git dir is the project, unless it holds a
    # .git of its own (then it is not what it claims to be).
    if _is_git_entry(Path(common_dir) / ".git"):
        return None
    return common_dir


def canonical_git_root(start: str | os.PathLike[str]) -> Path | None:
    """The main repository's working directory for ``start``, following git worktrees.

    ``None`` outside any repository. A worktree resolves to its main working tree (for a
    bare repository, the shared git dir itself) only when its layout checks out the way
    Claude Code checks it (see the module notes); a forged or stray ``.git`` file leaves
    the worktree's own root in place, so a cloned tree cannot point memory at another
    project.
    """
    root = find_git_root(start)
    if root is None:
        return None
    main = _worktree_main(str(root))
    return root if main is None else Path(main)


def _network_path(path: str) -> bool:
    parts = [p for p in path.split("/") if p not in ("", ".")]
    return bool(parts) and parts[0].lower() in _NETWORK_ROOTS


def _valid_override(raw: str | None, *, home: str | None) -> Path | None:
    """An override path that passes Claude Code's checks, else ``None``.

    With ``home``, a leading ``~/`` means that folder, but not when what follows is empty
    or climbs out of it (``~/..``, ``~/../x``).
    """
    if not raw:
        return None
    value = raw
    if home is not None and value.startswith(("~/", "~\\")):
        rest = value[2:]
        head = _js_normalize(rest or ".")
        if head in (".", "..") or head.startswith(("../", "..\\")):
            return None
        value = _js_normalize(f"{home}/{rest}")
    normalized = re.sub(r"[/\\]+$", "", _js_normalize(value))
    if (
        not normalized.startswith("/")
        or len(_js_units(normalized)) < 3
        or re.fullmatch(r"[A-Za-z]:", normalized)
        or _network_path(normalized)
        or "\0" in normalized
    ):
        return None
    return Path(unicodedata.normalize("NFC", normalized))


def _settings_override(project_root: Path, config_home: Path, home: str) -> Path | None:
    """``autoMemoryDirectory`` from the settings Claude Code trusts for it.

    Policy, then the project's *local* (uncommitted) settings, then the user's settings;
    the first that sets the key decides, and a value that fails the checks then means no
    override at all (the later sources are not consulted), as in Claude Code. The
    project's shared ``.claude/settings.json`` is deliberately not read, although Claude
    Code does read it once a folder is trusted: a cloned repository must never be able to
    point memory at, say, ``~/.ssh``.
    """
    policy = list(reversed(managed_settings_files()))  # the last drop-in is strongest
    for source in (
        *policy,
        project_root / ".claude" / "settings.local.json",
        config_home / "settings.json",
    ):
        settings = read_settings(source)
        value = settings.get("autoMemoryDirectory") if settings is not None else None
        if isinstance(value, str):
            return _valid_override(value, home=home)
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


def _project_dir_name(env: Mapping[str, str]) -> str | None:
    """``$CLAUDE_CODE_PROJECT_DIR_NAME`` where Claude Code would use it, else ``None``."""
    if not env.get(_CONFIG_DIR_ENV):
        return None
    name = env.get(_PROJECT_DIR_NAME_ENV)
    if not name or not _PROJECT_DIR_NAME.fullmatch(name) or _WINDOWS_DEVICE_NAME.fullmatch(name):
        return None
    return name


def default_memory_dir(
    project_root: str | os.PathLike[str],
    config_home: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> Path:
    """The memory directory for a project, where Claude Code keeps it too.

    ``project_root`` is the directory Claude Code runs in; ``env`` the environment it
    runs with (default: this process's), whose ``HOME`` is the home directory. In order:

    - ``$MEMDIR_DIR`` (a leading ``~/`` is that home);
    - Claude Code's own overrides: ``$CLAUDE_COWORK_MEMORY_PATH_OVERRIDE`` (absolute,
      taken literally), then ``autoMemoryDirectory`` from policy, local or user settings
      (never from the project's shared settings);
    - otherwise ``<base>/projects/<key>/memory``. The base is ``config_home`` if given,
      else ``$CLAUDE_CODE_REMOTE_MEMORY_DIR``, else :func:`claude_config_home`; a
      relative base is relative to the project directory, the working directory it is
      read in. The key is :func:`sanitize_path` of the canonical git root (worktrees
      share their main repository's memory), or of the project directory outside git;
      with a non-empty ``$CLAUDE_CONFIG_DIR`` and no remote base, a valid
      ``$CLAUDE_CODE_PROJECT_DIR_NAME`` replaces it.

    The project directory is resolved through symlinks first, as a process's working
    directory is.

    Raises :class:`~memdir.errors.UsageError` when ``$MEMDIR_DIR``, or the
    ``$CLAUDE_CONFIG_DIR`` the folder would be under, is set but unusable (see
    :func:`~memdir._claude_settings.path_env_problem`).
    """
    env = os.environ if env is None else env
    home = home_dir(env)
    explicit = env.get(MEMDIR_DIR_ENV)
    if explicit:
        problem = path_env_problem(MEMDIR_DIR_ENV, explicit)
        if problem is not None:
            raise UsageError(problem)
        chosen = _valid_override(explicit, home=home)
        if chosen is None:
            raise UsageError(
                f"{MEMDIR_DIR_ENV}={explicit!r} is not usable: give an absolute path "
                "(or one starting with ~/) other than the filesystem root"
            )
        return chosen
    cowork = _valid_override(env.get(_COWORK_OVERRIDE_ENV), home=None)
    if cowork is not None:
        return cowork
    if config_home is None:
        problem = path_env_problem(_CONFIG_DIR_ENV, env.get(_CONFIG_DIR_ENV))
        if problem is not None:
            raise UsageError(problem)

    raw_project = os.fspath(project_root)
    if raw_project == "~" or raw_project.startswith("~/"):
        raw_project = home + raw_project[1:]
    else:
        raw_project = os.path.expanduser(raw_project)  # ~user
    project = os.path.realpath(raw_project)
    config = claude_config_home(env) if config_home is None else Path(config_home)
    from_settings = _settings_override(
        Path(project), Path(project, config) if not config.is_absolute() else config, home
    )
    if from_settings is not None:
        return from_settings

    config_text = unicodedata.normalize("NFC", os.fspath(config))
    base = config_text
    remote = env.get(_REMOTE_BASE_ENV) if config_home is None else None
    if remote:
        base = remote
    name = _project_dir_name(env) if base == config_text else None
    if name is None:
        name = sanitize_path(str(canonical_git_root(project) or project))
    # Node's path.join, NFC-normalised as Claude Code does; a relative result is opened
    # from the working directory, whose real path needs no normalising of its own.
    joined = unicodedata.normalize("NFC", _js_normalize(posixpath.join(base or ".", "projects")))
    if not joined.startswith("/"):
        joined = _js_normalize(posixpath.join(project, joined))
    projects = Path(joined)
    return _projects_entry(projects, name) / "memory"
