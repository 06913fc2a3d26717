"""A recorded conversation sent as it was: ``ModelRequest.wire_prefix`` and the fork."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from memdir.fork import CacheSafeParams, run_forked_agent
from memdir.messages import Message
from memdir.models import AnthropicModel, ModelRequest, OpenAIModel
from memdir.models._anthropic import MAX_BREAKPOINTS, breakpoint_count
from memdir.permissions import auto_mem_can_use_tool
from memdir.testing import FunctionModel

RECORDED: tuple[dict[str, Any], ...] = (
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "<system-reminder>context</system-reminder>"},
            {"type": "text", "text": "I'm Ana.", "cache_control": {"type": "ephemeral"}},
        ],
    },
    {"role": "system", "content": "# Environment\nPlatform: linux"},
)


def test_the_prefix_goes_first_as_recorded_without_its_markers() -> None:
    request = ModelRequest(
        system=[{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
        messages=(Message.assistant("Hi Ana."), Message.user("What is worth keeping?")),
        wire_prefix=RECORDED,
        cache_points=(0,),
    )
    kwargs = AnthropicModel("claude-test", api_key="k").wire_request(request)
    messages = kwargs["messages"]
    assert messages[0]["content"][0] == RECORDED[0]["content"][0]
    assert messages[0]["content"][1] == {"type": "text", "text": "I'm Ana."}
    assert messages[1] == RECORDED[1]  # a system-role message, as it was
    # cache_points index the request's own messages: 0 is the answer, after the prefix.
    assert messages[2]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert messages[3]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert breakpoint_count(kwargs) <= MAX_BREAKPOINTS
    assert "cache_control" in RECORDED[0]["content"][1]  # the record itself is untouched


def test_openai_sends_a_recorded_chat_prefix_as_it_was() -> None:
    """A Chat Completions record (a framework's key order, its system message inside)
    goes out first and unchanged; memdir's own messages follow it."""
    recorded = (
        {"content": "You are terse.", "role": "system"},
        {"content": "I'm Ana.", "role": "user"},
        {"role": "assistant", "refusal": None, "content": "Hi Ana."},
    )
    model = OpenAIModel("gpt-4o", api_key="k", base_url="http://127.0.0.1:9")
    request = ModelRequest(messages=(Message.user("What is worth keeping?"),), wire_prefix=recorded)
    kwargs = model.wire_request(request)
    messages = kwargs["messages"]
    assert [list(m) for m in messages[:3]] == [list(m) for m in recorded]  # the key order too
    assert messages[:3] == list(recorded)
    assert messages[3]["role"] == "user"
    assert "What is worth keeping?" in json.dumps(messages[3])


def test_a_fork_sends_the_record_in_place_of_the_messages_it_stands_for() -> None:
    model = FunctionModel(lambda request: "Nothing new to save.")
    conversation = [Message.user("I'm Ana."), Message.assistant("Hi Ana.")]
    params = CacheSafeParams(model=model, wire_messages=RECORDED, wire_replaces=1)

    async def main() -> None:
        await run_forked_agent(
            params,
            conversation,
            [Message.user("What is worth keeping?")],
            tools=[],
            can_use_tool=auto_mem_can_use_tool("/tmp/memdir-wire-prefix-test"),
            cache_point=1,
        )

    asyncio.run(main())
    (sent,) = model.requests
    assert sent.wire_prefix == RECORDED
    assert [m.text for m in sent.messages] == ["Hi Ana.", "What is worth keeping?"]
    assert sent.cache_points == (0,)  # the answer, now first after the record
