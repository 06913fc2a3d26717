"""load_transcript: format sniffing, chat JSON formats, stable ids, and clear errors."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from memdir.errors import TranscriptError
from memdir.transcripts import load_transcript

OPENAI_CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a helpful agent."},
    {"role": "user", "content": "What's the weather in Paris and Rome?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "18C, sunny"},
    {"role": "tool", "tool_call_id": "call_2", "content": "22C, cloudy"},
    {"role": "assistant", "content": "Paris 18C and sunny; Rome 22C and cloudy."},
]

ANTHROPIC_CHAT: dict[str, Any] = {
    "system": "Be brief.",
    "messages": [
        {"role": "user", "content": "What's the weather in Paris?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "18C."}]},
    ],
}


def write_json(path: Path, payload: Any) -> Path:
    path.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return path


def test_openai_chat_list(tmp_path: Path) -> None:
    t = load_transcript(write_json(tmp_path / "chat.json", OPENAI_CHAT))
    assert t.format == "openai"
    assert [m.role for m in t.messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "user",
        "assistant",
    ]
    assert [b.id for b in t.messages[2].tool_uses] == ["call_1", "call_2"]
    assert t.messages[2].tool_uses[1].input == {"city": "Rome"}
    assert t.messages[3].tool_results[0].tool_use_id == "call_1"


def test_openai_object_with_messages(tmp_path: Path) -> None:
    t = load_transcript(
        write_json(tmp_path / "c.json", {"messages": OPENAI_CHAT, "session_id": "s9"})
    )
    assert t.format == "openai"
    assert len(t.messages) == 6
    assert t.session_id == "s9"


def test_anthropic_object_with_system(tmp_path: Path) -> None:
    t = load_transcript(write_json(tmp_path / "a.json", ANTHROPIC_CHAT))
    assert t.format == "anthropic"
    assert t.system == "Be brief."
    assert t.messages[1].tool_uses[0].id == "toolu_1"
    assert t.messages[2].is_tool_result


def test_anthropic_list_is_recognised_by_its_blocks(tmp_path: Path) -> None:
    t = load_transcript(write_json(tmp_path / "a.json", ANTHROPIC_CHAT["messages"]))
    assert t.format == "anthropic"


def test_uuids_are_stable_on_reimport_and_after_appending(tmp_path: Path) -> None:
    path = write_json(tmp_path / "chat.json", OPENAI_CHAT[:4])
    first = [m.uuid for m in load_transcript(path).messages]
    again = [m.uuid for m in load_transcript(path).messages]
    assert first == again
    assert len(set(first)) == len(first)
    write_json(path, OPENAI_CHAT)  # the same conversation, two more messages
    longer = [m.uuid for m in load_transcript(path).messages]
    assert longer[:4] == first
    assert len(longer) == 6
    # The same file written with different spacing reads the same.
    path.write_text(json.dumps(OPENAI_CHAT), encoding="utf-8")
    assert [m.uuid for m in load_transcript(path).messages] == longer


def test_identical_messages_get_distinct_uuids(tmp_path: Path) -> None:
    chat = [{"role": "user", "content": "ok"}, {"role": "assistant", "content": "ok"}] * 2
    t = load_transcript(write_json(tmp_path / "c.json", chat))
    assert len({m.uuid for m in t.messages}) == 4


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(OPENAI_CHAT).encode())
    assert len(load_transcript(path).messages) == 6


def test_empty_conversation(tmp_path: Path) -> None:
    assert load_transcript(write_json(tmp_path / "e.json", [])).messages == ()


def test_home_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    write_json(tmp_path / "chat.json", OPENAI_CHAT)
    assert len(load_transcript("~/chat.json").messages) == 6


# --- errors --------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="no such file") as info:
        load_transcript(tmp_path / "nope.jsonl")
    assert info.value.path == tmp_path / "nope.jsonl"
    assert str(tmp_path / "nope.jsonl") in str(info.value)


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="is a directory"):
        load_transcript(tmp_path)


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_json(tmp_path / "locked.json", [])

    def denied(*args: object, **kwargs: object) -> int:
        raise PermissionError(13, "Permission denied")

    # The loader opens the file itself (without blocking, to check it is a regular file).
    with monkeypatch.context() as patch:
        patch.setattr(os, "open", denied)
        with pytest.raises(TranscriptError, match="cannot read: Permission denied") as info:
            load_transcript(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "an empty file"),
        (b"   \n", "an empty file"),
        (b"hello there\n", "not JSON or JSONL"),
        (b'{"foo": 1}', "without a 'messages' list"),
        (b'"just a string"', "not JSON or JSONL"),
        (b'{"a": 1}\n{"b": 2}\n', "no Claude Code user, assistant or system entry"),
        (b'[{"role": "user", "content": "hi"}, {"role": "wizard", "content": "x"}]', "1"),
        (b'[{"role": "user"', "invalid JSON"),
        (b"[1, 2]", "0"),
    ],
)
def test_no_known_format(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "input.json"
    path.write_bytes(content)
    with pytest.raises(TranscriptError, match=reason) as info:
        load_transcript(path)
    assert str(info.value).startswith(str(path))


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('[\n  {"role": "user", "content": "hi"},\n  {"role": \n', encoding="utf-8")
    with pytest.raises(TranscriptError) as info:
        load_transcript(path)
    assert info.value.line == 4
    assert str(info.value).startswith(f"{path}:4: invalid JSON")


def test_a_single_line_session_is_read_as_claude_code(tmp_path: Path) -> None:
    line = {
        "type": "user",
        "uuid": "u1",
        "parentUuid": None,
        "sessionId": "s",
        "message": {"role": "user", "content": "hello"},
    }
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    t = load_transcript(path)
    assert t.format == "claude-code"
    assert [m.uuid for m in t.messages] == ["u1"]
