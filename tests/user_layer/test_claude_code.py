"""The user layer in the real Claude Code CLI: a memory promoted in one project is in the
request of a session in another, through the import memdir adds to the user's CLAUDE.md."""

from __future__ import annotations

from click.testing import CliRunner

from memdir._claude_user_layer import claude_md_path, install_user_layer
from memdir._cli import cli
from memdir.store import MemoryDir, default_memory_dir, user_memory_dir
from tests.claude_code._cli import ClaudeCli
from tests.claude_code.test_hook_cli import hook_settings, wait_for_workers

FACT = "The user wants pnpm, never npm, in every repository"
PREFERENCE = (
    "---\nname: prefers-pnpm\ndescription: "
    + FACT
    + "\nmetadata:\n  type: user\n---\n\nUse pnpm for installs and scripts.\n"
)


def _memdir(env: dict[str, str], *args: str) -> str:
    result = CliRunner().invoke(cli, list(args), env=env)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_a_promoted_memory_reaches_another_projects_session(claude_cli: ClaudeCli) -> None:
    env = claude_cli.env()
    env["CLAUDE_CONFIG_DIR"] = str(claude_cli.home / ".claude")  # where the CLI looks
    first = claude_cli.project
    memory = default_memory_dir(first, env=env)
    memory.mkdir(parents=True)
    (memory / "prefers-pnpm.md").write_text(PREFERENCE, encoding="utf-8")
    (memory / "MEMORY.md").write_text(f"- [Prefers pnpm](prefers-pnpm.md) — {FACT}\n")
    other = claude_cli.project.parent / "elsewhere"
    other.mkdir()
    own = default_memory_dir(other, env=env)
    own.mkdir(parents=True)
    (own / "MEMORY.md").write_text("- [Npm here](npm-here.md) — this repo pins npm 10\n")

    before = claude_cli.run("hello", cwd=other, env_extra={})
    assert FACT not in before.first_user_text()

    _memdir(env, "install", "claude-code", "--user-layer")
    _memdir(env, "promote", "prefers-pnpm", "--to", "user", "--memory-dir", str(memory))
    assert FACT not in (memory / "MEMORY.md").read_text(encoding="utf-8")

    after = claude_cli.run("hello", cwd=other)
    shown = after.first_user_text()
    layer = claude_cli.home / ".claude" / "memdir-user" / "MEMORY.md"
    assert f"Contents of {layer}" in shown
    assert FACT in shown
    # The project's own memory comes after the user's file: it is the one that stands.
    assert "the project's memory wins" in shown
    assert shown.index(FACT) < shown.index("this repo pins npm 10")


def test_the_hook_saves_the_person_in_the_layer_for_every_project(claude_cli: ClaudeCli) -> None:
    env = claude_cli.env()
    layer = user_memory_dir(env)
    install_user_layer(layer, claude_md_path(env))
    first = claude_cli.run(
        "I'm Ana, I lead the data platform team. Always use polars, never pandas.",
        replies=["Noted."],
        settings=hook_settings("--model", "offline"),
    )
    assert first.transcript is not None
    wait_for_workers(str(first.transcript))
    assert first.memory_dir is not None
    about_her = [h for h in layer.scan() if h.type == "user"]
    assert about_her, "the hook saved nothing about the person in the user layer"
    assert not [h for h in MemoryDir(first.memory_dir).scan() if h.type == "user"]
    line = next(
        line
        for line in layer.entrypoint.read_text(encoding="utf-8").splitlines()
        if f"]({about_her[0].filename})" in line
    )

    other = claude_cli.project.parent / "elsewhere"
    other.mkdir()
    second = claude_cli.run("Who am I?", cwd=other, replies=["Ana."], settings={})
    assert line in second.first_user_text()
