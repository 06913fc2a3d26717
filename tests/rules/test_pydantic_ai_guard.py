"""The rules as a pydantic-ai toolset wrapper, in a real ``Agent`` run on a
``FunctionModel``: the denied call never runs and the model reads the memory's words."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic_ai import Agent, FunctionToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memdir.integrations.pydantic_ai_rules import RulesToolset
from memdir.rules import read_firings
from tests.rules._memories import PNPM, write_memory


def test_a_denied_call_does_not_run_and_the_model_is_told_why(tmp_path: Path) -> None:
    write_memory(tmp_path, "feedback_pnpm.md", PNPM)
    ran: list[str] = []

    def shell(cmd: str) -> str:
        """Run a shell command."""
        ran.append(cmd)
        return "ok"

    retries: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        retries[:] = [
            str(part.content)
            for message in messages
            for part in message.parts
            if isinstance(part, RetryPromptPart | ToolReturnPart)
        ]
        turn = len(messages) // 2
        if turn == 0:
            return ModelResponse(parts=[ToolCallPart("shell", {"cmd": "bash -c 'npm i'"})])
        if turn == 1:
            return ModelResponse(parts=[ToolCallPart("shell", {"cmd": "pnpm i"})])
        return ModelResponse(parts=[TextPart("Installed with pnpm.")])

    tools = RulesToolset(FunctionToolset([shell]), tmp_path, shell_tools={"shell": "cmd"})
    agent = Agent(FunctionModel(model), toolsets=[tools])
    result = asyncio.run(agent.run("Install the dependencies."))
    assert result.output == "Installed with pnpm."

    assert ran == ["pnpm i"]
    denied, ran_ok = retries
    assert "never npm" in denied
    assert ran_ok == "ok"
    assert read_firings(tmp_path)[0]["stopped"] == "bash -c 'npm i'"
