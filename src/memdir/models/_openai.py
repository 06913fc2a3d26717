"""Any OpenAI-compatible chat server through the official ``openai`` client.

OpenAI itself, vLLM, Ollama, llama.cpp's server, LM Studio: anything that speaks Chat
Completions at a ``base_url``. Those servers cache by prefix on their own, so the only
rule for sharing a cache is to send the same bytes first, which the deterministic
conversion here does.
"""

from __future__ import annotations

import dataclasses
import uuid as _uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memdir.errors import MissingExtraError, ModelError, UsageError, one_line
from memdir.messages import Message, messages_from_openai, messages_to_openai
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
from memdir.models._types import ModelRequest, ModelResponse, SystemPrompt, Usage
from memdir.models._wire_cache import WireCache

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["OpenAIModel", "openai_tools"]

_STOP_REASONS = {"tool_calls": "tool_use", "stop": "end_turn", "length": "max_tokens"}


def openai_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool definitions in OpenAI's ``function`` shape.

    Anthropic-shaped definitions (``name``, ``description``, ``input_schema``) are
    converted; ones already in OpenAI's shape pass through. Keys only Anthropic knows
    (``cache_control``) are dropped.
    """
    out: list[dict[str, Any]] = []
    for tool in tools:
        if tool.get("type") == "function" and "function" in tool:
            out.append(dict(tool))
            continue
        function: dict[str, Any] = {"name": tool["name"]}
        if "description" in tool:
            function["description"] = tool["description"]
        function["parameters"] = tool.get("input_schema", {"type": "object", "properties": {}})
        out.append({"type": "function", "function": function})
    return out


def _system_messages(system: SystemPrompt) -> list[dict[str, Any]]:
    if system is None:
        return []
    if isinstance(system, str):
        text = system
    else:
        text = "\n\n".join(
            str(b.get("text", "")) for b in system if b.get("type", "text") == "text"
        )
    return [{"role": "system", "content": text}]


class OpenAIModel(ClientPerLoop["AsyncOpenAI"]):
    """A chat model behind any OpenAI-compatible server, via the official async client.

    Tool calls map both ways (parallel calls included); cached prompt tokens are read
    from ``usage.prompt_tokens_details.cached_tokens``. Rate limits, server errors and
    connection failures are retried with backoff; the rest raises
    :class:`~memdir.errors.ModelError`.

    ``client``: a client of the caller's, used as it is and left open. ``client_factory``:
    how memdir makes a client of its own (one per event loop, closed with the model),
    for settings beyond ``api_key`` and ``base_url`` (a host's organization, headers,
    transport); it is called once here, so make the model off the event loop.
    """

    def __init__(
        self,
        model: str,
        *,
        client: AsyncOpenAI | None = None,
        client_factory: Callable[[], AsyncOpenAI] | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 600.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        if not model:
            raise UsageError("OpenAIModel needs a model name, e.g. 'gpt-4.1'")
        self.model = model
        self.retry = retry or RetryPolicy()
        factory: Callable[[], AsyncOpenAI] | None = client_factory
        if client is None and factory is not None:
            client = factory()
        elif client is None:
            try:
                from openai import AsyncOpenAI, OpenAIError
            except ImportError as exc:
                raise MissingExtraError("OpenAIModel", "openai", one_line(exc)) from exc

            def factory() -> AsyncOpenAI:
                return AsyncOpenAI(
                    api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0
                )

            try:
                client = factory()
            except OpenAIError as exc:  # no key anywhere
                raise UsageError(f"cannot set up the OpenAI client: {exc}") from exc
        self._clients = LoopClients(client, factory)
        self._wire: WireCache[list[dict[str, Any]]] = WireCache(_message_wire)

    @property
    def name(self) -> str:
        """``openai:<model>``."""
        return f"openai:{self.model}"

    def wire_request(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments sent to ``chat.completions.create`` for ``request``."""
        return self._assemble(request, self._wire.convert(request.messages))

    def _assemble(
        self, request: ModelRequest, converted: list[list[dict[str, Any]]]
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model}
        kwargs.update(request.params)
        messages = _system_messages(request.system)
        # A recorded start of the conversation goes out as it was recorded.
        messages.extend(dict(m) for m in request.wire_prefix)
        for wire in converted:
            messages.extend(wire)
        kwargs["messages"] = messages
        if request.tools:
            kwargs["tools"] = openai_tools(request.tools)
        return kwargs

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` and return the model's answer."""
        # A long conversation's first request converts it in slices; later ones reuse it.
        converted = await self._wire.convert_in_slices(request.messages)
        kwargs = self._assemble(request, converted)
        return await with_retries(lambda: self._once(kwargs), self.retry, provider=self.name)

    async def _once(self, kwargs: dict[str, Any]) -> ModelResponse:
        import openai

        try:
            create = single_attempt(self._clients.get()).chat.completions.create
            completion = await create(**_untransformed(split_known(create, kwargs)))
        except openai.APIStatusError as exc:
            detail = f"HTTP {exc.status_code}: {exc.message}"
            if is_retryable_status(exc.status_code):
                raise TransientError(
                    detail, retry_after=retry_after(exc), status=exc.status_code
                ) from exc
            raise ModelError(f"{self.name}: {detail}", status=exc.status_code) from exc
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            reason = unreachable(exc)
            if reason is not None:  # the same on every repeat: say so now
                raise UnreachableError(f"{self.name}: {reason}") from exc
            raise TransientError(f"{type(exc).__name__}: {exc}") from exc
        except openai.OpenAIError as exc:
            raise ModelError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        except ValueError as exc:
            raise TransientError(f"unreadable response: {exc}") from exc
        data = completion.model_dump(mode="json")
        choices = data.get("choices") or []
        if not choices or not isinstance(choices[0].get("message"), dict):
            raise ModelError(f"{self.name}: the response has no message")
        return ModelResponse(
            message=self._message(choices[0]["message"]),
            usage=_usage(data.get("usage") or {}),
            stop_reason=_STOP_REASONS.get(choices[0].get("finish_reason") or ""),
            model=data.get("model"),
            id=data.get("id"),
        )

    def _message(self, wire: Mapping[str, Any]) -> Message:
        kept: dict[str, Any] = {"role": "assistant", "content": wire.get("content")}
        if wire.get("tool_calls"):
            kept["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": c["function"]}
                for c in wire["tool_calls"]
            ]
        if wire.get("reasoning_content"):
            kept["reasoning_content"] = wire["reasoning_content"]
        try:
            (message,) = messages_from_openai([kept])
        except UsageError as exc:
            raise ModelError(f"{self.name}: unusable response: {exc}") from exc
        # Ids derived from content alone would repeat for two identical answers.
        return dataclasses.replace(message, uuid=str(_uuid.uuid4()))


def _message_wire(message: Message, index: int) -> list[dict[str, Any]]:
    """One message as Chat Completions takes it (a user message with tool results is
    several)."""
    try:
        return messages_to_openai([message])
    except UsageError as exc:
        raise UsageError(str(exc).replace("message 0", f"message {index}", 1)) from None


# The SDK walks every message and tool of a request through its type-driven transform, on
# the caller's event loop: about half a millisecond a message, so seconds for a long
# conversation. Messages and tools built here are wire-ready dicts it would give back
# unchanged, so they go in ``extra_body``, which is merged into the JSON body as is and in
# place, leaving the bytes sent the same.
_READY = ("messages", "tools")


def _untransformed(kwargs: dict[str, Any]) -> dict[str, Any]:
    out = dict(kwargs)
    ready = {k: out[k] for k in _READY if k in out}
    if not ready:
        return out
    for key in ready:
        out[key] = []
    out["extra_body"] = {**ready, **dict(out.get("extra_body") or {})}
    return out


def _usage(usage: Mapping[str, Any]) -> Usage:
    prompt = usage.get("prompt_tokens") or 0
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") or 0
    completion = usage.get("completion_tokens") or 0
    reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    return Usage(
        input_tokens=max(prompt - cached, 0),
        # completion_tokens holds the reasoning tokens: OpenAI bills them as output.
        output_tokens=completion,
        cache_read_input_tokens=cached,
        reasoning_tokens=reasoning,
    )
