"""The detached half of ``memdir hook claude-code``: save memories from one session.

Started by :mod:`memdir._hook_entry` as ``python -m memdir._hook_worker JOB`` (JOB: a JSON
object with ``transcript_path``, ``cwd``, ``session_id`` and the hook's options), in a
session of its own, with no terminal. Everything it has to say goes to
``.memdir/hook.log`` in the memory folder, one line per event, each starting with the
time (UTC, ISO 8601): what it extracted, and when something failed, why.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from memdir._claude_setup import hook_memory_off
from memdir._hook_entry import ANSWER_TAIL_CHARS, log_elsewhere
from memdir._private import make_private_dirs, open_private
from memdir.errors import MemdirError, one_line

if TYPE_CHECKING:
    from memdir._cli._run import TranscriptReport
    from memdir.extract._planner import Mode
    from memdir.models import Model
    from memdir.transcripts import Transcript

__all__ = [
    "ANSWER_TAIL_CHARS",
    "HookLog",
    "extract_session",
    "extract_through_claude_code_session",
    "load_settled",
    "log_report",
    "main",
    "memory_root_for",
    "open_log",
    "run_job",
]


class HookLog:
    """``.memdir/hook.log``: timestamped lines, appended and flushed one at a time."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def line(self, message: str) -> None:
        from memdir.store import iso_timestamp

        stamp = iso_timestamp(datetime.datetime.now(datetime.UTC))
        self._stream.write(f"{stamp} {' '.join(message.split())}\n")
        self._stream.flush()


def open_log(memory_root: Path) -> TextIO:
    """``.memdir/hook.log`` of ``memory_root``, opened to append (earlier files moved in)."""
    from memdir.state import HOOK_LOG_NAME, migrate_legacy_files

    make_private_dirs(memory_root)
    migrate_legacy_files(memory_root)
    path = memory_root / HOOK_LOG_NAME
    make_private_dirs(path.parent)
    fd = open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    return open(fd, "a", encoding="utf-8")


def memory_root_for(job: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Path:
    """The job's ``memory_dir``, else Claude Code's folder for its ``cwd`` under ``env``
    (default: this process's environment)."""
    from memdir.store import default_memory_dir

    chosen = job.get("memory_dir")
    if isinstance(chosen, str) and chosen:
        return Path(os.path.expanduser(chosen))
    cwd = job.get("cwd")
    return default_memory_dir(cwd if isinstance(cwd, str) and cwd else os.getcwd(), env=env)


def log_report(log: HookLog, report: TranscriptReport) -> None:
    """What one session's extraction did, as the hook's log lines."""
    for reason in report.error_reasons:
        log.line(f"run failed (retried next time): {reason}")
    if report.turns:
        log.line(f"host request: {report.host_request}")
    log.line(
        f"session {report.session_id}: {report.turns} turn(s), {report.runs} run(s) "
        f"({', '.join(report.modes) or 'none'}), "
        f"{report.memories_saved} memory(ies) saved, {report.errors} failed; "
        + (
            f"tokens estimated ~{report.input_tokens} in, ~{report.output_tokens} out "
            "(the offline model calls no provider)"
            if report.usage_estimated
            else f"input {report.input_tokens + report.cache_creation_input_tokens} "
            f"+ {report.cache_read_input_tokens} from cache, output {report.output_tokens} tokens"
        )
    )
    for went, plan in zip(report.modes, report.plans, strict=False):
        log.line(f"{went}: {plan}")
    for path in report.saved_paths:
        log.line(f"saved {path}")


async def extract_session(
    transcript: Transcript,
    memory_root: Path,
    log: HookLog,
    *,
    model: Model | str | None = None,
    base_url: str | None = None,
    mode: Mode = "auto",
) -> int:
    """Save memories from the turns of ``transcript`` since its saved cursor, logging to
    ``log``; 0 when every run succeeded, 1 when one failed, 2 when none could start (no
    credentials for the provider). ``model`` is a model, a spec, or
    None for the default (``$MEMDIR_MODEL``, then the session's own model, then the
    default of the provider whose key is set)."""
    from memdir._cli._common import NO_MODEL, close_model, missing_credentials, model_spec
    from memdir._cli._run import extract_transcript
    from memdir.models import resolve_model
    from memdir.store import MemoryDir
    from memdir.transcripts import host_model

    owned = model is None or isinstance(model, str)  # a model passed in is the caller's
    if isinstance(model, str) or model is None:
        # The session's own model (a retired one replaced) when memdir can reach it.
        host = host_model(transcript)
        spec = model_spec(model or None, host=host)
        if spec is not None and host is not None and spec.partition(":")[2] != host:
            log.line(f"the session's model is {host}; memory runs on {spec}")
        missing = NO_MODEL if spec is None else missing_credentials(spec, base_url)
        if spec is None or missing is not None:
            log.line(f"extraction not started: {missing}")
            return 2
        model = resolve_model(spec, base_url=base_url)
    try:
        report = await extract_transcript(transcript, MemoryDir(memory_root), model, mode=mode)
    finally:
        if owned:
            await close_model(model)
    log_report(log, report)
    return 1 if report.errors else 0


async def extract_through_claude_code_session(
    transcript: Transcript,
    memory_root: Path,
    log: HookLog,
    *,
    cli_path: str,
    env: Mapping[str, str] | None = None,
) -> int:
    """:func:`extract_session` through the user's own Claude Code at ``cli_path``: the
    session resumed as a fork that runs memdir's memory agent (see
    :mod:`memdir._claude_code_backend`). Same log lines, same exit statuses."""
    from memdir._claude_code_backend import extract_through_claude_code
    from memdir.store import MemoryDir

    log.line(f"extracting through Claude Code at {cli_path}")
    report = await extract_through_claude_code(
        transcript, MemoryDir(memory_root), cli_path=cli_path, env=env
    )
    log_report(log, report)
    return 1 if report.errors else 0


def repair_before_extraction(memory_root: Path, log: HookLog) -> None:
    """Repair what a killed run left in the memory folder (a memory saved but never
    indexed, say), a line in the log for each repair, before this run saves more."""
    from memdir.store import MemoryDir, repair_memory_dir

    for repair in repair_memory_dir(MemoryDir(memory_root)):
        log.line(f"repaired: {repair.describe()}")


# How long to wait for Claude Code to finish writing the turn the hook was called for.
_SETTLE_SECONDS = 15.0


def load_settled(
    path: Path, answer_tail: str | None, *, timeout: float = _SETTLE_SECONDS
) -> Transcript:
    """Load the transcript once it holds the answer the hook was called for.

    Claude Code may call a Stop hook before the turn's last lines reach the transcript
    (the Agent SDK's in-process hooks run before the file is even created); loading at
    once would miss the turn, or the whole session. So the file is read again, a little
    later each time, until its last answer ends with ``answer_tail`` (or, without one,
    until the file exists), for up to ``timeout`` seconds; then whatever is there is
    used. Raises :class:`~memdir.errors.TranscriptError` when the file never appears.
    """
    from memdir.transcripts import load_transcript

    deadline = time.monotonic() + timeout
    delay = 0.02
    wanted = answer_tail.strip() if answer_tail else None
    while True:
        last_try = time.monotonic() >= deadline
        if path.exists() or last_try:
            transcript = load_transcript(path)
            answers = [m for m in transcript.messages if m.role == "assistant" and m.text]
            written = answers and answers[-1].text.strip().endswith(wanted or "")
            if wanted is None or written or last_try:
                return transcript
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 1.0)


def run_job(job: Mapping[str, Any], *, stream: TextIO | None = None) -> int:
    """Do one hook job; returns the exit status (0 done, 1 failed, 2 unusable job)."""
    if hook_memory_off(job, note_folder=stream is None):  # Claude Code's memory is off
        return 0
    # Without a memory folder there is no hook.log: the reason goes to memdir's own log
    # (see log_elsewhere), since this process's stderr reaches no one.
    try:
        memory_root = memory_root_for(job)
    except MemdirError as exc:
        _unusable(f"nothing done for {job.get('transcript_path')}: {one_line(exc)}")
        return 2
    try:
        handle = stream if stream is not None else open_log(memory_root)
    except OSError as exc:
        _unusable(f"cannot use {memory_root}: {exc.strerror or exc}")
        return 2
    log = HookLog(handle)
    try:
        log.line(f"started for {job.get('transcript_path')} (pid {os.getpid()})")
        unusable = job.get("unusable")
        if isinstance(unusable, str):
            log.line(f"extraction not started: {unusable}")
            return 2
        path = Path(os.path.expanduser(str(job["transcript_path"])))
        tail = job.get("answer_tail")
        transcript = load_settled(path, tail if isinstance(tail, str) else None)
        from memdir.transcripts._lines import is_overlong

        for skipped in transcript.skipped:
            if is_overlong(skipped.reason):  # routine skips (unknown types) stay quiet
                log.line(f"skipped line {skipped.line} of {path}: {skipped.reason}")
        repair_before_extraction(memory_root, log)
        base_url = job.get("base_url")
        model = job.get("model")
        cli_path = job.get("claude_path")
        if job.get("backend") == "claude-code" and isinstance(cli_path, str):
            return asyncio.run(
                extract_through_claude_code_session(transcript, memory_root, log, cli_path=cli_path)
            )
        return asyncio.run(
            extract_session(
                transcript,
                memory_root,
                log,
                model=model if isinstance(model, str) else None,
                base_url=base_url if isinstance(base_url, str) else None,
                mode=_mode(job.get("mode")),
            )
        )
    except MemdirError as exc:
        log.line(f"extraction failed: {one_line(exc)}")
        return 1
    except Exception as exc:  # the log is the only place anyone will look
        log.line(f"extraction failed: {type(exc).__name__}: {one_line(exc)}")
        return 1
    finally:
        if stream is None:
            handle.close()


def _unusable(message: str) -> None:
    sys.stderr.write(f"memdir hook: {message}\n")
    log_elsewhere(message)


def _mode(value: object) -> Mode:
    return "fork" if value == "fork" else "standalone" if value == "standalone" else "auto"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        job = json.loads(args[0]) if args else None
    except ValueError:
        job = None
    if not isinstance(job, dict) or not isinstance(job.get("transcript_path"), str):
        sys.stderr.write("memdir hook: the worker needs the hook's job as a JSON object\n")
        return 2
    return run_job(job)


if __name__ == "__main__":
    raise SystemExit(main())
