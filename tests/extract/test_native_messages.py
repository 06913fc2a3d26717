"""TurnContext takes the conversation as agent loops hold it: provider dicts, SDK objects.

Each kind gets its memories saved with every message covered exactly once; what is no
message raises TypeError at on_turn_end, naming the converters; a turn reads only the
messages it adds; and a fork sends SDK-held messages back as the host's SDK sent them.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from anthropic import AsyncAnthropic
from anthropic.types import Message as AnthropicResponse
from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionMessage

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.fork import CacheSafeParams
from memdir.messages import (
    AnyMessage,
    Message,
    ToolUseBlock,
    _native,
    derive_uuid,
    messages_from_anthropic,
    messages_from_native,
    messages_from_openai,
    model_visible,
)
from memdir.models import AnthropicModel, ModelRequest
from memdir.telemetry import CollectingSink
from memdir.testing import FakeAnthropicServer, FunctionModel
from memdir.tools import builtin_tools

MEMORY_FILE = "---\nname: {name}\ndescription: about {name}\ntype: user\n---\n\nbody\n"


def saver(memory: Path) -> Callable[[ModelRequest], Message | str]:
    """A memory agent that saves one new memory on each run (memdir's tools write its
    index line)."""
    numbers = itertools.count()

    def answer(request: ModelRequest) -> Message | str:
        if request.messages[-1].is_tool_result:
            return "Saved."
        name = f"note_{next(numbers)}.md"
        uses = (
            ToolUseBlock(
                id=f"{name}-w",
                name="Write",
                input={"file_path": str(memory / name), "content": MEMORY_FILE.format(name=name)},
            ),
        )
        return Message(role="assistant", content=uses)

    return answer


def extractor(
    tmp_path: Path, model: FunctionModel | None = None, **config: Any
) -> tuple[MemoryExtractor, CollectingSink, Path]:
    memory = tmp_path / "memory"
    sink = CollectingSink()
    model = model or FunctionModel(saver(memory))
    return MemoryExtractor(memory, model, ExtractConfig(**config), sink=sink), sink, memory


def report_each_turn(
    ex: MemoryExtractor,
    turns: Sequence[Sequence[AnyMessage]],
    params: CacheSafeParams | None = None,
) -> list[AnyMessage]:
    """Grow one conversation turn by turn, as a host loop does, waiting for each run."""
    conversation: list[AnyMessage] = []

    async def main() -> None:
        for turn in turns:
            conversation.extend(turn)
            ex.on_turn_end(TurnContext(messages=conversation, params=params))
            await ex.drain()

    asyncio.run(main())
    return conversation


def assert_covered_once(
    ex: MemoryExtractor, sink: CollectingSink, memory: Path, expected: list[Message], runs: int
) -> None:
    """Memories saved by every run, each message counted by exactly one of them."""
    assert "extract.error" not in sink.names()
    counts = [e.fields["message_count"] for e in sink.events if e.name == "extract.run"]
    assert len(counts) == runs
    assert sum(counts) == len(model_visible(expected))
    assert ex.cursor == expected[-1].uuid
    saved = sorted(p.name for p in memory.glob("note_*.md"))
    assert saved == [f"note_{n}.md" for n in range(runs)]


# --- each kind of message -------------------------------------------------------------------


ANTHROPIC_TURNS: list[list[dict[str, Any]]] = [
    [
        {"role": "user", "content": "I'm Ana; check the config before you answer."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading it."},
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"p": "x"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}],
        },
        {"role": "assistant", "content": "The config is fine."},
    ],
    [
        {"role": "user", "content": [{"type": "text", "text": "Always use polars."}]},
        {"role": "assistant", "content": "Polars it is."},
    ],
]


def test_anthropic_dicts_are_remembered_each_message_once(tmp_path: Path) -> None:
    ex, sink, memory = extractor(tmp_path)
    conversation = report_each_turn(ex, ANTHROPIC_TURNS)
    expected = messages_from_anthropic([m for t in ANTHROPIC_TURNS for m in t])
    assert len(conversation) == len(expected) == 6
    assert_covered_once(ex, sink, memory, expected, runs=2)


OPENAI_TURNS: list[list[dict[str, Any]]] = [
    [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is in the config? I'm Ana."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_config", "arguments": '{"path": "x"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "debug = false"},
        {"role": "assistant", "content": "Debugging is off."},
    ],
    [
        {"role": "user", "content": "Always use polars."},
        {"role": "assistant", "content": "Polars it is."},
    ],
]


def test_openai_dicts_are_remembered_each_message_once(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    # The host's model is OpenAI's: plain-text messages, alike in both formats, are then
    # read as OpenAI's, so the fork writes every message back as the host sent it.
    host = FunctionModel(saver(memory), name="openai:gpt-4o")
    ex, sink, memory = extractor(tmp_path, host, mode="fork")
    params = CacheSafeParams(
        model=host, system="host", tools=[t.definition() for t in builtin_tools(tmp_path)]
    )
    conversation = report_each_turn(ex, OPENAI_TURNS, params)
    expected = messages_from_openai([m for t in OPENAI_TURNS for m in t])
    assert_covered_once(ex, sink, memory, expected, runs=2)
    # The fork sent the conversation as messages_from_openai reads it, wire marks included.
    last_fork = next(r for r in reversed(host.requests) if not r.messages[-1].is_tool_result)
    sent = list(last_fork.messages[: len(conversation)])
    assert sent == expected
    assert [m.extra for m in sent] == [m.extra for m in expected]


def anthropic_response(content: list[dict[str, Any]], stop: str = "end_turn") -> AnthropicResponse:
    """A response object as the anthropic SDK hands it back."""
    return AnthropicResponse.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    )


def test_anthropic_sdk_objects_are_remembered_each_message_once(tmp_path: Path) -> None:
    calling = anthropic_response(
        [
            {"type": "text", "text": "Reading it.", "citations": None},
            {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"p": "x"}},
        ],
        stop="tool_use",
    )
    final = anthropic_response([{"type": "text", "text": "The config is fine."}])
    question: MessageParam = {"role": "user", "content": "I'm Ana; check the config."}
    result: MessageParam = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}],
    }
    turns: list[list[AnyMessage]] = [
        # The loop's usual shape: the response's content blocks inside a dict...
        [question, {"role": "assistant", "content": calling.content}, result],
        # ...or the response object itself.
        [final],
    ]
    ex, sink, memory = extractor(tmp_path)
    report_each_turn(ex, [turns[0] + turns[1]])
    plain = [
        question,
        {
            "role": "assistant",
            "content": [b.model_dump(exclude_unset=True) for b in calling.content],
        },
        result,
        {"role": "assistant", "content": [{"type": "text", "text": "The config is fine."}]},
    ]
    expected = messages_from_anthropic(plain)
    assert messages_from_native([*turns[0], *turns[1]]) == expected
    assert_covered_once(ex, sink, memory, expected, runs=1)


def test_openai_sdk_objects_are_remembered_each_message_once(tmp_path: Path) -> None:
    calling = ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_config", "arguments": "{}"},
                }
            ],
        }
    )
    final = ChatCompletionMessage.model_validate(
        {"role": "assistant", "content": "Debugging is off.", "refusal": None}
    )
    question = {"role": "user", "content": "What is in the config? I'm Ana."}
    result = {"role": "tool", "tool_call_id": "call_1", "content": "debug = false"}
    turn: list[AnyMessage] = [question, calling, result, final]
    ex, sink, memory = extractor(tmp_path)
    report_each_turn(ex, [turn])
    expected = messages_from_openai(
        [
            question,
            calling.model_dump(exclude_unset=True),
            result,
            final.model_dump(exclude_unset=True),
        ]
    )
    assert messages_from_native(turn) == expected
    assert_covered_once(ex, sink, memory, expected, runs=1)


def test_memdir_messages_mixed_with_dicts_keep_their_own_uuids(tmp_path: Path) -> None:
    first = Message.user("I'm Ana.")
    later = Message.user("Always use polars.")
    answer: dict[str, Any] = {"role": "assistant", "content": "Hello Ana."}
    last: dict[str, Any] = {"role": "assistant", "content": "Polars it is."}
    ex, sink, memory = extractor(tmp_path)
    report_each_turn(ex, [[first, answer], [later, last]])
    read = messages_from_native([first, answer, later, last])
    assert read[0] is first
    assert read[2] is later
    assert read[1].uuid == derive_uuid(first.uuid, read[1])
    assert read[3].uuid == derive_uuid(later.uuid, read[3])
    assert_covered_once(ex, sink, memory, read, runs=2)


# --- what is no message ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "item",
    [3, None, "Polars it is.", {"content": "no role"}, object()],
    ids=["int", "none", "str", "dict-without-role", "object"],
)
def test_what_is_no_message_raises_type_error_naming_the_converters(
    tmp_path: Path, item: object
) -> None:
    ex, sink, memory = extractor(tmp_path)
    good: list[Any] = [{"role": "user", "content": "I'm Ana."}]

    async def main() -> None:
        with pytest.raises(TypeError, match=r"messages\[1\]") as raised:
            ex.on_turn_end(TurnContext(messages=[*good, item]))  # type: ignore[list-item]
        message = str(raised.value)
        assert "memdir.messages.messages_from_anthropic" in message
        assert "memdir.messages.messages_from_openai" in message
        assert ex.in_flight == 0  # nothing was scheduled
        # Nothing of the refused call was kept: the corrected conversation runs as usual.
        ex.on_turn_end(TurnContext(messages=[*good, {"role": "assistant", "content": "Hi."}]))
        await ex.drain()

    asyncio.run(main())
    expected = messages_from_anthropic([*good, {"role": "assistant", "content": "Hi."}])
    assert_covered_once(ex, sink, memory, expected, runs=1)


@pytest.mark.parametrize(
    ("item", "converter"),
    [
        (
            {"role": "assistant", "content": [{"type": "tool_use", "name": "Read", "input": {}}]},
            "memdir.messages.messages_from_anthropic",
        ),
        ({"role": "function", "name": "f", "content": "x"}, "memdir.messages.messages_from_openai"),
        (
            {"role": "tool", "content": "a result that names no call"},
            "memdir.messages.messages_from_openai",
        ),
    ],
    ids=["anthropic-tool-use-without-id", "openai-function-role", "openai-tool-without-id"],
)
def test_a_malformed_message_raises_type_error_naming_its_converter(
    tmp_path: Path, item: dict[str, Any], converter: str
) -> None:
    ex, sink, _ = extractor(tmp_path)
    with pytest.raises(TypeError, match=r"messages\[1\]") as raised:
        ex.on_turn_end(TurnContext(messages=[{"role": "user", "content": "hi"}, item]))
    assert converter in str(raised.value)
    assert ex.in_flight == 0
    assert sink.events == []


@pytest.mark.parametrize(
    "messages",
    [
        iter([{"role": "user", "content": "hi"}]),
        {"role": "user", "content": "hi"},
        {"role": "user", "content": "hi"}.values(),
    ],
    ids=["iterator", "one-message", "no-indexing"],
)
def test_messages_that_are_no_list_raise_type_error(tmp_path: Path, messages: Any) -> None:
    ex, sink, _ = extractor(tmp_path)
    with pytest.raises(TypeError, match="list or a tuple"):
        ex.on_turn_end(TurnContext(messages=messages))
    assert ex.in_flight == 0


# --- telling the formats apart --------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"role": "system", "content": "Be brief."}, "openai"),
        ({"role": "developer", "content": "Be brief."}, "openai"),
        ({"role": "tool", "tool_call_id": "c1", "content": "42"}, "openai"),
        ({"role": "assistant", "content": "", "tool_calls": []}, "openai"),
        ({"role": "assistant", "content": None}, "openai"),
        ({"role": "user", "content": "hi", "name": "ana"}, "openai"),
        (
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]},
            "openai",
        ),
        (
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n"}]},
            "anthropic",
        ),
        (
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
            "anthropic",
        ),
        ({"role": "assistant", "content": [{"type": "thinking", "thinking": "."}]}, "anthropic"),
        ({"role": "user", "content": ["a bare string"]}, "anthropic"),
        (
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
            },
            "anthropic",
        ),
        ({"role": "user", "content": "hi"}, None),
        ({"role": "assistant", "content": [{"type": "text", "text": "hi"}]}, None),
    ],
)
def test_a_dict_is_read_in_the_format_only_it_has(
    data: dict[str, Any], expected: str | None
) -> None:
    assert _native.format_of(data) == expected
    if expected is None:  # alike in both: read as the host's model's format
        for fmt in ("anthropic", "openai"):
            (read,) = messages_from_native([data], ambiguous_as=fmt)
            assert read.extra["memdir:format"] == fmt


def test_a_conversation_mixing_both_formats_reads_each_message_in_its_own() -> None:
    mixed: list[AnyMessage] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "1"}]},
    ]
    read = messages_from_native(mixed)
    assert [m.extra["memdir:format"] for m in read] == ["openai", *["anthropic"] * 3]
    assert [m.role for m in read] == ["system", "user", "assistant", "user"]
    assert read[3].is_tool_result


# --- the cost contract ----------------------------------------------------------------------


@pytest.mark.parametrize("handed", ["same-list", "tuple-copy", "rebuilt-dicts"])
def test_a_turn_reads_only_the_messages_it_adds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handed: str
) -> None:
    reads: list[object] = []
    real = _native.read_message

    def counting(item: object, *args: Any) -> Message:
        reads.append(item)
        return real(item, *args)

    monkeypatch.setattr(_native, "read_message", counting)
    ex, sink, memory = extractor(tmp_path, FunctionModel(lambda _: "Nothing to save."))
    conversation: list[dict[str, Any]] = []
    turns = 30

    async def main() -> None:
        for n in range(turns):
            conversation.append({"role": "user", "content": f"question {n}"})
            conversation.append(
                {"role": "assistant", "content": [{"type": "text", "text": f"{n}"}]}
            )
            if handed == "same-list":
                messages: Sequence[Any] = conversation
            elif handed == "tuple-copy":
                messages = tuple(conversation)
            else:  # a loop that rebuilds its dicts each turn (from a store, say)
                messages = copy.deepcopy(conversation)
            ex.on_turn_end(TurnContext(messages=messages))
            await ex.drain()
        # A rewind: the last answer replaced by another one reads that one alone.
        rewound = [*conversation[:-1], {"role": "assistant", "content": "Another answer."}]
        ex.on_turn_end(TurnContext(messages=rewound))
        await ex.drain()

    asyncio.run(main())
    assert len(reads) == 2 * turns + 1
    assert "extract.error" not in sink.names()
    counts = [e.fields["message_count"] for e in sink.events if e.name == "extract.run"]
    # Each turn's two messages once; then the rewound answer: the cursor's message is gone,
    # so that run counts everything again, as with any rewind.
    assert counts == [2] * turns + [2 * turns]


# --- the fork sends what the host sent ------------------------------------------------------


def strip_markers(value: Any) -> Any:
    """``value`` without ``cache_control`` markers (each request places its own)."""
    if isinstance(value, dict):
        return {k: strip_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_markers(v) for v in value]
    return value


def test_the_fork_sends_sdk_blocks_as_the_host_sdk_sent_them(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    note = saver(memory)

    def handler(body: dict[str, Any]) -> Message | str:
        if str(memory) in json.dumps(body["messages"]):  # the host never names it: a fork
            request = messages_from_anthropic(body["messages"])
            return note(ModelRequest(messages=tuple(request)))
        if body["messages"][-1]["content"] == "Check the config.":
            return Message(
                role="assistant",
                content=(ToolUseBlock(id="toolu_9", name="Read", input={"file_path": "x"}),),
            )
        return "Done."

    tools = [t.definition() for t in builtin_tools(tmp_path)]
    with FakeAnthropicServer(handler=handler) as server:

        async def host() -> list[dict[str, Any]]:
            async with AsyncAnthropic(base_url=server.base_url, api_key="test") as client:
                model = AnthropicModel("claude-test", client=client.with_options(max_retries=0))
                params = CacheSafeParams(
                    model=model, system="host", tools=tools, params={"max_tokens": 512}
                )
                ex = MemoryExtractor(memory, model, ExtractConfig(mode="fork"))
                messages: list[Any] = []
                for text in ("Check the config.", "I'm Ana, use polars."):
                    messages.append({"role": "user", "content": text})
                    while True:
                        response = await client.messages.create(
                            model="claude-test",
                            max_tokens=512,
                            system="host",
                            tools=tools,  # type: ignore[arg-type]
                            messages=messages,
                        )
                        messages.append({"role": "assistant", "content": response.content})
                        calls = [b for b in response.content if b.type == "tool_use"]
                        if not calls:
                            break
                        results = [
                            {"type": "tool_result", "tool_use_id": c.id, "content": "ok"}
                            for c in calls
                        ]
                        messages.append({"role": "user", "content": results})
                    ex.on_turn_end(TurnContext(messages=messages, params=params))
                    await ex.drain()
                return messages

        conversation = asyncio.run(host())
        bodies = [r.body for r in server.requests]
        server.assert_no_errors()

    assert len(conversation) == 6
    assert sorted(p.name for p in memory.glob("note_*.md")) == ["note_0.md", "note_1.md"]
    hosts = [b for b in bodies if str(memory) not in json.dumps(b)]
    forks = [b for b in bodies if str(memory) in json.dumps(b["messages"][-1])]
    assert len(forks) == 2
    # Everything the host sent, the fork sends again as it was: the cache's prefix.
    for fork in forks:
        sent = strip_markers(fork["messages"])
        before = [h for h in hosts if bodies.index(h) < bodies.index(fork)][-1]
        host_sent = strip_markers(before["messages"])
        assert sent[: len(host_sent)] == host_sent
        assert fork["tools"] == before["tools"]


def test_a_host_that_keeps_a_window_keeps_its_cursor_and_reads_what_it_adds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[object] = []
    real = _native.read_message

    def counting(item: object, *args: Any) -> Message:
        reads.append(item)
        return real(item, *args)

    monkeypatch.setattr(_native, "read_message", counting)
    ex, sink, memory = extractor(tmp_path, FunctionModel(lambda _: "Nothing to save."))
    conversation: list[dict[str, Any]] = []
    turns, window = 20, 8

    async def main() -> None:
        for n in range(turns):
            conversation.append({"role": "user", "content": f"question {n}"})
            conversation.append(
                {"role": "assistant", "content": [{"type": "text", "text": f"{n}"}]}
            )
            del conversation[:-window]  # the host sends only its last eight messages
            ex.on_turn_end(TurnContext(messages=list(conversation)))
            await ex.drain()

    asyncio.run(main())
    assert len(reads) == 2 * turns
    assert "extract.error" not in sink.names()
    counts = [e.fields["message_count"] for e in sink.events if e.name == "extract.run"]
    assert counts == [2] * turns
