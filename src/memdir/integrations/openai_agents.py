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
"chat_completions")``) the memory agent can be a fork of the last request. The hooks rebuild
that request by running the SDK model's own request builder against a stand-in client
that records it and sends nothing (so the agent's tools and handoffs, its model settings
merged with ``run_config``'s, the output schema and the message conversion are the
SDK's), read the conversation back from those very chat messages, and check that
memdir's OpenAI adapter writes them out byte for byte, system message and tools
included, with the same parameters. Only then does the turn carry
:class:`~memdir.fork.CacheSafeParams` (the extractor's planner still decides, in its
``auto`` mode, whether the fork or memdir's own request is cheaper); otherwise it goes
standalone and :attr:`MemdirRunHooks.fallback_reason` says why.

Requests are routed to a cache machine by ``prompt_cache_key``. On OpenAI's own endpoint
the runner sends a new random key per run, which hooks never see; so before an agent's
first request the hooks pin a stable one in its ``model_settings.extra_args`` (derived
from the memory folder and the agent's name; it also lets the host's own runs share a
cache), unless the agent or the ``run_config`` given here sets one. Elsewhere the
runner sends none and nothing is pinned, unless ``prompt_cache_key=`` names a key to
pin. Pass the ``RunConfig`` you run with when it changes the model or its settings:
hooks are not shown it.

What stays standalone, and why:

- The Responses API (``OpenAIResponsesModel``, the SDK's default) and other model
  classes: memdir's OpenAI adapter speaks Chat Completions, so it cannot send a
  ``/v1/responses`` request's prefix. The conversation is then read with
  :func:`messages_from_items`.
- A request whose chat messages memdir cannot write back in the same bytes (an
  assistant ``refusal``, replayed reasoning in some positions), or a conversation
  converted differently when it grows: sending something else would only pay for a new
  cache.
- A ``prompt_cache_key`` the runner generated (where the agent could not be pinned):
  hooks never see it, and a fork with another key lands on another cache machine.

One hooks object follows one conversation: give each session its own. The conversation
is what the last model call was sent, so with server-managed state
(``previous_response_id``, ``conversation_id``) each turn holds only the items sent in
it.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

# The SDK is this module's whole point, and only this module's: memdir itself never needs it.
try:
    from agents import (
        Agent,
        AgentHooks,
        FunctionTool,
        ModelResponse,
        ModelSettings,
        OpenAIChatCompletionsModel,
        RunConfig,
        RunContextWrapper,
        RunHooks,
        Tool,
    )
    from agents.items import TResponseInputItem
    from agents.models.interface import ModelTracing
    from agents.run_context import AgentHookContext
except ModuleNotFoundError as exc:
    raise ModuleNotFoundError(
        "memdir.integrations.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'memdir[openai-agents]'",
        name=exc.name,
    ) from exc

from memdir.errors import UsageError
from memdir.extract import ExtractConfig, MemoryExtractor, Notify, TurnContext
from memdir.fork import CacheSafeParams
from memdir.messages import (
    ContentBlock,
    ImageBlock,
    Message,
    OtherBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    messages_from_openai,
    with_derived_uuids,
)
from memdir.models import Model, ModelRequest, OpenAIModel, resolve_model
from memdir.permissions import auto_mem_can_use_tool, memory_write_guard
from memdir.store import MemoryDir, default_memory_dir
from memdir.telemetry import Sink, emit
from memdir.tools import MemoryFiles, ToolContext, ToolError, builtin_tools
from memdir.tools import Tool as MemdirTool

__all__ = ["MemdirAgentHooks", "MemdirRunHooks", "messages_from_items", "messages_to_items"]

_log = logging.getLogger(__name__)

_FORMAT = "openai-agents"
# ``extra`` keys under memdir's prefix are never written to a wire (see memdir.messages).
_FORMAT_KEY = "memdir:format"
_ITEM = "memdir:item"  # the input item (or content part) a block was read from
_MESSAGE = "memdir:message"  # an assistant text's message item, without its content
_STRING = "memdir:string"  # the text was the whole content, as a bare string
_KEY_FIELD = "prompt_cache_key"
_HOST_TOOLS = ("Read", "Write", "Edit")
# What a fork does not send as parameters: the conversation and tools travel on their
# own, and streaming is how the answer comes back, not part of the prompt.
_NOT_PARAMS = frozenset({"model", "messages", "tools", "stream", "stream_options"})
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
    out: list[Message] = []
    model_side: list[ContentBlock] = []
    results: list[ContentBlock] = []

    def close() -> None:
        if model_side:
            out.append(_own(Message(role="assistant", content=tuple(model_side))))
            model_side.clear()
        if results:
            out.append(_own(Message(role="user", content=tuple(results))))
            results.clear()

    for index, raw in enumerate(items):
        where = f"item {index}"
        item = _plain(raw, where)
        kind = item.get("type")
        role = item.get("role")
        if kind in (None, "message") and role in ("user", "system", "developer"):
            close()
            content = item.get("content")
            meta = {k: v for k, v in item.items() if k != "content"}
            out.append(
                Message(
                    role=role,
                    content=_content_blocks(content, where),
                    string_content=isinstance(content, str),
                    extra={_FORMAT_KEY: _FORMAT, _ITEM: meta},
                )
            )
        elif kind in (None, "message") and role == "assistant":
            if results:
                close()
            meta = {k: v for k, v in item.items() if k != "content"}
            for block in _content_blocks(item.get("content"), where):
                model_side.append(_with_meta(block, meta))
        elif kind == "function_call":
            if results:
                close()
            model_side.append(_tool_use(item, where))
        elif kind == "reasoning":
            if results:
                close()
            model_side.append(_thinking(item))
        elif kind == "function_call_output":
            if model_side:
                close()
            results.append(_tool_result(item, where))
        elif isinstance(kind, str) and _is_model_side(kind):
            if results:
                close()
            model_side.append(OtherBlock(type=kind, data=item))
        elif isinstance(kind, str):
            if model_side:
                close()
            results.append(OtherBlock(type=kind, data=item))
        else:
            raise UsageError(f"{where}: neither a message nor a typed item")
    close()
    return with_derived_uuids(out)


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


# --- the host's last request ---------------------------------------------------------------


class _RecordedError(Exception):
    """Raised by :class:`_RecordingClient` once it holds the request it was asked to send."""


class _RecordingClient:
    """Stands in for the host's ``AsyncOpenAI`` while the SDK's model builds a request: it
    keeps the ``chat.completions.create`` arguments and sends nothing."""

    def __init__(self, base_url: object) -> None:
        self.base_url = base_url
        self.chat = self
        self.completions = self
        self.kwargs: dict[str, Any] = {}

    def with_options(self, **_: object) -> _RecordingClient:
        return self

    async def create(self, **kwargs: Any) -> Any:
        self.kwargs = kwargs
        raise _RecordedError


def _is_given(value: object) -> bool:
    import openai

    omitted = tuple(
        t for t in (getattr(openai, "Omit", None), getattr(openai, "NotGiven", None)) if t
    )
    return not isinstance(value, omitted)


def _wire(value: object) -> str:
    """``value`` as JSON with its keys in the order they came: what a prefix cache compares."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _has_key(settings: ModelSettings) -> bool:
    return any(
        isinstance(extra, Mapping) and _KEY_FIELD in extra
        for extra in (settings.extra_args, settings.extra_body)
    )


def _sdk_turn_preparation() -> Any:
    """The runner's own helpers for a turn's model, settings, handoffs and schema, so that
    the request rebuilt here is the one it sent (not a copy of its rules)."""
    from agents.run_internal import turn_preparation

    return turn_preparation


@dataclass
class _Call:
    """The latest model call of a run, as the hooks saw it."""

    agent: Agent[Any]
    system: str | None
    items: list[Any]
    sent_at: float
    used_tools_before: bool
    response: ModelResponse | None = None


@dataclass
class _HostRequest:
    """A turn ready for the extractor."""

    messages: list[Message]
    params: CacheSafeParams | None
    host_model: Model | None
    fallback: str | None = None


@dataclass
class _RunState:
    """What one run of the runner left in the hooks (the latest run only)."""

    context: object = None
    used_tools: set[int] = field(default_factory=set)
    tool_outputs: dict[str, object] = field(default_factory=dict)
    call: _Call | None = None


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
        prompt_cache_key: str | None,
        notify: Notify | None,
        cwd: str | os.PathLike[str] | None,
        session_id: str | None,
        base_url: str | None,
    ) -> None:
        self.cwd = str(cwd) if cwd is not None else None
        if memory_dir is None:
            memory_dir = default_memory_dir(self.cwd or os.getcwd())
        self.memory_dir = memory_dir if isinstance(memory_dir, MemoryDir) else MemoryDir(memory_dir)
        self.config = config or ExtractConfig()
        self.sink = sink
        self.run_config = run_config
        self.prompt_cache_key = prompt_cache_key
        self.notify = notify
        self.session_id = session_id
        self.fallback_reason: str | None = None
        self.extractor: MemoryExtractor | None = None
        if isinstance(model, str):
            model = resolve_model(model, base_url=base_url)
        if model is not None:
            self.extractor = self._new_extractor(model)
        self._runs: dict[int, _RunState] = {}
        """Per run, by its ``Usage`` object: the one thing the runner shares between the
        ``RunContextWrapper`` of the model hooks and the ``AgentHookContext`` of the end
        hook, so that concurrent runs through one hooks object never mix."""
        self._fork_models: dict[tuple[int, str], tuple[object, OpenAIModel]] = {}
        self._tool_context: ToolContext | None = None
        self._default_run_config: RunConfig | None = None

    def _new_extractor(self, model: Model) -> MemoryExtractor:
        return MemoryExtractor(self.memory_dir, model, self.config, self.sink)

    def _config(self) -> RunConfig:
        if self.run_config is not None:
            return self.run_config
        if self._default_run_config is None:
            self._default_run_config = RunConfig()
        return self._default_run_config

    # --- prompt_cache_key -------------------------------------------------------------------

    def pin(self, agent: Agent[Any]) -> None:
        """Give ``agent`` a stable ``prompt_cache_key`` where the request would otherwise
        carry one the hooks cannot know (or where the caller asked for one)."""
        try:
            prep = _sdk_turn_preparation()
            run_config = self._config()
            if _has_key(prep.get_model_settings(agent, run_config)):
                return
            model = prep.get_model(agent, run_config)
            if not isinstance(model, OpenAIChatCompletionsModel):
                return
            key = self.prompt_cache_key
            if key is None:
                if not model._supports_default_prompt_cache_key():
                    return  # the runner sends none here, so the fork needs none either
                seed = f"{self.memory_dir.root}\0{agent.name}"
                key = (
                    "memdir-"
                    + hashlib.sha256(seed.encode("utf-8", "surrogatepass")).hexdigest()[:32]
                )
            settings = agent.model_settings
            agent.model_settings = dataclasses.replace(
                settings, extra_args={**(settings.extra_args or {}), _KEY_FIELD: key}
            )
        except Exception as exc:  # never into the host's run
            _log.debug("memdir: prompt_cache_key not pinned: %s", exc)

    # --- the run, as the hooks see it ---------------------------------------------------------

    def llm_started(
        self,
        context: object,
        agent: Agent[Any],
        system: str | None,
        items: Sequence[Any],
    ) -> None:
        run = self._state(context)
        run.call = _Call(
            agent=agent,
            system=system,
            items=list(items),
            sent_at=time.time(),
            used_tools_before=id(agent) in run.used_tools,
        )

    def _state(self, context: object) -> _RunState:
        usage = getattr(context, "usage", context)
        run = self._runs.get(id(usage))
        if run is None or run.context is not usage:
            run = self._runs[id(usage)] = _RunState(context=usage)
            while len(self._runs) > 256:  # runs that failed never end: drop the oldest
                del self._runs[next(iter(self._runs))]
        return run

    def llm_ended(self, context: object, agent: Agent[Any], response: ModelResponse) -> None:
        run = self._state(context)
        call = run.call
        if call is None or call.agent is not agent:
            return
        call.response = response
        for item in response.output:
            kind = getattr(item, "type", None)
            if isinstance(kind, str) and kind.endswith("_call"):
                # The runner resets a forced tool_choice once the agent has used a tool.
                run.used_tools.add(id(agent))
                break

    def tool_ended(self, context: object, result: object) -> None:
        call_id = getattr(context, "tool_call_id", None)
        if isinstance(call_id, str):
            self._state(context).tool_outputs[call_id] = result

    async def turn_ended(self, context: RunContextWrapper[Any], agent: Agent[Any]) -> None:
        """The agent produced its final output: report the turn to the extractor."""
        try:
            run = self._runs.pop(id(getattr(context, "usage", context)), None)
            call = run.call if run is not None else None
            if run is None or call is None or call.agent is not agent or call.response is None:
                return
            items = [*call.items, *self._final_items(run, call.response)]
            try:
                turn = await self._host_request(context, call, items)
            except Exception as exc:  # an SDK this code does not know: memdir's own request
                turn = _HostRequest(
                    messages=messages_from_items(items),
                    params=None,
                    host_model=None,
                    fallback=f"the request could not be rebuilt: {type(exc).__name__}: {exc}",
                )
            self.fallback_reason = turn.fallback
            if turn.fallback is not None:
                _log.debug("memdir: standalone run: %s", turn.fallback)
            extractor = self.extractor
            if extractor is None:
                extractor = self.extractor = self._new_extractor(self._own_model(turn, agent))
            extractor.on_turn_end(
                TurnContext(
                    messages=tuple(turn.messages),
                    params=turn.params,
                    cwd=self.cwd,
                    last_request_at=call.sent_at,
                    session_id=self.session_id,
                ),
                notify=self.notify,
            )
        except Exception as exc:  # the host's turn must never fail because of memory
            _log.warning("memdir: turn not reported: %s: %s", type(exc).__name__, exc)
            emit(self.sink, "extract.error", duration_ms=0, error_type=type(exc).__name__)

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

    def _own_model(self, turn: _HostRequest, agent: Agent[Any]) -> Model:
        """The extractor's model when none was given: the host's own, through its client,
        else ``$MEMDIR_MODEL``, else the offline model."""
        if turn.host_model is not None:
            return turn.host_model
        try:
            sdk_model = _sdk_turn_preparation().get_model(agent, self._config())
            client = getattr(sdk_model, "_client", None)
            name = getattr(sdk_model, "model", None)
            from openai import AsyncOpenAI

            if isinstance(client, AsyncOpenAI) and isinstance(name, str):
                return OpenAIModel(name, client=client.with_options(max_retries=0))
        except Exception as exc:
            _log.debug("memdir: the agent's model is not usable for memory: %s", exc)
        return resolve_model(os.environ.get("MEMDIR_MODEL") or "offline")

    # --- rebuilding the host's request -------------------------------------------------------

    async def _host_request(
        self, context: RunContextWrapper[Any], call: _Call, items: list[Any]
    ) -> _HostRequest:
        prep = _sdk_turn_preparation()
        agent = call.agent
        run_config = self._config()
        sdk_model = prep.get_model(agent, run_config)
        if not isinstance(sdk_model, OpenAIChatCompletionsModel):
            return _HostRequest(
                messages=messages_from_items(items),
                params=None,
                host_model=None,
                fallback=f"{type(sdk_model).__name__} is not a Chat Completions model: memdir's "
                "OpenAI adapter cannot send its request's prefix",
            )
        from openai import AsyncOpenAI

        client: object = getattr(sdk_model, "_client", None)
        if not isinstance(client, AsyncOpenAI):
            return _HostRequest(
                messages=messages_from_items(items),
                params=None,
                host_model=None,
                fallback="the model has no AsyncOpenAI client",
            )
        fork_model = self._fork_model(sdk_model.model, client)
        settings = prep.get_model_settings(agent, run_config)
        if call.used_tools_before and agent.reset_tool_choice is True:
            settings = dataclasses.replace(settings, tool_choice=None)
        tools: list[Tool] = await agent.get_all_tools(context)
        handoffs = await prep.get_handoffs(agent, context)
        try:
            from agents._tool_identity import resolve_tool_name_collisions

            tools, handoffs = resolve_tool_name_collisions(
                tools, handoffs, collision_policy=run_config.tool_name_collision_policy
            )
        except ImportError:
            pass  # an SDK without name collision handling sends the lists as they are
        schema = prep.get_output_schema(agent)

        async def record(input_items: list[Any]) -> dict[str, Any]:
            recorder = _RecordingClient(client.base_url)
            clone = copy.copy(sdk_model)
            clone._client = cast(Any, recorder)
            try:
                await clone._fetch_response(
                    call.system,
                    input_items,
                    settings,
                    tools,
                    schema,
                    handoffs,
                    cast(Any, None),  # no span: tracing is off for this rehearsal
                    ModelTracing.DISABLED,
                    stream=False,
                )
            except _RecordedError:
                return {k: v for k, v in recorder.kwargs.items() if _is_given(v)}
            raise UsageError("the model sent nothing to record")

        host = await record(call.items)
        whole = await record(items)
        offset = 1 if call.system else 0
        messages = messages_from_openai(whole["messages"][offset:])

        def standalone(why: str) -> _HostRequest:
            return _HostRequest(messages=messages, params=None, host_model=fork_model, fallback=why)

        sent = host["messages"]
        if _wire(whole["messages"][: len(sent)]) != _wire(sent):
            return standalone("the conversation converts differently once it grows")
        if not _has_key(settings) and sdk_model._supports_default_prompt_cache_key():
            return standalone("the runner chose a prompt_cache_key that hooks cannot see")
        params = CacheSafeParams(
            model=fork_model,
            system=call.system or None,
            tools=list(host.get("tools") or ()),
            params={
                k: v
                for k, v in host.items()
                if k not in _NOT_PARAMS and not (k.startswith("extra_") and v is None)
            },
        )
        # memdir writes the fork's request itself: it must come out as the host's bytes.
        rebuilt = fork_model.wire_request(
            ModelRequest(
                system=params.system,
                tools=params.tools,
                messages=tuple(messages[: len(sent) - offset]),
                params=params.params,
            )
        )
        if _wire(rebuilt["messages"]) != _wire(sent):
            return standalone("memdir would not write these chat messages byte for byte")
        if _wire(rebuilt.get("tools")) != _wire(host.get("tools")):
            return standalone("memdir would not write these tools byte for byte")
        return _HostRequest(messages=messages, params=params, host_model=fork_model)

    def _fork_model(self, name: str, client: Any) -> OpenAIModel:
        """memdir's model for the host's client and model name (one per pair, so its
        converted messages carry over from turn to turn)."""
        key = (id(client), name)
        known = self._fork_models.get(key)
        if known is not None and known[0] is client:
            return known[1]
        model = OpenAIModel(
            name,
            # memdir retries on its own: one attempt per call from the client.
            client=client.with_options(max_retries=0),
            system_content_first=True,
        )
        self._fork_models[key] = (client, model)
        return model

    # --- memory tools for the host -----------------------------------------------------------

    def tools(self) -> list[Tool]:
        cwd = self.cwd or os.getcwd()
        md = self.memory_dir
        if self._tool_context is None:
            self._tool_context = ToolContext(
                write_guard=memory_write_guard(
                    md, allow_private_secrets=self.config.allow_private_secrets
                ),
                memory_files=MemoryFiles(
                    memory_dir=md, format=self.config.memory_format, session_id=self.session_id
                ),
            )
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
        md = self.memory_dir
        path = tool_input.get("file_path")
        if not md.is_memory_path(path, cwd=cwd):
            return f"{tool.name} is limited to files inside the memory directory {md.root}."
        if _hidden_part(md, str(path), cwd):
            # memdir's own bookkeeping (.memdir/: cursors, logs, the trash) is not memory.
            return f"{tool.name} is limited to memory files; hidden names are not memories."
        gate = auto_mem_can_use_tool(
            md, cwd=cwd, allow_private_secrets=self.config.allow_private_secrets, sink=self.sink
        )
        decision = await gate(tool, tool_input)
        if not decision.allowed:
            return decision.message or f"{tool.name} is not allowed here."
        assert self._tool_context is not None
        try:
            await asyncio.to_thread(md.ensure)
            output = await tool.run(tool_input, self._tool_context)
        except ToolError as exc:
            return str(exc)
        return output.content

    async def drain(self, timeout: float) -> None:  # noqa: ASYNC109 (as the extractor's)
        if self.extractor is not None:
            await self.extractor.drain(timeout)


def _hidden_part(md: MemoryDir, path: str, cwd: str) -> bool:
    """Whether ``path``, inside the memory directory, goes through a hidden name there."""
    full = os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))
    try:
        relative = Path(full).relative_to(md.root)
    except ValueError:
        relative = Path(os.path.relpath(os.path.realpath(full), os.path.realpath(md.root)))
    return any(part.startswith(".") for part in relative.parts)


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
        prompt_cache_key: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        session_id: str | None = None,
        base_url: str | None = None,
    ) -> None:
        self._memory = _Memory(
            memory_dir,
            model,
            config=config,
            sink=sink,
            notify=notify,
            run_config=run_config,
            prompt_cache_key=prompt_cache_key,
            cwd=cwd,
            session_id=session_id,
            base_url=base_url,
        )

    @property
    def memory_dir(self) -> MemoryDir:
        """Where the memories go."""
        return self._memory.memory_dir

    @property
    def extractor(self) -> MemoryExtractor | None:
        """The extractor; None until the first turn when no ``model`` was given."""
        return self._memory.extractor

    @property
    def fallback_reason(self) -> str | None:
        """Why the last turn went standalone instead of forking the host's request; None
        when it forked (or no turn ended yet)."""
        return self._memory.fallback_reason

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
        await self._memory.drain(timeout)

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        """Keep the exact input of the call: the fork's prefix is the last one's."""
        self._memory.llm_started(context, agent, system_prompt, input_items)

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
    runs use, when it sets the model or model settings. ``prompt_cache_key``: pin this
    key on the agents (see the module docs). ``session_id``: the conversation's id,
    written into the memories it saves.
    """

    async def on_agent_start(self, context: AgentHookContext[Any], agent: Agent[Any]) -> None:
        """Pin the agent's ``prompt_cache_key`` before its first request."""
        self._memory.pin(agent)

    async def on_agent_end(
        self, context: AgentHookContext[Any], agent: Agent[Any], output: Any
    ) -> None:
        """Report the finished turn; the memory run goes on in the background."""
        await self._memory.turn_ended(context, agent)


class MemdirAgentHooks(_MemdirHooks, AgentHooks[Any]):
    """:class:`MemdirRunHooks` as ``Agent(hooks=memory)``, for the turns this agent ends.

    Takes the same arguments. A run that another agent finishes after a handoff is not
    seen; use :class:`MemdirRunHooks` for runs with handoffs.
    """

    async def on_start(self, context: AgentHookContext[Any], agent: Agent[Any]) -> None:
        """Pin the agent's ``prompt_cache_key`` before its first request."""
        self._memory.pin(agent)

    async def on_end(self, context: AgentHookContext[Any], agent: Agent[Any], output: Any) -> None:
        """Report the finished turn; the memory run goes on in the background."""
        await self._memory.turn_ended(context, agent)
