"""memdir as a pydantic-ai capability: memories saved after every run of an agent.

A run of a pydantic-ai agent is one turn of its conversation. :class:`MemdirCapability`
reports each run that ends with an answer to a :class:`~memdir.extract.MemoryExtractor`
(one per conversation, by pydantic-ai's ``conversation_id``), whose memory agent then
works in the background while the host goes on::

    from pydantic_ai import Agent
    from memdir.integrations.pydantic_ai import MemdirCapability

    memory = MemdirCapability("memory/", memory_tool=True)
    agent = Agent("anthropic:claude-sonnet-5-5", capabilities=[memory])
    result = await agent.run("I'm Ana; we use polars here.")
    result = await agent.run("...", message_history=result.all_messages())
    await memory.drain()  # before the process exits: let the last extraction finish

It hooks ``wrap_run`` (a run that fails or is cancelled is no turn: its messages come
with the next one) and ``wrap_model_request`` (to see each request go out).

**Sharing the host's prompt cache.** With pydantic-ai's ``AnthropicModel`` on an
``anthropic.AsyncAnthropic`` client, the memory agent is a fork: it sends the host's last
request again — model, system blocks, tools, parameters, beta header and messages, byte
for byte — then the final answer and memdir's prompt, so everything up to the final
answer is read from what that request wrote to the cache. The request is recorded as the
client sent it, not rebuilt from what a capability is shown: ``ModelRequestContext``
holds pydantic-ai's messages, settings and tool definitions before its Anthropic adapter
renders them, and that rendering (key order, merged turns, ``max_tokens`` from the
model's profile, betas, where ``cache_control`` goes, native tools swapped in) is the
adapter's own, thousands of lines to reproduce byte for byte and to follow release by
release. So a hook on the client's HTTP pool keeps the body of each ``POST …/v1/messages``
sent while one of this capability's runs has a model request in flight; every other
request of the client (an agent called from a tool, the fork itself) passes untouched.
pydantic-ai's ``OpenAIChatModel`` on an ``openai.AsyncOpenAI`` client is recorded the
same way (``POST …/chat/completions``), and its fork sends that request's messages —
the system message among them — tools and parameters as they were, then the final
answer and memdir's prompt; OpenAI caches every prefix without breakpoints.

A fork is shown the agent's tools and no others, so it can only save through one of
them: ``memory_tool=True`` gives the agent Anthropic's client-side ``memory`` tool over
the memory directory (without it, or a ``Write``/``Edit`` of the agent's own, the default
planner sends memdir's standalone request). ``cache=True`` (the default) turns on
pydantic-ai's prompt caching for such models when the agent's settings leave it unset.

Runs are standalone (memdir's own request, windowed, with its own cache) for other
providers (the Responses API model among them), for a client memdir cannot record
(Bedrock, Vertex, a durable-execution worker, a ``FallbackModel``), and for an Anthropic
request with no cache breakpoint at all, whose cache holds nothing to read;
:attr:`MemdirCapability.fallback_reason` says which.

Memory requests, fork and standalone, go through a client of memdir's own made (in a
worker thread) with the host client's settings — base URL, key, organization, default
headers, a custom ``http_client``'s transport — so the host may close its client before
:meth:`MemdirCapability.drain`. Each conversation is shown memdir's memory instructions
and the saved ``MEMORY.md`` index, after the agent's own instructions, as they were when
the conversation began; when the memory folder changes after that, the next request gets
memdir's notice (a ``<system-reminder>`` user prompt, kept in the history) instead of a
new index (``load_memory=False`` turns both off).

:func:`messages_from_pydantic_ai` and :func:`messages_to_pydantic_ai` convert between
pydantic-ai's ``ModelMessage`` s and memdir :class:`~memdir.messages.Message` s. Only this
module imports pydantic-ai (the ``[pydantic-ai]`` extra).
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import dataclasses
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from memdir.errors import MissingExtraError, one_line

try:
    from pydantic_ai import messages as _pa
    from pydantic_ai.capabilities import (
        AbstractCapability,
        WrapModelRequestHandler,
        WrapRunHandler,
    )
    from pydantic_ai.exceptions import ToolFailed
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.models.wrapper import WrapperModel
    from pydantic_ai.native_tools import AbstractNativeTool
    from pydantic_ai.native_tools import MemoryTool as NativeMemoryTool
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.tools import DeferredToolRequests, RunContext, Tool
    from pydantic_ai.toolsets import FunctionToolset
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise MissingExtraError(
        "memdir.integrations.pydantic_ai", "pydantic-ai", one_line(exc)
    ) from exc

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
    SentRequest,
    Sessions,
)
from memdir.integrations._wire import add_pool_hook
from memdir.messages import (
    ContentBlock,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    derive_uuid,
)
from memdir.models import Model
from memdir.tools import MemoryTool, ToolError

if TYPE_CHECKING:
    from pydantic_ai.agent.abstract import AgentInstructions, AgentModelSettings
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models import Model as PydanticModel
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.tools import AgentNativeTool
    from pydantic_ai.toolsets import AgentToolset

    from memdir.telemetry import Sink

__all__ = ["MemdirCapability", "messages_from_pydantic_ai", "messages_to_pydantic_ai"]

_log = logging.getLogger("memdir.integrations.pydantic_ai")

# ---------------------------------------------------------------------------------------
# ModelMessage -> Message


def _user_items(content: str | Sequence[Any]) -> list[ContentBlock]:
    """A user prompt's content as blocks: text and images, other attachments named in text
    (the memory agent reads the conversation; a PDF's bytes would tell it nothing)."""
    if isinstance(content, str):
        return [TextBlock(text=content)] if content else []
    blocks: list[ContentBlock] = []
    for item in content:
        if isinstance(item, str):
            if item:
                blocks.append(TextBlock(text=item))
        elif isinstance(item, _pa.TextContent):
            if item.content:
                blocks.append(TextBlock(text=item.content))
        elif isinstance(item, _pa.ImageUrl):
            blocks.append(ImageBlock(url=item.url))
        elif isinstance(item, _pa.BinaryContent):
            if item.is_image:
                blocks.append(ImageBlock(media_type=item.media_type, data=item.base64))
            else:
                blocks.append(TextBlock(text=f"[attached {item.media_type} file]"))
        elif isinstance(item, _pa.FileUrl):
            blocks.append(TextBlock(text=f"[attached file: {item.url}]"))
        elif isinstance(item, _pa.UploadedFile):
            blocks.append(TextBlock(text=f"[attached file: {item.file_id}]"))
        # A CachePoint is a marker for the provider, not content.
    return blocks


def _tool_result(part: _pa.ToolReturnPart) -> ToolResultBlock:
    text = part.model_response_str(wrap_if_error=False)
    images = tuple(
        ImageBlock(media_type=f.media_type, data=f.base64)
        for f in part.files
        if isinstance(f, _pa.BinaryContent) and f.is_image
    )
    content: str | tuple[TextBlock | ImageBlock, ...] = text
    if images:
        content = ((TextBlock(text=text),) if text else ()) + images
    return ToolResultBlock(
        tool_use_id=part.tool_call_id,
        content=content,
        is_error=part.outcome in _pa.ERROR_OUTCOMES,
    )


def _request_messages(request: _pa.ModelRequest) -> list[Message]:
    """A request as memdir messages: its system prompts, then what the model is told.

    Instructions are not here: like a system prompt passed to the API, they are the
    developer's, not the conversation's. pydantic-ai's own feedback (a retry) with no word
    of the user's is meta, as harness text is, and so is a prompt that is a whole
    ``<system-reminder>`` (memdir's notice that memory changed): a meta message of its
    own after the rest, so that the request reads the same whether pydantic-ai merged it
    into the request before it (as it does with the history a run is given) or not.
    """
    system: list[ContentBlock] = []
    blocks: list[ContentBlock] = []
    reminders: list[ContentBlock] = []
    spoken = False
    for part in request.parts:
        if isinstance(part, _pa.SystemPromptPart):
            if part.content:
                system.append(TextBlock(text=part.content))
        elif isinstance(part, _pa.UserPromptPart) and _is_reminder(part.content):
            reminders.append(TextBlock(text=str(part.content)))
        elif isinstance(part, _pa.UserPromptPart):
            items = _user_items(part.content)
            spoken = spoken or bool(items)
            blocks += items
        elif isinstance(part, _pa.ToolReturnPart):
            blocks.append(_tool_result(part))
        elif isinstance(part, _pa.RetryFeedbackPart):
            blocks.append(TextBlock(text=part.model_response()))
        elif getattr(part, "part_kind", None) == "retry-prompt":
            # The deprecated RetryPromptPart, still found in histories built by hand.
            feedback = str(part.model_response())  # type: ignore[union-attr]
            call_id = getattr(part, "tool_call_id", None)
            if getattr(part, "tool_name", None) and isinstance(call_id, str):
                blocks.append(ToolResultBlock(tool_use_id=call_id, content=feedback, is_error=True))
            else:
                blocks.append(TextBlock(text=feedback))
        # Deltas, baselines and compaction records steer pydantic-ai, not the model's talk.
    out: list[Message] = []
    when = request.timestamp
    if system:
        out.append(Message(role="system", content=tuple(system), timestamp=when))
    if blocks:
        meta = not spoken and not any(isinstance(b, ToolResultBlock) for b in blocks)
        out.append(Message(role="user", content=tuple(blocks), timestamp=when, is_meta=meta))
    if reminders:
        out.append(Message(role="user", content=tuple(reminders), timestamp=when, is_meta=True))
    return out


def _is_reminder(content: object) -> bool:
    """Whether a user prompt is a ``<system-reminder>`` and nothing else: harness text."""
    if not isinstance(content, str):
        return False
    text = content.strip()
    return text.startswith("<system-reminder>") and text.endswith("</system-reminder>")


def _response_message(response: _pa.ModelResponse) -> list[Message]:
    blocks: list[ContentBlock] = []
    for part in response.parts:
        if isinstance(part, _pa.TextPart):
            if part.content:
                blocks.append(TextBlock(text=part.content))
        elif isinstance(part, _pa.ThinkingPart):
            # A signature is only good with the provider that made it; redacted thinking
            # has no text to remember.
            if part.content:
                signature = part.signature if part.provider_name == "anthropic" else None
                blocks.append(ThinkingBlock(thinking=part.content, signature=signature))
        elif isinstance(part, _pa.ToolCallPart):
            raw = part.args if isinstance(part.args, str) else None
            blocks.append(
                ToolUseBlock(
                    id=part.tool_call_id,
                    name=part.tool_name,
                    input=part.args_as_dict(),
                    raw_input=raw,
                )
            )
        # Provider-run tools, files and compaction summaries carry nothing to remember
        # that the text around them does not say.
    if not blocks:
        return []
    return [Message(role="assistant", content=tuple(blocks), timestamp=response.timestamp)]


def _read(message: ModelMessage, previous: str | None) -> list[Message]:
    """One pydantic-ai message as memdir messages, their uuids chained after ``previous``
    as the other converters chain theirs: the same history gives the same ids."""
    if isinstance(message, _pa.ModelRequest):
        read = _request_messages(message)
    else:
        read = _response_message(message)
    out = []
    for item in read:
        previous = derive_uuid(previous, item)
        out.append(dataclasses.replace(item, uuid=previous))
    return out


def messages_from_pydantic_ai(messages: Sequence[ModelMessage]) -> list[Message]:
    """pydantic-ai's message history (``result.all_messages()``) as memdir messages.

    A ``ModelRequest`` gives a ``system`` message for its system prompts, then a user
    message with its prompts, tool returns (``is_error`` for a failed or retried call)
    and retry feedback; a ``ModelResponse`` gives an assistant message with its text,
    thinking and tool calls. Images are kept; other attachments are named in text.
    Instructions, provider-run tools and pydantic-ai's bookkeeping parts are left out.
    Uuids are derived from the content, so converting the same history again gives the
    same ids.
    """
    out: list[Message] = []
    previous: str | None = None
    for message in messages:
        read = _read(message, previous)
        if read:
            previous = read[-1].uuid
        out += read
    return out


# ---------------------------------------------------------------------------------------
# Message -> ModelMessage


def _image_content(block: ImageBlock) -> Any:
    if block.data is not None:
        try:
            data = base64.b64decode(block.data, validate=True)
        except (binascii.Error, ValueError):
            return None
        return _pa.BinaryContent(data=data, media_type=block.media_type or "image/png")
    if block.url is not None:
        return _pa.ImageUrl(url=block.url)
    return None


def _result_content(block: ToolResultBlock) -> Any:
    if isinstance(block.content, str):
        return block.content
    items: list[Any] = []
    for item in block.content:
        if isinstance(item, TextBlock):
            items.append(item.text)
        else:
            image = _image_content(item)
            if image is not None:
                items.append(image)
    return items[0] if len(items) == 1 and isinstance(items[0], str) else items


def _to_request(message: Message, names: Mapping[str, str]) -> _pa.ModelRequest | None:
    parts: list[Any] = []
    prompt: list[Any] = []
    for block in message.content:
        if message.role in ("system", "developer"):
            if isinstance(block, TextBlock):
                parts.append(_pa.SystemPromptPart(content=block.text))
        elif isinstance(block, ToolResultBlock):
            parts.append(
                _pa.ToolReturnPart(
                    tool_name=names.get(block.tool_use_id, "unknown"),
                    content=_result_content(block),
                    tool_call_id=block.tool_use_id,
                    outcome="failed" if block.is_error else "success",
                )
            )
        elif isinstance(block, TextBlock):
            prompt.append(block.text)
        elif isinstance(block, ImageBlock):
            image = _image_content(block)
            if image is not None:
                prompt.append(image)
    if prompt:
        content = prompt[0] if len(prompt) == 1 and isinstance(prompt[0], str) else prompt
        parts.append(_pa.UserPromptPart(content=content))
    if not parts:
        return None
    return _pa.ModelRequest(parts=parts, timestamp=message.timestamp)


def _to_response(message: Message) -> _pa.ModelResponse | None:
    parts: list[Any] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            parts.append(_pa.TextPart(content=block.text))
        elif isinstance(block, ThinkingBlock):
            parts.append(
                _pa.ThinkingPart(
                    content=block.thinking,
                    signature=block.signature,
                    provider_name="anthropic" if block.signature else None,
                )
            )
        elif isinstance(block, ToolUseBlock):
            parts.append(
                _pa.ToolCallPart(
                    tool_name=block.name, args=dict(block.input), tool_call_id=block.id
                )
            )
    if not parts:
        return None
    if message.timestamp is None:
        return _pa.ModelResponse(parts=parts)
    return _pa.ModelResponse(parts=parts, timestamp=message.timestamp)


def messages_to_pydantic_ai(messages: Sequence[Message]) -> list[ModelMessage]:
    """memdir messages as a pydantic-ai ``message_history``: a transcript loaded with
    :func:`memdir.load_transcript`, say, to go on with in a pydantic-ai agent.

    System messages become ``SystemPromptPart`` s; user text and images a
    ``UserPromptPart``; tool results ``ToolReturnPart`` s (named after the call they
    answer; a failed one ``outcome="failed"``); assistant text, thinking and tool calls
    ``TextPart``, ``ThinkingPart`` and ``ToolCallPart`` s. Blocks of other types are left
    out, and so is a message with nothing left.
    """
    names: dict[str, str] = {}
    out: list[ModelMessage] = []
    for message in messages:
        converted: ModelMessage | None
        if message.role == "assistant":
            names.update((use.id, use.name) for use in message.tool_uses)
            converted = _to_response(message)
        else:
            converted = _to_request(message, names)
        if converted is not None:
            out.append(converted)
    return out


def _new_history() -> GrowingReader[ModelMessage]:
    """One conversation's history read as it grows, each message once (a history only
    grows between runs, ``message_history=result.all_messages()``, or is reloaded equal)."""
    return GrowingReader(_read)


# ---------------------------------------------------------------------------------------
# The host's request, as its client sent it


@dataclass(frozen=True)
class _Sent:
    body: dict[str, Any]
    beta: str | None
    at: float


@dataclass
class _Step:
    """The last model request of a run."""

    history_length: int
    """Messages in the run's history when the request was answered (the response not yet
    among them): the history the request stood for."""
    model: PydanticModel
    sent: _Sent | None = None


@dataclass
class _Run:
    """One run of the agent, as far as memdir follows it."""

    last: _Step | None = None
    requesting: int = 0
    """Model requests of the run in flight: the client's requests are kept only then, so
    those of an agent called from one of its tools (which run between its requests)
    are not taken for its own."""
    latest: _Sent | None = None
    sent_count: int = 0


_RUN: contextvars.ContextVar[_Run | None] = contextvars.ContextVar(
    "memdir_pydantic_ai_run", default=None
)
"""The run whose code this is. Set around the whole run, not only around a model
request: a streamed request is sent from a task the run started before that request,
which sees what was set then."""


async def _record_request(request: Any) -> None:
    """An HTTP request hook: keep the body of a Messages (or Chat Completions) request
    a run sent."""
    run = _RUN.get()
    if run is None or not run.requesting:
        return
    try:
        path = request.url.path
        if request.method != "POST" or not path.endswith(("/v1/messages", "/chat/completions")):
            return
        body = json.loads(request.content)
        beta = request.headers.get("anthropic-beta")
    except Exception:  # a body that is not JSON (or not read yet): nothing to share
        return
    if isinstance(body, dict) and isinstance(body.get("messages"), list):
        run.latest = _Sent(body=body, beta=beta, at=time.time())
        run.sent_count += 1


def _unwrapped(model: Any) -> Any:
    """The model under any ``WrapperModel`` s (instrumentation, a capability's wrapper)."""
    seen = 0
    while isinstance(model, WrapperModel) and seen < 16:
        model, seen = model.wrapped, seen + 1
    return model


def _anthropic_client(model: Any) -> Any:
    """The ``AsyncAnthropic`` client a pydantic-ai model sends through, if that is what it is."""
    if "pydantic_ai.models.anthropic" not in sys.modules:
        return None  # no such model was made: and importing it would stall the loop
    try:
        from anthropic import AsyncAnthropic
        from pydantic_ai.models.anthropic import AnthropicModel as PydanticAnthropic
    except ImportError:
        return None
    model = _unwrapped(model)
    if not isinstance(model, PydanticAnthropic):
        return None
    client = model.client
    return client if isinstance(client, AsyncAnthropic) else None


def _openai_client(model: Any) -> tuple[Any, str] | None:
    if "pydantic_ai.models.openai" not in sys.modules:
        return None  # no such model was made
    try:
        from openai import AsyncOpenAI
        from pydantic_ai.models.openai import OpenAIChatModel
    except ImportError:
        return None
    model = _unwrapped(model)
    if isinstance(model, OpenAIChatModel) and isinstance(model.client, AsyncOpenAI):
        return model.client, model.model_name
    return None


def _client_of(model: Any) -> tuple[Any, Endpoint] | None:
    """The SDK client a pydantic-ai model sends through, and its endpoint, when it is an
    ``AnthropicModel`` on ``AsyncAnthropic`` or an ``OpenAIChatModel`` on ``AsyncOpenAI``."""
    client = _anthropic_client(model)
    name = _unwrapped(model).model_name if client is not None else None
    if client is None:
        found = _openai_client(model)
        if found is None:
            return None
        client, name = found
    settings = ClientSettings.of(client)
    if settings is None or not isinstance(name, str):
        return None
    return client, Endpoint(settings, name)


def _outside_runs(core: HostCore, turn: Callable[[], HostTurn | None]) -> None:
    _RUN.set(None)
    core.report(turn)


# ---------------------------------------------------------------------------------------
# The memory tool


def _is_pydantic_anthropic(model: Any) -> bool:
    if "pydantic_ai.models.anthropic" not in sys.modules:
        return False
    try:
        from pydantic_ai.models.anthropic import AnthropicModel as PydanticAnthropic
    except ImportError:
        return False
    return isinstance(_unwrapped(model), PydanticAnthropic)


# ---------------------------------------------------------------------------------------
# The capability


_ACTIVE: contextvars.ContextVar[frozenset[int]] = contextvars.ContextVar(
    "memdir_pydantic_ai_active", default=frozenset()
)
"""The capabilities whose run encloses this code: a run inside one of its own is a
subagent's (an agent called from a tool), whose turns are not remembered."""


class MemdirCapability(AbstractCapability[Any]):
    """A pydantic-ai capability that saves memories after each run of the agent.

    ``memory_dir``: where the memory lives (default: Claude Code's folder for the
    current directory, so both share it). ``model``: what memdir's standalone runs call —
    a :class:`~memdir.models.Model` or a spec (``anthropic:MODEL``, ``openai:MODEL``,
    ``offline``; ``base_url`` goes with a spec); default: the host's own model on its
    endpoint (a client of memdir's own with the host client's settings) when it is
    Anthropic or OpenAI, else ``$MEMDIR_MODEL``, else the offline model. The fork always
    calls the host's model. ``config``, ``sink`` and ``notify`` go to each conversation's
    extractor (``notify`` gets a :class:`~memdir.extract.MemorySaved` when memories were
    saved). ``cache``: turn on pydantic-ai's prompt caching for Anthropic models whose
    settings leave it unset. ``backend``: where turns go (default: extraction in this
    process). ``load_memory``: add memdir's memory instructions and the saved
    ``MEMORY.md`` index to the agent's instructions, after its own (default True; the
    index as it was when the conversation began, so its requests share one prefix, and a
    notice in the history when memory changed since: see :meth:`before_model_request`).

    ``memory_tool=True`` gives the agent a ``memory`` tool over the memory directory
    (``/memories/x`` is ``<memory_dir>/x``): Anthropic's own client-side memory tool on an
    Anthropic model, which Claude is trained on, a function tool of the same commands on
    others; memdir's :class:`~memdir.memory_tool.MemoryTool` does the work (containment,
    the credential guard, Claude Code's file layout). The fork is shown the agent's tools
    and no others, so it can save a memory only through one of them: without this (or a
    ``Write``/``Edit`` tool of the agent's own) the default planner (``mode="auto"``)
    sends memdir's standalone request instead. With it the agent may also look up and save
    memories itself; a turn in which it saved one is not extracted again.

    Conversations are told apart by pydantic-ai's ``conversation_id`` (carried by the
    message history, so a restored history is the same conversation); each has its own
    cursor. At most ``max_sessions`` are kept with their messages; an idle one beyond
    that reads its history again when it comes back.
    """

    def __init__(
        self,
        memory_dir: str | os.PathLike[str] | None = None,
        model: Model | str | None = None,
        *,
        base_url: str | None = None,
        config: ExtractConfig | None = None,
        sink: Sink | None = None,
        notify: Notify | None = None,
        cache: bool = True,
        memory_tool: bool = False,
        max_sessions: int = 256,
        id: str | None = None,
        backend: Backend | None = None,
        load_memory: bool = True,
    ) -> None:
        self.id = id
        self.description = None
        self.defer_loading = False
        self._core = HostCore(
            memory_dir,
            model,
            config=config,
            sink=sink,
            notify=notify,
            base_url=base_url,
            backend=backend,
            max_conversations=max_sessions,
        )
        self.memory_dir = self._core.memory_dir.root
        self.config = self._core.config
        self.sink = sink
        self.notify = notify
        self.cache = cache
        self.memory_tool = memory_tool
        self.load_memory = load_memory
        self._memory = MemoryTool(
            self.memory_dir, allow_private_secrets=self.config.allow_private_secrets
        )
        self.max_sessions = max(1, max_sessions)
        self._runs: dict[str, _Run] = {}
        self._histories: Sessions[GrowingReader[ModelMessage]] = Sessions(
            _new_history, self.max_sessions
        )
        self._notices: Sessions[list[str]] = Sessions(list, self.max_sessions)
        """Per conversation, the memory change notices waiting for its next request."""

    # Identity, not the fields: two memories are never the same one.
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    @property
    def fallback_reason(self) -> str | None:
        """Why the last turn reported carried no request of the host's to fork, so that
        its run was memdir's standalone one; None when it carried one (the planner may
        still have found the standalone request cheaper)."""
        return self._core.fallback_reason

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """None: it holds live state (extractors, runs), nothing an agent spec can carry."""
        return None

    # --- what it asks of the agent ----------------------------------------------------------

    def get_instructions(self) -> AgentInstructions | None:
        """memdir's memory instructions and the saved index, after the agent's own."""
        return self._memory_instructions if self.load_memory else None

    async def _memory_instructions(self, ctx: RunContext[Any]) -> str:
        loaded = await self._core.aload_memory(ctx.conversation_id or None)
        if loaded is None:
            return ""
        if loaded.notice is not None:
            # Instructions are resolved before the request's hooks run: the notice waits
            # for before_model_request, which puts it in the conversation.
            self._notices.get(ctx.conversation_id or None).append(loaded.notice)
        return f"{loaded.instructions}\n\n{loaded.index}"

    def get_model_settings(self) -> AgentModelSettings[Any] | None:
        """Prompt caching on, per request, where the agent's settings leave it unset."""
        return self._cache_settings if self.cache else None

    def _cache_settings(self, ctx: RunContext[Any]) -> ModelSettings:
        chosen = ctx.model_settings or {}
        if any(key == "cache" or key.startswith("anthropic_cache") for key in chosen):
            return ModelSettings()
        if _anthropic_client(ctx.model) is None:
            return ModelSettings()  # OpenAI caches on its own; others are left as they are
        return ModelSettings(cache=True)

    def get_toolset(self) -> AgentToolset[Any] | None:
        """The ``memory`` tool, with ``memory_tool=True``."""
        if not self.memory_tool:
            return None
        tool = Tool.from_schema(
            self._memory_command,
            name="memory",
            description=MEMORY_FUNCTION_DESCRIPTION,
            json_schema=MEMORY_FUNCTION_SCHEMA,
            takes_ctx=True,
            sequential=True,  # one change to a file at a time, in the model's order
        )
        return FunctionToolset([tool])

    def get_native_tools(self) -> Sequence[AgentNativeTool[Any]]:
        """On Anthropic models, the API's own memory tool in place of the function's
        definition (pydantic-ai swaps it in and still runs the function)."""
        return [self._native_memory_tool] if self.memory_tool else []

    def _native_memory_tool(self, ctx: RunContext[Any]) -> AbstractNativeTool | None:
        return NativeMemoryTool() if _is_pydantic_anthropic(ctx.model) else None

    async def _memory_command(self, ctx: RunContext[Any], **command: Any) -> str:
        """One command of the agent's, stamped with its conversation as the session."""
        try:
            output = await self._memory.run(command, self._core.tool_context(ctx.conversation_id))
        except ToolError as exc:
            raise ToolFailed(str(exc)) from exc
        if output.is_error:
            raise ToolFailed(output.content)
        return output.content

    # --- the hooks ---------------------------------------------------------------------------

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Tell the model that memory changed since its conversation loaded it.

        The instructions and index stay as they were loaded (the cached prefix); the
        notice is a user prompt of its own (a ``<system-reminder>``, read back as a meta
        message), enqueued so that pydantic-ai puts it after the conversation so far in
        this request and in the run's history alike: ``result.all_messages()`` holds it,
        so the next run, given that history, sends it at the same place again (pydantic-ai
        merges it into the user's request before it, which sends the same user turn) and
        every later request starts with the earlier ones. Put only in the request
        (``request_context.messages``), it would be missing from the next one, whose
        messages would differ from that point on.
        """
        pending = self._notices.peek(ctx.conversation_id or None)
        while pending:
            notice = pending.pop(0)
            ctx.enqueue(_pa.ModelRequest(parts=[_pa.UserPromptPart(content=notice)]))
        return request_context

    async def wrap_run(
        self, ctx: RunContext[Any], *, handler: WrapRunHandler
    ) -> AgentRunResult[Any]:
        """Run the agent, then report the turn; a run that fails or is cancelled is no
        turn (its messages are seen with the next one that ends)."""
        key = ctx.run_id or ""
        outer = _ACTIVE.get()
        run = self._runs[key] = _Run()
        active, current = _ACTIVE.set(outer | {id(self)}), _RUN.set(run)
        try:
            result = await handler()
        finally:
            _RUN.reset(current)
            _ACTIVE.reset(active)
            self._runs.pop(key, None)
        self._turn_ended(ctx, result, run, subagent=id(self) in outer)
        return result

    async def wrap_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        handler: WrapModelRequestHandler,
    ) -> _pa.ModelResponse:
        """Send the request, keeping its body as the client sent it."""
        run = self._runs.get(ctx.run_id or "")
        if run is None:
            return await handler(request_context)
        try:
            found = _client_of(request_context.model)
            if found is not None:
                add_pool_hook(found[0], "request", _record_request)
                # memdir's own client for this endpoint is built in a thread, now.
                self._core.host_model(found[1])
        except Exception as exc:  # never into the host's request
            _log.debug("memdir: the model's requests are not watched: %s", exc)
        before = run.sent_count
        run.requesting += 1
        try:
            response = await handler(request_context)
        finally:
            run.requesting -= 1
        # Retries and fallbacks may have sent more than one: the last is what answered.
        run.last = _Step(
            history_length=len(ctx.messages),
            model=request_context.model,
            sent=run.latest if run.sent_count > before else None,
        )
        return response

    # --- one turn ----------------------------------------------------------------------------

    def _turn_ended(
        self, ctx: RunContext[Any], result: AgentRunResult[Any], run: _Run, *, subagent: bool
    ) -> None:
        def turn() -> HostTurn | None:
            if isinstance(result.output, DeferredToolRequests):
                return None  # tool calls wait for approval: the turn is not over
            history = result.all_messages()
            conversation = ctx.conversation_id or None
            messages, ends = self._histories.get(conversation).read(history)
            if not messages:
                return None
            request, endpoint, fallback = self._request(run, ends, len(history))
            return HostTurn(
                messages=messages,
                conversation=conversation,
                request=request,
                endpoint=endpoint,
                fallback=fallback,
                is_subagent=subagent,
            )

        # The run's task inherits this context: outside any run, so that the fork's own
        # requests are never taken for an enclosing run's.
        contextvars.copy_context().run(_outside_runs, self._core, turn)

    def _request(
        self, run: _Run, ends: Sequence[int], history_length: int
    ) -> tuple[SentRequest | None, Endpoint | None, str | None]:
        """The host's last request as sent, standing for the history it answered (the
        final answer after it is memdir's to send), and its endpoint; else why not."""
        step = run.last
        if step is None:
            return None, None, "the run made no model request"
        found = _client_of(step.model)
        if found is None:
            return (
                None,
                None,
                (
                    "the model is neither pydantic-ai's AnthropicModel on an AsyncAnthropic "
                    "nor its OpenAIChatModel on an AsyncOpenAI"
                ),
            )
        endpoint = found[1]
        if step.sent is None:
            return None, endpoint, "the last request was not seen on its way out"
        body = step.sent.body
        name = body.get("model")
        if not isinstance(name, str):
            return None, endpoint, "the last request names no model"
        if not 0 < step.history_length <= history_length:
            return None, endpoint, "the history changed after the last request"
        endpoint = Endpoint(endpoint.settings, name)
        wire: Literal["anthropic", "chat"] = (
            "chat" if endpoint.settings.provider == "openai" else "anthropic"
        )
        return (
            SentRequest(
                wire=wire,
                body=body,
                replaces=ends[step.history_length - 1],
                headers={"anthropic-beta": step.sent.beta} if step.sent.beta else {},
                sent_at=step.sent.at,
            ),
            endpoint,
            None,
        )

    # --- for the host --------------------------------------------------------------------------

    def extractor(self, conversation_id: str | None) -> MemoryExtractor | None:
        """The extractor of a conversation (pydantic-ai's ``conversation_id``), if it has
        reported a turn and is still kept (with the default backend)."""
        return self._core.extractor(conversation_id or None)

    async def drain(self, timeout: float = 60.0) -> None:  # noqa: ASYNC109 (as the extractor's)
        """Wait up to ``timeout`` seconds for every extraction still running."""
        await self._core.drain(timeout)

    def drain_sync(self, timeout: float = 60.0) -> None:
        """:meth:`drain` for a host that ran its agent with ``run_sync``.

        ``run_sync`` drives the agent on an event loop that stays between calls; the runs
        are tasks there, which move only while that loop runs: this runs it until they end.
        """
        self._core.drain_sync(timeout)

    def close(self) -> None:
        """Stop the backend's background work."""
        self._core.close()
