"""``memdir prompt`` and ``memdir recall``: what a main agent is given from memory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from memdir._cli._common import (
    base_url_option,
    choose_memory_dir,
    close_model,
    fail,
    json_option,
    memory_dir_option,
    print_json,
)
from memdir.errors import MemdirError
from memdir.models import Model, resolve_model
from memdir.recall import MAX_SURFACED, memory_prompt, memory_reminder, select_relevant_memories


@click.command("prompt")
@memory_dir_option
@click.option("--team", is_flag=True, help="Include team memory (team/).")
@click.option("--skip-index", is_flag=True, help="Memory without a MEMORY.md index.")
@json_option
def prompt_command(memory_dir: Path | None, team: bool, skip_index: bool, as_json: bool) -> None:
    """Print what an agent is given: the memory section of its system prompt, then the
    MEMORY.md reminder for the start of a conversation."""
    memory = choose_memory_dir(memory_dir, None)
    system = memory_prompt(memory, team=team, skip_index=skip_index)
    reminder = memory_reminder(memory, team=team)
    if as_json:
        print_json({"system_prompt": system, "reminder": reminder})
    else:
        click.echo(f"{system}\n\n{reminder}")


@click.command("recall")
@click.argument("query")
@memory_dir_option
@click.option(
    "--model",
    "model_option",
    help="Let a model choose (anthropic:MODEL or openai:MODEL); default: a lexical ranking.",
)
@base_url_option
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_SURFACED),
    default=MAX_SURFACED,
    show_default=True,
    help="The most memories to surface.",
)
@json_option
def recall_command(
    query: str,
    memory_dir: Path | None,
    model_option: str | None,
    base_url: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Print the memories relevant to QUERY, as they would be surfaced to an agent."""
    memory = choose_memory_dir(memory_dir, None)
    model: Model | None = None
    if model_option:
        try:
            model = resolve_model(model_option, base_url=base_url)
        except MemdirError as exc:
            fail(str(exc))

    async def go() -> list[object]:
        try:
            return list(await select_relevant_memories(query, memory, model, limit=limit))
        finally:
            if model is not None:
                await close_model(model)

    surfaced = asyncio.run(go())
    if as_json:
        print_json({"query": query, "memories": [vars(m) for m in surfaced]})
    elif not surfaced:
        click.echo("no relevant memories")
    else:
        click.echo("\n\n".join(getattr(m, "text", "") for m in surfaced))
