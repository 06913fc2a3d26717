"""Claude through the official ``anthropic`` client."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memdir.errors import ModelError, UsageError
from memdir.messages import Message, message_from_anthropic, messages_to_anthropic
from memdir.models._loops import ClientPerLoop, LoopClients
from memdir.models._retry import (
    RetryPolicy,
    TransientError,
    is_retryable_status,
    retry_after,
    split_known,
    with_retries,
)
from memdir.models._types import ModelRequest, ModelResponse, SystemPrompt, Usage

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = ["AnthropicModel"]

_EPHEMERAL = {"type": "ephemeral"}
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


def _system_blocks(system: SystemPrompt) -> list[dict[str, Any]] | None:
    """The system prompt as blocks, with a cache breakpoint on the last one."""
    if system is None:
        return None
    blocks: list[dict[str, Any]]
    if isinstance(system, str):
        blocks = [{"type": "text", "text": system}]
    else:
        blocks = [dict(b) for b in system]
    if blocks:
        blocks[-1]["cache_control"] = dict(_EPHEMERAL)
    return blocks


_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


def _markable(block: object) -> bool:
    # The API refuses a breakpoint on a thinking block or on an empty text block.
    if not isinstance(block, dict):
        return False
    kind = block.get("type")
    return kind not in _UNMARKABLE and not (kind == "text" and not block.get("text"))


def _mark(message: dict[str, Any]) -> None:
    """Put a cache breakpoint on the last block of ``message`` that may carry one."""
    if isinstance(message.get("content"), str):
        if not message["content"]:
            return
        message["content"] = [{"type": "text", "text": message["content"]}]
    content = message.get("content")
    if isinstance(content, list):
        for block in reversed(content):
            if _markable(block):
                block["cache_control"] = dict(_EPHEMERAL)
                return


def _wire_messages(messages: Sequence[Message], points: Sequence[int] = ()) -> list[dict[str, Any]]:
    """The messages with a cache breakpoint on the last block of the last message.

    Markers already in the messages are removed, so that a parent and a fork built from
    the same conversation send identical bytes for everything before the breakpoint.
    ``points`` adds breakpoints at the end of those messages too (at most two are used:
    Anthropic allows four in all, and the system prompt takes one).
    """
    wire = copy.deepcopy(messages_to_anthropic(messages))
    for message in wire:
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict):
                    block.pop("cache_control", None)
    if wire:
        extra = sorted({p % len(wire) for p in points if -len(wire) <= p < len(wire)})
        for index in [*extra[-2:], len(wire) - 1]:
            _mark(wire[index])
    return wire


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
    """

    def __init__(
        self,
        model: str,
        *,
        client: AsyncAnthropic | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 600.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        if not model:
            raise UsageError("AnthropicModel needs a model name, e.g. 'claude-sonnet-4-5'")
        self.model = model
        self.retry = retry or RetryPolicy()
        factory: Callable[[], AsyncAnthropic] | None = None
        if client is None:
            try:
                from anthropic import AsyncAnthropic
            except ModuleNotFoundError as exc:
                raise UsageError(
                    "AnthropicModel needs the anthropic package: pip install 'memdir[anthropic]'"
                ) from exc

            def factory() -> AsyncAnthropic:
                # Retries are ours (the policy above), so the client makes one attempt.
                return AsyncAnthropic(
                    api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0
                )

            client = factory()
        self._clients = LoopClients(client, factory)

    @property
    def name(self) -> str:
        """``anthropic:<model>``."""
        return f"anthropic:{self.model}"

    def wire_request(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments sent to ``messages.create`` for ``request``."""
        kwargs: dict[str, Any] = {"model": self.model, "max_tokens": _DEFAULT_MAX_TOKENS}
        kwargs.update(request.params)
        system = _system_blocks(request.system)
        if system is not None:
            kwargs["system"] = system
        if request.tools:
            kwargs["tools"] = [dict(t) for t in request.tools]
        kwargs["messages"] = _wire_messages(request.messages, request.cache_points)
        return kwargs

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` and return Claude's answer."""
        kwargs = self.wire_request(request)
        return await with_retries(lambda: self._once(kwargs), self.retry, provider=self.name)

    async def _once(self, kwargs: dict[str, Any]) -> ModelResponse:
        import anthropic
        import httpx2

        try:
            call = self._clients.get().messages.stream
            async with call(**split_known(call, kwargs)) as stream:
                final = await stream.get_final_message()
        except anthropic.APIStatusError as exc:
            detail = f"HTTP {exc.status_code}: {_error_text(exc)}"
            if is_retryable_status(exc.status_code):
                raise TransientError(detail, retry_after=retry_after(exc)) from exc
            raise ModelError(f"{self.name}: {detail}") from exc
        except (anthropic.APIConnectionError, anthropic.APITimeoutError) as exc:
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
            ),
            stop_reason=data.get("stop_reason"),
            model=data.get("model"),
            id=data.get("id"),
        )


def _error_text(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    return str(getattr(exc, "message", exc))
