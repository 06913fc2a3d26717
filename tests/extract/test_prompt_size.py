"""What memdir sends of its own on every memory run stays small: the standalone
request's instructions and tool definitions, its last message, and the fork's prompt,
measured as the planner measures them (characters / 4), with an empty store and with 150
memories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memdir.extract._standalone import estimate_tokens
from memdir.models import ModelRequest
from tests.extract.test_bounded_state import fill, run_once

STATIC_BUDGET = 1_470
"""Most tokens of the standalone request's cached prefix of memdir's own: the system
prompt (who the agent is, every instruction, what each request holds, the memory
directory) and the Read, Write, Edit and short Grep definitions. 2,151 at first; 1,151
once memdir's tools wrote the index lines; 1,224 with a feedback memory's checkable rule;
1,411 to 1,463 (the memory directory's path is part of it) with what each request holds
and the directory moved here from the last message (cached here, uncached there) and the
Grep, with a path, that a store too large to list needs."""
FORK_BEFORE = {0: 1_566, 150: 1_846}
"""Tokens of the whole fork prompt (sent uncached on every fork) at first, for the
stores below, as this file builds them."""
FORK_SHARE = 0.562
"""The most the whole fork prompt may be now, as a share of :data:`FORK_BEFORE` (0.54 and
0.58 while the agent still saw and edited the index; 0.51 and 0.52 since; 0.565 with a
feedback memory's checkable rule; 0.560 and 0.561 since memdir takes a memory's name and
type from its file name)."""
SHORT_BUDGET = {0: 360, 150: 520}
"""Most tokens of the short fork prompt, for a host with a memory section of its own
(440 and 720 at first; 349 and 583 with the index shown; 343 and 509 without; 355 and
514, measured from a longer path, with relative paths and no closing line)."""
FINAL_BUDGET = {0: 40, 150: 110}
"""Most tokens of the standalone request's last message, the request and the memory's
state, sent uncached on every run: 96 and 331 while it showed the index for the agent to
edit, 83 and 240 since memdir writes the index lines, 29 and 96 since what does not
change from run to run (what each request holds, the memory directory) went to the
cached system prompt."""


def request_for(tmp_path: Path, count: int, mode: str) -> ModelRequest:
    memory = tmp_path / "memory"
    if count:
        fill(memory, count)
    else:
        memory.mkdir()
    return run_once(memory, mode)


def system_text(request: ModelRequest) -> str:
    system = request.system
    if isinstance(system, str):
        return system
    return "".join(str(block.get("text", "")) for block in system or ())


@pytest.mark.parametrize("count", [0, 150])
def test_the_standalone_instructions_and_tools_fit_their_budget(tmp_path: Path, count: int) -> None:
    request = request_for(tmp_path, count, "standalone")
    tools = [{k: v for k, v in tool.items() if k != "cache_control"} for tool in request.tools]
    assert [tool["name"] for tool in tools] == ["Read", "Write", "Edit", "Grep"]
    static = estimate_tokens(system_text(request))
    static += estimate_tokens(json.dumps(tools, ensure_ascii=False))
    assert static <= STATIC_BUDGET


@pytest.mark.parametrize("count", [0, 150])
def test_the_whole_fork_prompt_fits_its_budget(tmp_path: Path, count: int) -> None:
    prompt = request_for(tmp_path, count, "fork").messages[-1].text
    assert prompt.startswith("# Memory update")
    assert "## Types" in prompt  # the whole prompt: the host has no memory section
    assert estimate_tokens(prompt) <= FORK_SHARE * FORK_BEFORE[count]


@pytest.mark.parametrize("count", [0, 150])
def test_the_short_fork_prompt_fits_its_budget(tmp_path: Path, count: int) -> None:
    prompt = request_for(tmp_path, count, "fork-short").messages[-1].text
    assert "## How this run works" in prompt
    assert estimate_tokens(prompt) <= SHORT_BUDGET[count]


@pytest.mark.parametrize("count", [0, 150])
def test_the_standalone_final_message_fits_its_budget(tmp_path: Path, count: int) -> None:
    final = request_for(tmp_path, count, "standalone").messages[-1].text
    assert final.startswith("# Memory update")
    assert "MEMORY.md` as it is now" not in final  # memdir keeps the index: not shown
    assert estimate_tokens(final) <= FINAL_BUDGET[count]
