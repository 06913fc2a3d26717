"""The quick half of ``memdir hook claude-code``: read the hook's input, start the work in
a detached process, exit.

Claude Code waits for a Stop hook before the session can end, so this half imports
nothing but the standard library (no provider SDK, no YAML, no click) and never waits
for the extraction. The detached process (:mod:`memdir._hook_worker`) finds the memory
folder, loads the transcript and saves memories; it logs what it did, with timestamps,
to ``.memdir/hook.log`` in the memory folder.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from memdir._claude_settings import home_dir, path_env_problem
from memdir._claude_setup import hook_memory_off
from memdir._private import make_private_dirs, open_private

__all__ = [
    "ANSWER_TAIL_CHARS",
    "API_KEY_VARS",
    "FORK_ENV",
    "NO_MODEL_MESSAGE",
    "STDIN_MAX_BYTES",
    "Backend",
    "HookOptions",
    "choose_backend",
    "fallback_log_path",
    "find_claude_code",
    "job_from",
    "log_elsewhere",
    "parse_options",
    "read_payload",
    "run",
    "start",
]

FORK_ENV = "MEMDIR_CLAUDE_CODE_FORK"
"""Set in the environment of the Claude Code that memdir's Claude Code backend runs; a
hook that sees it is that run's own Stop hook, and does nothing (no recursion)."""

API_KEY_VARS = ("MEMDIR_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
"""Credentials for Anthropic's API, in the order they are used. The first is memdir's
own, for a user who pays for memory apart from Claude Code."""

# The events memdir acts on. Claude Code runs Stop hooks after the main agent's answer;
# a settings file that points other events here gets nothing done.
_EVENTS = frozenset({"Stop"})
ANSWER_TAIL_CHARS = 200
"""How much of the hook's ``last_assistant_message`` a job carries: enough for the
worker to tell when the transcript holds that answer."""


@dataclass(frozen=True)
class HookOptions:
    """The hook's own options, as ``memdir hook claude-code --help`` lists them."""

    memory_dir: str | None = None
    model: str | None = None
    base_url: str | None = None
    timeout: float = 0.0
    """Seconds to wait for the extraction (0: never wait; tests wait to see its result)."""
    mode: str = "auto"
    """``auto`` (the planner picks per run), ``fork`` or ``standalone``."""


_VALUED = {
    "--memory-dir": "memory_dir",
    "--model": "model",
    "--base-url": "base_url",
    "--mode": "mode",
}
_MODES = ("auto", "fork", "standalone")


def parse_options(args: Sequence[str]) -> HookOptions | None:
    """The options in ``args``, or None for anything the quick path does not handle
    (``--help``, an unknown or malformed option): the full command line then takes it."""
    values: dict[str, str] = {}
    timeout = 0.0
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, inline = arg.partition("=")
        if name not in (*_VALUED, "--timeout"):
            return None
        if eq:
            value = inline
        elif i + 1 < len(args):
            i += 1
            value = args[i]
        else:
            return None
        if name == "--timeout":
            try:
                timeout = float(value)
            except ValueError:
                return None
            if not timeout >= 0:  # also refuses NaN
                return None
        else:
            values[_VALUED[name]] = value
        i += 1
    if values.get("mode", "auto") not in _MODES:
        return None
    return HookOptions(**values, timeout=timeout)


@dataclass(frozen=True)
class Backend:
    """What the hook's worker will extract with."""

    kind: str
    """``model`` (``--model`` or ``$MEMDIR_MODEL``), ``api`` (a key is in the
    environment), ``claude-code`` (the user's own Claude Code, logged in as it is), or
    ``none`` (nothing can run: :attr:`reason` says why)."""
    claude_path: str | None = None
    """For ``claude-code``: the executable to run."""
    reason: str | None = None
    """For ``none``: why no model can run, in one line."""


def _exe_of(pid: str) -> str | None:
    """The Claude Code executable of the process ``pid`` (Linux ``/proc``): the binary
    itself, or, when it runs on Node or Bun, the script it was started with."""
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            argv = cmdline.read().split(b"\0")
    except (OSError, ValueError):
        return None
    # The binary's own name, or a folder of its install (the native installer keeps
    # versions as ``…/claude/versions/2.1.332``).
    if "claude" in exe:
        return exe
    script = argv[1].decode(errors="replace") if len(argv) > 1 else ""
    return script if script and os.path.isabs(script) else None


def _sdk_spec() -> importlib.machinery.ModuleSpec | None:
    """claude-agent-sdk's module spec, found without importing it; None when it is not
    installed (or cannot be looked up: the hook must not fail on it)."""
    try:
        return importlib.util.find_spec("claude_agent_sdk")
    except (ImportError, ValueError):
        return None


def _bundled_cli() -> str | None:
    """The CLI bundled with claude-agent-sdk, found without importing the SDK."""
    spec = _sdk_spec()
    if spec is None or not spec.submodule_search_locations:
        return None
    name = "claude.exe" if sys.platform == "win32" else "claude"
    return os.path.join(next(iter(spec.submodule_search_locations)), "_bundled", name)


def find_claude_code(env: Mapping[str, str]) -> str | None:
    """The Claude Code to run the memory agent in: the one that ran this hook (Claude
    Code gives its hooks ``CLAUDE_PID``), else ``claude`` on ``PATH``, else the CLI the
    Agent SDK bundles; None when there is none."""
    candidates = [
        _exe_of(env["CLAUDE_PID"]) if env.get("CLAUDE_PID", "").isdigit() else None,
        shutil.which("claude", path=env.get("PATH")),
        _bundled_cli(),
    ]
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.realpath(candidate)
    return None


def _missing_key(spec: str, base_url: str | None, env: Mapping[str, str]) -> str | None:
    """Why the model ``spec`` named for the hook cannot run for lack of a key, or None
    (the worker says what else may be wrong with it)."""
    provider = spec.partition(":")[0]
    if provider == "anthropic" and not any(env.get(name) for name in API_KEY_VARS):
        return f"{spec} needs a key, and none of {', '.join(API_KEY_VARS)} is set"
    reachable = base_url or env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL")
    if provider == "openai" and not reachable:
        return f"{spec} needs OPENAI_API_KEY (or a --base-url), and none is set"
    return None


def choose_backend(options: HookOptions, env: Mapping[str, str]) -> Backend:
    """What to extract with, never the offline engine unless it is asked for: the model
    given (``--model``, ``$MEMDIR_MODEL``), else the API when a key is in the
    environment, else the user's own Claude Code through the Agent SDK, else nothing."""
    named = options.model or env.get("MEMDIR_MODEL")
    if named:
        missing = _missing_key(named, options.base_url, env)
        return Backend("model") if missing is None else Backend("none", reason=missing)
    # OpenAI's key or endpoint has chosen OpenAI's API for memdir since before this backend.
    if any(env.get(name) for name in (*API_KEY_VARS, "OPENAI_API_KEY", "OPENAI_BASE_URL")):
        return Backend("api")
    if _sdk_spec() is None:
        return Backend(
            "none",
            reason="no API key in the environment, and claude-agent-sdk (which runs the "
            "memory agent in your Claude Code) is not installed",
        )
    found = find_claude_code(env)
    if found is None:
        return Backend(
            "none", reason="no API key in the environment, and no Claude Code executable found"
        )
    return Backend("claude-code", claude_path=found)


NO_MODEL_MESSAGE = (
    "memdir saved no memories: {reason}. Log in to Claude Code, set MEMDIR_ANTHROPIC_API_KEY "
    "or ANTHROPIC_API_KEY, or give the hook --model."
)


STDIN_MAX_BYTES = 8 * 2**20
"""The most of the hook's stdin read. A Stop hook's input is a few fields and the tail of
the last answer (some hundred KiB at the very most); more is not that input, and reading
it whole would cost its size in memory twice over."""


def read_payload(
    stream: BinaryIO | TextIO | None, limit: int = STDIN_MAX_BYTES
) -> tuple[object, str | None]:
    """The hook's JSON input read from ``stream``: ``(value, None)``, or ``(None, reason)``
    with a one-line reason when it is over ``limit`` bytes (characters, from a text
    stream), not UTF-8 or not JSON. No stream (a host that closed stdin) reads as empty.

    Nesting too deep for the parser (``[[[[…``) is one such reason, never a traceback.
    """
    try:
        data = stream.read(limit + 1) if stream is not None else b""
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"cannot read stdin: {_reason_of(exc)}; nothing done"
    if len(data) > limit:
        return None, f"stdin is over {limit // 2**20} MiB, not the hook's input; nothing done"
    try:
        text = data if isinstance(data, str) else data.decode("utf-8")
        return json.loads(text or "{}"), None
    except UnicodeDecodeError:
        return None, "stdin is not UTF-8 text; nothing done"
    except RecursionError:
        return None, "stdin nests deeper than the hook's JSON can; nothing done"
    except ValueError:
        return None, "stdin is not the hook's JSON; nothing done"


def _reason_of(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return " ".join(str(exc).split()) or type(exc).__name__


def fallback_log_path(env: Mapping[str, str] | None = None) -> Path:
    """Where a hook that cannot reach its memory folder logs: memdir's folder for logs
    under the user's state folder (``$XDG_STATE_HOME`` or ``~/.local/state``; macOS
    ``~/Library/Logs``; Windows ``%LOCALAPPDATA%``), file ``hook.log``."""
    environ = os.environ if env is None else env
    home = home_dir(environ)
    if sys.platform == "win32":
        base = environ.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local")
    elif sys.platform == "darwin":
        base = os.path.join(home, "Library", "Logs")
    else:
        state = environ.get("XDG_STATE_HOME", "")
        base = state if os.path.isabs(state) else os.path.join(home, ".local", "state")
    return Path(base, "memdir", "hook.log")


def log_elsewhere(message: str, env: Mapping[str, str] | None = None) -> None:
    """Append one timestamped line to :func:`fallback_log_path`: the hook's output goes
    nowhere anyone looks, so what stopped it must land in a file. Never raises."""
    path = fallback_log_path(env)
    stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
    line = " ".join(message.split())
    try:
        make_private_dirs(path.parent)
        fd = open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        with open(fd, "a", encoding="utf-8") as stream:
            stream.write(f"{stamp.replace('+00:00', 'Z')} {line}\n")
    except (OSError, ValueError):
        pass


def _notice(message: str, env: Mapping[str, str] | None = None) -> None:
    # Only a notice: the hook always exits 0 so that Claude Code carries on untouched.
    # Claude Code keeps a hook's stderr out of sight, so the line also goes to a file.
    sys.stderr.write(f"memdir hook: {message}\n")
    log_elsewhere(message, env)


def _unusable_folder(job: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    """Why the path that would place the job's memory folder is unusable, or None: the
    hook's ``--memory-dir``, else ``$MEMDIR_DIR``, else ``$CLAUDE_CONFIG_DIR``."""
    chosen = job.get("memory_dir")
    if isinstance(chosen, str) and chosen:
        return path_env_problem("--memory-dir", chosen)
    if env.get("MEMDIR_DIR"):
        return path_env_problem("MEMDIR_DIR", env["MEMDIR_DIR"])
    return path_env_problem("CLAUDE_CONFIG_DIR", env.get("CLAUDE_CONFIG_DIR"))


def job_from(payload: object, options: HookOptions) -> dict[str, Any] | str | None:
    """The worker's job for a Stop hook's input: None when the input is to be ignored
    (another event than ``Stop``, or ``stop_hook_active: true``: Claude Code is already
    going on because of a Stop hook), a one-line reason when it cannot be used."""
    if not isinstance(payload, Mapping):
        return "stdin is not a JSON object; nothing done"
    event = payload.get("hook_event_name", "Stop")
    if event not in _EVENTS or payload.get("stop_hook_active") is True:
        return None
    transcript = payload.get("transcript_path")
    if not isinstance(transcript, str) or not transcript:
        return "no transcript_path in the hook's input; nothing done"
    cwd = payload.get("cwd")
    session = payload.get("session_id")
    answer = payload.get("last_assistant_message")
    return {
        "transcript_path": transcript,
        "cwd": cwd if isinstance(cwd, str) else None,
        "session_id": session if isinstance(session, str) else None,
        # Enough of the answer to tell when the transcript holds it (see load_settled).
        "answer_tail": answer[-ANSWER_TAIL_CHARS:] if isinstance(answer, str) else None,
        "memory_dir": options.memory_dir,
        "model": options.model,
        "base_url": options.base_url,
        "mode": options.mode,
    }


def _tell_user(message: str) -> None:
    """One line Claude Code shows the user: a Stop hook's ``systemMessage``."""
    sys.stdout.write(json.dumps({"systemMessage": message}) + "\n")
    sys.stdout.flush()


def start(payload: object, options: HookOptions, *, env: Mapping[str, str] | None = None) -> None:
    """Start the extraction for a Stop hook's input, detached; wait ``options.timeout``.

    What :func:`job_from` ignores is ignored quietly. Never raises.
    """
    environ = os.environ if env is None else env
    if environ.get(FORK_ENV):
        return  # the Stop of memdir's own run inside Claude Code
    job = job_from(payload, options)
    if job is None:
        return
    if isinstance(job, str):
        _notice(job, environ)
        return
    unusable = _unusable_folder(job, environ)
    if unusable is not None:  # the worker could find no folder to save in, or to log to
        _tell_user(f"memdir saved no memories: {unusable}")
        _notice(unusable, environ)
        return
    if hook_memory_off(job, env):  # Claude Code's memory is off: neither start nor write
        return
    backend = choose_backend(options, environ)
    job["backend"] = backend.kind
    job["claude_path"] = backend.claude_path
    if backend.reason is not None:
        # The worker still starts: it writes the reason to the hook's log.
        job["unusable"] = backend.reason
        _tell_user(NO_MODEL_MESSAGE.format(reason=backend.reason))
    workdir = job["cwd"] if job["cwd"] and os.path.isdir(job["cwd"]) else None
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "memdir._hook_worker", json.dumps(job)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=workdir,
            env=dict(environ),
            start_new_session=True,  # outlives the hook, and Claude Code's signals
        )
    except OSError as exc:
        _notice(f"cannot start the extraction: {exc.strerror or exc}", environ)
        return
    if options.timeout > 0:
        # Past the timeout it is still working; it saves its cursor when done.
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=options.timeout)


def run(args: Sequence[str]) -> bool:
    """The quick path for ``memdir hook claude-code ARGS``: False when it does not handle
    ``args`` (the full command line does), else True once the hook is done."""
    options = parse_options(args)
    if options is None:
        return False
    # The bytes under a text stdin, so a line's length is counted in bytes; a host that
    # replaced stdin with a text stream of its own is read as that.
    payload, problem = read_payload(getattr(sys.stdin, "buffer", sys.stdin))
    if problem is not None:
        _notice(problem)
        return True
    try:
        start(payload, options)
    except Exception as exc:  # the hook never fails the session, whatever it was given
        _notice(f"nothing done: {type(exc).__name__}: {exc}")
    return True
