"""The rules as a LangChain agent middleware, in a real ``create_agent`` run on
``ChatAnthropic`` against the fake server: the denied call never runs and the model reads
the memory's words in the next request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.tools import tool

from memdir.integrations.langchain_rules import RulesMiddleware
from memdir.messages import Message, ToolUseBlock
from memdir.rules import read_firings
from memdir.testing import FakeAnthropicServer, Reply
from tests.rules._memories import PNPM, write_memory
from tests.rules.test_real_cli import result_text, tool_results


def test_a_denied_call_does_not_run_and_the_model_is_told_why(tmp_path: Path) -> None:
    write_memory(tmp_path, "feedback_pnpm.md", PNPM)
    ran: list[str] = []

    @tool
    def shell(command: str) -> str:
        """Run a shell command."""
        ran.append(command)
        return "ok"

    script = ["env CI=1 npm install", "pnpm install"]

    def reply(body: dict[str, Any]) -> Reply:
        done = len(tool_results(body))
        if done < len(script):
            use = ToolUseBlock(id=f"toolu_{done}", name="shell", input={"command": script[done]})
            return Message(role="assistant", content=(use,))
        return "Installed with pnpm."

    with FakeAnthropicServer(handler=reply) as server:
        model = ChatAnthropic(model="claude-sonnet-5-5", base_url=server.base_url, api_key="test")  # type: ignore[call-arg,arg-type]
        agent = create_agent(
            model, [shell], middleware=[RulesMiddleware(tmp_path, shell_tools={"shell": "command"})]
        )
        agent.invoke({"messages": [{"role": "user", "content": "Install the dependencies."}]})
        second = server.requests[1].body

    assert ran == ["pnpm install"]
    (denied,) = [result_text(block) for block in tool_results(second)]
    assert "never npm" in denied
    assert read_firings(tmp_path)[0]["stopped"] == "env CI=1 npm install"
