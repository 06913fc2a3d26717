"""The click application behind ``memdir`` (imported only when click is installed)."""

from __future__ import annotations

import click

from memdir import __version__
from memdir._cli._common import guarded
from memdir._cli._dream import dream_command
from memdir._cli._extract import extract_command
from memdir._cli._forget import forget_command
from memdir._cli._hook import hook_group
from memdir._cli._install import doctor_command, install_group, log_command
from memdir._cli._manage import dir_command, ls_command, show_command
from memdir._cli._promote import demote_command, promote_command
from memdir._cli._queue import queue_group, sync_command, worker_command
from memdir._cli._recall import prompt_command, recall_command
from memdir._cli._rules import rules_group
from memdir._cli._search import search_command
from memdir._cli._watch import watch_command
from memdir._cli._why import why_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="memdir")
def cli() -> None:
    """Automatic long-term memory for LLM agents.

    memdir keeps an agent's memories as Markdown files in a memory directory, indexed by
    MEMORY.md, in the same place Claude Code keeps its own, so both share one memory.

    \b
    Start here:
      memdir extract SESSION.jsonl   save memories from a transcript
      memdir ls                      list what is remembered
      memdir install claude-code     make Claude Code save memories (its Stop hook)
      memdir doctor                  check that it would work; memdir log: what it did
    """


for command in (
    extract_command,
    watch_command,
    hook_group,
    install_group,
    doctor_command,
    log_command,
    ls_command,
    show_command,
    forget_command,
    promote_command,
    demote_command,
    dir_command,
    dream_command,
    prompt_command,
    recall_command,
    search_command,
    why_command,
    worker_command,
    queue_group,
    sync_command,
    rules_group,
):
    if command.callback is not None:
        command.callback = guarded(command.callback)
    cli.add_command(command)

__all__ = ["cli"]
