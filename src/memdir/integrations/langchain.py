"""memdir for LangChain agents (``create_agent``) and plain LangGraph graphs.

:class:`MemdirMiddleware` is an agent middleware. Its ``awrap_model_call`` notes each
model request the agent makes — system message, messages, tools, model settings — and
its ``aafter_agent`` reports the finished turn (the thread's whole conversation) to a
:class:`~memdir.extract.MemoryExtractor` of that thread, with the last request rebuilt
exactly as ``langchain-anthropic`` (or ``langchain-openai``) sent it, so that the memory
agent runs as a fork inside the agent's own prompt cache::

    from langchain.agents import create_agent
    from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware
    from memdir.integrations.langchain import MemdirMiddleware

    memory = MemdirMiddleware("./memory", memory_tool=True)
    agent = create_agent(model, tools, middleware=[AnthropicPromptCachingMiddleware(), memory])
    ...  # await agent.ainvoke(...), turn after turn
    await memory.drain()  # before the process exits: let the last extraction finish

List it last: middleware compose first-outermost, so the last one sees the request as
the others have shaped it, which is what goes on the wire. ``memory_tool=True`` gives the
agent a ``memory`` tool (Anthropic's own on ``ChatAnthropic``, a function tool of the
same commands elsewhere): a fork is shown the agent's tools and can save only
through one of them, so without it (or a Write/Edit tool of the agent's) the planner
sends memdir's standalone request instead.

When the fork shares the cache, and when it does not (the run is then memdir's own
standalone request, see :class:`~memdir.extract.ExtractConfig`):

- the agent's model is ``ChatAnthropic`` on the Anthropic API itself (not Bedrock or
  Vertex, whose subclasses shape requests their own way) or ``ChatOpenAI`` on Chat
  Completions (not Azure's, nor the Responses API), with no structured output
  (``response_format`` binds tools and settings inside ``create_agent`` where no
  middleware sees them);
- an Anthropic agent caches: its request carries ``cache_control``
  (``AnthropicPromptCachingMiddleware`` puts it there), or its answer reports cache reads
  or writes. With no breakpoint it caches nothing a fork could read. OpenAI caches every
  prefix on its own;
- the last request's messages are the conversation's first messages, by id (a middleware
  that rewrites them per request, rather than in the state, leaves nothing to match).

The fork sends the rebuilt request's messages as they are (``langchain-openai``'s system
message and key order included), then memdir's own. Any other chat model gets standalone
runs, by default on the agent's own model where memdir knows it (Anthropic, OpenAI).

For a graph of your own (``StateGraph``), give memdir a model and report each finished
turn, from the thread's checkpointed messages or with a callback handler on the run::

    memory = MemdirMiddleware("./memory", model="anthropic:claude-sonnet-5-5")
    config = {"configurable": {"thread_id": "t1"}}
    await graph.ainvoke({"messages": [("user", text)]}, config)
    await memory.areport_graph(graph, config)
    # or: graph.ainvoke(..., {**config, "callbacks": [memory.callback_handler()]})

Those runs are standalone: a graph calls its model itself, where no hook sees the
request as it is sent.

Each thread is shown memdir's memory instructions and the saved ``MEMORY.md`` index, after
the agent's system text (the same for all its requests, so they share one cached prefix);
when the memory folder changes after that, the next request gets memdir's notice, a
``<system-reminder>`` ``HumanMessage`` added to the thread's messages, instead of a new
index (``load_memory=False`` turns both off). Memory requests, fork and standalone, go
through a client of memdir's own made (in a worker thread) with the chat model's client
settings — base URL, key, organization, default headers — so they reach the same gateway
and organization. At most ``max_threads`` threads are held; an idle one past that is let go.

Only this module imports LangChain (the ``[langchain]`` extra).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import os
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from uuid import UUID

from memdir.errors import MissingExtraError, one_line

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        ChatMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )
    from langchain_core.tools import BaseTool, StructuredTool, ToolException
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise MissingExtraError("memdir.integrations.langchain", "langchain", one_line(exc)) from exc

from memdir.extract import ExtractConfig, MemoryExtractor, Notify
from memdir.integrations._host import (
    MEMORY_FUNCTION_DESCRIPTION,
    MEMORY_FUNCTION_SCHEMA,
    Backend,
    ClientSettings,
    Endpoint,
    GrowingReader,
    HostCore,
    HostTurn,
    LoadedMemory,
    SentRequest,
    Sessions,
)
from memdir.messages import (
    ContentBlock,
    ImageBlock,
    Message,
    OtherBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    derive_uuid,
)
from memdir.models import Model
from memdir.store import MemoryDir, MemoryFormat
from memdir.telemetry import Sink
from memdir.tools import MEMORY_TOOL_TYPE, MemoryTool, ToolContext, ToolError, ToolOutput

if TYPE_CHECKING:
    from langchain.agents.middleware import ModelRequest, ModelResponse
    from langchain.agents.middleware.types import ExtendedModelResponse
    from langgraph.runtime import Runtime

__all__ = [
    "MemdirCallbackHandler",
    "MemdirMiddleware",
    "langchain_memory_tool",
    "message_from_langchain",
    "messages_from_langchain",
    "messages_to_langchain",
]


# --- messages ---------------------------------------------------------------------------------

# Keys of a LangChain text block worth keeping on the wire; the rest (``index`` from a
# stream, LangChain's own ``id``) are bookkeeping that no provider takes back.
_TEXT_EXTRA = ("cache_control", "citations")


def _image_from_url(url: str, extra: Mapping[str, Any]) -> ImageBlock:
    """An image given by address; a ``data:`` URL becomes inline base64 data."""
    if url.startswith("data:") and ";base64," in url:
        head, _, data = url[5:].partition(";base64,")
        with contextlib.suppress(binascii.Error, ValueError):
            base64.b64decode(data, validate=True)
            return ImageBlock(media_type=head or None, data=data, extra=extra)
    return ImageBlock(url=url, extra=extra)


def _image(block: Mapping[str, Any]) -> ContentBlock:
    """An image in any of the shapes LangChain carries: Anthropic's ``source``, OpenAI's
    ``image_url``, LangChain's own ``base64``/``url`` fields."""
    extra = {k: block[k] for k in ("cache_control",) if block.get(k) is not None}
    source = block.get("source")
    if isinstance(source, Mapping):
        kind = source.get("type")
        if kind == "base64" and isinstance(source.get("data"), str):
            return ImageBlock(media_type=source.get("media_type"), data=source["data"], extra=extra)
        if kind == "url" and isinstance(source.get("url"), str):
            return ImageBlock(url=source["url"], extra=extra)
    address = block.get("image_url")
    if isinstance(address, Mapping):
        address = address.get("url")
    if isinstance(address, str):
        return _image_from_url(address, extra)
    if isinstance(block.get("base64"), str):
        media = block.get("mime_type")
        return ImageBlock(
            media_type=media if isinstance(media, str) else None, data=block["base64"]
        )
    if isinstance(block.get("url"), str):
        return _image_from_url(block["url"], extra)
    return OtherBlock(type=str(block.get("type", "image")), data=dict(block))


def _block(item: object) -> ContentBlock | None:
    """One item of a LangChain ``content`` list; None for what carries nothing."""
    if isinstance(item, str):
        return TextBlock(text=item) if item else None
    if not isinstance(item, Mapping):
        return None
    kind = item.get("type")
    if kind == "text" and isinstance(item.get("text"), str):
        extra = {k: item[k] for k in _TEXT_EXTRA if item.get(k) is not None}
        return TextBlock(text=item["text"], extra=extra)
    if kind == "thinking" and isinstance(item.get("thinking"), str):
        signature = item.get("signature")
        return ThinkingBlock(
            thinking=item["thinking"], signature=signature if isinstance(signature, str) else None
        )
    if kind == "reasoning" and isinstance(item.get("reasoning"), str):
        return ThinkingBlock(thinking=item["reasoning"])
    if kind in ("tool_use", "tool_call") and isinstance(item.get("name"), str):
        arguments = item.get("input", item.get("args"))
        return ToolUseBlock(
            id=str(item.get("id") or ""),
            name=item["name"],
            input=dict(arguments) if isinstance(arguments, Mapping) else {},
        )
    if kind in ("image", "image_url"):
        return _image(item)
    if kind == "tool_result" and isinstance(item.get("tool_use_id"), str):
        return ToolResultBlock(
            tool_use_id=item["tool_use_id"],
            content=_result_content(item.get("content")),
            is_error=bool(item.get("is_error")),
        )
    return OtherBlock(type=str(kind or "unknown"), data=dict(item))


def _blocks(content: object) -> list[ContentBlock]:
    if isinstance(content, str):
        return [TextBlock(text=content)] if content else []
    if not isinstance(content, list):
        return []
    return [b for b in (_block(item) for item in content) if b is not None]


def _result_content(content: object) -> str | tuple[TextBlock | ImageBlock, ...]:
    """A tool result's content: text as a string, or its text and image parts."""
    if isinstance(content, str):
        return content
    parts = [b for b in _blocks(content) if isinstance(b, TextBlock | ImageBlock)]
    if parts and all(isinstance(p, TextBlock) and not p.extra for p in parts):
        return "\n".join(p.text for p in parts if isinstance(p, TextBlock))
    return tuple(parts)


def _assistant_blocks(message: AIMessage) -> list[ContentBlock]:
    """The answer's blocks, then the tool calls its content does not already hold.

    Anthropic answers carry their calls as ``tool_use`` blocks in the content; OpenAI
    answers only in ``tool_calls``. Either way each call appears once.
    """
    blocks = _blocks(message.content)
    present = {b.id for b in blocks if isinstance(b, ToolUseBlock)}
    for call in message.tool_calls:
        call_id = call.get("id") or ""
        if call_id and call_id in present:
            continue
        blocks.append(ToolUseBlock(id=call_id, name=call["name"], input=dict(call["args"])))
    return blocks


_ROLES: dict[str, Role] = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "system": "system",
    "developer": "developer",
}


def message_from_langchain(message: BaseMessage, *, previous: str | None = None) -> Message:
    """One LangChain message as a memdir :class:`~memdir.messages.Message`.

    ``HumanMessage`` is a user message; ``AIMessage`` an assistant one, its tool calls as
    :class:`~memdir.messages.ToolUseBlock` s; ``ToolMessage`` a user message holding one
    :class:`~memdir.messages.ToolResultBlock` (``status="error"`` sets ``is_error``);
    ``SystemMessage`` a system one. Content may be a string or a list of blocks (text,
    thinking or reasoning, images in Anthropic's, OpenAI's or LangChain's own shape);
    block types memdir does not model are kept whole as
    :class:`~memdir.messages.OtherBlock`. The uuid is the message's ``id`` (LangGraph's
    ``add_messages`` gives every message one, kept across turns by a checkpointer), else
    derived from ``previous`` and the content, so the same conversation reads the same.
    """
    string = isinstance(message.content, str) and bool(message.content)
    blocks: list[ContentBlock]
    role: Role
    if isinstance(message, AIMessage):
        role = "assistant"
        blocks = _assistant_blocks(message)
        string = string and not message.tool_calls
    elif isinstance(message, ToolMessage):
        role, string = "user", False
        result = ToolResultBlock(
            tool_use_id=message.tool_call_id,
            content=_result_content(message.content),
            is_error=message.status == "error",
        )
        blocks = [result]
    elif isinstance(message, SystemMessage):
        role, blocks = "system", _blocks(message.content)
    elif isinstance(message, ChatMessage):
        role, blocks = _ROLES.get(message.role, "user"), _blocks(message.content)
    else:  # HumanMessage, and anything else a person or a tool said
        role, blocks = _ROLES.get(message.type, "user"), _blocks(message.content)
    # A message that is a whole <system-reminder> is the harness's (memdir's notice that
    # memory changed), not the user's words.
    meta = role == "user" and _is_reminder(message.content)
    built = Message(role=role, content=tuple(blocks), string_content=string, is_meta=meta)
    if isinstance(message.id, str) and message.id:
        return dataclasses.replace(built, uuid=message.id)
    return dataclasses.replace(built, uuid=derive_uuid(previous, built))


def _is_reminder(content: object) -> bool:
    if not isinstance(content, str):
        return False
    text = content.strip()
    return text.startswith("<system-reminder>") and text.endswith("</system-reminder>")


def messages_from_langchain(messages: Sequence[BaseMessage]) -> list[Message]:
    """:func:`message_from_langchain` for a conversation, one memdir message each."""
    out: list[Message] = []
    previous: str | None = None
    for message in messages:
        converted = message_from_langchain(message, previous=previous)
        out.append(converted)
        previous = converted.uuid
    return out


def _wire_block(block: ContentBlock) -> dict[str, Any]:
    """A block as LangChain carries Anthropic-style content."""
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text, **block.extra}
    if isinstance(block, ThinkingBlock):
        out: dict[str, Any] = {"type": "thinking", "thinking": block.thinking}
        if block.signature is not None:
            out["signature"] = block.signature
        return out
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": dict(block.input)}
    if isinstance(block, ImageBlock):
        if block.data is not None:
            source = {"type": "base64", "media_type": block.media_type, "data": block.data}
        else:
            source = {"type": "url", "url": block.url}
        return {"type": "image", "source": source, **block.extra}
    if isinstance(block, ToolResultBlock):
        content: Any = block.content
        if not isinstance(content, str):
            content = [_wire_block(b) for b in content]
        return {
            "type": "tool_result",
            "tool_use_id": block.tool_use_id,
            "content": content,
            "is_error": block.is_error,
        }
    return dict(block.data)


def _content(blocks: Sequence[ContentBlock], string: bool) -> str | list[str | dict[str, Any]]:
    if string and len(blocks) == 1 and isinstance(blocks[0], TextBlock):
        return blocks[0].text
    return [_wire_block(b) for b in blocks]


def messages_to_langchain(messages: Sequence[Message]) -> list[BaseMessage]:
    """memdir messages as LangChain ones, the reverse of :func:`messages_from_langchain`.

    A user message's tool results become one ``ToolMessage`` each (LangChain keeps one
    per call), followed by a ``HumanMessage`` for whatever else it held; an assistant
    message becomes an ``AIMessage`` whose calls are both ``tool_use`` blocks and
    ``tool_calls``. Ids are the uuids (with ``-1``, ``-2``, … for the further messages
    one memdir message turns into).
    """
    out: list[BaseMessage] = []
    for message in messages:
        produced: list[BaseMessage] = []
        if message.role in ("system", "developer"):
            produced.append(SystemMessage(content=_content(message.content, True)))
        elif message.role == "assistant":
            calls = [
                {"name": u.name, "args": dict(u.input), "id": u.id, "type": "tool_call"}
                for u in message.tool_uses
            ]
            content = _content(message.content, message.string_content)
            produced.append(AIMessage(content=content, tool_calls=calls))
        else:
            rest: list[ContentBlock] = []
            for block in message.content:
                if isinstance(block, ToolResultBlock):
                    result: Any = block.content
                    if not isinstance(result, str):
                        result = [_wire_block(b) for b in result]
                    status = "error" if block.is_error else "success"
                    produced.append(
                        ToolMessage(content=result, tool_call_id=block.tool_use_id, status=status)
                    )
                else:
                    rest.append(block)
            if rest or not produced:
                produced.append(HumanMessage(content=_content(rest, message.string_content)))
        for index, item in enumerate(produced):
            item.id = message.uuid if index == 0 else f"{message.uuid}-{index}"
            out.append(item)
    return out


# --- the memory tool --------------------------------------------------------------------------


def langchain_memory_tool(
    memory_dir: MemoryDir | str | os.PathLike[str],
    *,
    allow_private_secrets: bool = False,
    format: MemoryFormat | None = None,
) -> BaseTool:
    """Anthropic's client-side ``memory`` tool as a LangChain tool, over ``memory_dir``.

    ``ChatAnthropic`` sends it as the API's own tool (``memory_20250818``: Claude knows
    its commands); other chat models get a JSON schema of the same commands. memdir's
    :class:`~memdir.memory_tool.MemoryTool` does the work (``/memories/x`` is
    ``<memory_dir>/x``, containment, the credential guard, Claude Code's file layout); a
    command it refuses comes back to the model as an error result.
    """
    tool = MemoryTool(memory_dir, allow_private_secrets=allow_private_secrets, format=format)

    def answer(output: ToolOutput) -> str:
        if output.is_error:
            raise ToolException(output.content)  # sent back as an error result
        return output.content

    def run(**command: Any) -> str:
        try:
            return answer(tool.run_sync(command, ToolContext()))
        except ToolError as exc:
            raise ToolException(str(exc)) from exc

    async def arun(**command: Any) -> str:
        try:
            return answer(await tool.run(command, ToolContext()))
        except ToolError as exc:
            raise ToolException(str(exc)) from exc

    return StructuredTool(
        name=tool.name,
        description=MEMORY_FUNCTION_DESCRIPTION,
        args_schema=MEMORY_FUNCTION_SCHEMA,
        func=run,
        coroutine=arun,
        handle_tool_error=True,
        extras={"provider_tool_definition": {"type": MEMORY_TOOL_TYPE, "name": tool.name}},
    )


# --- the host's request -----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Capture:
    """A model request of the agent's, as the middleware saw it go by."""

    request: ModelRequest[Any]
    messages: tuple[BaseMessage, ...]
    """The request's messages (the list is the host's; this copy is ours)."""
    sent_at: float
    """When it was sent, on ``time.time``."""


def _is_direct_anthropic(chat_model: object) -> bool:
    """``ChatAnthropic`` on the Anthropic API: the one whose requests memdir can repeat."""
    if not type(chat_model).__module__.startswith("langchain_anthropic"):
        return False  # and so never imports it (a second or more, on the host's loop)
    try:
        from langchain_anthropic import ChatAnthropic
    except ModuleNotFoundError:
        return False
    return isinstance(chat_model, ChatAnthropic) and chat_model._llm_type == "anthropic-chat"


def _reported_cache_use(messages: Sequence[BaseMessage]) -> bool:
    """Whether the agent's last answer says its request read or wrote the prompt cache:
    then it carried breakpoints, even where they were added after this middleware saw
    it (a caching middleware listed after this one)."""
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            usage = message.usage_metadata
            details = usage.get("input_token_details") if usage is not None else None
            if details is None:
                return False
            return bool(details.get("cache_read") or details.get("cache_creation"))
    return False


def _is_chat_openai(chat_model: object) -> bool:
    """``ChatOpenAI`` itself (not Azure's, which shapes its requests its own way)."""
    if not type(chat_model).__module__.startswith("langchain_openai"):
        return False  # and so never imports it
    try:
        from langchain_openai import ChatOpenAI
    except ModuleNotFoundError:
        return False
    return type(chat_model) is ChatOpenAI


def _payload(capture: _Capture) -> dict[str, Any] | None:
    """The body ``langchain-anthropic`` or ``langchain-openai`` sent for the captured
    request: the tools bound as ``create_agent`` binds them, then the model's own payload
    builder on the messages as the chat model normalises them. None where that cannot be
    told (see the module)."""
    from langchain_core.language_models._utils import _normalize_messages

    request = capture.request
    chat_model: Any = request.model
    if request.response_format is not None:
        return None
    if not (_is_direct_anthropic(chat_model) or _is_chat_openai(chat_model)):
        return None
    with warnings.catch_warnings():
        # The agent already heard any warning the binding gives (a dropped tool, say).
        warnings.simplefilter("ignore")
        if request.tools:
            bound = chat_model.bind_tools(
                request.tools, tool_choice=request.tool_choice, **request.model_settings
            )
        else:
            bound = chat_model.bind(**request.model_settings)
        kwargs = dict(getattr(bound, "kwargs", {}))
        system = [request.system_message] if request.system_message is not None else []
        messages = _normalize_messages([*system, *capture.messages])
        payload: dict[str, Any] = chat_model._get_request_payload(messages, **kwargs)
    return payload


# --- the middleware ---------------------------------------------------------------------------


@dataclass
class _Thread:
    """What the middleware keeps per conversation: its messages read so far, and the
    last request its agent sent."""

    conversation: GrowingReader[BaseMessage] = field(
        default_factory=lambda: GrowingReader(_read_one)
    )
    capture: _Capture | None = None
    notices: list[str] = field(default_factory=list)
    """Notices that memory changed, for the thread's next ``before_model``."""


def _read_one(message: BaseMessage, previous: str | None) -> list[Message]:
    return [message_from_langchain(message, previous=previous)]


def _thread_of(runtime: object) -> str | None:
    """The LangGraph thread a node runs in: its ``thread_id``, None without a checkpointer."""
    info = getattr(runtime, "execution_info", None)
    thread = getattr(info, "thread_id", None)
    if thread is None:
        with contextlib.suppress(Exception):  # outside a graph there is no config
            from langgraph.config import get_config

            thread = get_config().get("configurable", {}).get("thread_id")
    return str(thread) if thread is not None else None


def _conversation_key(thread: str | None, messages: Sequence[object]) -> str | None:
    """Which conversation a turn or a request belongs to: its thread, or, for an agent
    run without a checkpointer (a server that passes each user's history itself), the id
    LangGraph gave its first message, which comes back with the history it returns."""
    if thread is not None:
        return thread
    first = getattr(messages[0], "id", None) if messages else None
    return f"first-message:{first}" if isinstance(first, str) and first else None


def _endpoint(chat_model: Any) -> Endpoint | None:
    """The chat model's endpoint, read from the SDK client it sends through, for
    ``ChatAnthropic`` on the Anthropic API and ``ChatOpenAI``."""
    if _is_direct_anthropic(chat_model):
        client, name = chat_model._async_client, chat_model.model
    elif _is_chat_openai(chat_model):
        client, name = chat_model.root_async_client, chat_model.model_name
    else:
        return None
    settings = ClientSettings.of(client) if client is not None else None
    return Endpoint(settings, str(name)) if settings is not None else None


class MemdirMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """A ``create_agent`` middleware that saves memories after each turn of the agent.

    ``memory_dir``: where memories live; default ``$MEMDIR_DIR``, else the folder Claude
    Code keeps for the working directory's project. ``model``: memdir's model for the
    runs that do not fork (a :class:`~memdir.models.Model` or a spec such as
    ``anthropic:claude-sonnet-5-5``); default the agent's own model on its endpoint (a
    client of memdir's own with the chat model's settings) when it is ``ChatAnthropic``
    or ``ChatOpenAI``, else ``$MEMDIR_MODEL``, else the offline model. A fork always runs
    on the agent's model: that is where its cache is. ``config``, ``sink``: as for
    :class:`~memdir.extract.MemoryExtractor`; ``notify`` receives the
    :class:`~memdir.extract.MemorySaved` notices. ``backend``: where turns go (default:
    extraction in this process). ``load_memory``: add memdir's memory instructions and
    the saved ``MEMORY.md`` index to the agent's system message, after its own text
    (default True; the index as it was when the thread began, so its requests share one
    cached prefix, and a notice in the thread when memory changed since: see
    :meth:`abefore_model`).

    ``memory_tool=True`` gives the agent :func:`langchain_memory_tool`. A fork is shown
    the agent's tools, and can save a memory only through one of them: without Write,
    Edit or a ``memory`` tool among the agent's own, the default planner (``mode="auto"``)
    sends memdir's standalone request instead. With it, the agent may also look up and
    save memories itself; a turn in which it saved one is not extracted again.

    Each thread (``config={"configurable": {"thread_id": ...}}``; a run without one is
    named by its first message's id) has its own cursor: every message of a thread is
    looked at by one run. At most ``max_threads`` threads are held at once; an idle one
    past that is let go and read again when it comes back. One middleware serves one
    agent; a subagent gets its own. A turn that stops with tool calls pending (a call
    limit reached) is not reported: the next turn covers its messages.
    """

    def __init__(
        self,
        memory_dir: str | os.PathLike[str] | MemoryDir | None = None,
        model: Model | str | None = None,
        *,
        config: ExtractConfig | None = None,
        sink: Sink | None = None,
        notify: Notify | None = None,
        memory_tool: bool = False,
        backend: Backend | None = None,
        load_memory: bool = True,
        max_threads: int = 256,
    ) -> None:
        self._core = HostCore(
            memory_dir,
            model,
            config=config,
            sink=sink,
            notify=notify,
            backend=backend,
            max_conversations=max_threads,
        )
        self.memory_dir = self._core.memory_dir
        self.model = self._core.model
        self.config = self._core.config
        self.sink = sink
        self.notify = notify
        self.load_memory = load_memory
        if memory_tool:
            # Registered with the agent: its model may read and write memory itself, and
            # a fork shown the agent's tools finds one it can save with.
            self.tools = [
                langchain_memory_tool(
                    self.memory_dir,
                    allow_private_secrets=self.config.allow_private_secrets,
                    format=self.config.memory_format,
                )
            ]
        self._lock = threading.Lock()
        self._threads: Sessions[_Thread] = Sessions(_Thread, max_threads)

    # --- hooks ------------------------------------------------------------------------------

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Tell the model that memory changed since its thread loaded it (see
        :meth:`abefore_model`)."""
        if not self.load_memory:
            return None
        messages = state.get("messages") or []
        key = _conversation_key(_thread_of(runtime), messages)
        return self._noticed(key, self._core.load_memory(key))

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Tell the model that memory changed since its thread loaded it.

        The system text keeps the instructions and index as the thread first loaded them
        (the cached prefix); the notice is a ``HumanMessage`` added to the agent's state,
        after the conversation so far, so the checkpointer keeps it (and a server that
        hands each turn the history it got back has it too): every later request sends
        it at the same place, and each starts with the one before. Added only to the
        model's request, from ``wrap_model_call``, it would be gone from the next one,
        whose messages would then differ from that point on. It is read back as a meta
        message (harness text, not the user's words).
        """
        if not self.load_memory:
            return None
        messages = state.get("messages") or []
        key = _conversation_key(_thread_of(runtime), messages)
        return self._noticed(key, await self._core.aload_memory(key))

    def _noticed(self, key: str | None, loaded: LoadedMemory | None) -> dict[str, Any] | None:
        """The state update that adds the notices due to ``key``'s thread, if any."""
        with self._lock:
            entry = self._threads.get(key)
            notices, entry.notices = entry.notices, []
        if loaded is not None and loaded.notice is not None:
            notices.append(loaded.notice)
        if not notices:
            return None
        return {"messages": [HumanMessage(content=notice) for notice in notices]}

    def _show(
        self, request: ModelRequest[Any], key: str | None, loaded: LoadedMemory | None
    ) -> ModelRequest[Any]:
        if loaded is not None and loaded.notice is not None:
            # Memory changed between before_model and now: this request goes as the
            # state has it, and the thread's next one carries the notice.
            with self._lock:
                self._threads.get(key).notices.append(loaded.notice)
        return _shown(request, loaded)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Show the thread its memory, note the request (for the fork), and send it."""
        key = _conversation_key(_thread_of(request.runtime), request.messages)
        if self.load_memory:
            request = self._show(request, key, self._core.load_memory(key))
        self._note(request, key)
        return handler(request)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Show the thread its memory, note the request (for the fork), and send it."""
        key = _conversation_key(_thread_of(request.runtime), request.messages)
        if self.load_memory:
            request = self._show(request, key, await self._core.aload_memory(key))
        self._note(request, key)
        return await handler(request)

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Report the finished turn; the extraction runs in the background."""
        self._turn_ended(state.get("messages") or [], _thread_of(runtime), use_capture=True)
        return None

    async def aafter_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Report the finished turn; the extraction runs as a task on this loop."""
        self._turn_ended(state.get("messages") or [], _thread_of(runtime), use_capture=True)
        return None

    def _note(self, request: ModelRequest[Any], key: str | None) -> None:
        # Only references are kept here, on the agent's hot path; the request is rebuilt
        # once per turn, at its end, and only the last one of the turn.
        capture = _Capture(request=request, messages=tuple(request.messages), sent_at=time.time())
        with contextlib.suppress(Exception):  # memdir's own client, built in a thread now
            endpoint = _endpoint(request.model)
            if endpoint is not None:
                self._core.host_model(endpoint)
        with self._lock:
            self._threads.get(key).capture = capture

    # --- plain graphs -----------------------------------------------------------------------

    def report(self, messages: Sequence[BaseMessage], *, thread_id: str | None = None) -> None:
        """Report a finished turn of a graph of your own: ``messages`` is the thread's whole
        conversation (``result["messages"]`` of ``graph.ainvoke``). Returns at once.

        The run is standalone (no middleware saw the model's request), on the ``model``
        this middleware was given: with none, there is no agent's model to fall back on,
        and ``$MEMDIR_MODEL`` or the offline model is used."""
        self._turn_ended(messages, thread_id, use_capture=False)

    async def areport_graph(self, graph: Any, config: Mapping[str, Any]) -> None:
        """Report the turn that ``await graph.ainvoke(..., config)`` just finished, reading
        the thread's messages from the graph's checkpointer (``graph.aget_state``)."""
        snapshot = await graph.aget_state(config)
        messages = snapshot.values.get("messages") or []
        thread = (config.get("configurable") or {}).get("thread_id")
        self.report(messages, thread_id=str(thread) if thread is not None else None)

    def callback_handler(self) -> MemdirCallbackHandler:
        """A LangChain callback handler that reports each finished run of a graph: pass it
        as ``config={"callbacks": [handler], "configurable": {"thread_id": ...}}``."""
        return MemdirCallbackHandler(self)

    # --- waiting and closing ----------------------------------------------------------------

    def extractor(self, thread_id: str | None = None) -> MemoryExtractor | None:
        """The extractor of a thread (its ``cursor`` tells how far memory has read), if
        that thread has reported a turn and is still held (with the default backend)."""
        return self._core.extractor(thread_id)

    async def drain(self, timeout: float = 60.0) -> None:  # noqa: ASYNC109 (the extractor's)
        """Wait up to ``timeout`` seconds for every thread's extractions so far."""
        await self._core.backend.drain(timeout)

    def drain_sync(self, timeout: float = 60.0) -> None:
        """:meth:`drain` for an agent run with ``invoke``: blocks until done or timeout."""
        self._core.backend.drain_sync(timeout)

    def close(self) -> None:
        """Stop the extractors' background threads (those of ``invoke`` runs)."""
        self._core.close()

    # --- one turn ---------------------------------------------------------------------------

    def _turn_ended(
        self, messages: Sequence[BaseMessage], thread: str | None, *, use_capture: bool
    ) -> None:
        """Hand the turn to the backend; never raises into the agent."""

        def turn() -> HostTurn | None:
            if not messages or not self.config.enabled:
                return None
            last = messages[-1]
            if isinstance(last, AIMessage) and last.tool_calls:
                return None  # calls pending: not a finished turn
            key = _conversation_key(thread, messages)
            with self._lock:
                entry = self._threads.get(key)
                capture, entry.capture = entry.capture, None
                conversation, _ = entry.conversation.read(messages)
            capture = capture if use_capture else None
            endpoint = request = None
            if capture is not None:
                try:
                    endpoint = _endpoint(capture.request.model)
                    if endpoint is not None and self.config.mode != "standalone":
                        request = self._request(capture, messages, endpoint)
                except Exception:
                    # A request that cannot be rebuilt (a chat model's configuration the
                    # payload builder refuses, say) still leaves the turn to remember.
                    request = None
            return HostTurn(
                messages=conversation,
                conversation=key,
                request=request,
                endpoint=endpoint,
                fallback=None if request is not None else "no request of the agent's to fork",
                last_request_at=capture.sent_at if capture is not None else None,
            )

        self._core.report(turn)

    def _request(
        self, capture: _Capture, messages: Sequence[BaseMessage], endpoint: Endpoint
    ) -> SentRequest | None:
        """The host's last request, rebuilt as it was sent, when it can be exactly."""
        count = len(capture.messages)
        sent = [m.id for m in capture.messages]
        if count > len(messages) or None in sent or sent != [m.id for m in messages[:count]]:
            return None  # the request is not the conversation's start
        payload = _payload(capture)
        if payload is None or payload.get("model") != endpoint.model:
            return None
        if endpoint.settings.provider == "openai":
            if not isinstance(payload.get("messages"), list):
                return None  # the Responses API (``input``): memdir speaks Chat Completions
            return SentRequest(wire="chat", body=payload, replaces=count, sent_at=capture.sent_at)
        return SentRequest(
            wire="anthropic",
            body=payload,
            replaces=count,
            sent_at=capture.sent_at,
            # A caching middleware listed after this one adds breakpoints this one did
            # not see; the answer's cache use says they were there.
            cached=_reported_cache_use(messages),
        )


def _shown(request: ModelRequest[Any], loaded: LoadedMemory | None) -> ModelRequest[Any]:
    """``request`` with memdir's memory instructions and the thread's index after the
    agent's own system text (the same for every request of the thread)."""
    if loaded is None:
        return request  # memory that cannot be read is not shown; the request goes on
    extra = f"{loaded.instructions}\n\n{loaded.index}"
    system = request.system_message
    content: str | list[str | dict[str, Any]]
    if system is None:
        content = extra
    elif isinstance(system.content, str):
        content = f"{system.content}\n\n{extra}" if system.content else extra
    else:
        # Into the last text block, where a caching middleware's marker is: a block of
        # its own after it would take a breakpoint of the fork's.
        blocks = list(system.content)
        last = blocks[-1] if blocks else None
        if isinstance(last, dict) and last.get("type") == "text":
            blocks[-1] = {**last, "text": f"{last.get('text', '')}\n\n{extra}"}
        else:
            blocks.append({"type": "text", "text": extra})
        content = blocks
    return request.override(system_message=SystemMessage(content=content))


class MemdirCallbackHandler(BaseCallbackHandler):
    """Reports each finished run of a LangGraph graph to a :class:`MemdirMiddleware`.

    The graph's run is the root run (no parent): when it ends, its output's ``messages``
    are the thread's conversation (the whole of it with a checkpointer). A run that
    stopped at an interrupt has not finished its turn and is not reported. Inline, so
    that from ``ainvoke`` the extraction is a task on the graph's own loop.
    """

    run_inline = True

    def __init__(self, middleware: MemdirMiddleware) -> None:
        self.middleware = middleware
        self._threads: dict[UUID, str | None] = {}

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: dict[str, Any] | Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Note the root run's thread (LangGraph puts it in the run's metadata)."""
        if parent_run_id is None:
            thread = (metadata or {}).get("thread_id")
            self._threads[run_id] = str(thread) if thread is not None else None

    def on_chain_end(
        self,
        outputs: dict[str, Any] | Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """At the end of the root run, report its messages."""
        if parent_run_id is not None:
            return
        thread = self._threads.pop(run_id, None)
        if not isinstance(outputs, Mapping) or "__interrupt__" in outputs:
            return
        messages = outputs.get("messages")
        if isinstance(messages, list) and all(isinstance(m, BaseMessage) for m in messages):
            self.middleware.report(messages, thread_id=thread)

    def on_chain_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """A failed run is no finished turn: forget it."""
        self._threads.pop(run_id, None)
