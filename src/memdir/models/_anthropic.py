"""Claude through the official ``anthropic`` client."""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memdir.errors import MissingExtraError, ModelError, UsageError, one_line
from memdir.messages import Message, message_from_anthropic, messages_to_anthropic
from memdir.models._loops import ClientPerLoop, LoopClients
from memdir.models._retry import (
    RetryPolicy,
    TransientError,
    UnreachableError,
    is_retryable_status,
    retry_after,
    single_attempt,
    split_known,
    unreachable,
    with_retries,
)
from memdir.models._table import check_not_retired
from memdir.models._types import ModelRequest, ModelResponse, SystemPrompt, Usage
from memdir.models._wire_cache import WireCache

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = ["MAX_BREAKPOINTS", "MEMDIR_ANTHROPIC_API_KEY_ENV", "AnthropicModel", "breakpoint_count"]

MEMDIR_ANTHROPIC_API_KEY_ENV = "MEMDIR_ANTHROPIC_API_KEY"
"""A key for memdir's own requests only, so that memory is billed apart from the host's
work: it takes precedence over ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_AUTH_TOKEN`` for the
clients memdir makes, and nothing of memdir hands it to Claude Code."""

_EPHEMERAL = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4
"""Anthropic refuses a request with more ``cache_control`` markers than this."""
# Anthropic requires max_tokens; used only when the request's params do not set it.
_DEFAULT_MAX_TOKENS = 8192
# The block fields a request may carry; a response can hold more (citations set to null,
# server-side bookkeeping) that the API refuses when sent back.
_BLOCK_FIELDS = {
    "text": ("type", "text", "citations"),
    "thinking": ("type", "thinking", "signature"),
    "redacted_thinking": ("type", "data"),
    "tool_use": ("type", "id", "name", "input"),
}
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


def _marked(item: object) -> bool:
    return isinstance(item, Mapping) and item.get("cache_control") is not None


def _markable(block: object) -> bool:
    # The API refuses a breakpoint on a thinking block or on an empty text block.
    if not isinstance(block, dict):
        return False
    kind = block.get("type")
    return kind not in _UNMARKABLE and not (kind == "text" and not block.get("text"))


def _message_wire(message: Message, index: int) -> dict[str, Any]:
    """One message as the API takes it, without any ``cache_control`` of its own.

    Markers that came with the message are left out, so that a parent and a fork built
    from the same conversation send identical bytes for everything before a breakpoint;
    where the breakpoints go is decided per request.
    """
    try:
        (wire,) = messages_to_anthropic([message])
    except UsageError as exc:
        raise UsageError(str(exc).replace("message 0", f"message {index}", 1)) from None
    content = wire.get("content")
    if isinstance(content, list) and any(_marked(b) for b in content):
        wire["content"] = [
            {k: v for k, v in b.items() if k != "cache_control"} if _marked(b) else b
            for b in content
        ]
    return wire


def _unmarked_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A recorded wire message without its ``cache_control`` markers (blocks copied only
    where one is dropped): where the breakpoints go is decided per request."""
    content = message.get("content")
    if isinstance(content, list) and any(_marked(b) for b in content):
        content = [
            {k: v for k, v in b.items() if k != "cache_control"} if _marked(b) else b
            for b in content
        ]
        return {**message, "content": content}
    return dict(message)


def _marker(ttl: str | None) -> dict[str, str]:
    """A ``cache_control`` value: the default lifetime, or ``ttl`` (``"1h"``)."""
    return {**_EPHEMERAL, "ttl": ttl} if ttl is not None else dict(_EPHEMERAL)


def _with_marker(message: dict[str, Any], ttl: str | None = None) -> dict[str, Any] | None:
    """A copy of ``message`` with a breakpoint on its last block that may carry one.

    The cached wire form is shared between requests, so only the copy changes. None when
    no block may carry a marker (an empty message, thinking alone).
    """
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return None
        block = {"type": "text", "text": content, "cache_control": _marker(ttl)}
        return {**message, "content": [block]}
    if not isinstance(content, list):
        return None
    for position in range(len(content) - 1, -1, -1):
        if _markable(content[position]):
            blocks = list(content)
            blocks[position] = {**content[position], "cache_control": _marker(ttl)}
            return {**message, "content": blocks}
    return None


def _markable_message(message: dict[str, Any]) -> bool:
    content = message.get("content")
    if isinstance(content, str):
        return bool(content)
    return isinstance(content, list) and any(_markable(b) for b in content)


def _system_blocks(system: SystemPrompt, ttl: str | None = None) -> list[dict[str, Any]] | None:
    """The system prompt as blocks, with a cache breakpoint (of lifetime ``ttl``, None for
    the default) on the last one.

    A marker the caller already put on the last block stays as it is, with its TTL: a
    host that caches its system prompt for an hour keeps that hour.
    """
    if system is None:
        return None
    blocks: list[dict[str, Any]]
    if isinstance(system, str):
        blocks = [{"type": "text", "text": system}]
    else:
        blocks = [dict(b) for b in system]
    if blocks and not _marked(blocks[-1]):
        blocks[-1]["cache_control"] = _marker(ttl)
    return blocks


def _fit_breakpoints(
    tools: list[dict[str, Any]], system: list[dict[str, Any]] | None, reserved: int
) -> None:
    """Remove markers from ``tools`` and ``system`` until ``reserved`` more fit in four.

    The conversation's own marker matters most (without it nothing of the conversation is
    cached), so when the tools and system prompt already hold four, the earliest of
    theirs gives way: a later breakpoint caches everything an earlier one does.
    """
    places: list[dict[str, Any]] = [t for t in tools if _marked(t)]
    places += [b for b in system or () if _marked(b)]
    while len(places) + reserved > MAX_BREAKPOINTS and places:
        places.pop(0).pop("cache_control", None)


def _message_points(wire: list[dict[str, Any]], points: Sequence[int], budget: int) -> list[int]:
    """Which messages end a cached prefix: the last, then ``points``, latest first."""
    if not wire or budget < 1:
        return []
    size = len(wire)
    chosen: list[int] = []
    last = next((i for i in range(size - 1, -1, -1) if _markable_message(wire[i])), None)
    if last is not None:
        chosen.append(last)
    extra = sorted({p % size for p in points if -size <= p < size}, reverse=True)
    for index in extra:
        if len(chosen) >= budget:
            break
        if index not in chosen and _markable_message(wire[index]):
            chosen.append(index)
    return sorted(chosen)


def breakpoint_count(kwargs: Mapping[str, Any]) -> int:
    """How many ``cache_control`` markers a request built by :class:`AnthropicModel` holds."""
    count = sum(_marked(t) for t in kwargs.get("tools") or ())
    system = kwargs.get("system")
    if isinstance(system, list):
        count += sum(_marked(b) for b in system)
    for message in kwargs.get("messages") or ():
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):
            count += sum(_marked(b) for b in content)
    return count + (1 if _marked(kwargs) else 0)


def _response_message(data: Mapping[str, Any]) -> Message:
    blocks = []
    for block in data.get("content") or []:
        fields = _BLOCK_FIELDS.get(block.get("type"))
        if fields is None:
            blocks.append(block)
        else:
            blocks.append({k: block[k] for k in fields if block.get(k) is not None})
    return message_from_anthropic({"role": "assistant", "content": blocks})


class AnthropicModel(ClientPerLoop["AsyncAnthropic"]):
    """A Claude model, called through the official async ``anthropic`` client.

    Every request gets two cache breakpoints — the last system block and the last block
    of the last message — the same rule for an agent and for its fork, so the fork reads
    the prefix its parent wrote. Rate limits (429), overload (529), server errors and
    connection failures are retried with backoff; what still fails, or fails for good,
    raises :class:`~memdir.errors.ModelError`. Responses are streamed, so long outputs
    are never cut by an HTTP timeout.

    ``client``: a client of the caller's, used as it is and left open. ``client_factory``:
    how memdir makes a client of its own (one per event loop, closed with the model),
    for settings beyond ``api_key`` and ``base_url`` (a host's organization, headers,
    transport); it is called once here, so make the model off the event loop.

    Without either, memdir makes the client from ``api_key`` or ``auth_token`` (a bearer
    token, as a gateway takes), else from the environment: ``MEMDIR_ANTHROPIC_API_KEY``,
    then the SDK's own ``ANTHROPIC_API_KEY`` or ``ANTHROPIC_AUTH_TOKEN``. Such a client
    reaches Anthropic's own API, so a model retired there on ``today`` (default: the
    current date) is refused with a :class:`~memdir.errors.UsageError` naming its
    replacement; a caller's client or factory may reach a platform that still serves it,
    and is left to decide.
    """

    def __init__(
        self,
        model: str,
        *,
        client: AsyncAnthropic | None = None,
        client_factory: Callable[[], AsyncAnthropic] | None = None,
        api_key: str | None = None,
        auth_token: str | None = None,
        base_url: str | None = None,
        timeout: float = 600.0,
        retry: RetryPolicy | None = None,
        today: datetime.date | None = None,
    ) -> None:
        if not model:
            raise UsageError("AnthropicModel needs a model name, e.g. 'claude-sonnet-5-5'")
        if api_key is not None and auth_token is not None:
            raise UsageError("AnthropicModel takes api_key or auth_token, not both")
        self.model = model
        self.retry = retry or RetryPolicy()
        factory: Callable[[], AsyncAnthropic] | None = client_factory
        if client is None and factory is not None:
            client = factory()
        elif client is None:
            check_not_retired(model, today=today)
            try:
                from anthropic import AsyncAnthropic
            except ImportError as exc:
                raise MissingExtraError("AnthropicModel", "anthropic", one_line(exc)) from exc
            if api_key is None and auth_token is None:
                # Passed explicitly, it keeps the SDK from reading (and sending) the
                # host's ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN instead.
                api_key = os.environ.get(MEMDIR_ANTHROPIC_API_KEY_ENV) or None

            def factory() -> AsyncAnthropic:
                # Retries are ours (the policy above), so the client makes one attempt.
                return AsyncAnthropic(
                    api_key=api_key,
                    auth_token=auth_token,
                    base_url=base_url,
                    timeout=timeout,
                    max_retries=0,
                )

            client = factory()
        self._clients = LoopClients(client, factory)
        self._wire: WireCache[dict[str, Any]] = WireCache(_message_wire)

    @property
    def name(self) -> str:
        """``anthropic:<model>``."""
        return f"anthropic:{self.model}"

    def wire_request(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments sent to ``messages.stream`` for ``request``.

        Breakpoints: the caller's own markers on tools and system blocks stay, with their
        TTLs; the last system block gets one if it has none; the last message gets one,
        and ``request.cache_points`` take what is left of Anthropic's four, latest first.
        ``request.cache_ttl`` is the lifetime of the system block's and the points'
        markers; the last message's has the default.
        """
        return self._assemble(request, self._wire.convert(request.messages))

    def _assemble(self, request: ModelRequest, messages: list[dict[str, Any]]) -> dict[str, Any]:
        if request.wire_prefix:
            prefix = [_unmarked_message(m) for m in request.wire_prefix]
            shift = len(prefix)
            request = dataclasses.replace(
                request,
                cache_points=tuple(p + shift if p >= 0 else p for p in request.cache_points),
            )
            messages = [*prefix, *messages]
        kwargs: dict[str, Any] = {"model": self.model, "max_tokens": _DEFAULT_MAX_TOKENS}
        kwargs.update(request.params)
        system = _system_blocks(request.system, request.cache_ttl)
        tools = [dict(t) for t in request.tools]
        # A top-level automatic marker takes one of the four too.
        reserved = (1 if messages else 0) + (1 if _marked(request.params) else 0)
        _fit_breakpoints(tools, system, reserved)
        if system is not None:
            kwargs["system"] = system
        if tools:
            kwargs["tools"] = tools
        fixed = breakpoint_count({"tools": tools, "system": system, **request.params})
        points = _message_points(messages, request.cache_points, MAX_BREAKPOINTS - fixed)
        if points:
            messages = list(messages)
            for index in points:
                # The last message ends what changes each request: the default lifetime
                # there, after the longer one of the stable prefix (longer ones first).
                ttl = request.cache_ttl if index != points[-1] else None
                marked = _with_marker(messages[index], ttl)
                if marked is not None:
                    messages[index] = marked
        kwargs["messages"] = messages
        return kwargs

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` and return Claude's answer."""
        # A long conversation's first request converts it in slices; later ones reuse it.
        messages = await self._wire.convert_in_slices(request.messages)
        kwargs = self._assemble(request, messages)
        return await with_retries(lambda: self._once(kwargs), self.retry, provider=self.name)

    async def _once(self, kwargs: dict[str, Any]) -> ModelResponse:
        import anthropic
        import httpx2

        _pin_stream_types()
        try:
            call = single_attempt(self._clients.get()).messages.stream
            async with call(**split_known(call, kwargs)) as stream:
                final = await stream.get_final_message()
        except anthropic.APIStatusError as exc:
            detail = f"HTTP {exc.status_code}: {_error_text(exc)}"
            if is_retryable_status(exc.status_code):
                raise TransientError(
                    detail, retry_after=retry_after(exc), status=exc.status_code
                ) from exc
            raise ModelError(f"{self.name}: {detail}", status=exc.status_code) from exc
        except (anthropic.APIConnectionError, anthropic.APITimeoutError) as exc:
            reason = unreachable(exc)
            if reason is not None:  # the same on every repeat: say so now
                raise UnreachableError(f"{self.name}: {reason}") from exc
            raise TransientError(f"{type(exc).__name__}: {exc}") from exc
        except httpx2.TransportError as exc:  # a stream cut off midway is not wrapped
            raise TransientError(f"connection lost: {type(exc).__name__}: {exc}") from exc
        except anthropic.AnthropicError as exc:
            raise ModelError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        except ValueError as exc:  # an answer that does not parse
            raise TransientError(f"unreadable response: {exc}") from exc
        data = final.model_dump(mode="json")
        usage = data.get("usage") or {}
        try:
            message = _response_message(data)
        except UsageError as exc:
            raise ModelError(f"{self.name}: unusable response: {exc}") from exc
        return ModelResponse(
            message=message,
            usage=Usage(
                input_tokens=usage.get("input_tokens") or 0,
                output_tokens=usage.get("output_tokens") or 0,
                cache_read_input_tokens=usage.get("cache_read_input_tokens") or 0,
                cache_creation_input_tokens=usage.get("cache_creation_input_tokens") or 0,
                cache_creation_1h_input_tokens=_one_hour_writes(usage),
            ),
            stop_reason=data.get("stop_reason"),
            model=data.get("model"),
            id=data.get("id"),
        )


_PINNED: list[object] = []


def _pin_stream_types() -> None:
    """Keep the SDK's parametrised stream snapshot class alive between requests.

    The SDK's stream helper evaluates ``ParsedMessage[ResponseFormatT]`` on every
    ``message_start``. pydantic caches that class only weakly, so once a collection has
    freed it, the next request builds it again: 6 to 12 ms on the host's event loop, at
    any conversation length. Holding one reference keeps the cached class. Where the SDK
    has moved these names, nothing is pinned and nothing else changes.
    """
    if _PINNED:
        return
    try:
        from anthropic.lib._parse._response import ResponseFormatT
        from anthropic.types.parsed_message import ParsedMessage

        _PINNED.append(ParsedMessage[ResponseFormatT])  # type: ignore[valid-type]
    except Exception:  # private names of the SDK: a best-effort saving
        _PINNED.append(None)


def _one_hour_writes(usage: Mapping[str, Any]) -> int:
    breakdown = usage.get("cache_creation")
    if isinstance(breakdown, Mapping):
        return int(breakdown.get("ephemeral_1h_input_tokens") or 0)
    return 0


def _error_text(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    return str(getattr(exc, "message", exc))
