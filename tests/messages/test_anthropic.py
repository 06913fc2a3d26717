"""Anthropic Messages <-> Message: exact round trips, the block mapping, errors, a property."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memdir.errors import UsageError
from memdir.messages import (
    ImageBlock,
    Message,
    OtherBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    message_from_anthropic,
    message_to_anthropic,
    messages_from_anthropic,
    messages_to_anthropic,
)

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4"
    "2mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

ROUND_TRIPS: dict[str, dict[str, Any]] = {
    "string content": {"role": "user", "content": "What's the weather in Paris?"},
    "text with cache_control": {
        "role": "user",
        "content": [
            {"type": "text", "text": "Long context", "cache_control": {"type": "ephemeral"}}
        ],
    },
    "thinking with signature": {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "The user wants X.", "signature": "EqQBCgIYAh=="},
            {"type": "text", "text": "Here is X."},
        ],
    },
    "redacted thinking": {
        "role": "assistant",
        "content": [
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
            {"type": "text", "text": "Done."},
        ],
    },
    "image base64 and url": {
        "role": "user",
        "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}},
            {"type": "text", "text": "What is in these?"},
        ],
    },
    "tool use": {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me check.", "citations": None},
            {
                "type": "tool_use",
                "id": "toolu_01",
                "name": "get_weather",
                "input": {"city": "Paris", "units": ["c", "f"]},
            },
        ],
    },
    "tool result string": {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "18C"}],
    },
    "tool result blocks": {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_02",
                "content": [
                    {"type": "text", "text": "screenshot:"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                    },
                ],
            }
        ],
    },
    "tool result is_error true": {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "boom", "is_error": True}
        ],
    },
    "tool result explicit is_error null and false": {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "ok", "is_error": None},
            {"type": "tool_result", "tool_use_id": "b", "content": "ok", "is_error": False},
        ],
    },
    "tool result without content": {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t"}],
    },
    "tool result with a document inside": {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "t",
                "content": [
                    {"type": "text", "text": "found:"},
                    {"type": "search_result", "source": "https://x", "title": "X", "content": []},
                ],
            }
        ],
    },
    "document": {
        "role": "user",
        "content": [
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": "Grass is green."},
                "citations": {"enabled": True},
            },
            {"type": "text", "text": "What colour is grass?"},
        ],
    },
    "bare string in a content list": {
        "role": "user",
        "content": ["plain string item", {"type": "text", "text": "a block"}],
    },
    "response object": {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Hi."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 2},
    },
    "image with a file source": {
        "role": "user",
        "content": [{"type": "image", "source": {"type": "file", "file_id": "file_01"}}],
    },
}


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value))


@pytest.mark.parametrize("payload", ROUND_TRIPS.values(), ids=list(ROUND_TRIPS))
def test_round_trip_is_exact(payload: dict[str, Any]) -> None:
    message = message_from_anthropic(payload)
    assert _json(message_to_anthropic(message)) == _json(payload)


def test_list_round_trip_is_exact_and_ids_are_derived() -> None:
    payloads = list(ROUND_TRIPS.values())
    messages = messages_from_anthropic(payloads)
    assert _json(messages_to_anthropic(messages)) == _json(payloads)
    assert [m.uuid for m in messages] == [m.uuid for m in messages_from_anthropic(payloads)]


def test_blocks_are_mapped() -> None:
    message = message_from_anthropic(
        {
            "role": "user",
            "content": [
                "bare",
                {"type": "image", "source": {"type": "url", "url": "https://x/a.png"}},
                {"type": "tool_result", "tool_use_id": "t1", "content": "out", "is_error": None},
                {"type": "document", "source": {"type": "url", "url": "https://x/a.pdf"}},
            ],
        }
    )
    bare, image, result, document = message.content
    assert bare == TextBlock(text="bare")
    assert image == ImageBlock(url="https://x/a.png")
    assert result == ToolResultBlock(tool_use_id="t1", content="out", is_error=False)
    assert isinstance(document, OtherBlock)
    assert document.type == "document"
    assert not message.string_content


def test_string_content_and_given_uuid() -> None:
    message = message_from_anthropic({"role": "user", "content": "hi"}, uuid="u-1")
    assert message == Message.user("hi", uuid="u-1", string_content=True)


def test_random_uuid_when_none_given() -> None:
    payload = {"role": "user", "content": "hi"}
    assert message_from_anthropic(payload).uuid != message_from_anthropic(payload).uuid


def test_response_fields_go_to_extra() -> None:
    message = message_from_anthropic(ROUND_TRIPS["response object"])
    assert message.extra["stop_reason"] == "end_turn"
    assert message.extra["usage"] == {"input_tokens": 10, "output_tokens": 2}


def test_thinking_and_tool_use_fields() -> None:
    thinking = message_from_anthropic(ROUND_TRIPS["thinking with signature"]).content[0]
    assert thinking == ThinkingBlock(thinking="The user wants X.", signature="EqQBCgIYAh==")
    call = message_from_anthropic(ROUND_TRIPS["tool use"]).tool_uses[0]
    assert call == ToolUseBlock(
        id="toolu_01", name="get_weather", input={"city": "Paris", "units": ["c", "f"]}
    )


@pytest.mark.parametrize("role", ["system", "developer"])
def test_system_roles_are_refused(role: Any) -> None:
    with pytest.raises(UsageError, match="message 1: role"):
        messages_to_anthropic([Message.user("a"), Message(role=role, content=())])


BAD: dict[str, tuple[Any, str]] = {
    "not a mapping": (["hello"], r"^message 0: expected an object, got str$"),
    "missing role": ([{"content": "x"}], r"^message 0: has no 'role'$"),
    "unknown role": ([{"role": "tool", "content": "x"}], r"^message 0: role must be"),
    "missing content": ([{"role": "user"}], r"^message 0: has no 'content'$"),
    "content not str or list": (
        [{"role": "user", "content": "ok"}, {"role": "assistant", "content": 3}],
        r"^message 1: 'content' must be a string or a list, got int$",
    ),
    "block not a mapping": (
        [{"role": "user", "content": ["ok", 5]}],
        r"^message 0, block 1: a block must be an object or a string, got int$",
    ),
    "block without type": (
        [{"role": "user", "content": [{"text": "x"}]}],
        r"^message 0, block 0: block has no string 'type'$",
    ),
    "tool_use without id": (
        [{"role": "assistant", "content": [{"type": "tool_use", "name": "n", "input": {}}]}],
        r"^message 0, block 0 \(tool_use\): has no 'id'$",
    ),
    "tool_use without name": (
        [{"role": "assistant", "content": [{"type": "tool_use", "id": "i", "input": {}}]}],
        r"^message 0, block 0 \(tool_use\): has no 'name'$",
    ),
    "tool_use input not an object": (
        [{"role": "assistant", "content": [{"type": "tool_use", "id": "i", "name": "n"}]}],
        r"^message 0, block 0 \(tool_use\): 'input' must be an object, got NoneType$",
    ),
    "text not a string": (
        [{"role": "user", "content": [{"type": "text", "text": None}]}],
        r"^message 0, block 0 \(text\): 'text' must be a string, got NoneType$",
    ),
    "tool_result without id": (
        [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}],
        r"^message 0, block 0 \(tool_result\): has no 'tool_use_id'$",
    ),
    "tool_result bad is_error": (
        [
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}],
            }
        ],
        r"^message 0, block 0 \(tool_result\): 'is_error' must be true, false or null",
    ),
    "tool_result bad content item": (
        [
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t", "content": [1]}],
            }
        ],
        r"^message 0, block 0 \(tool_result\), content item 0: a block must be",
    ),
    "thinking signature not a string": (
        [{"role": "assistant", "content": [{"type": "thinking", "thinking": "", "signature": 1}]}],
        r"^message 0, block 0 \(thinking\): 'signature' must be a string",
    ),
    "not a list": ({"role": "user", "content": "x"}, r"^messages: expected a list"),
}


@pytest.mark.parametrize(("data", "pattern"), BAD.values(), ids=list(BAD))
def test_malformed_input_raises_usage_error(data: Any, pattern: str) -> None:
    with pytest.raises(UsageError, match=pattern) as info:
        messages_from_anthropic(data)
    assert "\n" not in str(info.value)


def test_single_message_errors_say_message() -> None:
    with pytest.raises(UsageError, match=r"^message: has no 'role'$"):
        message_from_anthropic({"content": "x"})


# A property: Messages built from the blocks Anthropic models survive the trip.

_json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
_json_values = st.recursive(
    _json_scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
_ids = st.text(st.characters(categories=("L", "N")), min_size=1, max_size=10)
_text = st.builds(TextBlock, text=st.text(max_size=20))
_thinking = st.builds(
    ThinkingBlock, thinking=st.text(max_size=20), signature=st.none() | st.text(max_size=10)
)
_tool_use = st.builds(
    ToolUseBlock,
    id=_ids,
    name=_ids,
    input=st.dictionaries(st.text(max_size=5), _json_values, max_size=3),
)
_tool_result = st.builds(
    ToolResultBlock, tool_use_id=_ids, content=st.text(max_size=20), is_error=st.booleans()
)


@st.composite
def _messages(draw: st.DrawFn) -> Message:
    role: Role = draw(st.sampled_from(["user", "assistant"]))
    blocks = _text | _thinking | _tool_use | _tool_result
    if draw(st.booleans()):
        return Message(role=role, content=(draw(_text),), string_content=True)
    return Message(role=role, content=tuple(draw(st.lists(blocks, max_size=5))))


@given(_messages())
def test_messages_survive_anthropic_round_trip(message: Message) -> None:
    wire = _json(message_to_anthropic(message))
    assert message_from_anthropic(wire, uuid=message.uuid) == message
