"""``memdir rules``: list the rules feedback memories state, test a command against them,
switch one off or on again."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from memdir._cli._common import fail, json_option, memory_dir_option, print_json
from memdir._cli._existing import existing_memory_dir
from memdir.rules import Rule, check_tool_call, load_rules, read_firings, set_enabled


def _root(memory_dir: Path | None) -> Path:
    if memory_dir is None:  # `memdir rules --memory-dir X test ...` names it on the group
        parent = click.get_current_context().parent
        chosen = parent.params.get("memory_dir") if parent is not None else None
        memory_dir = chosen if isinstance(chosen, Path) else None
    return existing_memory_dir(memory_dir, None).root


def _line(rule: Rule, fired: int) -> str:
    state = "on " if rule.enabled else "off"
    instead = f" -> {rule.instead}" if rule.instead else ""
    times = f"  (fired {fired}x)" if fired else ""
    return (
        f"{rule.id}  {state}  {rule.action:<4}  {rule.tool} {shlex.quote(rule.match)}"
        + (f" without {rule.require}" if rule.require else "")
        + f"{instead}"
        f"  [{rule.memory}]{times}"
    )


@click.group("rules", invoke_without_command=True)
@memory_dir_option
@json_option
@click.pass_context
def rules_group(ctx: click.Context, memory_dir: Path | None, as_json: bool) -> None:
    """List the rules that feedback memories state, which `memdir hook pre-tool-use`
    applies before each Claude Code tool call.

    A rule comes only from a memory: when a feedback memory states something checkable
    ("we use pnpm, never npm"), the memory agent writes it into the memory's frontmatter
    (rule: {tool: Bash, match: "npm", action: deny, instead: "pnpm"}). A rule lives as long
    as its memory; `memdir rules off ID` switches one off without forgetting the memory.
    """
    if ctx.invoked_subcommand is not None:
        return
    root = _root(memory_dir)
    rules = load_rules(root)
    fired: dict[str, int] = {}
    for firing in read_firings(root):
        rule_id = str(firing.get("rule"))
        fired[rule_id] = fired.get(rule_id, 0) + 1
    if as_json:
        print_json([{**r.as_dict(), "fired": fired.get(r.id, 0)} for r in rules])
        return
    if not rules:
        click.echo("No rules: no feedback memory states one.")
        return
    for rule in rules:
        click.echo(_line(rule, fired.get(rule.id, 0)))


@rules_group.command("test")
@click.argument("command")
@click.option(
    "--tool",
    default="Bash",
    show_default=True,
    help="The tool the call is for: Bash (COMMAND is a command line), or Edit/Write (a path).",
)
@memory_dir_option
@json_option
def rules_test(command: str, tool: str, memory_dir: Path | None, as_json: bool) -> None:
    """Say which rules would fire for COMMAND (nothing is run or recorded).

    Exits 1 when a rule would deny it, so a script can ask too.
    """
    root = _root(memory_dir)
    key = "command" if tool == "Bash" else "file_path"
    hits = check_tool_call(load_rules(root), tool, {key: command}, str(Path.cwd()))
    if as_json:
        print_json([{**hit.rule.as_dict(), "stopped": hit.stopped} for hit in hits])
    elif not hits:
        click.echo("No rule fires.")
    else:
        for hit in hits:
            verb = "denies" if hit.rule.action == "deny" else "warns"
            click.echo(f"{hit.rule.id} {verb}: {hit.rule.reason}  [{hit.rule.memory}]")
    if any(hit.rule.action == "deny" for hit in hits):
        raise SystemExit(1)


def _switch(rule_id: str, memory_dir: Path | None, enabled: bool) -> None:
    try:
        rule = set_enabled(_root(memory_dir), rule_id, enabled)
    except LookupError as exc:
        fail(str(exc))
    click.echo(_line(rule, 0))


@rules_group.command("off")
@click.argument("rule_id")
@memory_dir_option
def rules_off(rule_id: str, memory_dir: Path | None) -> None:
    """Switch the rule RULE_ID off (its memory stays)."""
    _switch(rule_id, memory_dir, False)


@rules_group.command("on")
@click.argument("rule_id")
@memory_dir_option
def rules_on(rule_id: str, memory_dir: Path | None) -> None:
    """Switch the rule RULE_ID on again."""
    _switch(rule_id, memory_dir, True)
