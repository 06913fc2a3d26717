"""``memdir hook claude-code``: extraction as a Claude Code Stop hook.

Claude Code runs the hook after each answer, with a JSON object on stdin (``session_id``,
``transcript_path``, ``cwd``, ``stop_hook_active``). A hook must not hold up or fail the
session, so the extraction runs in a child process of its own: the hook waits for it a
short while and then returns, leaving the child to finish in the background. The next
call picks up from the cursor the child saved, so nothing is lost if it is slow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click

from memdir._cli._common import base_url_option, memory_dir_option, model_option
from memdir.errors import MemdirError
from memdir.store import default_memory_dir

_LOG_NAME = ".memdir-hook.log"


def _warn(message: str) -> None:
    # Only a notice: the hook always exits 0 so that Claude Code carries on untouched.
    click.echo(f"memdir hook: {message}", err=True)


@click.group("hook")
def hook_group() -> None:
    """Run memdir from another tool's hooks."""


@hook_group.command("claude-code")
@memory_dir_option
@model_option
@base_url_option
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Seconds to wait for the extraction before leaving it to finish in the background.",
)
def claude_code_hook(
    memory_dir: Path | None, model_option: str | None, base_url: str | None, timeout: float
) -> None:
    """The Claude Code Stop hook: save memories from the session that just answered.

    Add it to Claude Code's settings (~/.claude/settings.json):

    \b
      {"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": "memdir hook claude-code"}]}]}}

    Memories go to the folder Claude Code itself uses for the session's working
    directory, so both read the same memory. The hook never blocks or fails the session.
    """
    try:
        payload = json.loads(sys.stdin.read() or "{}")
    except ValueError:
        _warn("stdin is not the hook's JSON; nothing done")
        return
    if not isinstance(payload, dict):
        _warn("stdin is not a JSON object; nothing done")
        return
    transcript = payload.get("transcript_path")
    if not isinstance(transcript, str) or not transcript:
        _warn("no transcript_path in the hook's input; nothing done")
        return
    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else None
    try:
        target = memory_dir or default_memory_dir(cwd or os.getcwd())
    except MemdirError as exc:
        _warn(str(exc))
        return
    command = [sys.executable, "-m", "memdir", "extract", "--quiet", "--memory-dir", str(target)]
    if model_option:
        command += ["--model", model_option]
    if base_url:
        command += ["--base-url", base_url]
    command.append(os.path.expanduser(transcript))
    try:
        Path(target).mkdir(parents=True, exist_ok=True)
        log = open(Path(target) / _LOG_NAME, "ab")  # noqa: SIM115 (handed to the child)
    except OSError as exc:
        _warn(f"cannot use {target}: {exc.strerror or exc}")
        return
    with log:
        try:
            child = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=cwd if cwd and os.path.isdir(cwd) else None,
                start_new_session=True,  # survives the hook's own exit
            )
        except OSError as exc:
            _warn(f"cannot start the extraction: {exc.strerror or exc}")
            return
    try:
        child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return  # still working; it saves its cursor when done
