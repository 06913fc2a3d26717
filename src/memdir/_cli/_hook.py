"""``memdir hook claude-code``: extraction as a Claude Code Stop hook.

Claude Code runs the hook after each answer, with a JSON object on stdin (``session_id``,
``transcript_path``, ``cwd``, ``hook_event_name``, ``stop_hook_active``) and waits for it
before the session can go on or end. The hook starts the extraction in a detached process
and exits at once (:mod:`memdir._hook_entry`; ``memdir`` takes that path before loading
this command line at all); the process logs to ``.memdir/hook.log`` in the memory folder.
This command is what ``--help`` shows, and it runs the same path.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from memdir._cli._common import base_url_option, memory_dir_option, model_option
from memdir._hook_entry import HookOptions, log_elsewhere, read_payload, start


@click.group("hook")
def hook_group() -> None:
    """Run memdir from another tool's hooks."""


@hook_group.command("claude-code")
@memory_dir_option
@model_option
@base_url_option
@click.option(
    "--mode",
    type=click.Choice(["auto", "fork", "standalone"]),
    default="auto",
    show_default=True,
    help="fork: share Claude Code's prompt cache through the request it recorded; "
    "standalone: memdir's own request; auto: whichever costs less.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Seconds to wait for the extraction (0: return at once; it goes on detached).",
)
def claude_code_hook(
    memory_dir: Path | None,
    model_option: str | None,
    base_url: str | None,
    mode: str,
    timeout: float,
) -> None:
    """The Claude Code Stop hook: save memories from the session that just answered.

    `memdir install claude-code` adds it to Claude Code's settings with memdir's
    absolute path (Claude Code's PATH need not hold memdir):

    \b
      {"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": "/abs/path/memdir hook claude-code"}]}]}}

    Memories go to the folder Claude Code itself uses for the session's working
    directory, so both read the same memory. The hook returns within a fraction of a
    second and never fails the session: the extraction goes on in a detached process,
    which logs what it did, and why a run failed, to .memdir/hook.log in that folder.
    Other hook events, and a Stop with stop_hook_active set, are ignored, and so is
    every session whose Claude Code memory is switched off (autoMemoryEnabled false,
    CLAUDE_CODE_DISABLE_AUTO_MEMORY). `memdir log` shows the runs.

    The memory agent runs on --model (or $MEMDIR_MODEL), else on Anthropic's API when a
    key is in the environment (MEMDIR_ANTHROPIC_API_KEY, ANTHROPIC_API_KEY,
    ANTHROPIC_AUTH_TOKEN), else inside Claude Code itself with your login (the session
    resumed as a fork; needs claude-agent-sdk). When none can run, Claude Code shows one
    line saying why and nothing is saved; the offline engine runs only as --model offline.
    """
    payload, problem = read_payload(getattr(sys.stdin, "buffer", sys.stdin))
    if problem is not None:
        click.echo(f"memdir hook: {problem}", err=True)
        log_elsewhere(problem)
        return
    options = HookOptions(
        memory_dir=str(memory_dir) if memory_dir is not None else None,
        model=model_option,
        base_url=base_url,
        timeout=timeout,
        mode=mode,
    )
    start(payload, options)


@hook_group.command("pre-tool-use")
@click.option(
    "--memory-dir",
    "memory_dirs",
    multiple=True,
    type=click.Path(path_type=Path),
    help="A memory folder whose rules apply (repeatable); default: Claude Code's for the "
    "session's working directory.",
)
def pre_tool_use_hook(memory_dirs: tuple[Path, ...]) -> None:
    """The Claude Code PreToolUse hook: stop a tool call that a feedback memory's rule
    forbids, telling the model why in the memory's own words (`memdir rules` lists them).

    `memdir install claude-code` adds it to Claude Code's settings. A rule that warns
    lets the call run and tells the model; each firing is recorded in
    .memdir/rule_firings.jsonl in the memory folder. Where Claude Code's memory is off
    (autoMemoryEnabled false, CLAUDE_CODE_DISABLE_AUTO_MEMORY) no rule applies. The hook
    never fails a call because it could not check it: it says why on stderr and lets the
    call run.
    """
    from memdir.rules._hook import hook_main

    argv = [part for d in memory_dirs for part in ("--memory-dir", str(d))]
    hook_main(argv)
