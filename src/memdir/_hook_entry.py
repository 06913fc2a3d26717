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
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memdir._claude_setup import hook_memory_off

__all__ = ["ANSWER_TAIL_CHARS", "HookOptions", "job_from", "parse_options", "run", "start"]

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


def _notice(message: str) -> None:
    # Only a notice: the hook always exits 0 so that Claude Code carries on untouched.
    sys.stderr.write(f"memdir hook: {message}\n")


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


def start(payload: object, options: HookOptions, *, env: Mapping[str, str] | None = None) -> None:
    """Start the extraction for a Stop hook's input, detached; wait ``options.timeout``.

    What :func:`job_from` ignores is ignored quietly. Never raises.
    """
    job = job_from(payload, options)
    if job is None:
        return
    if isinstance(job, str):
        _notice(job)
        return
    if hook_memory_off(job, env):  # Claude Code's memory is off: neither start nor write
        return
    workdir = job["cwd"] if job["cwd"] and os.path.isdir(job["cwd"]) else None
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "memdir._hook_worker", json.dumps(job)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=workdir,
            env=dict(os.environ if env is None else env),
            start_new_session=True,  # outlives the hook, and Claude Code's signals
        )
    except OSError as exc:
        _notice(f"cannot start the extraction: {exc.strerror or exc}")
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
    try:
        raw = sys.stdin.read()
    except (OSError, UnicodeDecodeError):
        raw = ""
    try:
        payload = json.loads(raw or "{}")
    except ValueError:
        _notice("stdin is not the hook's JSON; nothing done")
        return True
    start(payload, options)
    return True
