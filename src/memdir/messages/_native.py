"""Messages as agent loops hold them, read into :class:`~memdir.messages.Message`.

An agent loop keeps its conversation in its provider's shape: Anthropic message dicts
(``{"role", "content"}`` with a string or a list of blocks), OpenAI Chat Completions dicts
(roles ``system``, ``developer``, ``tool``, an assistant's ``tool_calls``), and the SDKs'
own objects that it appends as they come back (an ``anthropic`` response ``Message``, an
``openai`` ``ChatCompletionMessage``, content blocks inside a dict). This module reads
any of them, message by message, with the converters of
:mod:`memdir.messages._anthropic` and :mod:`memdir.messages._openai`, and refuses what it
cannot read with a :class:`TypeError` that names the converter to use.

Which format a dict is in is told by what only one format has:

- OpenAI: a role ``system``, ``developer``, ``tool`` or ``function``; a key only OpenAI
  messages carry (``tool_calls``, ``tool_call_id``, ``name``, ``refusal``, …); a null
  ``content``; a content part of an OpenAI-only type (``image_url``, ``input_audio``, …);
- Anthropic: a content block of any other type than ``text`` (``tool_use``,
  ``tool_result``, ``thinking``, ``image``, …), a bare string in a content list, or a
  text block with more than ``type`` and ``text`` (``cache_control``, ``citations``).

What neither tells — a user or assistant message whose content is plain text — reads the
same either way but for the format mark that decides where its wire fields are written
back; it is read as the format of the host's model when there is one. Items of OpenAI's
Responses API (``input_text`` parts and the like) are refused: neither converter reads them.

:class:`ConversationReader` reads a growing conversation incrementally: each message is
read once, when it is first seen, and keeps its uuid on every later call.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, TypeAlias

from memdir.errors import UsageError
from memdir.messages import _anthropic, _openai
from memdir.messages._model import Message, derive_uuid

__all__ = [
    "AnyMessage",
    "ConversationReader",
    "MessageTypeError",
    "NativeFormat",
    "SupportsModelDump",
    "messages_from_native",
]

NativeFormat: TypeAlias = Literal["anthropic", "openai"]
"""A provider's wire format for messages."""


class SupportsModelDump(Protocol):
    """An SDK object (a pydantic model, as the ``anthropic`` and ``openai`` SDKs return)."""

    def model_dump(self, *, mode: Literal["json"], exclude_unset: bool, by_alias: bool) -> Any:
        """The object as plain data."""


AnyMessage: TypeAlias = Message | Mapping[str, Any] | SupportsModelDump
"""One message as an agent loop may hold it: a :class:`Message`, an Anthropic or OpenAI
message dict, or an SDK message object."""

_ANTHROPIC_CONVERTER = "memdir.messages.messages_from_anthropic"
_OPENAI_CONVERTER = "memdir.messages.messages_from_openai"
_ACCEPTED = (
    "memdir reads memdir.Message objects, Anthropic or OpenAI message dicts, "
    "or the anthropic/openai SDKs' message objects; convert anything else first with "
    f"{_ANTHROPIC_CONVERTER} or {_OPENAI_CONVERTER}"
)

_OPENAI_ROLES = frozenset({"system", "developer", "tool", "function"})
_OPENAI_KEYS = frozenset(
    {
        "tool_calls",
        "tool_call_id",
        "name",
        "refusal",
        "audio",
        "annotations",
        "function_call",
        "reasoning_content",
    }
)
_OPENAI_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})
# The Responses API's item shapes: neither converter reads them, so they are refused
# rather than kept as opaque blocks the memory agent could not read.
_RESPONSES_PARTS = frozenset({"input_text", "output_text", "input_image", "input_file"})


class MessageTypeError(TypeError):
    """A message that memdir cannot read: the message says which one, and what to do."""


def _is_sdk_object(value: object) -> bool:
    return callable(getattr(value, "model_dump", None)) and not isinstance(value, type)


def _dump(value: Any, where: str) -> object:
    """An SDK object as its SDK sends it in a request: the fields it was given (or that
    the API returned), by their wire names, without those the SDK leaves out."""
    exclude = getattr(value, "__api_exclude__", None)
    try:
        try:
            return value.model_dump(mode="json", exclude_unset=True, by_alias=True, exclude=exclude)
        except TypeError:  # a model_dump of another signature: its plain form will do
            return value.model_dump()
    except Exception as exc:
        raise MessageTypeError(
            f"{where}: {type(value).__name__}.model_dump() failed ({exc}); {_ACCEPTED}"
        ) from exc


# JSON's scalars, by exact type: most of a message, told apart without an isinstance walk.
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain(value: object, where: str) -> object:
    """``value`` with every SDK object inside it dumped; the same object when it holds
    none, so that nothing is copied for dicts that are plain already."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is not dict and kind is not list and _is_sdk_object(value):
        return _dump(value, where)  # plain all the way down: pydantic dumps what it holds
    if kind is dict or isinstance(value, Mapping):
        assert isinstance(value, Mapping)
        changed: dict[Any, Any] | None = None
        for key, item in value.items():
            plain = _plain(item, where)
            if plain is not item:
                if changed is None:
                    changed = dict(value)
                changed[key] = plain
        return value if changed is None else changed
    if kind is list or kind is tuple:
        assert isinstance(value, list | tuple)
        items = [_plain(item, where) for item in value]
        if any(new is not old for new, old in zip(items, value, strict=True)):
            return items
    return value


def _kind(part: object) -> str | None:
    """A content part's ``type``, when it is a string."""
    kind = part.get("type") if isinstance(part, Mapping) else None
    return kind if isinstance(kind, str) else None


def format_of(data: Mapping[str, Any]) -> NativeFormat | None:
    """The format only one of which has what ``data`` holds; None when both read it alike."""
    role = data.get("role")
    if (isinstance(role, str) and role in _OPENAI_ROLES) or not _OPENAI_KEYS.isdisjoint(data):
        return "openai"
    if "content" in data and data["content"] is None:
        return "openai"
    content = data.get("content")
    if not isinstance(content, list | tuple):
        return None
    for part in content:
        if isinstance(part, str):
            return "anthropic"
        kind = _kind(part)
        if kind in _OPENAI_PARTS:
            return "openai"
        if kind != "text" or (isinstance(part, Mapping) and set(part) - {"type", "text"}):
            return "anthropic"
    return None


def _refuse_responses_items(data: Mapping[str, Any], where: str) -> None:
    content = data.get("content")
    parts = content if isinstance(content, list | tuple) else ()
    if any(_kind(part) in _RESPONSES_PARTS for part in parts):
        raise MessageTypeError(
            f"{where}: an OpenAI Responses API item, which memdir does not read; pass "
            f"Chat Completions messages ({_OPENAI_CONVERTER}) or Anthropic ones "
            f"({_ANTHROPIC_CONVERTER})"
        )


def read_message(
    item: object, where: str, previous: str | None, ambiguous_as: NativeFormat
) -> Message:
    """``item`` as a :class:`Message`: a Message as it is (its own uuid), anything else
    read from its format with the uuid :func:`~memdir.messages.derive_uuid` gives after
    ``previous`` (the uuid of the message before it), as the list converters do.

    Raises :class:`MessageTypeError` for what is no message or does not read.
    """
    if isinstance(item, Message):
        return item
    data = _plain(item, where)  # dicts holding SDK blocks too: the loop's usual shape
    if _is_sdk_object(item) and isinstance(data, Mapping) and data.get("type") == "message":
        # A response holds its id, model and usage besides: what a request sends back of
        # it, and what the SDK's MessageParam takes, is its role and content.
        data = {key: data[key] for key in ("role", "content") if key in data}
    if not isinstance(data, Mapping):
        raise MessageTypeError(
            f"{where} is of type {type(item).__name__}, not a message; {_ACCEPTED}"
        )
    if "role" not in data:
        keys = ", ".join(repr(k) for k in list(data)[:4]) or "no keys"
        raise MessageTypeError(f"{where} is a mapping without 'role' ({keys}); {_ACCEPTED}")
    _refuse_responses_items(data, where)
    fmt = format_of(data) or ambiguous_as
    try:
        if fmt == "openai":
            message = _openai._message(data, where)
        else:
            message = _anthropic._message(data, where, None)
    except UsageError as exc:
        name, converter = (
            ("an OpenAI", _OPENAI_CONVERTER)
            if fmt == "openai"
            else ("an Anthropic", _ANTHROPIC_CONVERTER)
        )
        raise MessageTypeError(f"{exc} (read as {name} message; see {converter})") from exc
    return dataclasses.replace(message, uuid=derive_uuid(previous, message))


def messages_from_native(
    items: Sequence[AnyMessage], *, ambiguous_as: NativeFormat = "anthropic"
) -> list[Message]:
    """Read a conversation of any mix of :class:`Message` s, Anthropic and OpenAI message
    dicts and SDK message objects, each message in its own format.

    Messages keep their uuids; every other item gets the uuid the chain of
    :func:`~memdir.messages.derive_uuid` gives it, so a list in one format gets the ids
    :func:`~memdir.messages.messages_from_anthropic` or
    :func:`~memdir.messages.messages_from_openai` would give it. SDK objects are read as
    their SDK sends them (``model_dump(mode="json", exclude_unset=True)``), a response
    object as its role and content. ``ambiguous_as``: the format a message that reads the
    same in both (plain text) is marked with.

    Raises :class:`TypeError`, naming the item and the converter to use, for an item that
    is no message or does not read.
    """
    out: list[Message] = []
    previous: str | None = None
    for index, item in enumerate(items):
        message = read_message(item, f"messages[{index}]", previous, ambiguous_as)
        out.append(message)
        previous = message.uuid
    return out


def _same(new: object, old: object) -> bool:
    """Whether ``new`` stands for the message ``old`` was read from: the same object, or,
    for a loop that rebuilds its dicts every turn, an equal one (never for a Message,
    whose identity is its uuid)."""
    if new is old:
        return True
    if isinstance(new, Message) or type(new) is not type(old):
        return False
    try:
        return bool(new == old)
    except Exception:  # an __eq__ that fails tells nothing: read the message again
        return False


class ConversationReader:
    """A host's conversation read turn by turn, each message once.

    :meth:`read` keeps the messages already read while the conversation only grows (the
    items it was given are the same objects, or equal ones) and reads only the rest, so a
    turn costs what it adds. A host that keeps a window of the conversation, dropping
    messages from its front, costs what it adds and drops. When something before the end
    changed (a compaction, a rewind) it keeps the longest unchanged prefix. The lists it
    returns are never changed below the length they were returned with: a run may read
    them later, from any thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[object] = []
        """The host's items, as last seen, to tell what is new."""
        self._messages: list[Message] = []
        """``_items`` read, one for one."""

    def read(
        self, items: Sequence[object], ambiguous_as: NativeFormat = "anthropic"
    ) -> tuple[Sequence[Message], int]:
        """The messages of ``items`` and how many they are: a list whose first that many
        entries are ``items`` read. Raises :class:`MessageTypeError` for an item that is
        no message, and then nothing is kept of this call."""
        try:
            length = len(items)
        except TypeError:
            length = -1  # no length at all: an iterator, a generator
        if length < 0 or isinstance(items, Mapping) or not hasattr(items, "__getitem__"):
            raise MessageTypeError(
                f"TurnContext.messages must be the conversation as a list or a tuple of "
                f"messages, not {type(items).__name__}"
            )
        with self._lock:
            shift = self._dropped_from_front(items, length)
            if shift:
                # New lists, as below; the messages kept keep their uuids, so a cursor
                # on one of them still finds it.
                self._items = self._items[shift:]
                self._messages = self._messages[shift:]
            kept = self._kept(items, length)
            if kept == length:
                return self._messages, length
            previous = self._messages[kept - 1].uuid if kept else None
            fresh: list[Message] = []
            added: list[object] = []
            for index in range(kept, length):
                item = items[index]
                message = read_message(item, f"messages[{index}]", previous, ambiguous_as)
                fresh.append(message)
                added.append(item)
                previous = message.uuid
            if kept < len(self._messages):
                # New lists: an earlier turn's run may still read the old ones.
                self._items = self._items[:kept]
                self._messages = self._messages[:kept]
            self._items.extend(added)
            self._messages.extend(fresh)
            return self._messages, length

    def _dropped_from_front(self, items: Sequence[object], length: int) -> int:
        """How many messages a host that keeps a window dropped from its front: the place
        of ``items[0]`` among those already read, or 0 when it is the first of them or
        none of them (a compaction's summary). Costs what was dropped: the search starts
        at the front."""
        if not length or not self._items or _same(items[0], self._items[0]):
            return 0
        first = items[0]
        for index in range(1, len(self._items)):
            if _same(first, self._items[index]):
                return index
        return 0

    def _kept(self, items: Sequence[object], length: int) -> int:
        """How many leading ``items`` are the ones already read."""
        have = min(len(self._items), length)
        if have == 0 or _same(items[have - 1], self._items[have - 1]):
            return have
        # Assuming, as between turns, that what still matches is a prefix.
        low, high = 0, have - 1  # items[:low] match; items[high] does not
        while low < high:
            middle = (low + high + 1) // 2
            if _same(items[middle - 1], self._items[middle - 1]):
                low = middle
            else:
                high = middle - 1
        return low
