"""The Anthropic Messages wire format, to and from :class:`~memdir.messages.Message`.

Reading then writing an Anthropic message gives back the same JSON value: fields memdir
does not model (``cache_control``, ``citations``, a response's ``id``/``model``/``usage``)
ride along in ``extra``, and block types it does not model become :class:`OtherBlock`.

Bookkeeping that the wire shape needs but the model has no field for lives in ``extra``
under keys starting with ``memdir:`` (:data:`MARK`); they are never written to the wire.
Every message read here carries ``extra["memdir:format"] == "anthropic"``: wire fields
in ``extra`` (and :class:`OtherBlock` data) are written back only to the format they came
from, so an OpenAI ``refusal`` never leaks into an Anthropic request, nor
``cache_control`` into an OpenAI one. Messages built by hand (no format mark) have their
``extra`` written to either format.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from memdir.errors import UsageError
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

__all__ = [
    "message_from_anthropic",
    "message_to_anthropic",
    "messages_from_anthropic",
    "messages_to_anthropic",
]

MARK = "memdir:"
"""Prefix of the ``extra`` keys memdir keeps for itself; never written to the wire."""
FORMAT_KEY = "memdir:format"
"""``extra`` key naming the wire format a message was read from."""
RAW_CONTENT = "memdir:raw_content"
"""A tool result's content list, kept whole when it holds items other than text/image."""
_BARE = "memdir:bare_string"
_NO_CONTENT = "memdir:no_content"
_ANTHROPIC = "anthropic"


# Helpers shared with the OpenAI module.


def fail(where: str, what: str) -> NoReturn:
    """Raise the one-line :class:`UsageError` for malformed input at ``where``."""
    raise UsageError(f"{where}: {what}")


def short(value: object) -> str:
    """A short, one-line description of a bad value for an error message."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def rest(data: Mapping[str, Any], known: set[str]) -> dict[str, Any]:
    """The keys of ``data`` that memdir does not model, to keep in ``extra``."""
    return {k: v for k, v in data.items() if k not in known}


def merge(out: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Add the wire fields of ``extra`` to ``out`` (fields already set in ``out`` win)."""
    for key, value in extra.items():
        if not key.startswith(MARK) and key not in out:
            out[key] = value
    return out


def wire_extra(block: TextBlock, native: bool) -> bool:
    """Whether ``block`` has wire fields to write, so cannot be sent as a bare string."""
    return native and any(not k.startswith(MARK) for k in block.extra)


def is_native(message: Message, fmt: str) -> bool:
    """Whether ``message`` came from ``fmt`` (or from no format at all, i.e. by hand)."""
    return bool(message.extra.get(FORMAT_KEY, fmt) == fmt)


def require_str(data: Mapping[str, Any], key: str, where: str) -> str:
    """``data[key]``, which must be a string."""
    if key not in data:
        fail(where, f"has no {key!r}")
    value = data[key]
    if not isinstance(value, str):
        fail(where, f"{key!r} must be a string, got {type(value).__name__}")
    return value


def require_list(data: object, what: str) -> Sequence[Any]:
    """``data`` as a list of messages, or a UsageError."""
    if not isinstance(data, list | tuple):
        fail(what, f"expected a list of messages, got {type(data).__name__}")
    return data


# Reading.


def _text(item: Mapping[str, Any], where: str) -> TextBlock:
    return TextBlock(text=require_str(item, "text", where), extra=rest(item, {"type", "text"}))


def _thinking(item: Mapping[str, Any], where: str) -> ThinkingBlock:
    signature = item.get("signature")
    if signature is not None and not isinstance(signature, str):
        fail(where, f"'signature' must be a string, got {type(signature).__name__}")
    known = {"type", "thinking", "signature"} if signature is not None else {"type", "thinking"}
    return ThinkingBlock(
        thinking=require_str(item, "thinking", where), signature=signature, extra=rest(item, known)
    )


def _image(item: Mapping[str, Any]) -> ImageBlock | OtherBlock:
    """An image with a base64 or url source; any other source is kept as an OtherBlock."""
    source = item.get("source")
    extra = rest(item, {"type", "source"})
    if isinstance(source, Mapping):
        kind, keys = source.get("type"), set(source)
        media_type, data, url = source.get("media_type"), source.get("data"), source.get("url")
        base64 = kind == "base64" and keys == {"type", "media_type", "data"}
        if base64 and isinstance(media_type, str) and isinstance(data, str):
            return ImageBlock(media_type=media_type, data=data, extra=extra)
        if kind == "url" and keys == {"type", "url"} and isinstance(url, str):
            return ImageBlock(url=url, extra=extra)
    return OtherBlock(type="image", data=dict(item))


def _tool_use(item: Mapping[str, Any], where: str) -> ToolUseBlock:
    value = item.get("input")
    if not isinstance(value, Mapping):
        fail(where, f"'input' must be an object, got {type(value).__name__}")
    return ToolUseBlock(
        id=require_str(item, "id", where),
        name=require_str(item, "name", where),
        input=dict(value),
        extra=rest(item, {"type", "id", "name", "input"}),
    )


def _tool_result(item: Mapping[str, Any], where: str) -> ToolResultBlock:
    tool_use_id = require_str(item, "tool_use_id", where)
    extra = rest(item, {"type", "tool_use_id", "content", "is_error"})
    is_error = item.get("is_error")
    if is_error is not None and not isinstance(is_error, bool):
        fail(where, f"'is_error' must be true, false or null, got {short(is_error)}")
    if "is_error" in item and not is_error:
        extra["is_error"] = is_error  # an explicit false or null, written back as it came
    content: str | tuple[TextBlock | ImageBlock, ...] = ""
    raw = item.get("content")
    if "content" not in item:
        extra[_NO_CONTENT] = True
    elif isinstance(raw, str):
        content = raw
    elif isinstance(raw, list | tuple):
        parsed = [_block(part, f"{where}, content item {k}") for k, part in enumerate(raw)]
        content = tuple(b for b in parsed if isinstance(b, TextBlock | ImageBlock))
        if len(content) != len(parsed):
            extra[RAW_CONTENT] = list(raw)
    else:
        fail(where, f"'content' must be a string or a list, got {type(raw).__name__}")
    return ToolResultBlock(
        tool_use_id=tool_use_id, content=content, is_error=bool(is_error), extra=extra
    )


def _block(item: object, where: str) -> ContentBlock:
    if isinstance(item, str):
        return TextBlock(text=item, extra={_BARE: True})
    if not isinstance(item, Mapping):
        fail(where, f"a block must be an object or a string, got {type(item).__name__}")
    kind = item.get("type")
    if not isinstance(kind, str):
        fail(where, "block has no string 'type'")
    where = f"{where} ({kind})"
    if kind == "text":
        return _text(item, where)
    if kind == "thinking":
        return _thinking(item, where)
    if kind == "image":
        return _image(item)
    if kind == "tool_use":
        return _tool_use(item, where)
    if kind == "tool_result":
        return _tool_result(item, where)
    return OtherBlock(type=kind, data=dict(item))


def _message(data: object, where: str, uuid: str | None) -> Message:
    if not isinstance(data, Mapping):
        fail(where, f"expected an object, got {type(data).__name__}")
    if "role" not in data:
        fail(where, "has no 'role'")
    role = data["role"]
    if role not in ("user", "assistant"):
        fail(where, f"role must be 'user' or 'assistant', got {short(role)}")
    if "content" not in data:
        fail(where, "has no 'content'")
    content = data["content"]
    if isinstance(content, str):
        blocks: tuple[ContentBlock, ...] = (TextBlock(text=content),)
    elif isinstance(content, list | tuple):
        blocks = tuple(_block(b, f"{where}, block {j}") for j, b in enumerate(content))
    else:
        fail(where, f"'content' must be a string or a list, got {type(content).__name__}")
    extra = rest(data, {"role", "content"})
    extra[FORMAT_KEY] = _ANTHROPIC
    message = Message(
        role=role, content=blocks, string_content=isinstance(content, str), extra=extra
    )
    return message if uuid is None else dataclasses.replace(message, uuid=uuid)


def message_from_anthropic(data: Mapping[str, Any], *, uuid: str | None = None) -> Message:
    """Read one Anthropic message param (or response object) into a :class:`Message`.

    ``content`` may be a string (``string_content`` is then set) or a list of blocks:
    ``text``, ``thinking``, ``image`` (base64 or url source), ``tool_use`` and
    ``tool_result`` map to their blocks; ``redacted_thinking``, ``document``, images with
    another source and any unknown type become :class:`OtherBlock` kept whole. A bare
    string inside the list becomes a :class:`TextBlock`. Unknown keys on blocks and on
    the message go to ``extra``. Lossless: :func:`message_to_anthropic` gives the same
    JSON value back. ``uuid`` defaults to a random one.

    Raises :class:`~memdir.errors.UsageError` when ``data`` is malformed.
    """
    return _message(data, "message", uuid)


def messages_from_anthropic(data: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Read an Anthropic ``messages`` list, with ids derived from the conversation.

    Each item is read as :func:`message_from_anthropic` does; the uuids come from
    :func:`~memdir.messages.with_derived_uuids`, so the same conversation (or a longer
    one) always gets the same ids. Malformed input raises
    :class:`~memdir.errors.UsageError` naming the message (and block) index.
    """
    items = require_list(data, "messages")
    return with_derived_uuids([_message(m, f"message {i}", None) for i, m in enumerate(items)])


# Writing.


def _text_out(block: TextBlock, native: bool) -> str | dict[str, Any]:
    if native and block.extra.get(_BARE):
        return block.text
    out: dict[str, Any] = {"type": "text", "text": block.text}
    return merge(out, block.extra) if native else out


def _image_out(block: ImageBlock, native: bool) -> dict[str, Any]:
    if block.data is not None:
        source = {"type": "base64", "media_type": block.media_type, "data": block.data}
    elif block.url is not None:
        source = {"type": "url", "url": block.url}
    else:
        raise UsageError("an image block has neither data nor url")
    out: dict[str, Any] = {"type": "image", "source": source}
    return merge(out, block.extra) if native else out


def _tool_result_out(block: ToolResultBlock, native: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_use_id}
    if native and RAW_CONTENT in block.extra:
        out["content"] = block.extra[RAW_CONTENT]
    elif isinstance(block.content, str):
        if block.content or not (native and block.extra.get(_NO_CONTENT)):
            out["content"] = block.content
    else:
        out["content"] = [
            _text_out(b, native) if isinstance(b, TextBlock) else _image_out(b, native)
            for b in block.content
        ]
    if block.is_error:
        out["is_error"] = True
    return merge(out, block.extra) if native else out


def _block_out(block: ContentBlock, native: bool) -> str | dict[str, Any] | None:
    """The wire form of ``block``; None for a block that is not written."""
    out: dict[str, Any]
    if isinstance(block, TextBlock):
        if not native and not block.text:
            return None  # the API refuses empty text blocks; OpenAI sends content "" often
        return _text_out(block, native)
    if isinstance(block, ImageBlock):
        return _image_out(block, native)
    if isinstance(block, ThinkingBlock):
        out = {"type": "thinking", "thinking": block.thinking}
        if block.signature is not None:
            out["signature"] = block.signature
    elif isinstance(block, ToolUseBlock):
        out = {"type": "tool_use", "id": block.id, "name": block.name, "input": dict(block.input)}
    elif isinstance(block, ToolResultBlock):
        return _tool_result_out(block, native)
    else:
        return dict(block.data) if native else None
    return merge(out, block.extra) if native else out


def _message_out(message: Message, where: str) -> dict[str, Any]:
    if message.role not in ("user", "assistant"):
        fail(
            where,
            f"role {message.role!r} has no Anthropic equivalent; "
            "pass its text as the top-level 'system' parameter",
        )
    native = is_native(message, _ANTHROPIC)
    blocks = message.content
    content: str | list[Any]
    first = blocks[0] if len(blocks) == 1 else None
    if message.string_content and isinstance(first, TextBlock) and not wire_extra(first, native):
        content = first.text
    else:
        content = [x for b in blocks if (x := _block_out(b, native)) is not None]
    out: dict[str, Any] = {"role": message.role, "content": content}
    return merge(out, message.extra) if native else out


def message_to_anthropic(message: Message) -> dict[str, Any]:
    """Write ``message`` as an Anthropic message param: the inverse of
    :func:`message_from_anthropic`.

    Lossless for messages read from Anthropic. For messages from another format, its
    wire fields (``extra``) and :class:`OtherBlock` data are left out, as are empty text
    blocks; a :class:`ThinkingBlock` without a signature is written without one, and a
    tool-use block's ``raw_input`` is not used. A ``system`` or ``developer`` message
    raises :class:`~memdir.errors.UsageError`: Anthropic takes system text as a separate
    top-level parameter.
    """
    return _message_out(message, "message")


def messages_to_anthropic(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Write each message as :func:`message_to_anthropic` does, one dict per message.

    Consecutive messages of the same role are not merged (Anthropic's API merges them).
    """
    return [_message_out(m, f"message {i}") for i, m in enumerate(messages)]
