"""The conversation model's helpers and its derived, deterministic uuids."""

from __future__ import annotations

import dataclasses

from memdir.messages import (
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    derive_uuid,
    messages_from_anthropic,
    model_visible,
    with_derived_uuids,
)

CALL = ToolUseBlock(id="t1", name="search", input={"q": "paris"})
RESULT = ToolResultBlock(tool_use_id="t1", content="18C")


def _conversation() -> list[Message]:
    return [
        Message.user("What's the weather?"),
        Message(role="assistant", content=(TextBlock(text="Let me check."), CALL)),
        Message(role="user", content=(RESULT,)),
        Message.assistant("18C."),
    ]


def test_text_joins_text_blocks_only() -> None:
    message = Message(
        role="assistant",
        content=(
            ThinkingBlock(thinking="hidden"),
            TextBlock(text="one"),
            CALL,
            ImageBlock(url="https://x/a.png"),
            TextBlock(text="two"),
        ),
    )
    assert message.text == "one\ntwo"
    assert Message(role="user", content=(RESULT,)).text == ""


def test_tool_result_text_leaves_images_out() -> None:
    result = ToolResultBlock(
        tool_use_id="t", content=(TextBlock(text="a"), ImageBlock(url="u"), TextBlock(text="b"))
    )
    assert result.text == "a\nb"
    assert RESULT.text == "18C"


def test_tool_uses_and_results_in_order() -> None:
    second = ToolUseBlock(id="t2", name="search", input={"q": "rome"})
    message = Message(role="assistant", content=(CALL, TextBlock(text="and"), second))
    assert message.tool_uses == (CALL, second)
    assert Message.user("hi").tool_uses == ()
    assert Message(role="user", content=(RESULT, TextBlock(text="x"))).tool_results == (RESULT,)


def test_is_tool_result() -> None:
    assert Message(role="user", content=(RESULT,)).is_tool_result
    assert not Message(role="user", content=(RESULT, TextBlock(text="and?"))).is_tool_result
    assert not Message(role="user", content=()).is_tool_result
    assert not Message(role="assistant", content=(RESULT,)).is_tool_result
    assert not Message.user("hi").is_tool_result


def test_model_visible_keeps_user_and_assistant() -> None:
    conversation = [
        Message(role="system", content=(TextBlock(text="sys"),)),
        Message(role="developer", content=(TextBlock(text="dev"),)),
        *_conversation(),
        Message.user("reminder", is_meta=True),
    ]
    assert model_visible(conversation) == conversation[2:]


def test_same_conversation_gives_same_uuids() -> None:
    first = with_derived_uuids(_conversation())
    second = with_derived_uuids(_conversation())
    assert [m.uuid for m in first] == [m.uuid for m in second]
    assert len({m.uuid for m in first}) == len(first)


def test_appending_leaves_earlier_uuids_unchanged() -> None:
    short = with_derived_uuids(_conversation())
    longer = with_derived_uuids([*_conversation(), Message.user("Thanks!")])
    assert [m.uuid for m in longer[: len(short)]] == [m.uuid for m in short]


def test_identical_messages_at_different_positions_differ() -> None:
    messages = with_derived_uuids([Message.user("ok"), Message.assistant("ok"), Message.user("ok")])
    assert messages[0].uuid != messages[2].uuid


def test_uuid_depends_on_role_content_and_history() -> None:
    assert derive_uuid(None, Message.user("a")) == derive_uuid(None, Message.user("a"))
    assert derive_uuid(None, Message.user("a")) != derive_uuid(None, Message.assistant("a"))
    assert derive_uuid(None, Message.user("a")) != derive_uuid(None, Message.user("b"))
    assert derive_uuid("x", Message.user("a")) != derive_uuid("y", Message.user("a"))


def test_wire_details_do_not_change_the_uuid() -> None:
    plain = {"role": "user", "content": [{"type": "text", "text": "Long context"}]}
    cached = {
        "role": "user",
        "content": [
            {"type": "text", "text": "Long context", "cache_control": {"type": "ephemeral"}}
        ],
    }
    assert messages_from_anthropic([plain])[0].uuid == messages_from_anthropic([cached])[0].uuid
    message = Message.user("a")
    flagged = dataclasses.replace(message, is_meta=True, string_content=True, uuid="other")
    assert derive_uuid(None, message) == derive_uuid(None, flagged)


def test_raw_input_and_extra_are_not_compared() -> None:
    a = ToolUseBlock(id="t", name="n", input={"x": 1}, raw_input='{"x": 1}')
    b = ToolUseBlock(id="t", name="n", input={"x": 1}, extra={"caller": "me"})
    assert a == b
    assert Message.user("hi", uuid="u", extra={"name": "ana"}) == Message.user("hi", uuid="u")
