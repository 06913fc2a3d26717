"""``memdir install claude-code``, ``memdir doctor`` and ``memdir log``: set the Stop hook
up, say what would stop memory from working, show what the hook did.

The work is in :mod:`memdir._claude_setup`; these commands print it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from memdir._claude_setup import (
    Finding,
    HookRun,
    SettingsChange,
    check_credentials,
    check_memory_folder,
    check_model,
    check_switches,
    command_finding,
    describe_change,
    doctor_findings,
    find_hooks,
    hook_command,
    hook_env,
    hook_option,
    install_hook,
    memory_folder,
    read_runs,
    settings_path,
    uninstall_hook,
)
from memdir._cli._common import EXIT_FAILED, fail, guarded, json_option, print_json
from memdir._hook_entry import fallback_log_path
from memdir.errors import UsageError

project_option = click.option(
    "--project",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    show_default=True,
    help="The project Claude Code runs in (where its memory folder is keyed).",
)


def _echo_findings(findings: list[Finding]) -> None:
    for finding in findings:
        mark = "ok     " if finding.ok else click.style("PROBLEM", fg="red", bold=True)
        click.echo(f"  {mark} {finding.check}: {finding.message}")


@click.group("install")
def install_group() -> None:
    """Set memdir up in another tool."""


@install_group.command("claude-code")
@click.option(
    "--scope",
    type=click.Choice(["user", "project"]),
    default="user",
    show_default=True,
    help="user: every project (<Claude config home>/settings.json, $CLAUDE_CONFIG_DIR "
    "honoured); project: this one (.claude/settings.json in --project).",
)
@project_option
@click.option("--uninstall", is_flag=True, help="Remove memdir's hook (only memdir's).")
@click.option(
    "--rules",
    is_flag=True,
    help="Also add the PreToolUse hook that applies feedback memories' rules "
    "(`memdir rules`) before each Bash, Edit or Write.",
)
@click.option("--dry-run", is_flag=True, help="Say what would change; write nothing.")
@click.option(
    "--user-layer",
    is_flag=True,
    help="Also (or with --uninstall: only) the user layer: an import of its MEMORY.md in "
    "your own CLAUDE.md, so every project's session loads the memories about you.",
)
@json_option
@guarded  # a subcommand: the group's registration does not wrap it
def install_claude_code(
    scope: str,
    project: Path,
    uninstall: bool,
    rules: bool,
    dry_run: bool,
    user_layer: bool,
    as_json: bool,
) -> None:
    """Add memdir's Stop hook to Claude Code's settings, then check that it can work.

    The hook runs this memdir by its absolute path (the `memdir` script of the
    environment it is installed in, or `python -m memdir`), so it works whatever PATH
    Claude Code has. Running it again changes nothing; an older memdir hook is replaced,
    not duplicated; every other setting and hook is kept. A settings file that is not a
    JSON object is refused and left alone.

    Then it checks what it can: credentials (an API key, or your Claude Code login),
    the model, the project's memory folder, and Claude Code's switches that turn memory
    off (autoMemoryEnabled, CLAUDE_CODE_DISABLE_AUTO_MEMORY). `memdir doctor` checks the
    same later; `memdir log` shows what the hook did.
    """
    path = settings_path("project" if scope == "project" else "user", project)
    layer = _user_layer(uninstall=uninstall, dry_run=dry_run, quiet=as_json) if user_layer else None
    if layer is not None and uninstall:
        return
    if uninstall or rules:
        from memdir.rules._settings import install_rules_hook, rules_hook_command

        rules_command = rules_hook_command() if rules and not uninstall else None
        rules_changed, _ = install_rules_hook(path, rules_command, dry_run=dry_run)
        if rules_changed and not as_json:
            what = f"PreToolUse hook: {rules_command}" if rules_command else "rules hook removed"
            click.echo(f"memdir: {path}: {what}")
    if uninstall:
        change = uninstall_hook(path, dry_run=dry_run)
        if as_json:
            print_json(_change_json(change, scope, "uninstall", []))
        elif change.changed:
            click.echo(f"memdir: {describe_change(change)}: memdir's Stop hook removed")
        else:
            click.echo(f"memdir: no memdir hook in {path}; nothing changed")
        return
    command = hook_command()
    change = install_hook(path, command, dry_run=dry_run)
    findings = [
        command_finding(command),  # memdir's own absolute path, in this environment
        check_credentials(project),
        check_model(project, command=command),
        check_memory_folder(project, command=command),
        check_switches(project),
    ]
    if as_json:
        extra = {"user_layer": layer} if layer is not None else {}
        print_json({**_change_json(change, scope, "install", findings), **extra})
        return
    click.echo(f"memdir: {describe_change(change)}")
    click.echo(f"  Stop hook: {command}")
    _echo_findings(findings)
    problems = sum(not f.ok for f in findings)
    if dry_run:
        click.echo("Dry run: nothing written.")
    elif problems:
        click.echo(f"Installed, but {problems} problem(s) above would stop memory from working.")
    else:
        click.echo("Installed: Claude Code saves memories after each answer.")


def _user_layer(*, uninstall: bool, dry_run: bool, quiet: bool) -> dict[str, object]:
    """Add or remove the user layer's import in the user's CLAUDE.md, and say so."""
    from memdir._claude_user_layer import claude_md_path, install_user_layer
    from memdir.store import user_memory_dir

    layer = user_memory_dir()
    change = install_user_layer(layer, claude_md_path(), uninstall=uninstall, dry_run=dry_run)
    found: dict[str, object] = {
        "claude_md": str(change.path),
        "user_dir": str(layer.root),
        "changed": change.changed,
        "written": change.written,
    }
    if quiet:
        if uninstall:  # an install prints this inside its own JSON object
            print_json({"action": "uninstall", "user_layer": found})
        return found
    done = (
        "would change"
        if dry_run and change.changed
        else "changed"
        if change.changed
        else "unchanged"
    )
    what = "import removed" if uninstall else f"imports the user layer {layer.entrypoint}"
    click.echo(f"memdir: {change.path} {done}: {what}")
    return found


def _change_json(
    change: SettingsChange, scope: str, action: str, findings: list[Finding]
) -> dict[str, object]:
    return {
        "action": action,
        "scope": scope,
        "settings": str(change.path),
        "command": change.command,
        "changed": change.changed,
        "written": change.written,
        "findings": [f.as_json() for f in findings],
        "ok": all(f.ok for f in findings),
    }


@click.command("doctor")
@project_option
@json_option
def doctor_command(project: Path, as_json: bool) -> None:
    """Check whether Claude Code would save memories for a project.

    Reads, never writes: the Stop hook (installed, and its program there to run),
    credentials, the model, the memory folder (and that it can be written), Claude
    Code's switches that turn memory off, and how the hook's last run went. Exits 0 when
    memory would work, 1 with a PROBLEM line for each thing that stops it.
    """
    findings = doctor_findings(project)
    ok = all(f.ok for f in findings)
    if as_json:
        print_json({"ok": ok, "findings": [f.as_json() for f in findings]})
    else:
        click.echo(f"memdir doctor: {os.path.abspath(project)}")
        _echo_findings(findings)
    if not ok:
        sys.exit(EXIT_FAILED)


@click.command("log")
@click.option(
    "--memory-dir",
    type=click.Path(path_type=Path),
    help="The memory folder (default: the one the hook uses for --project).",
)
@project_option
@click.option(
    "-n",
    "--runs",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="How many of the latest runs to show.",
)
@click.option("--failed", is_flag=True, help="Only the runs that failed.")
@json_option
def log_command(
    memory_dir: Path | None, project: Path, runs: int, failed: bool, as_json: bool
) -> None:
    """Show the Claude Code hook's recent runs, and why any failed.

    Each run is one line: its time, OK, FAILED, OFF (Claude Code's memory was switched
    off) or UNFINISHED (still running, or stopped before it said), and what it did or
    why it failed; the run's own log lines follow, indented. The log is
    .memdir/hook.log in the memory folder.
    """
    if memory_dir is None:
        hooks = find_hooks(project)
        command = hooks[0].command if hooks else None
        chosen = hook_option(command, "--memory-dir") if command is not None else None
        try:
            memory_dir, _ = memory_folder(project, hook_env(project), chosen)
        except UsageError as exc:
            # With no folder, the hook logs what stopped it in memdir's own log.
            fail(f"{exc} (the hook logs to {fallback_log_path()})", kind="memory_dir")
    found = read_runs(memory_dir, None)
    if failed:
        found = [r for r in found if r.outcome == "failed"]
    found = found[-runs:]
    if as_json:
        print_json({"memory_dir": str(memory_dir), "runs": [r.as_json() for r in found]})
        return
    if not found:
        what = "failed runs" if failed else "hook runs"
        click.echo(f"memdir: no {what} logged in {memory_dir / '.memdir' / 'hook.log'}")
        if fallback_log_path().exists():  # a hook that found no folder logs there
            click.echo(f"memdir: a hook that could not run says why in {fallback_log_path()}")
        return
    for run in found:
        _echo_run(run)


_COLOURS = {"ok": "green", "failed": "red", "off": "yellow", "unfinished": "yellow"}


def _echo_run(run: HookRun) -> None:
    label = click.style(f"{run.outcome.upper():10}", fg=_COLOURS[run.outcome], bold=True)
    click.echo(f"{run.started}  {label} {run.summary}")
    if len(run.lines) > 1:
        for line in run.lines:
            click.echo(f"    {line.partition(' ')[2]}")
