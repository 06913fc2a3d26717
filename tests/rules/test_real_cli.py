"""With the real Claude Code CLI offline: a correction saved as a memory with its
rule stops the mistake in the next session, before it happens, in the memory's words."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import memdir
from memdir.messages import Message, ToolUseBlock
from memdir.rules import load_rules, read_firings, set_enabled
from memdir.rules._settings import RULES_MATCHER
from memdir.store import default_memory_dir
from memdir.testing import FakeAnthropicServer, Reply
from tests.claude_code._cli import ClaudeCli, memory_dir_in
from tests.claude_code.test_hook_cli import wait_for_workers
from tests.rules._memories import PNPM

# The hook runs this checkout's memdir (Claude Code's environment has no PYTHONPATH).
_SOURCE = shlex.quote(str(Path(memdir.__file__).resolve().parents[1]))
HOOK = f"PYTHONPATH={_SOURCE} {shlex.quote(sys.executable)} -m memdir hook pre-tool-use"
SETTINGS = {
    "hooks": {
        "PreToolUse": [{"matcher": RULES_MATCHER, "hooks": [{"type": "command", "command": HOOK}]}]
    }
}
# Claude Code in -p mode asks before a Bash call; the user allowed Bash for this project.
ALLOW_BASH = ("--allowedTools", "Bash")
# ';' rather than ': ' in the description keeps the frontmatter valid YAML, so Claude Code
# keeps the rule as a mapping (it keeps it either way, as text otherwise).
MEMORY = PNPM.replace("never npm: npm writes", "never npm; npm writes")
REASON = "We use pnpm in this repo, never npm; npm writes a package-lock.json."


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content)
    return str(content)


def steps(*calls: Callable[[dict[str, Any]], Reply]) -> Callable[[dict[str, Any]], Reply]:
    """One call per agent turn, chosen by how many tool results the request holds."""

    def reply(body: dict[str, Any]) -> Reply:
        return calls[len(tool_results(body))](body)

    return reply


def bash(command: str, n: int) -> Callable[[dict[str, Any]], Reply]:
    use = ToolUseBlock(id=f"toolu_bash_{n}", name="Bash", input={"command": command})
    return lambda body: Message(role="assistant", content=(use,))


def write_memory(body: dict[str, Any]) -> Reply:
    folder = memory_dir_in(body, Path("/"))
    assert folder is not None
    write = ToolUseBlock(
        id="toolu_write_1",
        name="Write",
        input={"file_path": str(folder / "feedback_pnpm.md"), "content": MEMORY},
    )
    return Message(role="assistant", content=(write,))


def say(text: str) -> Callable[[dict[str, Any]], Reply]:
    return lambda body: text


def results_of(requests: Sequence[Any]) -> list[str]:
    return [result_text(block) for block in tool_results(requests[-1].body)]


def test_a_saved_correction_stops_the_mistake_next_session(claude_cli: ClaudeCli) -> None:
    first = claude_cli.run(
        "Don't use npm here: we use pnpm, never npm.",
        replies=steps(write_memory, say("Saved: pnpm, never npm.")),
        settings=SETTINGS,
        args=ALLOW_BASH,
    )
    memory = first.memory_dir
    assert memory is not None
    saved = (memory / "feedback_pnpm.md").read_text(encoding="utf-8")
    assert "rule:" in saved  # Claude Code keeps the rule (under `metadata`)
    (rule,) = load_rules(memory)
    assert (rule.tool, rule.match, rule.action) == ("Bash", "npm", "deny")

    second = claude_cli.run(
        "Install the dependencies.",
        replies=steps(bash("npm install", 1), bash("pnpm install", 2), say("Installed.")),
        settings=SETTINGS,
        args=ALLOW_BASH,
    )
    turns = second.turns
    assert len(turns) == 3
    # The fake server sees the memory's reason in the very next request, as the npm
    # call's result: the model corrects itself in the same turn.
    (denied,) = results_of(turns[:2])
    assert REASON in denied
    assert "Instead: pnpm install" in denied
    # pnpm goes through (whatever pnpm itself then says on this machine).
    after = results_of(turns)[-1]
    assert REASON not in after
    assert "memdir rule" not in after
    (firing,) = read_firings(memory)
    assert (firing["rule"], firing["stopped"], firing["session_id"]) == (
        rule.id,
        "npm install",
        second.session_id,
    )

    set_enabled(memory, rule.id, False)
    third = claude_cli.run(
        "Install the dependencies with npm this once.",
        replies=steps(bash("npm install", 1), say("Done.")),
        settings=SETTINGS,
        args=ALLOW_BASH,
    )
    (ran,) = results_of(third.turns)
    assert REASON not in ran
    assert len(read_firings(memory)) == 1
    assert json.loads((memory / ".memdir" / "rules.json").read_text())["off"] == [rule.id]


def test_memdirs_memory_agent_saves_the_rule_with_the_correction(claude_cli: ClaudeCli) -> None:
    """The same, with the memory saved by memdir's own Stop hook: its memory agent (a
    scripted model) writes the feedback memory with the rule in the same Write."""
    memory = default_memory_dir(claude_cli.project, env=claude_cli.env())

    def memory_model(body: dict[str, Any]) -> Reply:
        if tool_results(body):
            return "Saved: pnpm, never npm."
        write = ToolUseBlock(
            id="toolu_memory_write",
            name="Write",
            input={"file_path": str(memory / "feedback_pnpm.md"), "content": MEMORY},
        )
        return Message(role="assistant", content=(write,))

    with FakeAnthropicServer(handler=memory_model, min_cache_tokens=0) as memory_server:
        stop = (
            f"PYTHONPATH={_SOURCE} {shlex.quote(sys.executable)} -m memdir hook claude-code "
            f"--model anthropic:claude-sonnet-5-5 --base-url {memory_server.base_url}"
        )
        settings = {
            **SETTINGS,
            "hooks": {
                **SETTINGS["hooks"],
                "Stop": [{"hooks": [{"type": "command", "command": stop}]}],
            },
        }
        first = claude_cli.run(
            "Don't use npm here: we use pnpm, never npm.",
            replies=["Got it: pnpm."],
            settings=settings,
        )
        assert first.transcript is not None
        wait_for_workers(str(first.transcript))
        memory_server.assert_no_errors()
    (rule,) = load_rules(memory)
    assert (rule.match, rule.action, rule.reason) == ("npm", "deny", REASON)

    second = claude_cli.run(
        "Install the dependencies.",
        replies=steps(bash("npm install", 1), say("I'll use pnpm.")),
        settings=SETTINGS,
        args=ALLOW_BASH,
    )
    (denied,) = results_of(second.turns)
    assert REASON in denied
