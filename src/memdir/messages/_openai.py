"""The OpenAI Chat Completions wire format, to and from :class:`~memdir.messages.Message`.

One wire message is one :class:`Message`: a ``tool`` message becomes a ``user`` message
holding a single :class:`ToolResultBlock`, and an assistant's ``tool_calls`` become
:class:`ToolUseBlock` s after its text. Reading then writing gives back the same JSON
value; as in the Anthropic module, wire fields memdir does not model ride in ``extra``
and are written back only to the format they came from (see
:mod:`memdir.messages._anthropic`).

The deprecated ``function`` role is refused with a :class:`~memdir.errors.UsageError`:
its results are matched by function name, not by call id, so it has no faithful
tool-result form.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from memdir.errors import UsageError
from memdir.messages._anthropic import (
    FORMAT_KEY,
    RAW_CONTENT,
    fail,
    is_native,
    merge,
    require_list,
    require_str,
    rest,
    short,
    wire_extra,
)
from memdir.messages._model import (
    ContentBlock,
    ImageBlock,
    Message,
    OtherBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    with_derived_uuids,
)

__all__ = ["messages_from_openai", "messages_to_openai"]

_OPENAI = "openai"
_CONTENT = "memdir:content"  # "null" or "absent": an assistant's content as it came
_NO_TYPE = "memdir:no_type"  # a tool call without "type"
_ARGS_OBJECT = "memdir:arguments_object"  # arguments sent as an object, not JSON text
_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)
_ROLES = ("system", "developer", "user", "assistant", "tool")


# Reading.


def _part(item: object, where: str) -> ContentBlock:
    if not isinstance(item, Mapping):
        fail(where, f"a content part must be an object, got {type(item).__name__}")
    kind = item.get("type")
    if not isinstance(kind, str):
        fail(where, "content part has no string 'type'")
    if kind == "text":
        text = require_str(item, "text", f"{where} (text)")
        return TextBlock(text=text, extra=rest(item, {"type", "text"}))
    image = item.get("image_url")
    if kind == "image_url" and set(item) == {"type", "image_url"} and isinstance(image, Mapping):
        url = image.get("url")
        if isinstance(url, str):
            extra = rest(image, {"url"})
            if match := _DATA_URL.fullmatch(url):
                return ImageBlock(media_type=match[1], data=match[2], extra=extra)
            return ImageBlock(url=url, extra=extra)
    return OtherBlock(type=kind, data=dict(item))


def _content(value: object, where: str) -> tuple[ContentBlock, ...]:
    if isinstance(value, str):
        return (TextBlock(text=value),)
    if not isinstance(value, list | tuple):
        fail(where, f"'content' must be a string or a list of parts, got {type(value).__name__}")
    return tuple(_part(p, f"{where}, part {k}") for k, p in enumerate(value))


def _tool_call(item: object, where: str) -> ToolUseBlock:
    if not isinstance(item, Mapping):
        fail(where, f"a tool call must be an object, got {type(item).__name__}")
    call_id = require_str(item, "id", where)
    extra = rest(item, {"id", "type", "function"})
    if "type" not in item:
        extra[_NO_TYPE] = True
    elif item["type"] != "function":
        fail(where, f"tool call type {short(item['type'])} is not supported, only 'function'")
    function = item.get("function")
    if not isinstance(function, Mapping):
        fail(where, "has no 'function' object")
    name = require_str(function, "name", where)
    if function.keys() - {"name", "arguments"}:
        extra["function"] = rest(function, {"name", "arguments"})
    arguments = function.get("arguments")
    raw: str | None = None
    if isinstance(arguments, str):
        raw = arguments
        try:
            decoded = json.loads(arguments)
        except (ValueError, RecursionError):
            decoded = None
        value = decoded if isinstance(decoded, dict) else {}
    elif isinstance(arguments, Mapping):
        value, extra[_ARGS_OBJECT] = dict(arguments), True
    else:
        fail(where, f"'arguments' must be a JSON string, got {type(arguments).__name__}")
    return ToolUseBlock(
        id=call_id,
        name=name,
        input=value,
        raw_input=raw,
        extra=extra,
    )


def _tool(data: Mapping[str, Any], where: str) -> Message:
    tool_call_id = require_str(data, "tool_call_id", where)
    if "content" not in data:
        fail(where, "has no 'content'")
    block_extra: dict[str, Any] = {}
    content: str | tuple[TextBlock | ImageBlock, ...]
    if isinstance(data["content"], str):
        content = data["content"]
    else:
        parts = _content(data["content"], where)
        content = tuple(b for b in parts if isinstance(b, TextBlock | ImageBlock))
        if len(content) != len(parts):
            block_extra[RAW_CONTENT] = list(data["content"])
    extra = rest(data, {"role", "tool_call_id", "content"})
    extra[FORMAT_KEY] = _OPENAI
    block = ToolResultBlock(tool_use_id=tool_call_id, content=content, extra=block_extra)
    return Message(role="user", content=(block,), extra=extra)


def _assistant(data: Mapping[str, Any], where: str) -> Message:
    extra = rest(data, {"role", "content", "tool_calls", "reasoning_content"})
    extra[FORMAT_KEY] = _OPENAI
    blocks: list[ContentBlock] = []
    reasoning = data.get("reasoning_content")
    if isinstance(reasoning, str):
        blocks.append(ThinkingBlock(thinking=reasoning))
    elif "reasoning_content" in data:
        extra["reasoning_content"] = reasoning
    content = data.get("content")
    if content is None:
        extra[_CONTENT] = "null" if "content" in data else "absent"
    else:
        blocks.extend(_content(content, where))
    calls = data.get("tool_calls")
    if isinstance(calls, list | tuple) and calls:
        blocks.extend(_tool_call(c, f"{where}, tool call {k}") for k, c in enumerate(calls))
    elif calls is None or isinstance(calls, list | tuple):
        if "tool_calls" in data:
            extra["tool_calls"] = calls  # an explicit null or [], written back as it came
    else:
        fail(where, f"'tool_calls' must be a list, got {type(calls).__name__}")
    return Message(
        role="assistant",
        content=tuple(blocks),
        string_content=isinstance(content, str),
        extra=extra,
    )


def _message(data: object, where: str) -> Message:
    if not isinstance(data, Mapping):
        fail(where, f"expected an object, got {type(data).__name__}")
    if "role" not in data:
        fail(where, "has no 'role'")
    role = data["role"]
    if role == "function":
        fail(where, "the deprecated 'function' role is not supported; use a 'tool' message")
    if role not in _ROLES:
        fail(where, f"unknown role {short(role)}")
    if role == "tool":
        return _tool(data, where)
    if role == "assistant":
        return _assistant(data, where)
    if "content" not in data:
        fail(where, "has no 'content'")
    extra = rest(data, {"role", "content"})
    extra[FORMAT_KEY] = _OPENAI
    return Message(
        role=role,
        content=_content(data["content"], where),
        string_content=isinstance(data["content"], str),
        extra=extra,
    )


def messages_from_openai(data: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Read an OpenAI Chat Completions ``messages`` list into :class:`Message` s.

    Roles ``system``, ``developer``, ``user`` and ``assistant`` keep their role; a
    ``tool`` message becomes a ``user`` message holding one :class:`ToolResultBlock`.
    ``content`` may be a string (``string_content`` is set) or a list of parts: ``text``
    and ``image_url`` parts (a base64 ``data:`` URL gives ``media_type`` and ``data``)
    map to blocks, any other part becomes an :class:`OtherBlock`. An assistant's
    ``reasoning_content`` becomes a :class:`ThinkingBlock` first in its content and its
    ``tool_calls`` become :class:`ToolUseBlock` s, in order, after the text; arguments
    that are not a JSON object give ``input={}`` with the text kept in ``raw_input``.
    ``name``, ``refusal`` and unknown keys go to ``extra``. Lossless:
    :func:`messages_to_openai` gives the same JSON values back. The uuids come from
    :func:`~memdir.messages.with_derived_uuids`.

    Raises :class:`~memdir.errors.UsageError`, naming the message index, for malformed
    input and for the deprecated ``function`` role.
    """
    items = require_list(data, "messages")
    return with_derived_uuids([_message(m, f"message {i}") for i, m in enumerate(items)])


# Writing.


def _part_out(block: ContentBlock, native: bool) -> dict[str, Any] | None:
    """A content part for ``block``; None for a block with no OpenAI part."""
    if isinstance(block, TextBlock):
        out: dict[str, Any] = {"type": "text", "text": block.text}
        return merge(out, block.extra) if native else out
    if isinstance(block, ImageBlock):
        if block.data is not None:
            url = f"data:{block.media_type};base64,{block.data}"
        elif block.url is not None:
            url = block.url
        else:
            raise UsageError("an image block has neither data nor url")
        image = merge({"url": url}, block.extra) if native else {"url": url}
        return {"type": "image_url", "image_url": image}
    if isinstance(block, OtherBlock) and native:
        return dict(block.data)
    return None


def _parts(blocks: Sequence[ContentBlock], native: bool) -> list[dict[str, Any]]:
    return [out for b in blocks if (out := _part_out(b, native)) is not None]


def _content_out(message: Message, native: bool) -> str | list[dict[str, Any]]:
    blocks = message.content
    first = blocks[0] if len(blocks) == 1 else None
    if message.string_content and isinstance(first, TextBlock) and not wire_extra(first, native):
        return first.text
    return _parts(blocks, native)


def _arguments(block: ToolUseBlock, native: bool) -> Any:
    if native and block.extra.get(_ARGS_OBJECT):
        return dict(block.input)
    if block.raw_input is not None:
        try:
            decoded = json.loads(block.raw_input)
        except (ValueError, RecursionError):
            decoded = None
        if decoded == block.input or (not isinstance(decoded, dict) and not block.input):
            return block.raw_input
    return json.dumps(block.input, separators=(",", ":"), ensure_ascii=False)


def _tool_call_out(block: ToolUseBlock, native: bool) -> dict[str, Any]:
    function = {"name": block.name, "arguments": _arguments(block, native)}
    out: dict[str, Any] = {"id": block.id, "type": "function", "function": function}
    if not native:
        return out
    if block.extra.get(_NO_TYPE):
        del out["type"]
    more = block.extra.get("function")
    if isinstance(more, Mapping):
        merge(function, more)
    return merge(out, rest(block.extra, {"function"}))


def _assistant_out(message: Message, where: str, native: bool) -> dict[str, Any]:
    thinking: list[str] = []
    calls: list[dict[str, Any]] = []
    parts: list[ContentBlock] = []
    for j, block in enumerate(message.content):
        if isinstance(block, ThinkingBlock):
            thinking.append(block.thinking)
        elif isinstance(block, ToolUseBlock):
            calls.append(_tool_call_out(block, native))
        elif isinstance(block, ToolResultBlock):
            fail(f"{where}, block {j}", "a tool result cannot be in an assistant message")
        else:
            parts.append(block)
    texts = [b.text for b in parts if isinstance(b, TextBlock)]
    from_openai = message.extra.get(FORMAT_KEY) == _OPENAI
    shape = message.extra.get(_CONTENT) if from_openai and not parts else None
    out: dict[str, Any] = {"role": "assistant"}
    if shape == "null":
        out["content"] = None
    elif shape is None and message.string_content:
        out["content"] = "\n".join(texts)
    elif shape is None and from_openai:
        out["content"] = _parts(parts, native)
    elif shape is None:
        out["content"] = "\n".join(texts) if texts else (None if calls else "")
    if thinking:
        out["reasoning_content"] = "\n".join(thinking)
    if calls:
        out["tool_calls"] = calls
    return merge(out, message.extra) if native else out


def _tool_out(block: ToolResultBlock, native: bool) -> dict[str, Any]:
    content: Any
    if native and RAW_CONTENT in block.extra:
        content = block.extra[RAW_CONTENT]
    elif isinstance(block.content, str):
        content = block.content
    elif native or any(isinstance(b, ImageBlock) for b in block.content):
        content = _parts(block.content, native)
    else:
        content = block.text
    return {"role": "tool", "tool_call_id": block.tool_use_id, "content": content}


def _user_out(message: Message, where: str, native: bool) -> list[dict[str, Any]]:
    for j, block in enumerate(message.content):
        if isinstance(block, ToolUseBlock):
            fail(f"{where}, block {j}", "a tool call cannot be in a user message")
    results = message.tool_results
    if not results:
        return [{"role": "user", "content": _content_out(message, native)}]
    wire = [_tool_out(b, native) for b in results]
    others = _parts([b for b in message.content if not isinstance(b, ToolResultBlock)], native)
    if others:
        wire.append({"role": "user", "content": others})
    return wire


def messages_to_openai(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Write ``messages`` as an OpenAI Chat Completions ``messages`` list.

    The exact inverse of :func:`messages_from_openai` for messages read from OpenAI.
    Messages from elsewhere are mapped: a user message's tool results become one
    ``tool`` message each (a block-list result becomes its joined text, or a parts list
    when it holds images), followed by a ``user`` message for its other blocks, in
    order; assistant tool-use blocks become ``tool_calls`` (``arguments`` is the
    original ``raw_input`` while it still decodes to ``input``, else compact JSON), text
    blocks are joined by newlines into a string ``content`` (null when there is none
    and there are tool calls) and thinking becomes ``reasoning_content``.

    Not carried over from other formats: wire fields in ``extra`` (``cache_control``,
    ``citations``, …), thinking signatures, a tool result's ``is_error``, the position of
    text between tool calls, images in assistant messages, and :class:`OtherBlock` s
    (``redacted_thinking``, ``document``, …), which have no OpenAI equivalent.
    ``system`` and ``developer`` messages pass through. Raises
    :class:`~memdir.errors.UsageError` naming the message index for a tool call in a
    user message or a tool result in an assistant one.
    """
    wire: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        where = f"message {i}"
        native = is_native(message, _OPENAI)
        if message.role == "assistant":
            wire.append(_assistant_out(message, where, native))
            continue
        if message.role == "user":
            out = _user_out(message, where, native)
        else:
            out = [{"role": message.role, "content": _content_out(message, native)}]
        if native and len(out) == 1:
            merge(out[0], message.extra)
        wire.extend(out)
    return wire
