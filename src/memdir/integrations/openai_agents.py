"""memdir as run hooks of the OpenAI Agents SDK (``openai-agents``), in the host's process.

:class:`MemdirRunHooks` watches a run: it keeps the exact input of each model call
(``on_llm_start``'s system prompt and input items, after any ``call_model_input_filter``)
and the answer (``on_llm_end``), and when the agent produces its final output
(``on_agent_end``) it hands the turn to a :class:`~memdir.extract.MemoryExtractor`,
which saves memories in the background while the host carries on::

    from agents import Runner
    from memdir.integrations.openai_agents import MemdirRunHooks

    memory = MemdirRunHooks("./memory")
    result = await Runner.run(agent, "I'm Ana; always use polars.", hooks=memory)
    await memory.drain()  # before the process exits: let the last run finish

:class:`MemdirAgentHooks` does the same from ``Agent(hooks=...)``, for that agent's own
turns only. ``memory.tools()`` gives the agent memdir's ``Read``, ``Write`` and ``Edit``
(limited to the memory directory): with them the agent can save a memory when asked to,
and the memory agent, which is shown the host's tools and no others, can save too.

**Sharing the host's prompt cache.** With a Chat Completions model
(``OpenAIChatCompletionsModel``, or a model name with ``set_default_openai_api(
"chat_completions")``) the memory agent is a fork of the last request as it was sent.
The hooks add a response hook to the HTTP pool of the agent's ``AsyncOpenAI`` client,
which keeps each request's body as bytes, and take the body of the call that gave the
final answer (by the ``x-request-id`` the server answered with, which the SDK puts on
its ``ModelResponse``). The fork sends those messages, tools and parameters unchanged —
the ``prompt_cache_key`` the runner chose included, so it lands on the host's cache
machine — then the answer as the SDK writes it into the next request, then memdir's
prompt. Nothing of the agent is changed. At a turn's end the host's loop parses that one
body (a C-speed JSON parse: a few milliseconds for thousands of items), converts the
final answer and reads only the messages new since the last turn; nothing is rebuilt.

What stays standalone, and why (:attr:`MemdirRunHooks.fallback_reason` says which):

- The Responses API (``OpenAIResponsesModel``, the SDK's default) and other model
  classes: memdir's OpenAI adapter speaks Chat Completions, so it cannot send a
  ``/v1/responses`` request's prefix. The conversation is then read from the input
  items (:func:`messages_from_items`), each item once.
- A last request the pool did not show: a client without an HTTP pool memdir can hook,
  a ``RunConfig`` that picks another client than the one given here, a server that
  names no ``x-request-id`` while other requests are in flight, or a body let go
  before its call ended (a pool keeps at most 64 unclaimed bodies, 64 MiB, 15 minutes).
- A last request that forces ``tool_choice``: the memory agent must choose its own tools.

One hooks object follows one conversation: give each session its own, and name it
(``session=`` a ``SQLiteSession``, or ``session_id=``): its cursor is kept beside the
memory under that name, so a later process over the same session reads only the turns
that are new. The conversation is what the last model call was sent, so with
server-managed state (``previous_response_id``, ``conversation_id``) each turn holds only
the items sent in it (and memory is best not shown: ``load_memory=False``).

**Memory shown.** Each model call of a conversation starts with memdir's memory
instructions (a system message after the agent's own, the same text every time) and the
saved ``MEMORY.md`` index (a user message), as they were when the conversation began, so
that its requests share one cached prefix; they are sent, never part of what is
remembered. Before each later call the hooks look at the memory folder again (a stat of
its files): when it changed — a memory run saved, another process wrote — the call gets
memdir's notice (a ``<system-reminder>`` user message naming what changed and saying that
the loaded index is stale), once, before the user's new words (or after a tool's result,
when it changed during a run), and every later call of the conversation gets it again at
that place, so each request still starts with the one before. The SDK's history never
holds it (the hooks put it back), and neither does what is remembered.
``load_memory=False`` turns that off.

**The host's client.** Memory requests, fork and standalone, go through a client of
memdir's own made in a worker thread with the agent's client settings (base URL, key,
organization, project, default headers, a custom ``http_client``'s transport), so they
reach the same gateway and organization, and the host may close its client before
:meth:`MemdirRunHooks.drain`.
"""

from __future__ import annotations

import bisect
import contextvars
import dataclasses
import functools
import json
import logging
import os
import re
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from memdir.errors import MissingExtraError, one_line

# The SDK is this module's whole point, and only this module's: memdir itself never needs it.
try:
    from agents import (
        Agent,
        AgentHooks,
        FunctionTool,
        ModelResponse,
        OpenAIChatCompletionsModel,
        RunConfig,
        RunContextWrapper,
        RunHooks,
        Session,
        Tool,
    )
    from agents.items import TResponseInputItem
    from agents.run_context import AgentHookContext
except ImportError as exc:
    raise MissingExtraError(
        "memdir.integrations.openai_agents", "openai-agents", one_line(exc)
    ) from exc

from memdir.errors import UsageError
from memdir.extract import ExtractConfig, MemoryExtractor, MemorySaved, Notify
from memdir.integrations._host import (
    Backend,
    ClientSettings,
    Endpoint,
    HostCore,
    HostTurn,
    LoadedMemory,
    SentRequest,
    Sessions,
)
from memdir.integrations._wire import add_pool_hook
from memdir.messages import (
    ContentBlock,
    ImageBlock,
    Message,
    OtherBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    derive_uuid,
    with_derived_uuids,
)
from memdir.models import Model
from memdir.store import MemoryDir
from memdir.telemetry import Sink
from memdir.tools import Tool as MemdirTool
from memdir.tools import builtin_tools

__all__ = ["MemdirAgentHooks", "MemdirRunHooks", "messages_from_items", "messages_to_items"]

_log = logging.getLogger(__name__)

_FORMAT = "openai-agents"
# ``extra`` keys under memdir's prefix are never written to a wire (see memdir.messages).
_FORMAT_KEY = "memdir:format"
_ITEM = "memdir:item"  # the input item (or content part) a block was read from
_MESSAGE = "memdir:message"  # an assistant text's message item, without its content
_STRING = "memdir:string"  # the text was the whole content, as a bare string
_HOST_TOOLS = ("Read", "Write", "Edit")
_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)
# Item types that the model produces (its side of a turn) besides messages and calls.
_MODEL_SIDE = frozenset({"reasoning", "compaction", "mcp_list_tools", "mcp_approval_request"})


# --- Responses-API items <-> Message -----------------------------------------------------


def _plain(item: object, where: str) -> dict[str, Any]:
    """An input item as a plain dict: SDK items are dicts already, output items models."""
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        data = dump(exclude_unset=True)
        if isinstance(data, dict):
            return data
    raise UsageError(f"{where}: an input item must be a dict, got {type(item).__name__}")


def _is_model_side(kind: str) -> bool:
    return kind.endswith("_call") or kind in _MODEL_SIDE


def _part_block(part: object, where: str) -> ContentBlock:
    """One content part of a message (``input_text``, ``output_text``, ``input_image``…)."""
    if not isinstance(part, Mapping):
        raise UsageError(f"{where}: a content part must be an object")
    data = dict(part)
    kind = data.get("type")
    text = data.get("text")
    if kind in ("input_text", "output_text", "text") and isinstance(text, str):
        return TextBlock(text=text, extra={_ITEM: data})
    url = data.get("image_url")
    if kind == "input_image" and isinstance(url, str):
        if match := _DATA_URL.fullmatch(url):
            return ImageBlock(media_type=match[1], data=match[2], extra={_ITEM: data})
        return ImageBlock(url=url, extra={_ITEM: data})
    return OtherBlock(type=str(kind), data=data)


def _content_blocks(content: object, where: str) -> tuple[ContentBlock, ...]:
    if isinstance(content, str):
        return (TextBlock(text=content, extra={_STRING: True}),)
    if not isinstance(content, list | tuple):
        raise UsageError(f"{where}: 'content' must be a string or a list of parts")
    return tuple(_part_block(p, f"{where}, part {k}") for k, p in enumerate(content))


def _thinking(item: Mapping[str, Any]) -> ThinkingBlock:
    """A reasoning item: its reasoning text where it has one, else its summary."""

    def texts(key: str) -> list[str]:
        parts = item.get(key)
        if not isinstance(parts, list):
            return []
        return [str(p["text"]) for p in parts if isinstance(p, Mapping) and "text" in p]

    shown = texts("content") or texts("summary")
    signature = item.get("encrypted_content")
    return ThinkingBlock(
        thinking="\n".join(shown),
        signature=signature if isinstance(signature, str) else None,
        extra={_ITEM: dict(item)},
    )


def _tool_use(item: Mapping[str, Any], where: str) -> ToolUseBlock:
    call_id, name = item.get("call_id"), item.get("name")
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise UsageError(f"{where}: a function_call needs a string call_id and name")
    arguments = item.get("arguments")
    raw = arguments if isinstance(arguments, str) else None
    try:
        decoded = json.loads(raw) if raw else {}
    except ValueError:
        decoded = None
    value = decoded if isinstance(decoded, dict) else {}
    return ToolUseBlock(
        id=call_id, name=name, input=value, raw_input=raw, extra={_ITEM: dict(item)}
    )


def _tool_result(item: Mapping[str, Any], where: str) -> ToolResultBlock:
    call_id = item.get("call_id")
    if not isinstance(call_id, str):
        raise UsageError(f"{where}: a function_call_output needs a string call_id")
    output = item.get("output")
    content: str | tuple[TextBlock | ImageBlock, ...]
    if isinstance(output, str):
        content = output
    elif isinstance(output, list):
        parts = _content_blocks(output, where)
        content = tuple(b for b in parts if isinstance(b, TextBlock | ImageBlock))
    else:
        content = json.dumps(output, ensure_ascii=False, default=str)
    return ToolResultBlock(tool_use_id=call_id, content=content, extra={_ITEM: dict(item)})


def messages_from_items(items: Iterable[object]) -> list[Message]:
    """Read Responses-API input items (``result.to_input_list()``, ``on_llm_start``'s
    ``input_items``, a session's items) into :class:`~memdir.messages.Message` s.

    - ``user``, ``system`` and ``developer`` messages keep their role; text and image
      parts become blocks, other parts (files, audio) :class:`~memdir.messages.OtherBlock`.
    - The model's side of a turn — its reasoning, text, ``function_call`` s and other
      calls, up to the next item from the other side — is one assistant message:
      reasoning as :class:`~memdir.messages.ThinkingBlock` (its text, else its summary;
      ``encrypted_content`` as the signature), calls as tool-use blocks, hosted calls
      (web search, computer…) as other blocks.
    - ``function_call_output`` s in a row are one user message of tool results; other
      outputs ride there as other blocks.

    Every block keeps the item it came from, so :func:`messages_to_items` gives the same
    items back. Ids are derived from the conversation (the same items give the same ids).
    Raises :class:`~memdir.errors.UsageError` for an item it cannot read.
    """
    return with_derived_uuids([message for message, _ in _grouped(list(items))])


def _grouped(items: Sequence[object], start: int = 0) -> list[tuple[Message, int]]:
    """``items[start:]`` read into messages (their uuids not derived yet), each with the
    index of its first item: a message ends where the other side's items begin."""
    out: list[tuple[Message, int]] = []
    model_side: list[ContentBlock] = []
    results: list[ContentBlock] = []
    opened = start  # the first item of the message being gathered

    def close(at: int) -> None:
        nonlocal opened
        if model_side:
            out.append((_own(Message(role="assistant", content=tuple(model_side))), opened))
            model_side.clear()
        if results:
            out.append((_own(Message(role="user", content=tuple(results))), opened))
            results.clear()
        opened = at

    for index in range(start, len(items)):
        where = f"item {index}"
        item = _plain(items[index], where)
        kind = item.get("type")
        role = item.get("role")
        if kind in (None, "message") and role in ("user", "system", "developer"):
            close(index)
            content = item.get("content")
            meta = {k: v for k, v in item.items() if k != "content"}
            message = Message(
                role=role,
                content=_content_blocks(content, where),
                string_content=isinstance(content, str),
                extra={_FORMAT_KEY: _FORMAT, _ITEM: meta},
            )
            out.append((message, index))
            opened = index + 1
        elif kind in (None, "message") and role == "assistant":
            if results:
                close(index)
            meta = {k: v for k, v in item.items() if k != "content"}
            for block in _content_blocks(item.get("content"), where):
                model_side.append(_with_meta(block, meta))
        elif kind == "function_call":
            if results:
                close(index)
            model_side.append(_tool_use(item, where))
        elif kind == "reasoning":
            if results:
                close(index)
            model_side.append(_thinking(item))
        elif kind == "function_call_output":
            if model_side:
                close(index)
            results.append(_tool_result(item, where))
        elif isinstance(kind, str) and _is_model_side(kind):
            if results:
                close(index)
            model_side.append(OtherBlock(type=kind, data=item))
        elif isinstance(kind, str):
            if model_side:
                close(index)
            results.append(OtherBlock(type=kind, data=item))
        else:
            raise UsageError(f"{where}: neither a message nor a typed item")
    close(len(items))
    return out


class _ItemsReader:
    """One conversation's input items read into messages as it grows, each item once.

    Between turns the items only grow (``result.to_input_list()`` plus the next input):
    the messages of the unchanged prefix are kept, and only the last of them, which the
    new items may continue, is read again with what follows. Something changed before
    the end (a trimmed history) keeps the longest unchanged prefix.
    """

    def __init__(self) -> None:
        self._items: list[object] = []
        self._messages: list[Message] = []
        self._starts: list[int] = []
        """``_starts[i]``: the index of message ``i``'s first item."""

    def read(self, items: Sequence[object]) -> list[Message]:
        kept = _unchanged(items, self._items)
        # The last message kept whole is the one before the message holding item ``kept``.
        at = max(bisect.bisect_right(self._starts, kept) - 1, 0)
        messages, starts = self._messages[:at], self._starts[:at]
        previous = messages[-1].uuid if messages else None
        for message, first in _grouped(items, self._starts[at] if self._starts else 0):
            previous = derive_uuid(previous, message)
            messages.append(dataclasses.replace(message, uuid=previous))
            starts.append(first)
        self._items, self._messages, self._starts = list(items), messages, starts
        return list(messages)


def _unchanged(items: Sequence[object], seen: Sequence[object]) -> int:
    """How many leading ``items`` are those ``seen``, assuming (as between turns) that what
    still matches is a prefix: one comparison when nothing changed, a bisection else."""
    have = min(len(items), len(seen))
    if have == 0 or _same(items[have - 1], seen[have - 1]):
        return have
    low, high = 0, have - 1  # items[:low] match; items[high] does not
    while low < high:
        middle = (low + high) // 2
        if _same(items[middle], seen[middle]):
            low = middle + 1
        else:
            high = middle
    return low


def _same(a: object, b: object) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # an item type whose comparison fails: not the same
        return False


def _own(message: Message) -> Message:
    """Mark ``message`` as read from items: its ``extra`` then goes to no other wire."""
    return dataclasses.replace(message, extra={**message.extra, _FORMAT_KEY: _FORMAT})


def _with_meta(block: ContentBlock, meta: Mapping[str, Any]) -> ContentBlock:
    if isinstance(block, TextBlock):
        return dataclasses.replace(block, extra={**block.extra, _MESSAGE: dict(meta)})
    if isinstance(block, OtherBlock):  # a refusal, or a part memdir does not model
        return OtherBlock(type=block.type, data={**block.data, _MESSAGE: dict(meta)})
    return block


def _stored(block: ContentBlock) -> dict[str, Any] | None:
    """The item or part ``block`` was read from, if the block still says what it said."""
    if isinstance(block, OtherBlock):
        return None
    stored = block.extra.get(_ITEM)
    if not isinstance(stored, Mapping):
        return None
    again: ContentBlock
    try:
        if isinstance(block, ToolUseBlock):
            again = _tool_use(stored, "")
        elif isinstance(block, ToolResultBlock):
            again = _tool_result(stored, "")
        elif isinstance(block, ThinkingBlock):
            again = _thinking(stored)
        else:
            again = _part_block(stored, "")
    except UsageError:
        return None
    return dict(stored) if again == block else None


def _part_out(block: ContentBlock, assistant: bool) -> dict[str, Any] | None:
    stored = _stored(block)
    if stored is not None:
        return stored
    if isinstance(block, TextBlock):
        if assistant:
            return {"type": "output_text", "text": block.text, "annotations": []}
        return {"type": "input_text", "text": block.text}
    if isinstance(block, ImageBlock) and not assistant:
        url = block.url if block.data is None else f"data:{block.media_type};base64,{block.data}"
        return {"type": "input_image", "image_url": url, "detail": "auto"}
    if isinstance(block, OtherBlock):
        return {k: v for k, v in block.data.items() if k != _MESSAGE}
    return None  # an image in an assistant message: the Responses API has no such part


def _tool_use_out(block: ToolUseBlock) -> dict[str, Any]:
    stored = _stored(block)
    if stored is not None:
        return stored
    arguments = block.raw_input
    if arguments is None or _decoded(arguments) != dict(block.input):
        arguments = json.dumps(dict(block.input), ensure_ascii=False, separators=(",", ":"))
    return {
        "type": "function_call",
        "call_id": block.id,
        "name": block.name,
        "arguments": arguments,
    }


def _decoded(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _tool_result_out(block: ToolResultBlock) -> dict[str, Any]:
    stored = _stored(block)
    if stored is not None:
        return stored
    output: Any = block.content
    if not isinstance(block.content, str):
        output = [p for b in block.content if (p := _part_out(b, False)) is not None]
    return {"type": "function_call_output", "call_id": block.tool_use_id, "output": output}


def _assistant_items(message: Message) -> list[dict[str, Any]]:
    """The model's side of a turn as items, texts regrouped into their message items."""
    out: list[dict[str, Any]] = []
    text_run: list[ContentBlock] = []

    def flush() -> None:
        if not text_run:
            return
        first = text_run[0]
        meta = first.extra.get(_MESSAGE) if isinstance(first, TextBlock) else None
        if isinstance(first, OtherBlock):
            meta = first.data.get(_MESSAGE)
        parts = [p for b in text_run if (p := _part_out(b, True)) is not None]
        if isinstance(meta, Mapping):
            bare = len(text_run) == 1 and isinstance(first, TextBlock) and _STRING in first.extra
            content: object = first.text if bare and isinstance(first, TextBlock) else parts
            out.append({**meta, "content": content})
        else:
            text = "\n".join(b.text for b in text_run if isinstance(b, TextBlock))
            out.append({"role": "assistant", "content": text})
        text_run.clear()

    for block in message.content:
        if isinstance(block, TextBlock | ImageBlock) or (
            isinstance(block, OtherBlock) and _MESSAGE in block.data
        ):
            if text_run and _meta_of(text_run[-1]) != _meta_of(block):
                flush()
            text_run.append(block)
            continue
        flush()
        if isinstance(block, ToolUseBlock):
            out.append(_tool_use_out(block))
        elif isinstance(block, ThinkingBlock):
            # A reasoning item is valid only with the id the Responses API gave it:
            # thinking from elsewhere (or changed since) has no item to go back as.
            stored = _stored(block)
            if stored is not None:
                out.append(stored)
        elif isinstance(block, OtherBlock):
            out.append(dict(block.data))
        elif isinstance(block, ToolResultBlock):
            raise UsageError("a tool result cannot be in an assistant message")
    flush()
    return out


def _meta_of(block: ContentBlock) -> object:
    if isinstance(block, TextBlock | ImageBlock):
        return block.extra.get(_MESSAGE)
    if isinstance(block, OtherBlock):
        return block.data.get(_MESSAGE)
    return None


def _user_items(message: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    others: list[ContentBlock] = []
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            out.append(_tool_result_out(block))
        elif isinstance(block, ToolUseBlock):
            raise UsageError("a tool call cannot be in a user message")
        elif isinstance(block, OtherBlock) and not block.type.startswith("input_"):
            out.append(dict(block.data))  # an output item of another kind
        else:
            others.append(block)
    if others:
        out.append(_message_item(message, others))
    return out


def _message_item(message: Message, blocks: Sequence[ContentBlock]) -> dict[str, Any]:
    meta = message.extra.get(_ITEM)
    item: dict[str, Any] = dict(meta) if isinstance(meta, Mapping) else {"role": message.role}
    item["role"] = message.role
    first = blocks[0] if len(blocks) == 1 else None
    if message.string_content and isinstance(first, TextBlock):
        item["content"] = first.text
    else:
        item["content"] = [p for b in blocks if (p := _part_out(b, False)) is not None]
    return item


def messages_to_items(messages: Sequence[Message]) -> list[TResponseInputItem]:
    """Write :class:`~memdir.messages.Message` s as Responses-API input items, ready for
    ``Runner.run(agent, items)``.

    The inverse of :func:`messages_from_items` for what it read (the same items, as
    values). Messages from elsewhere are mapped: text and images to ``input_text`` /
    ``input_image`` parts (``output_text`` for the assistant), tool calls to
    ``function_call`` items, tool results to ``function_call_output`` items, in order.
    Thinking from elsewhere is left out: a reasoning item is valid only with the id the
    Responses API gave it. Raises :class:`~memdir.errors.UsageError` for a tool call in
    a user message or a tool result in an assistant one.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "assistant":
            out.extend(_assistant_items(message))
        elif message.role == "user":
            out.extend(_user_items(message))
        else:
            out.append(_message_item(message, message.content))
    return cast("list[TResponseInputItem]", out)


# --- the host's requests, as its client sent them ------------------------------------------


_OWN: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "memdir_openai_agents_own", default=False
)
"""Set around memdir's own work for a turn, so that the memory agent's requests (through
the host's client, on its HTTP pool) are never taken for the host's."""

_KEPT = 64
"""Request bodies a pool keeps until their run claims them: the host's requests in flight
at once, with room to spare. An unclaimed one (a run without hooks on a shared pool)
goes when it is the oldest past this many, past ``_KEPT_BYTES`` in all, or past
``_KEPT_SECONDS`` old; a run whose body went first is extracted standalone."""
_KEPT_BYTES = 64 * 1024 * 1024
_KEPT_SECONDS = 900.0


@dataclass(frozen=True)
class _Sent:
    """A Chat Completions request the host's client sent, as bytes, unparsed."""

    body: bytes
    request_id: str | None
    at: float


class _Wire:
    """The Chat Completions requests sent through one HTTP pool, kept by the id the server
    answered with (``x-request-id``, which the SDK puts on each ``ModelResponse``).

    Its response hook runs on the host's loop for each response, before the SDK reads it:
    it keeps a reference to the request's body and nothing else, so the host pays nothing
    per request but a dictionary entry. Requests are numbered as they come, so that "sent
    since this call started" never depends on the clock."""

    def __init__(self) -> None:
        self.count = 0
        """Requests recorded so far: a call notes it when it starts."""
        self._sent: OrderedDict[int, _Sent] = OrderedDict()
        self._bytes = 0
        self._dropped = 0
        """The number of the latest request let go unclaimed."""
        self._claimed: OrderedDict[str, _Sent] = OrderedDict()
        """Bodies claimed by id, a few, for another hooks object of the same run (run
        hooks and agent hooks both) to find too."""

    async def record(self, response: Any) -> None:
        if _OWN.get():
            return
        try:
            request = response.request
            if request.method != "POST" or not request.url.path.endswith("/chat/completions"):
                return
            if response.status_code >= 400:
                return  # a failed attempt: the SDK retries, or the run fails
            body = request.content
            request_id = response.headers.get("x-request-id")
        except Exception:  # a body not in memory (streamed out): nothing to share
            return
        if not isinstance(body, bytes):
            return
        self.count += 1
        now = time.time()
        self._sent[self.count] = _Sent(body=body, request_id=request_id, at=now)
        self._bytes += len(body)
        while len(self._sent) > 1:
            oldest = next(iter(self._sent.values()))
            if (
                len(self._sent) <= _KEPT
                and self._bytes <= _KEPT_BYTES
                and now - oldest.at < _KEPT_SECONDS
            ):
                break
            self._dropped = next(iter(self._sent))
            self._drop(self._dropped)

    def _drop(self, number: int) -> _Sent:
        sent = self._sent.pop(number)
        self._bytes -= len(sent.body)
        return sent

    def claim(self, request_id: str | None, after: int) -> _Sent | None:
        """The request a model call answered by ``request_id`` sent; without an id (a
        server that sends none), the one request recorded after number ``after`` (when the
        call started), if it is alone and none was let go meanwhile."""
        if request_id is not None:
            for number, sent in reversed(self._sent.items()):
                if sent.request_id == request_id:
                    self._claimed[request_id] = self._drop(number)
                    while len(self._claimed) > 8:
                        self._claimed.popitem(last=False)
                    return sent
            return self._claimed.get(request_id)
        if self._dropped > after:
            return None  # the call's own request may be the one let go
        candidates = [n for n in self._sent if n > after]
        if len(candidates) != 1 or self._sent[candidates[0]].request_id is not None:
            return None
        return self._drop(candidates[0])


_WIRES: weakref.WeakKeyDictionary[object, _Wire] = weakref.WeakKeyDictionary()


def _wire_of(client: object) -> _Wire | None:
    """The recorder on an ``AsyncOpenAI`` client's HTTP pool, added on first use. Clients
    made from one another (``with_options``) and the SDK's provider clients share a pool,
    and so one recorder."""
    pool = getattr(client, "_client", None)
    if pool is None:
        return None
    wire = _WIRES.get(pool) or _Wire()
    if not add_pool_hook(client, "response", wire.record):
        return None
    _WIRES[pool] = wire
    return wire


def _sdk_turn_preparation() -> Any:
    """The runner's own helpers for a turn's model and settings, so that the model found
    here is the one it calls (not a copy of its rules)."""
    from agents.run_internal import turn_preparation

    return turn_preparation


def _chat_model(agent: Agent[Any], run_config: RunConfig) -> tuple[Any, Any] | None:
    """The agent's Chat Completions model and its ``AsyncOpenAI`` client, if that is it."""
    from openai import AsyncOpenAI

    model = _sdk_turn_preparation().get_model(agent, run_config)
    client = getattr(model, "_client", None)
    if isinstance(model, OpenAIChatCompletionsModel) and isinstance(client, AsyncOpenAI):
        return model, client
    return None


def _as_chat(items: Sequence[Any], model: Any, client: Any) -> list[dict[str, Any]]:
    """Input items as the SDK's Chat Completions model writes them into a request."""
    from agents.models.chatcmpl_converter import Converter

    converted = Converter.items_to_messages(
        list(items),
        model=model.model,
        base_url=str(client.base_url),
        should_replay_reasoning_content=getattr(model, "should_replay_reasoning_content", None),
        strict_feature_validation=bool(getattr(model, "_strict_feature_validation", False)),
    )
    # As the request's JSON reads back: plain values, as the recorded part is.
    loaded = json.loads(json.dumps(converted, ensure_ascii=False, default=str))
    return cast("list[dict[str, Any]]", loaded)


@dataclass
class _Call:
    """The latest model call of a run, as the hooks saw it."""

    agent: Agent[Any]
    system: str | None
    items: list[Any]
    started_at: float
    wire: _Wire | None
    recorded_before: int
    """Requests the wire had recorded when the call started."""
    endpoint: Endpoint | None = None
    """The agent's model endpoint, when it sends through an SDK client."""
    response: ModelResponse | None = None
    sent: _Sent | None = None


@dataclass
class _RunState:
    """What one run of the runner left in the hooks."""

    usage: Callable[[], object] = lambda: None
    """The run's ``Usage`` object, weakly where it can be: a run that never ends (it
    failed, was cancelled, or another agent finished it) is let go with it."""
    tool_outputs: dict[str, object] = field(default_factory=dict)
    call: _Call | None = None


@dataclass(frozen=True)
class _Notice:
    """memdir's notice that memory changed, where the conversation first carried it."""

    at: int
    """How many of the conversation's items (memdir's own left out) come before it."""
    after: object
    """The item just before it, as a plain dict (None at the start): a conversation
    that no longer has it there is not the one the notice was given in."""
    item: dict[str, Any]
    """The notice as a user message item."""


@dataclass
class _Conversation:
    """What the hooks keep per conversation: its items read so far, the memory it is
    shown (the same two items on every request, so they share one cached prefix), and
    the notices that memory changed, put back at their place in every later request."""

    items: _ItemsReader = field(default_factory=lambda: _ItemsReader())
    shown: tuple[dict[str, Any], ...] = ()
    notices: list[_Notice] = field(default_factory=list)


def _shown_items(loaded: LoadedMemory) -> tuple[dict[str, Any], ...]:
    """Memory as input items: memdir's instructions as a system message (stable text,
    right after the agent's own, so the system prompt stays cacheable), then the
    ``MEMORY.md`` index as the conversation's first user message."""
    return (
        {"role": "system", "content": loaded.instructions},
        {"role": "user", "content": loaded.index},
    )


class _Memory:
    """The state and work shared by both kinds of hooks."""

    def __init__(
        self,
        memory_dir: MemoryDir | str | os.PathLike[str] | None,
        model: Model | str | None,
        *,
        config: ExtractConfig | None,
        sink: Sink | None,
        run_config: RunConfig | None,
        notify: Notify | None,
        cwd: str | os.PathLike[str] | None,
        session_id: str | None,
        base_url: str | None,
        backend: Backend | None,
        load_memory: bool,
    ) -> None:
        self.core = HostCore(
            memory_dir,
            model,
            config=config,
            sink=sink,
            notify=_outside(notify) if notify is not None else None,
            cwd=cwd,
            base_url=base_url,
            backend=backend,
        )
        self.run_config = run_config
        self.session_id = session_id
        self.load_memory = load_memory
        self._runs: dict[int, _RunState] = {}
        """Per run, by its ``Usage`` object: the one thing the runner shares between the
        ``RunContextWrapper`` of the model hooks and the ``AgentHookContext`` of the end
        hook, so that concurrent runs through one hooks object never mix."""
        self._conversations: Sessions[_Conversation] = Sessions(_Conversation)
        self._default_run_config: RunConfig | None = None

    @property
    def memory_dir(self) -> MemoryDir:
        return self.core.memory_dir

    def _config(self) -> RunConfig:
        if self.run_config is not None:
            return self.run_config
        if self._default_run_config is None:
            self._default_run_config = RunConfig()
        return self._default_run_config

    def _endpoint(self, agent: Agent[Any]) -> Endpoint | None:
        """The agent's model endpoint, when its model sends through an SDK client."""
        model = _sdk_turn_preparation().get_model(agent, self._config())
        client, name = getattr(model, "_client", None), getattr(model, "model", None)
        settings = ClientSettings.of(client) if client is not None else None
        if settings is None or not isinstance(name, str):
            return None
        return Endpoint(settings, name)

    # --- the run, as the hooks see it ---------------------------------------------------------

    async def llm_started(
        self,
        context: object,
        agent: Agent[Any],
        system: str | None,
        items: list[Any],
    ) -> None:
        conversation = self._conversations.get(self.session_id)
        own = _without_shown(items, conversation.shown)
        if self.load_memory:
            # Every call: after the first, a look at the folder's stamps, for the notice.
            loaded = await self.core.aload_memory(self.session_id)
            if not conversation.shown:
                conversation.shown = _shown_items(loaded) if loaded is not None else ()
            own = _without_shown(items, conversation.shown)
            own = _without_notices(own, conversation.notices)
            if loaded is not None and loaded.notice is not None:
                conversation.notices.append(_notice(own, loaded.notice))
            # The list is the one the runner sends: memory goes first, each notice at its
            # place; the runner's own items are left as they are.
            items[:] = _with_memory(own, conversation)
        run = self._state(context)
        wire = None
        endpoint = None
        try:
            endpoint = self._endpoint(agent)
            if endpoint is not None:
                self.core.host_model(endpoint)  # its client is built in a thread, now
            found = _chat_model(agent, self._config())
            wire = _wire_of(found[1]) if found is not None else None
        except Exception as exc:  # never into the host's run
            _log.debug("memdir: the agent's requests are not watched: %s", exc)
        run.call = _Call(
            agent=agent,
            system=system,
            items=own,
            started_at=time.time(),
            wire=wire,
            recorded_before=wire.count if wire is not None else 0,
            endpoint=endpoint,
        )

    def _state(self, context: object) -> _RunState:
        usage = getattr(context, "usage", context)
        key = id(usage)
        run = self._runs.get(key)
        if run is None or run.usage() is not usage:
            run = self._runs[key] = _RunState()
            try:
                run.usage = weakref.ref(usage)
                weakref.finalize(usage, self._runs.pop, key, None)
            except TypeError:  # not weakly referable: held, and bounded below
                run.usage = functools.partial(_same_object, usage)
            while len(self._runs) > 256:  # runs that never end: drop the oldest
                del self._runs[next(iter(self._runs))]
        return run

    def llm_ended(self, context: object, agent: Agent[Any], response: ModelResponse) -> None:
        run = self._state(context)
        call = run.call
        if call is None or call.agent is not agent:
            return
        call.response = response
        if call.wire is not None:
            call.sent = call.wire.claim(response.request_id, call.recorded_before)

    def tool_ended(self, context: object, result: object) -> None:
        call_id = getattr(context, "tool_call_id", None)
        if isinstance(call_id, str):
            self._state(context).tool_outputs[call_id] = result

    def turn_ended(self, context: RunContextWrapper[Any], agent: Agent[Any]) -> None:
        """The agent produced its final output: report the turn. Costs what the turn
        added: the last request is read as it was sent, not rebuilt."""
        try:
            run = self._runs.pop(id(getattr(context, "usage", context)), None)
            call = run.call if run is not None else None
            if run is None or call is None or call.agent is not agent or call.response is None:
                return
            final = self._final_items(run, call.response)
            conversation = self._conversations.get(self.session_id)
            try:
                turn = self._host_turn(call, final, conversation)
            except Exception as exc:  # an SDK this code does not know: memdir's own request
                turn = self._items_turn(call, final, conversation, f"{type(exc).__name__}: {exc}")
            try:
                self._submit(turn)
            except TypeError as exc:  # chat messages memdir cannot read; the items it can
                if turn.request is None and turn.fallback is None:
                    raise
                self._submit(self._items_turn(call, final, conversation, str(exc)))
        except Exception as exc:  # the host's turn must never fail because of memory
            self.core.failed(exc)

    def _submit(self, turn: HostTurn) -> None:
        # The run's task inherits this context: its requests are memdir's, not the host's.
        contextvars.copy_context().run(_as_own, self.core, turn)

    def _final_items(self, run: _RunState, response: ModelResponse) -> list[Any]:
        """The final answer as items, with the results of calls that ended the run (a
        ``tool_use_behavior`` that stops on a tool) so that no call is left unanswered."""
        out: list[Any] = list(response.to_input_items())
        answered = {i.get("call_id") for i in out if i.get("type") == "function_call_output"}
        for item in list(out):
            call_id = item.get("call_id")
            if item.get("type") != "function_call" or call_id in answered:
                continue
            if call_id in run.tool_outputs:
                result = run.tool_outputs[call_id]
                output = result if isinstance(result, str) else str(result)
                out.append({"call_id": call_id, "output": output, "type": "function_call_output"})
        return out

    # --- the turn's conversation and the fork's request ------------------------------------

    def _items_turn(
        self, call: _Call, final: list[Any], conversation: _Conversation, why: str
    ) -> HostTurn:
        """A standalone turn read from the input items (the Responses API, other models)."""
        return HostTurn(
            messages=conversation.items.read([*call.items, *final]),
            conversation=self.session_id,
            endpoint=call.endpoint,
            fallback=why,
            last_request_at=call.started_at,
        )

    def _host_turn(self, call: _Call, final: list[Any], conversation: _Conversation) -> HostTurn:
        found = _chat_model(call.agent, self._config())
        if found is None:
            model = _sdk_turn_preparation().get_model(call.agent, self._config())
            return self._items_turn(
                call,
                final,
                conversation,
                f"{type(model).__name__} is not a Chat Completions model on an AsyncOpenAI "
                "client: memdir's OpenAI adapter cannot send its request's prefix",
            )
        sdk_model, client = found
        answer = _as_chat(final, sdk_model, client)
        # As the SDK writes a message item of a string (the Converter is not asked again).
        shown = [{"role": i["role"], "content": i["content"]} for i in conversation.shown]
        if call.sent is None:
            # The conversation as the SDK writes it, so that its messages keep their ids
            # when a later turn's request is seen again.
            sent = _as_chat(call.items, sdk_model, client)
            return HostTurn(
                messages=[*sent, *answer],
                conversation=self.session_id,
                endpoint=call.endpoint,
                fallback="the last request was not seen on its way out (a client whose "
                "HTTP pool memdir cannot hook, a server that names no x-request-id while "
                "other requests are in flight, or a body let go before its call ended)",
                last_request_at=call.started_at,
            )
        body = json.loads(call.sent.body)
        recorded = body.get("messages")
        if not isinstance(recorded, list):
            raise UsageError("the recorded request has no messages")
        offset = 1 if call.system and recorded and recorded[0].get("role") == "system" else 0
        # memdir's own memory messages and notices are sent, but are no part of the
        # conversation (the SDK's history never holds them).
        if shown and recorded[offset : offset + len(shown)] == shown:
            offset += len(shown)
        notices = [{"role": "user", "content": n.item["content"]} for n in conversation.notices]
        messages = [*(m for m in recorded[offset:] if m not in notices), *answer]
        # What the host sent, then its answer as its next request will send it: the
        # fork's prefix is the host's, and the host's next request reads the fork's.
        return HostTurn(
            messages=messages,
            conversation=self.session_id,
            endpoint=call.endpoint,
            request=SentRequest(
                wire="chat",
                body=body,
                messages=[*recorded, *answer],
                replaces=len(messages),
                sent_at=call.sent.at,
            ),
        )

    # --- memory tools for the host -----------------------------------------------------------

    def tools(self) -> list[Tool]:
        cwd = self.core.cwd or os.getcwd()
        out: list[Tool] = []
        for tool in builtin_tools(cwd):
            if tool.name not in _HOST_TOOLS:
                continue
            definition = tool.definition()
            out.append(
                FunctionTool(
                    name=tool.name,
                    description=definition["description"],
                    params_json_schema=definition["input_schema"],
                    on_invoke_tool=functools.partial(self._invoke, tool, cwd),
                    strict_json_schema=False,
                )
            )
        return out

    async def _invoke(self, tool: MemdirTool, cwd: str, _: object, arguments: str) -> str:
        """One host call of a memory tool: inside the memory directory only."""
        try:
            tool_input = json.loads(arguments or "{}")
        except ValueError:
            return f"{tool.name}: the arguments are not valid JSON."
        if not isinstance(tool_input, dict):
            return f"{tool.name}: the arguments must be a JSON object."
        return await self.core.run_tool(tool, tool_input, cwd=cwd, conversation=self.session_id)


def _plain_or_none(item: object) -> object:
    return dict(item) if isinstance(item, Mapping) else None


def _notice(own: Sequence[Any], text: str) -> _Notice:
    """The notice ``text`` placed in the conversation ``own`` about to be sent: before the
    user's new words when they end it (a run's first call), else (after a tool's result)
    at its end.

    Either way after everything earlier requests sent. Before the user's words, it stays
    out of the turn's own messages, which the fork's prompt counts from the end
    ("the last ~N messages"), the notice being no message of the conversation: the
    SDK's history never holds it, and a later process would not read it there.
    """
    at = len(own) - 1 if own and _is_user_words(own[-1]) else len(own)
    after = _plain_or_none(own[at - 1]) if at else None
    return _Notice(at=at, after=after, item={"role": "user", "content": text})


def _is_user_words(item: object) -> bool:
    return (
        isinstance(item, Mapping)
        and item.get("role") == "user"
        and item.get("type", "message") == "message"
    )


def _without_notices(items: list[Any], notices: Sequence[_Notice]) -> list[Any]:
    """The items without memdir's notices that memory changed, where a list the runner
    kept from an earlier call would hold them (only their places are looked at)."""
    out = items
    for notice in notices:
        if notice.at < len(out) and _plain_or_none(out[notice.at]) == notice.item:
            out = [*out[: notice.at], *out[notice.at + 1 :]]
    return out


def _with_memory(own: list[Any], conversation: _Conversation) -> list[Any]:
    """What a model call of the conversation is sent: the memory shown, then its items
    with each notice that memory changed where it was first sent, so that every request
    starts with the one before. Notices the conversation no longer has room for (a
    shorter or another history) are let go."""
    out: list[Any] = [dict(i) for i in conversation.shown]
    placed = 0
    for count, notice in enumerate(conversation.notices):
        before = _plain_or_none(own[notice.at - 1]) if notice.at else None
        if notice.at > len(own) or notice.at < placed or before != notice.after:
            del conversation.notices[count:]
            break
        out += own[placed : notice.at]
        out.append(dict(notice.item))
        placed = notice.at
    return [*out, *own[placed:]]


def _without_shown(items: list[Any], shown: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The input items without memdir's memory items at their start."""
    count = len(shown)
    if count and [_plain_or_none(i) for i in items[:count]] == list(shown):
        return list(items[count:])
    return list(items)


def _as_own(core: HostCore, turn: HostTurn) -> None:
    _OWN.set(True)
    core.submit(turn)


def _outside(notify: Notify) -> Notify:
    """``notify`` run as the host's code again: a run it starts is the host's own."""

    def call(saved: MemorySaved) -> None:
        token = _OWN.set(False)
        try:
            notify(saved)
        finally:
            _OWN.reset(token)

    return call


def _same_object(value: object) -> object:
    return value


class _MemdirHooks:
    """What both kinds of hooks share: their arguments, their user's API, and the model
    call hooks, which the SDK calls alike on run and agent hooks."""

    def __init__(
        self,
        memory_dir: MemoryDir | str | os.PathLike[str] | None = None,
        model: Model | str | None = None,
        *,
        config: ExtractConfig | None = None,
        sink: Sink | None = None,
        notify: Notify | None = None,
        run_config: RunConfig | None = None,
        cwd: str | os.PathLike[str] | None = None,
        session_id: str | None = None,
        session: Session | None = None,
        base_url: str | None = None,
        backend: Backend | None = None,
        load_memory: bool = True,
    ) -> None:
        if session is not None and session_id is None:
            session_id = session.session_id
        self._memory = _Memory(
            memory_dir,
            model,
            config=config,
            sink=sink,
            notify=notify,
            run_config=run_config,
            cwd=cwd,
            session_id=session_id,
            base_url=base_url,
            backend=backend,
            load_memory=load_memory,
        )

    @property
    def memory_dir(self) -> MemoryDir:
        """Where the memories go."""
        return self._memory.memory_dir

    @property
    def extractor(self) -> MemoryExtractor | None:
        """The conversation's extractor, with the default backend, once a turn ended."""
        return self._memory.core.extractor(self._memory.session_id)

    @property
    def fallback_reason(self) -> str | None:
        """Why the last turn went standalone instead of forking the host's request; None
        when it forked (or no turn ended yet)."""
        return self._memory.core.fallback_reason

    def tools(self) -> list[Tool]:
        """memdir's ``Read``, ``Write`` and ``Edit`` for the agent, limited to the memory
        directory, with the memory agent's checks (no secrets in team memory, Read before
        changing a file, atomic writes).

        Add them to the agent (``Agent(tools=[..., *memory.tools()])``): the agent can then
        save what it is asked to remember, and the memory agent, a fork that is shown the
        host's tools and no others, can save too; without a tool that writes, the
        extractor's ``auto`` mode goes standalone.
        """
        return self._memory.tools()

    async def drain(self, timeout: float = 60.0) -> None:  # noqa: ASYNC109 (the contract)
        """Wait up to ``timeout`` seconds for the memory runs still going."""
        await self._memory.core.drain(timeout)

    def drain_sync(self, timeout: float = 60.0) -> None:
        """:meth:`drain` for a host that runs its agent with ``Runner.run_sync``, whose
        loop holds the memory runs between calls: this runs it until they end."""
        self._memory.core.drain_sync(timeout)

    def close(self) -> None:
        """Stop the backend's background work (the threads of ``run_sync`` hosts)."""
        self._memory.core.close()

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        """Keep the exact input of the call: the fork's prefix is the last one's."""
        await self._memory.llm_started(context, agent, system_prompt, input_items)

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        """Keep the answer: the final one ends the turn's conversation."""
        self._memory.llm_ended(context, agent, response)

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object
    ) -> None:
        """Keep the result, for a run that ends on a tool's output."""
        self._memory.tool_ended(context, result)


class MemdirRunHooks(_MemdirHooks, RunHooks[Any]):
    """Run hooks that save memories after each final answer: ``Runner.run(agent, input,
    hooks=memory)``, then ``await memory.drain()`` before exit.

    ``memory_dir``: where memories go (default: Claude Code's folder for ``cwd``, or
    ``$MEMDIR_DIR``). ``model``: the extractor's own model for standalone runs, a
    :class:`~memdir.models.Model` or a spec (``openai:gpt-4.1-mini``, with
    ``base_url``); default: the agent's model through its own client (else
    ``$MEMDIR_MODEL``, else offline). A fork always uses the host's model. ``config``,
    ``sink``: as for :class:`~memdir.extract.MemoryExtractor`; ``notify`` receives
    :class:`~memdir.extract.MemorySaved` notices. ``run_config``: the ``RunConfig`` the
    runs use, when it sets the model or its provider (the hooks find the agent's client
    through it). ``session_id``: the conversation's id, written into the memories it
    saves. After ``Runner.run_sync``, call :meth:`drain_sync` instead of :meth:`drain`.
    """

    async def on_agent_end(
        self, context: AgentHookContext[Any], agent: Agent[Any], output: Any
    ) -> None:
        """Report the finished turn; the memory run goes on in the background."""
        self._memory.turn_ended(context, agent)


class MemdirAgentHooks(_MemdirHooks, AgentHooks[Any]):
    """:class:`MemdirRunHooks` as ``Agent(hooks=memory)``, for the turns this agent ends.

    Takes the same arguments. A run that another agent finishes after a handoff is not
    seen; use :class:`MemdirRunHooks` for runs with handoffs.
    """

    async def on_end(self, context: AgentHookContext[Any], agent: Agent[Any], output: Any) -> None:
        """Report the finished turn; the memory run goes on in the background."""
        self._memory.turn_ended(context, agent)
