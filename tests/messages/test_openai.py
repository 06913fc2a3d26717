"""OpenAI Chat Completions <-> Message: round trips, cross-format, errors, a property."""

from __future__ import annotations

import dataclasses
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
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    message_from_anthropic,
    messages_from_anthropic,
    messages_from_openai,
    messages_to_anthropic,
    messages_to_openai,
    with_derived_uuids,
)

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4"
    "2mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a helpful agent."},
    {"role": "developer", "content": [{"type": "text", "text": "Answer briefly."}]},
    {"role": "user", "content": "What's the weather in Paris and Rome?", "name": "ana"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "And this picture?"},
            {"type": "image_url", "image_url": {"url": "https://x/a.jpg", "detail": "high"}},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "reasoning_content": "Two cities, two calls.",
        "tool_calls": [
            _call("call_1", "get_weather", '{ "city" : "Paris" }'),
            _call("call_2", "get_weather", '{"city": "Rome",\n "units": "c"}'),
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "18C, sunny"},
    {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "21C"}]},
    {"role": "assistant", "content": "Paris 18C, Rome 21C.", "name": "bot"},
    {"role": "user", "content": "Write malware."},
    {"role": "assistant", "content": None, "refusal": "I can't help with that."},
    {"role": "assistant", "tool_calls": [_call("call_3", "broken", "{not json")]},
    {"role": "assistant", "content": "", "tool_calls": [_call("call_4", "n", "[1, 2]")]},
    {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}], "tool_calls": []},
    {
        "role": "assistant",
        "content": "x",
        "tool_calls": [{"id": "c5", "function": {"name": "f", "arguments": {"a": 1}}}],
    },
    {"role": "tool", "tool_call_id": "c5", "content": [{"type": "file", "file": {"id": "f"}}]},
]


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def test_round_trip_is_exact() -> None:
    messages = messages_from_openai(CONVERSATION)
    assert _json(messages_to_openai(messages)) == _json(CONVERSATION)


@pytest.mark.parametrize("index", range(len(CONVERSATION)))
def test_each_message_round_trips_alone(index: int) -> None:
    payload = [CONVERSATION[index]]
    assert _json(messages_to_openai(messages_from_openai(payload))) == _json(payload)


def test_messages_are_mapped() -> None:
    m = messages_from_openai(CONVERSATION)
    assert [x.role for x in m[:4]] == ["system", "developer", "user", "user"]
    assert m[0].string_content
    assert not m[1].string_content
    assert m[2].extra["name"] == "ana"
    text, url_image, data_image, audio = m[3].content
    assert text == TextBlock(text="And this picture?")
    assert url_image == ImageBlock(url="https://x/a.jpg")
    assert url_image.extra == {"detail": "high"}
    assert data_image == ImageBlock(media_type="image/png", data=PNG)
    assert isinstance(audio, OtherBlock)
    assert audio.type == "input_audio"
    assert m[4].content[0] == ThinkingBlock(thinking="Two cities, two calls.")
    first, second = m[4].tool_uses
    assert first == ToolUseBlock(id="call_1", name="get_weather", input={"city": "Paris"})
    assert first.raw_input == '{ "city" : "Paris" }'
    assert second.input == {"city": "Rome", "units": "c"}
    assert m[5] == Message(
        role="user",
        content=(ToolResultBlock(tool_use_id="call_1", content="18C, sunny"),),
        uuid=m[5].uuid,
    )
    assert m[5].is_tool_result
    assert m[6].tool_results[0].content == (TextBlock(text="21C"),)
    assert m[9].extra["refusal"] == "I can't help with that."
    assert m[9].content == ()


def test_invalid_or_non_object_arguments_keep_the_text() -> None:
    m = messages_from_openai(CONVERSATION)
    broken = m[10].tool_uses[0]
    assert broken.input == {}
    assert broken.raw_input == "{not json"
    assert m[11].tool_uses[0].input == {}
    assert m[11].tool_uses[0].raw_input == "[1, 2]"


def test_edited_input_is_written_as_compact_json() -> None:
    m = messages_from_openai([CONVERSATION[4]])[0]
    call = dataclasses.replace(m.tool_uses[0], input={"city": "Zürich"})
    edited = dataclasses.replace(m, content=(call,))
    arguments = messages_to_openai([edited])[0]["tool_calls"][0]["function"]["arguments"]
    assert arguments == '{"city":"Zürich"}'


def test_openai_to_anthropic_and_back_gives_the_original() -> None:
    conversation: list[dict[str, Any]] = [
        {"role": "user", "content": "What's the weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                _call("call_1", "get_weather", '{"city":"Paris"}'),
                _call("call_2", "get_weather", '{"city":"Rome"}'),
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
        {"role": "tool", "tool_call_id": "call_2", "content": "21C"},
        {"role": "assistant", "content": "Paris 18C, Rome 21C."},
    ]
    messages = messages_from_openai(conversation)
    anthropic = _json(messages_to_anthropic(messages))
    assert [b["id"] for b in anthropic[1]["content"]] == ["call_1", "call_2"]
    assert [b["type"] for b in anthropic[1]["content"]] == ["tool_use", "tool_use"]
    assert anthropic[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "18C"}
    ]
    again = messages_from_anthropic(anthropic)
    assert again == messages
    assert _json(messages_to_openai(again)) == conversation


def test_anthropic_tool_results_become_tool_messages_then_user() -> None:
    message = message_from_anthropic(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "one", "is_error": True},
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "content": [{"type": "text", "text": "two"}, {"type": "text", "text": "2"}],
                    "cache_control": {"type": "ephemeral"},
                },
                {"type": "text", "text": "Now summarise.", "cache_control": {"type": "ephemeral"}},
                {"type": "document", "source": {"type": "url", "url": "https://x/a.pdf"}},
            ],
        }
    )
    assert messages_to_openai([message]) == [
        {"role": "tool", "tool_call_id": "t1", "content": "one"},
        {"role": "tool", "tool_call_id": "t2", "content": "two\n2"},
        {"role": "user", "content": [{"type": "text", "text": "Now summarise."}]},
    ]


def test_anthropic_assistant_and_images_map_to_openai() -> None:
    messages = messages_from_anthropic(
        [
            {
                "id": "msg_1",
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "t1", "name": "shot", "input": {"a": "é"}},
                    {"type": "text", "text": "Both."},
                    {"type": "redacted_thinking", "data": "xx"},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [
                            {"type": "text", "text": "see"},
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": PNG,
                                },
                            },
                        ],
                    }
                ],
            },
            {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "xx"}]},
        ]
    )
    assert messages_to_openai(messages) == [
        {
            "role": "assistant",
            "content": "Checking.\nBoth.",
            "reasoning_content": "hmm",
            "tool_calls": [_call("t1", "shot", '{"a":"é"}')],
        },
        {
            "role": "tool",
            "tool_call_id": "t1",
            "content": [
                {"type": "text", "text": "see"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            ],
        },
        {"role": "assistant", "content": ""},
    ]


def test_openai_extras_do_not_leak_into_anthropic() -> None:
    messages = messages_from_openai([CONVERSATION[3], CONVERSATION[9], CONVERSATION[7]])
    assert _json(messages_to_anthropic(messages)) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "And this picture?"},
                {"type": "image", "source": {"type": "url", "url": "https://x/a.jpg"}},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                },
            ],
        },
        {"role": "assistant", "content": []},
        {"role": "assistant", "content": "Paris 18C, Rome 21C."},
    ]


BAD: dict[str, tuple[Any, str]] = {
    "not a list": ("hello", r"^messages: expected a list of messages, got str$"),
    "not a mapping": ([{"role": "user", "content": "x"}, 7], r"^message 1: expected an object"),
    "missing role": ([{"content": "x"}], r"^message 0: has no 'role'$"),
    "unknown role": ([{"role": "robot", "content": "x"}], r"^message 0: unknown role 'robot'$"),
    "function role": (
        [{"role": "function", "name": "f", "content": "x"}],
        r"^message 0: the deprecated 'function' role is not supported",
    ),
    "user without content": ([{"role": "user"}], r"^message 0: has no 'content'$"),
    "content a number": (
        [{"role": "system", "content": 1}],
        r"^message 0: 'content' must be a string or a list of parts, got int$",
    ),
    "part not a mapping": (
        [{"role": "user", "content": ["x"]}],
        r"^message 0, part 0: a content part must be an object, got str$",
    ),
    "part without type": (
        [{"role": "user", "content": [{"text": "x"}]}],
        r"^message 0, part 0: content part has no string 'type'$",
    ),
    "text part without text": (
        [{"role": "user", "content": [{"type": "text"}]}],
        r"^message 0, part 0 \(text\): has no 'text'$",
    ),
    "tool without tool_call_id": (
        [{"role": "tool", "content": "x"}],
        r"^message 0: has no 'tool_call_id'$",
    ),
    "tool without content": (
        [{"role": "tool", "tool_call_id": "c"}],
        r"^message 0: has no 'content'$",
    ),
    "tool_calls not a list": (
        [{"role": "assistant", "content": None, "tool_calls": {}}],
        r"^message 0: 'tool_calls' must be a list, got dict$",
    ),
    "tool call not a mapping": (
        [{"role": "assistant", "tool_calls": ["x"]}],
        r"^message 0, tool call 0: a tool call must be an object, got str$",
    ),
    "tool call without id": (
        [{"role": "assistant", "tool_calls": [{"type": "function", "function": {}}]}],
        r"^message 0, tool call 0: has no 'id'$",
    ),
    "tool call without function": (
        [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function"}]}],
        r"^message 0, tool call 0: has no 'function' object$",
    ),
    "tool call without name": (
        [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}],
        r"^message 0, tool call 0: has no 'name'$",
    ),
    "tool call without arguments": (
        [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f"}}]}],
        r"^message 0, tool call 0: 'arguments' must be a JSON string, got NoneType$",
    ),
    "custom tool call": (
        [{"role": "assistant", "tool_calls": [{"id": "c", "type": "custom", "custom": {}}]}],
        r"^message 0, tool call 0: tool call type 'custom' is not supported",
    ),
}


@pytest.mark.parametrize(("data", "pattern"), BAD.values(), ids=list(BAD))
def test_malformed_input_raises_usage_error(data: Any, pattern: str) -> None:
    with pytest.raises(UsageError, match=pattern) as info:
        messages_from_openai(data)
    assert "\n" not in str(info.value)


def test_misplaced_blocks_cannot_be_written() -> None:
    call = ToolUseBlock(id="c", name="n", input={})
    result = ToolResultBlock(tool_use_id="c", content="x")
    with pytest.raises(UsageError, match=r"^message 1, block 0: a tool call cannot be"):
        messages_to_openai([Message.user("a"), Message(role="user", content=(call,))])
    with pytest.raises(UsageError, match=r"^message 0, block 1: a tool result cannot be"):
        messages_to_openai([Message(role="assistant", content=(call, result))])


# A property: the Messages OpenAI can express survive Message -> OpenAI -> Message.

_ids = st.text(st.characters(categories=("L", "N")), min_size=1, max_size=10)
_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
_values = st.recursive(
    _scalars | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
_tool_use = st.builds(
    ToolUseBlock,
    id=_ids,
    name=_ids,
    input=st.dictionaries(st.text(max_size=5), _values, max_size=3),
)
_text = st.builds(TextBlock, text=st.text(max_size=20))


@st.composite
def _user(draw: st.DrawFn) -> Message:
    if draw(st.booleans()):
        return Message(role="user", content=(draw(_text),), string_content=True)
    return Message(role="user", content=tuple(draw(st.lists(_text, max_size=3))))


@st.composite
def _assistant(draw: st.DrawFn) -> Message:
    blocks: list[Any] = []
    if draw(st.booleans()):
        blocks.append(ThinkingBlock(thinking=draw(st.text(max_size=20))))
    text = draw(st.none() | _text)
    if text is not None:
        blocks.append(text)
    calls = draw(st.lists(_tool_use, min_size=0 if text is not None else 1, max_size=3))
    return Message(role="assistant", content=(*blocks, *calls), string_content=text is not None)


_tool_result = st.builds(
    lambda id_, out: Message(role="user", content=(ToolResultBlock(tool_use_id=id_, content=out),)),
    _ids,
    st.text(max_size=20),
)


@given(st.lists(_user() | _assistant() | _tool_result, max_size=6))
def test_messages_survive_openai_round_trip(messages: list[Message]) -> None:
    wire = _json(messages_to_openai(messages))
    assert messages_from_openai(wire) == with_derived_uuids(messages)
