"""Setting memdir up as Claude Code's Stop hook, and checking that memory would work.

What ``memdir install claude-code``, ``memdir doctor`` and ``memdir log`` share: the
hook's command line, the edit of a settings file that adds or removes it, the checks
(hook, credentials, model, memory folder, Claude Code's switches, the last run, what a
crash left to repair) and the reading of the hook's log. The hook itself asks
:func:`hook_memory_off` before it does anything.

Nothing here imports click: the commands in :mod:`memdir._cli._install` print what these
functions return. The module's own imports are the standard library's, so the hook's
quick path can ask it whether memory is off without loading the store; what needs the
store imports it where it is used.
"""

from __future__ import annotations

import copy
import datetime
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from memdir._claude_settings import (
    claude_config_home,
    memory_switched_off,
    settings_sources,
)
from memdir.errors import MemdirError, UsageError

__all__ = [
    "HOOK_LOG_NAME",
    "Finding",
    "HookRun",
    "InstalledHook",
    "Scope",
    "SettingsChange",
    "check_credentials",
    "check_hook",
    "check_last_run",
    "check_memory_folder",
    "check_model",
    "check_switches",
    "command_finding",
    "describe_change",
    "doctor_findings",
    "find_hooks",
    "hook_command",
    "hook_env",
    "hook_memory_off",
    "hook_option",
    "install_hook",
    "is_memdir_hook",
    "memdir_command",
    "memory_folder",
    "read_runs",
    "settings_path",
    "uninstall_hook",
]

Scope = Literal["user", "project"]
HOOK_ARGS = "hook claude-code"
HOOK_LOG_NAME = ".memdir/hook.log"
"""The hook's log, relative to the memory folder (:data:`memdir.state.HOOK_LOG_NAME`)."""

# A Stop hook command that runs memdir's hook, however memdir is spelled before it: a bare
# ``memdir``, a path ending in it (quoted or not), or ``python -m memdir``.
_MEMDIR_HOOK = re.compile(r"(?:^|[\s/'\"])memdir['\"]?\s+hook\s+claude-code(?:\s|$)")
# What the hook's worker logs when a run, or the whole extraction, did not go through.
# Anchored at the start: a saved memory's name may hold any word ("cannot", "failed").
_FAILURE = re.compile(r"^(?:extraction failed|run failed|extraction not started|no model can)")
_OFF = "memory is off"
# Seconds ``memdir --version`` may take: a cold start on a loaded machine, with margin.
_START_TIMEOUT = 60.0


# -- the command ---------------------------------------------------------------------------


def memdir_command(executable: str | None = None) -> str:
    """The memdir that runs this code, as an absolute command line for a shell: the
    ``memdir`` script installed beside the interpreter (a virtual environment's
    ``bin/``), else ``<interpreter> -m memdir``.

    Claude Code runs hooks with its own ``PATH``, which need not hold the environment
    memdir was installed in, so the hook never relies on ``PATH``.
    """
    python = os.path.abspath(executable or sys.executable)
    script = Path(python).parent / ("memdir.exe" if sys.platform == "win32" else "memdir")
    if script.is_file() and os.access(script, os.X_OK):
        return shlex.quote(str(script))
    return f"{shlex.quote(python)} -m memdir"


def hook_command(executable: str | None = None) -> str:
    """The Stop hook's command line: ``<absolute memdir> hook claude-code``."""
    return f"{memdir_command(executable)} {HOOK_ARGS}"


def is_memdir_hook(command: object) -> bool:
    """Whether a hook's command runs ``memdir hook claude-code`` (this install or another)."""
    return isinstance(command, str) and _MEMDIR_HOOK.search(command) is not None


# -- the settings file -----------------------------------------------------------------------


def settings_path(
    scope: Scope, project: str | os.PathLike[str], env: Mapping[str, str] | None = None
) -> Path:
    """Where a hook of ``scope`` goes: the user's ``<config home>/settings.json``
    (``$CLAUDE_CONFIG_DIR`` honoured) or the project's ``.claude/settings.json``."""
    root = Path(os.path.abspath(os.path.expanduser(os.fspath(project))))
    if scope == "project":
        return root / ".claude" / "settings.json"
    config = claude_config_home(env)
    return (config if config.is_absolute() else root / config) / "settings.json"


@dataclass(frozen=True, kw_only=True)
class SettingsChange:
    """What an install or an uninstall does to one settings file."""

    path: Path
    """The settings file."""
    before: dict[str, Any] | None
    """Its settings before (None: the file did not exist)."""
    after: dict[str, Any] | None
    """Its settings after (None: the file is left absent)."""
    command: str | None = None
    """The hook command installed (None for an uninstall)."""
    written: bool = False
    """Whether the file was written (False for a dry run or when nothing changed)."""

    @property
    def changed(self) -> bool:
        """Whether the settings differ (in meaning: JSON values compared)."""
        return self.before != self.after and not (self.before is None and self.after is None)


def _load_for_edit(path: Path) -> dict[str, Any] | None:
    """The settings in ``path`` to edit, None when there is no such file; raises
    :class:`UsageError` (nothing is written then) when the file is not a JSON object."""
    if not os.path.lexists(path):
        return None
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"cannot read {path}: {reason}; nothing changed") from None
    if not text.strip():
        return {}  # an empty file is an empty object to Claude Code too
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); nothing changed") from None
    if not isinstance(value, dict):
        raise UsageError(f"{path} holds JSON but not an object; nothing changed")
    return value


def _stop_groups(settings: dict[str, Any], path: Path, *, create: bool) -> list[Any] | None:
    hooks = settings.get("hooks")
    if hooks is None:
        if not create:
            return None
        hooks = settings["hooks"] = {}
    if not isinstance(hooks, dict):
        raise UsageError(f'"hooks" in {path} is not an object; nothing changed')
    stop = hooks.get("Stop")
    if stop is None:
        if not create:
            return None
        stop = hooks["Stop"] = []
    if not isinstance(stop, list):
        raise UsageError(f'"hooks.Stop" in {path} is not a list; nothing changed')
    return stop


def _is_memdir_entry(entry: object) -> bool:
    return isinstance(entry, dict) and is_memdir_hook(entry.get("command"))


def _options(entry: dict[str, Any]) -> str:
    """What follows ``hook claude-code`` in a memdir entry's command (its options),
    with the space before it."""
    command = str(entry.get("command", ""))
    found = _MEMDIR_HOOK.search(command)
    tail = command[found.end() :].strip() if found is not None else ""
    return f" {tail}" if tail else ""


def _drop_memdir_entries(stop: list[Any], keep: dict[str, Any] | None) -> bool:
    """Remove memdir's entries from the Stop groups; with ``keep``, the first one is
    replaced by it in place instead. Groups left empty by the removal go too. Returns
    whether ``keep`` took a place."""
    placed = False
    for group in list(stop):
        entries = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(entries, list) or not any(_is_memdir_entry(e) for e in entries):
            continue
        kept: list[Any] = []
        for entry in entries:
            if not _is_memdir_entry(entry):
                kept.append(entry)
            elif keep is not None and not placed:
                # Options the user added to the entry (a timeout, say) stay, and so do
                # the hook's own options in the old command (--memory-dir, --model, …).
                kept.append({**entry, **keep, "command": keep["command"] + _options(entry)})
                placed = True
        if kept:
            group["hooks"] = kept
        else:
            stop.remove(group)
    return placed


def _write_settings(path: Path, settings: dict[str, Any]) -> None:
    from memdir.store import atomic_write

    # Through a symlink to the file it names: a settings.json linked from a dotfiles
    # repository stays linked.
    target = Path(os.path.realpath(path))
    atomic_write(target, json.dumps(settings, indent=2, ensure_ascii=False) + "\n")


def install_hook(path: Path, command: str, *, dry_run: bool = False) -> SettingsChange:
    """Add the Stop hook running ``command`` to the settings file ``path``.

    Idempotent: an install over the same one changes nothing, and an earlier memdir hook
    (another path, another spelling) is replaced where it stands, never duplicated.
    Every other setting and hook is kept. A file that is not a JSON object is refused
    with :class:`UsageError` and left as it is. The file is replaced atomically.
    """
    before = _load_for_edit(path)
    after = copy.deepcopy(before) if before is not None else {}
    stop = _stop_groups(after, path, create=True)
    assert stop is not None
    entry = {"type": "command", "command": command}
    if not _drop_memdir_entries(stop, entry):
        stop.append({"hooks": [entry]})
    change = SettingsChange(path=path, before=before, after=after, command=command)
    if change.changed and not dry_run:
        _write_settings(path, after)
        return SettingsChange(path=path, before=before, after=after, command=command, written=True)
    return change


def uninstall_hook(path: Path, *, dry_run: bool = False) -> SettingsChange:
    """Remove memdir's Stop hooks from the settings file ``path``, and the ``Stop`` list
    and ``hooks`` object when that leaves them empty; nothing else is touched."""
    before = _load_for_edit(path)
    if before is None:
        return SettingsChange(path=path, before=None, after=None)
    after = copy.deepcopy(before)
    stop = _stop_groups(after, path, create=False)
    if stop is not None and any(
        isinstance(g, dict)
        and isinstance(g.get("hooks"), list)
        and any(map(_is_memdir_entry, g["hooks"]))
        for g in stop
    ):
        _drop_memdir_entries(stop, None)
        hooks = after["hooks"]
        if not stop:
            del hooks["Stop"]
        if not hooks:
            del after["hooks"]
    change = SettingsChange(path=path, before=before, after=after)
    if change.changed and not dry_run:
        _write_settings(path, after)
        return SettingsChange(path=path, before=before, after=after, written=True)
    return change


# -- what the hook would find ----------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One thing checked, and what was found."""

    check: str
    """What was checked: hook, credentials, model, memory folder, switches, last run."""
    ok: bool
    """False when it would stop memory from working."""
    message: str
    """What was found, in one line."""

    def as_json(self) -> dict[str, Any]:
        return {"check": self.check, "ok": self.ok, "message": self.message}


@dataclass(frozen=True, kw_only=True)
class InstalledHook:
    """A memdir Stop hook found in one of Claude Code's settings files."""

    scope: str
    """managed, local, project or user."""
    where: str
    """The settings file (or ``claude --settings`` argument) it is in."""
    command: str
    """The hook's command line."""


def hook_env(
    project: str | os.PathLike[str], env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment the hook would run with: ``env`` (default: this process's) with
    the variables of the settings files' ``env`` objects on top, as Claude Code sets
    them for its hooks (the strongest file last)."""
    merged = dict(os.environ if env is None else env)
    for source in reversed(settings_sources(project, merged)):
        values = source.settings.get("env")
        if isinstance(values, dict):
            merged.update({k: str(v) for k, v in values.items() if isinstance(k, str)})
    return merged


def find_hooks(
    project: str | os.PathLike[str], env: Mapping[str, str] | None = None
) -> list[InstalledHook]:
    """memdir's Stop hooks in Claude Code's settings files for ``project``."""
    env = os.environ if env is None else env
    hooks = []
    for source in settings_sources(project, env):
        groups = source.settings.get("hooks")
        stop = groups.get("Stop") if isinstance(groups, dict) else None
        for group in stop if isinstance(stop, list) else ():
            entries = group.get("hooks") if isinstance(group, dict) else None
            for entry in entries if isinstance(entries, list) else ():
                if _is_memdir_entry(entry):
                    hooks.append(
                        InstalledHook(
                            scope=source.scope, where=source.where, command=entry["command"]
                        )
                    )
    return hooks


_TRUSTED_SCOPES = frozenset({"user", "managed"})
"""Settings whose hook programs memdir may start to check them: a project's own files
(``.claude/settings.json``, ``settings.local.json``) come with whatever was cloned, and
Claude Code runs their hooks only once the user has trusted the folder."""


def _runnable(command: str, env: Mapping[str, str], *, start: bool = True) -> str | None:
    """Why ``command``'s program cannot be started by Claude Code, or None.

    With ``start``, the program is also run (``--version``, in this process's own
    environment: a settings file's ``env`` is not applied to what memdir starts);
    without, it is only looked at."""
    try:
        words = shlex.split(command)
    except ValueError:
        return f"its command cannot be read: {command}"
    if not words:
        return "its command is empty"
    program = words[0]
    if os.sep not in program:
        found = shutil.which(program, path=env.get("PATH", os.defpath))
        if found is None:
            return (
                f"{program!r} is not on PATH, so Claude Code cannot start it; run "
                "memdir install claude-code to write an absolute path"
            )
        program = found
    elif not os.path.isfile(program):
        return f"{program} does not exist (memdir moved or was uninstalled?)"
    elif not os.access(program, os.X_OK):
        return f"{program} is not executable"
    return _starts(words, program, os.environ) if start else None


def _starts(words: list[str], program: str, env: Mapping[str, str]) -> str | None:
    """Why the memdir of a hook command fails to start (``--version``), or None.

    A script can be in place while the package behind it is gone (an editable install
    whose clone was moved), so the program is run, as far as the word before ``hook``.
    """
    head = next(
        (words[:i] for i in range(len(words) - 1) if words[i : i + 2] == ["hook", "claude-code"]),
        words[:1],
    )
    try:
        done = subprocess.run(
            [program, *head[1:], "--version"],
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_START_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{' '.join(head)} does not start: {exc}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return f"{' '.join(head)} does not start: {last}"
    return None


def command_finding(command: str, env: Mapping[str, str] | None = None) -> Finding:
    """Whether Claude Code could start the hook ``command`` with ``env``'s ``PATH``."""
    problem = _runnable(command, os.environ if env is None else env)
    if problem is not None:
        return Finding(check="hook", ok=False, message=problem)
    return Finding(check="hook", ok=True, message=f"{command} can be started")


def check_hook(project: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Finding:
    """Whether a memdir Stop hook is installed where Claude Code reads it, runnable, and
    not switched off by ``disableAllHooks``."""
    env = os.environ if env is None else env
    hooks = find_hooks(project, env)
    if not hooks:
        return Finding(
            check="hook",
            ok=False,
            message="no memdir Stop hook in Claude Code's settings; run memdir install claude-code",
        )
    for source in settings_sources(project, env):
        if source.settings.get("disableAllHooks") is True:
            return Finding(
                check="hook",
                ok=False,
                message=f"disableAllHooks is true in {source.where} ({source.scope} settings)",
            )
    problems = [
        (hook, _runnable(hook.command, env, start=hook.scope in _TRUSTED_SCOPES)) for hook in hooks
    ]
    broken = [f"{hook.where}: {why}" for hook, why in problems if why is not None]
    if broken:
        return Finding(check="hook", ok=False, message="; ".join(broken))
    where = ", ".join(f"{hook.where} ({hook.scope})" for hook in hooks)
    extra = f" ({len(hooks)} entries: each runs after every answer)" if len(hooks) > 1 else ""
    return Finding(check="hook", ok=True, message=f"{hooks[0].command} in {where}{extra}")


def _cli_reachable(env: Mapping[str, str]) -> str | None:
    spec = importlib.util.find_spec("claude_agent_sdk")
    if spec is None:
        return None  # the hook drives Claude Code through the Agent SDK
    found = shutil.which("claude", path=env.get("PATH", os.defpath))
    if found is not None:
        return found
    if spec.submodule_search_locations:
        bundled = Path(next(iter(spec.submodule_search_locations)), "_bundled", "claude")
        if bundled.is_file():
            return str(bundled)
    return None


def check_credentials(
    project: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    command: str | None = None,
) -> Finding:
    """What the hook would call a model with: a key in its environment (the settings'
    ``env`` included), or the user's Claude Code login; none for the offline engine
    (``--model offline`` in its ``command``, or ``$MEMDIR_MODEL``)."""
    env = hook_env(project, env)
    model = (hook_option(command, "--model") if command else None) or env.get("MEMDIR_MODEL", "")
    if model.partition(":")[0] == "offline":
        return Finding(
            check="credentials",
            ok=True,
            message="none needed: the hook asks for the offline rule-based engine",
        )
    for name, what in (
        ("MEMDIR_ANTHROPIC_API_KEY", "memdir's own Anthropic key (memory billed to it)"),
        ("ANTHROPIC_API_KEY", "an Anthropic API key"),
        ("ANTHROPIC_AUTH_TOKEN", "an Anthropic auth token (a gateway's)"),
        ("OPENAI_API_KEY", "an OpenAI key"),
    ):
        if env.get(name):
            return Finding(check="credentials", ok=True, message=f"{what} in {name}")
    config = claude_config_home(env)
    if not config.is_absolute():
        config = Path(os.path.abspath(os.fspath(project))) / config
    login = config / ".credentials.json"
    cli = _cli_reachable(env)
    if login.is_file() or (sys.platform == "darwin" and cli is not None):
        where = str(login) if login.is_file() else "the macOS keychain"
        if cli is None:
            return Finding(
                check="credentials",
                ok=False,
                message=f"a Claude Code login in {where}, but no Claude Code CLI to run the "
                "memory agent with it (memdir runs it through claude-agent-sdk: pip install -e "
                "'<memdir source tree>[claude-agent-sdk]')",
            )
        return Finding(
            check="credentials",
            ok=True,
            message=f"your Claude Code login ({where}): memory runs through {cli}",
        )
    return Finding(
        check="credentials",
        ok=False,
        message="no credentials the hook can use: log in to Claude Code (claude, then "
        "/login), or set ANTHROPIC_API_KEY (ANTHROPIC_AUTH_TOKEN for a gateway, "
        "MEMDIR_ANTHROPIC_API_KEY to pay for memory separately) where Claude Code runs",
    )


def hook_option(command: str, name: str) -> str | None:
    """The value of option ``name`` in a hook command line, if it is there."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for i, word in enumerate(words):
        if word == name and i + 1 < len(words):
            return words[i + 1]
        if word.startswith(name + "="):
            return word.partition("=")[2]
    return None


def check_model(
    project: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    command: str | None = None,
) -> Finding:
    """Which model the hook would use: ``--model`` in its ``command``, else
    ``$MEMDIR_MODEL``, else its default (the model of Claude Code's own session)."""
    env = hook_env(project, env)
    spec = (hook_option(command, "--model") if command else None) or None
    source = "--model in the hook's command"
    if spec is None and env.get("MEMDIR_MODEL"):
        spec, source = env["MEMDIR_MODEL"], "MEMDIR_MODEL"
    from memdir.models._table import DEFAULT_ANTHROPIC_MODEL, retirement

    if spec is None:
        return Finding(
            check="model",
            ok=True,
            message="the session's own model (a retired one on its replacement), else "
            f"{DEFAULT_ANTHROPIC_MODEL} (no --model in the hook, no MEMDIR_MODEL)",
        )
    retired = retirement(spec) if ":" in spec else None
    if retired is not None:
        return Finding(check="model", ok=False, message=f"{retired} ({source})")
    provider = spec.partition(":")[0]
    if provider not in ("anthropic", "openai", "offline") or (
        provider != "offline" and not spec.partition(":")[2]
    ):
        return Finding(
            check="model",
            ok=False,
            message=f"{spec!r} ({source}) is not a model spec: use anthropic:MODEL, "
            "openai:MODEL or offline",
        )
    return Finding(check="model", ok=True, message=f"{spec} ({source})")


def memory_folder(
    project: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    chosen: str | None = None,
) -> tuple[Path, str]:
    """The memory folder the hook would use for a session in ``project``, and why that
    one. Raises :class:`UsageError` when ``$MEMDIR_DIR`` is set but unusable."""
    from memdir.store import MEMDIR_DIR_ENV, canonical_git_root, default_memory_dir

    env = os.environ if env is None else env
    if chosen:
        return Path(os.path.expanduser(chosen)), "--memory-dir in the hook's command"
    folder = default_memory_dir(project, env=env)
    if env.get(MEMDIR_DIR_ENV):
        return folder, f"${MEMDIR_DIR_ENV}"
    cowork = env.get("CLAUDE_COWORK_MEMORY_PATH_OVERRIDE")
    if cowork and os.path.normpath(cowork) == str(folder):
        return folder, "$CLAUDE_COWORK_MEMORY_PATH_OVERRIDE"
    for source in settings_sources(project, env):
        value = source.settings.get("autoMemoryDirectory")
        if source.scope in ("project", "flag") or not isinstance(value, str):
            continue  # read from neither (see memdir.store.default_memory_dir)
        if folder.parent.parent.name == "projects" and folder.name == "memory":
            return folder, (
                f"Claude Code's folder for the project: autoMemoryDirectory in {source.where} "
                f"({value!r}) is not usable"
            )
        return folder, f"autoMemoryDirectory in {source.where} ({source.scope} settings)"
    real = os.path.realpath(os.path.expanduser(os.fspath(project)))
    root = canonical_git_root(real)
    base = "$CLAUDE_CONFIG_DIR" if env.get("CLAUDE_CONFIG_DIR") is not None else "~/.claude"
    keyed = f"the git repository {root}" if root is not None else real
    return folder, f"Claude Code's folder for {keyed} (under {base})"


def _unwritable(folder: Path) -> str | None:
    current = folder
    while not os.path.lexists(current) and current.parent != current:
        current = current.parent
    if not current.is_dir():
        return f"{current} is not a folder"
    try:
        if os.statvfs(current).f_flag & os.ST_RDONLY:
            return f"{current} is on a read-only filesystem"
    except OSError:
        pass
    for candidate in (current, current / ".memdir"):
        if candidate.is_dir() and not os.access(candidate, os.W_OK | os.X_OK):
            return f"no permission to write in {candidate}"
    return None


def check_memory_folder(
    project: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
    command: str | None = None,
) -> Finding:
    """Where the hook would save for ``project``, why there, and whether it can write."""
    env = hook_env(project, env)
    try:
        folder, why = memory_folder(
            project, env, hook_option(command, "--memory-dir") if command else None
        )
    except UsageError as exc:
        return Finding(check="memory folder", ok=False, message=str(exc))
    problem = _unwritable(folder)
    if problem is not None:
        return Finding(check="memory folder", ok=False, message=f"{folder} ({why}): {problem}")
    state = "" if folder.is_dir() else "; created on the first save"
    return Finding(check="memory folder", ok=True, message=f"{folder} ({why}){state}")


def check_switches(
    project: str | os.PathLike[str], env: Mapping[str, str] | None = None
) -> Finding:
    """Whether one of Claude Code's switches turns its automatic memory off."""
    env = hook_env(project, env)
    reason = memory_switched_off(project, env)
    if reason is not None:
        return Finding(
            check="switches",
            ok=False,
            message=f"Claude Code's automatic memory is off ({reason}): the hook saves nothing",
        )
    return Finding(
        check="switches",
        ok=True,
        message="automatic memory is on (autoMemoryEnabled, CLAUDE_CODE_DISABLE_AUTO_MEMORY); "
        "claude --bare and --safe-mode run no hook",
    )


# -- the hook's log ----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class HookRun:
    """One run of the hook's worker, as its log tells it."""

    lines: tuple[str, ...]
    """Its log lines, each starting with the time."""
    outcome: Literal["ok", "failed", "off", "unfinished"]
    """ok, failed, off (memory switched off), or unfinished (still running, or stopped
    before it said how it went)."""

    @property
    def started(self) -> str:
        """When it started (the first line's time)."""
        return self.lines[0].partition(" ")[0] if self.lines else ""

    @property
    def reason(self) -> str | None:
        """The line that says why it failed, if it did."""
        for line in self.lines:
            if _FAILURE.search(line.partition(" ")[2]):
                return line.partition(" ")[2]
        return None

    @property
    def summary(self) -> str:
        """The run in one line: why it failed, or what it did (its session line)."""
        if self.reason is not None:
            return self.reason
        texts = [line.partition(" ")[2] for line in self.lines]
        done = [t for t in texts if re.match(r"session \S+: ", t)]
        return done[-1] if done else texts[-1] if texts else ""

    def as_json(self) -> dict[str, Any]:
        return {
            "started": self.started,
            "outcome": self.outcome,
            "reason": self.reason,
            "lines": list(self.lines),
        }


def _outcome(lines: Sequence[str]) -> Literal["ok", "failed", "off", "unfinished"]:
    texts = [line.partition(" ")[2] for line in lines]
    if any(_FAILURE.search(t) for t in texts):
        return "failed"
    if any(t.startswith(_OFF) for t in texts):
        return "off"
    if any(re.match(r"session \S+: ", t) for t in texts):
        return "ok"
    return "unfinished"


def read_runs(memory_root: Path, limit: int | None = 20) -> list[HookRun]:
    """The hook's last ``limit`` runs (all with None) from the memory folder's log,
    oldest first. A run starts at its ``memory folder`` or ``started for`` line; a note
    that memory was off is a run of its own."""
    try:
        text = (memory_root / HOOK_LOG_NAME).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    runs: list[list[str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        body = line.partition(" ")[2]
        after_folder = bool(runs) and runs[-1][-1].partition(" ")[2].startswith("memory folder ")
        if (
            not runs
            or body.startswith((_OFF, "memory folder "))
            or (body.startswith("started for ") and not after_folder)
        ):
            runs.append([])
        runs[-1].append(line)
    chosen = runs if limit is None else runs[-limit:] if limit > 0 else []
    return [HookRun(lines=tuple(r), outcome=_outcome(r)) for r in chosen]


def check_last_run(memory_root: Path) -> Finding:
    """How the hook's last run went, from its log."""
    runs = read_runs(memory_root, 1)
    if not runs:
        return Finding(check="last run", ok=True, message="none logged yet")
    run = runs[-1]
    if run.outcome == "failed":
        return Finding(check="last run", ok=False, message=f"{run.started}: {run.reason}")
    last = run.lines[-1].partition(" ")[2]
    return Finding(check="last run", ok=True, message=f"{run.started} {run.outcome}: {last}")


def doctor_findings(
    project: str | os.PathLike[str], env: Mapping[str, str] | None = None
) -> list[Finding]:
    """Everything :func:`check_hook` and the other checks find for a session in
    ``project``, in order: hook, credentials, model, memory folder, switches, last run."""
    env = dict(os.environ if env is None else env)
    hooks = find_hooks(project, env)
    command = hooks[0].command if hooks else None
    findings = [
        check_hook(project, env),
        check_credentials(project, env, command),
        check_model(project, env, command),
        check_memory_folder(project, env, command),
        check_switches(project, env),
    ]
    try:
        folder, _ = memory_folder(
            project,
            hook_env(project, env),
            hook_option(command, "--memory-dir") if command else None,
        )
    except UsageError:
        return findings
    findings.append(check_last_run(folder))
    findings.append(check_crash_debris(folder))
    return findings


def check_crash_debris(memory_root: Path) -> Finding:
    """What killed runs left in the memory folder, which the next ``extract`` or ``dream``
    repairs (:func:`~memdir.store.repair_memory_dir`, as a dry run: nothing is changed).

    It never fails the check: memory still works, the index is only out of step with
    the files until then.
    """
    from memdir.store import MemoryDir, repair_memory_dir

    pending = repair_memory_dir(MemoryDir(memory_root), dry_run=True)
    if not pending:
        return Finding(check="repairs", ok=True, message="none needed")
    shown = "; ".join(r.describe(done=False) for r in pending[:3])
    more = f"; and {len(pending) - 3} more" if len(pending) > 3 else ""
    return Finding(
        check="repairs",
        ok=True,
        message=f"{len(pending)} left by interrupted runs, repaired by the next extract or "
        f"dream: {shown}{more}",
    )


# -- the hook ----------------------------------------------------------------------------------


def _log_line(memory_root: Path, message: str) -> None:
    from memdir._private import make_private_dirs, open_private
    from memdir.store import iso_timestamp

    path = memory_root / HOOK_LOG_NAME
    make_private_dirs(path.parent)
    stamp = iso_timestamp(datetime.datetime.now(datetime.UTC))
    fd = open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    with open(fd, "a", encoding="utf-8") as stream:
        stream.write(f"{stamp} {' '.join(message.split())}\n")


def hook_memory_off(
    job: Mapping[str, Any], env: Mapping[str, str] | None = None, *, note_folder: bool = False
) -> bool:
    """Whether the hook must leave this session alone because Claude Code's automatic
    memory is off for it (:func:`memory_switched_off` for the job's ``cwd`` and ``env``,
    default this process's environment).

    When it is off, nothing is created: the reason goes to the hook's log only where the
    memory folder already exists. When it is on and ``note_folder`` is set, the log
    says which folder the session's memory goes to and why (the worker, about to write
    there anyway, asks for that; the quick path does not, to stay quick). Never raises:
    a question it cannot answer leaves the decision to the worker.
    """
    env = os.environ if env is None else env
    cwd = job.get("cwd")
    project = cwd if isinstance(cwd, str) and cwd else os.getcwd()
    chosen = job.get("memory_dir")
    reason = memory_switched_off(project, env)
    if reason is None and not note_folder:
        return False
    try:
        folder, why = memory_folder(project, env, chosen if isinstance(chosen, str) else None)
        if reason is None:
            _log_line(folder, f"memory folder {folder} ({why})")
        elif folder.is_dir():
            _log_line(folder, f"{_OFF} for {project} ({reason}); nothing sent, nothing saved")
    except (OSError, MemdirError):
        pass  # the worker says what is wrong with the folder; the decision stands
    return reason is not None


def describe_change(change: SettingsChange) -> str:
    """One line for what an install or an uninstall did (or would do, in a dry run)."""
    if not change.changed:
        return f"{change.path}: already as wanted, nothing changed"
    verb = "wrote" if change.written else "would write"
    return f"{verb} {change.path}"
