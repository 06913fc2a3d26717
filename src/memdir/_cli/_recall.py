"""``memdir prompt`` and ``memdir recall``: what a main agent is given from memory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from memdir._cli._common import (
    base_url_option,
    close_model,
    fail_with,
    json_option,
    memory_dir_option,
    model_for,
    print_json,
)
from memdir._cli._existing import existing_memory_dir
from memdir.errors import ModelError
from memdir.models import Model
from memdir.recall import (
    DEFAULT_SELECTOR_MODEL,
    MAX_SURFACED,
    SESSION_SURFACE_BUDGET,
    SurfaceBudget,
    SurfacedMemory,
    memory_prompt,
    memory_reminder,
    select_relevant_memories,
)


@click.command("prompt")
@memory_dir_option
@click.option("--team", is_flag=True, help="Include team memory (team/).")
@click.option("--skip-index", is_flag=True, help="Memory without a MEMORY.md index.")
@json_option
def prompt_command(memory_dir: Path | None, team: bool, skip_index: bool, as_json: bool) -> None:
    """Print what an agent is given: the memory section of its system prompt, then the
    MEMORY.md reminder for the start of a conversation (after the user layer's index,
    when the layer is on)."""
    from memdir._claude_user_layer import user_layer_on

    memory = existing_memory_dir(memory_dir, None)
    user = user_layer_on()  # the user layer, when on: loaded first, the project wins
    system = memory_prompt(memory, team=team, skip_index=skip_index, user_dir=user)
    reminder = memory_reminder(memory, team=team, user_dir=user)
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
    help="Let a model choose (anthropic:MODEL or openai:MODEL; anthropic alone: "
    f"{DEFAULT_SELECTOR_MODEL}, the model Claude Code's own selector uses); default (or "
    "offline): a lexical ranking.",
)
@base_url_option
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=MAX_SURFACED,
    show_default=True,
    help="The most memories to surface; what is shown stops, as in a session, at "
    f"{SESSION_SURFACE_BUDGET // 1024} KiB.",
)
@click.option(
    "--fallback",
    is_flag=True,
    help="When no memory is relevant, show the passages of past sessions that match "
    "(as memdir search finds them).",
)
@json_option
def recall_command(
    query: str,
    memory_dir: Path | None,
    model_option: str | None,
    base_url: str | None,
    limit: int,
    fallback: bool,
    as_json: bool,
) -> None:
    """Print the memories relevant to QUERY, as they would be surfaced to an agent.

    Unlike a session, which surfaces nothing for a one-word message ("yes", "continue"),
    a one-word QUERY is searched for. With --model, a model that fails or answers
    something unusable stops the command (exit 1) with the reason; without it, the
    memories are ranked by the words they share with QUERY.
    """
    memory = existing_memory_dir(memory_dir, None)
    model: Model | None = None
    # The offline model cannot choose memories: "offline" is the lexical ranking.
    if model_option == "anthropic":
        model_option = f"anthropic:{DEFAULT_SELECTOR_MODEL}"
    if model_option and model_option != "offline":
        model = model_for(model_option, base_url)

    async def go() -> list[SurfacedMemory]:
        try:
            return await select_relevant_memories(
                query,
                memory,
                model,
                limit=limit,
                budget=SurfaceBudget(),
                single_word=True,
                strict=True,
                search_fallback=fallback,
            )
        finally:
            if model is not None:
                await close_model(model)

    try:
        surfaced = asyncio.run(go())
    except ModelError as exc:
        fail_with(exc, "recall failed")
    if as_json:
        print_json({"query": query, "memories": [vars(m) for m in surfaced]})
    elif not surfaced:
        click.echo("no relevant memories")
    else:
        click.echo("\n\n".join(m.text for m in surfaced))
