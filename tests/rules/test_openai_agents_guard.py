"""The rules as an OpenAI Agents SDK tool input guardrail, in a real ``Runner`` run: the
denied call never runs and the model reads the memory's words as its result."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agents import Agent, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call

from memdir.integrations.openai_agents_rules import rules_guardrail
from memdir.rules import read_firings
from tests.rules._memories import PNPM, write_memory


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    """The SDK would export traces to OpenAI; tests stay on this machine."""
    import agents

    agents.set_tracing_disabled(True)


def test_a_denied_call_does_not_run_and_the_model_is_told_why(tmp_path: Path) -> None:
    write_memory(tmp_path, "feedback_pnpm.md", PNPM)
    ran: list[str] = []

    @function_tool(tool_input_guardrails=[rules_guardrail(tmp_path, shell_tools={"sh": "cmd"})])
    def sh(cmd: str) -> str:
        """Run a shell command."""
        ran.append(cmd)
        return "ok"

    model = ScriptedModel(
        [
            [function_call("sh", {"cmd": "sudo npm install"}, call_id="c1")],
            [function_call("sh", {"cmd": "pnpm install"}, call_id="c2")],
            [assistant_message("Installed with pnpm.")],
        ]
    )
    agent = Agent(name="dev", instructions="Work.", model=model, tools=[sh])
    result = asyncio.run(Runner.run(agent, "Install the dependencies."))

    assert ran == ["pnpm install"]
    outputs = [
        item.output
        for item in result.new_items
        if getattr(item, "type", "") == "tool_call_output_item"
    ]
    assert "never npm" in str(outputs[0])
    assert outputs[1] == "ok"
    (firing,) = read_firings(tmp_path)
    assert (firing["tool"], firing["stopped"]) == ("sh", "sudo npm install")


def test_the_guard_maps_a_frameworks_tools_onto_the_rules(tmp_path: Path) -> None:
    from memdir.rules._guard import RuleGuard
    from tests.rules._memories import feedback

    write_memory(tmp_path, "feedback_pnpm.md", PNPM)
    write_memory(
        tmp_path, "feedback_dist.md", feedback("{tool: Edit, match: 'dist/**', action: warn}")
    )
    guard = RuleGuard(
        memory_dir=tmp_path, shell_tools={"sh": "cmd"}, file_tools={"save": "path"}, cwd="/p"
    )
    denied = guard.check("sh", {"cmd": "npm ci"})
    assert denied is not None
    assert denied.action == "deny"
    warned = guard.check("save", {"path": "dist/app.js"})
    assert warned is not None
    assert warned.action == "warn"
    assert guard.check("sh", {"cmd": "pnpm ci"}) is None
    assert guard.check("read", {"path": "dist/app.js"}) is None
    assert guard.check("sh", {"cmd": 3}) is None
