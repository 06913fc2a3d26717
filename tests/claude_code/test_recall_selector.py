"""memdir's memory selector against Claude Code's own, captured from the real CLI.

Claude Code 2.1.332 selects memories with a side request when its recall mode is on (the
server flag ``tengu_moth_copse``, forced here through the CLI's disk cache of flags). Both
selectors run on the same memory folder and the same query, against the fake server, and
their requests are compared in shape: the memory list first, as a message of its own that
ends a cached prefix, the query after it, a JSON-schema answer, the same ``max_tokens``,
the same side model, and the same list lines. The wording is each one's own.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from memdir.models import AnthropicModel, RetryPolicy
from memdir.recall import DEFAULT_SELECTOR_MODEL, select_relevant_memories
from memdir.store import default_memory_dir
from memdir.testing import FakeAnthropicServer, Reply
from tests.claude_code._cli import DEFAULT_TIMEOUT, ClaudeCli, is_agent_turn, side_reply

QUERY = "which dataframe library should I use for the nightly job?"
# Recall mode on, from the flag cache the CLI reads offline when told to.
FLAGS = {"tengu_moth_copse": True}


def _memories(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "polars.md").write_text(
        "---\nname: polars\ndescription: the team uses polars, not pandas\ntype: project\n"
        "---\n\nPolars only.\n",
        encoding="utf-8",
    )
    (folder / "user_role.md").write_text(
        "---\nname: user-role\ndescription: the user is a data engineer\ntype: user\n---\n\n"
        "Data engineer.\n",
        encoding="utf-8",
    )
    (folder / "MEMORY.md").write_text("- [Polars](polars.md) — dataframes\n", encoding="utf-8")


def _text(message: dict[str, Any]) -> str:
    return "".join(block["text"] for block in message["content"] if block["type"] == "text")


def _marked(message: dict[str, Any]) -> bool:
    return any(block.get("cache_control") for block in message["content"])


def _list_lines(text: str) -> set[str]:
    return {line for line in text.splitlines() if line.startswith("- ")}


def test_memdirs_selector_request_has_the_shape_of_claude_codes(claude_cli: ClaudeCli) -> None:
    memory = default_memory_dir(claude_cli.project, config_home=claude_cli.home / ".claude")
    _memories(memory)
    (claude_cli.home / ".claude.json").write_text(
        json.dumps({"cachedGrowthBookFeatures": FLAGS, "cachedFeatureFlags": FLAGS}),
        encoding="utf-8",
    )
    # The CLI selects in parallel with the agent's turn and may end before its selector
    # has asked: the turn is answered only once the selector's request is in.
    selector_asked = threading.Event()

    def answer(body: dict[str, Any]) -> Reply:
        if is_agent_turn(body):
            selector_asked.wait(timeout=DEFAULT_TIMEOUT)
            return "Done."
        if "output_config" in body:
            selector_asked.set()
        return side_reply(body)

    with FakeAnthropicServer(handler=answer) as server:
        run = claude_cli.run(
            QUERY,
            env_extra={"CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF": "1"},
            server=server,
        )
    [theirs] = [r.body for r in run.side_requests if "output_config" in r.body]

    async def ours_against(url: str) -> None:
        model = AnthropicModel(
            DEFAULT_SELECTOR_MODEL, api_key="k", base_url=url, retry=RetryPolicy(max_retries=0)
        )
        try:
            await select_relevant_memories(QUERY, memory, model)
        finally:
            await model.aclose()

    with FakeAnthropicServer(['{"selected_memories": []}']) as server:
        asyncio.run(ours_against(server.base_url))
        [ours] = [r.body for r in server.requests]

    for body in (theirs, ours):
        # The list, then the query: two user messages, each ending a cached prefix.
        listed, asked = body["messages"]
        assert listed["role"] == asked["role"] == "user"
        assert _marked(listed)
        assert _marked(asked)
        assert QUERY not in _text(listed)
        assert _text(asked).endswith(QUERY)
        assert body["system"][-1].get("cache_control")
        assert "tools" not in body
    assert ours["model"] == theirs["model"] == "claude-sonnet-5-5"
    assert ours["max_tokens"] == theirs["max_tokens"] == 2560
    assert ours["output_config"] == theirs["output_config"]
    assert theirs["output_config"]["format"]["type"] == "json_schema"
    # The same memory list, line for line: "- [type] file (ISO time): description".
    their_lines = _list_lines(_text(theirs["messages"][0]))
    assert len(their_lines) == 2
    assert _list_lines(_text(ours["messages"][0])) == their_lines
