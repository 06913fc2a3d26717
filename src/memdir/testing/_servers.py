"""Fake Anthropic and OpenAI servers that the official SDKs talk to over real HTTP.

Each fake listens on 127.0.0.1, answers the provider's endpoint from a script of replies
(or a function), records every request byte for byte, and reports prompt-cache usage by
the provider's rules, so a test can prove that two requests share a cached prefix.

A reply is a string (an assistant text), an assistant :class:`~memdir.messages.Message`
(text, thinking and tool calls), or a :class:`Fault`. A tool call, then a final answer::

    from memdir.messages import Message, ToolUseBlock
    call = ToolUseBlock(id="toolu_1", name="Read", input={"file_path": "/mem/MEMORY.md"})
    async with FakeAnthropicServer([Message(role="assistant", content=(call,)), "Saved."]) as fake:
        async with AsyncAnthropic(base_url=fake.base_url, api_key="test") as client:
            ...  # 1st request: stop_reason "tool_use"; 2nd: the text "Saved."
    fake.assert_all_used()

The stop reason is ``tool_use`` (OpenAI: ``tool_calls``) when the reply calls a tool and
``end_turn`` (``stop``) otherwise; ``extra={"stop_reason": "max_tokens"}`` on the message
overrides it. Streaming requests (``"stream": true``) get Server-Sent Events in the
provider's format. Each fake records what went wrong outside the script (a request with
no reply left, an unknown path, a request the provider would refuse) for
``assert_all_used()`` and ``assert_no_errors()``.

Cache entries expire as they do at the provider, measured on the server's ``clock``
(``time.monotonic`` by default). A test that spans minutes passes a
:class:`~memdir.testing.FakeClock` and moves it instead of sleeping::

    clock = FakeClock()
    async with FakeAnthropicServer(["a", "b"], clock=clock) as fake:
        ...  # the first request writes its prefix
        clock.advance(6 * 60)  # past the 5-minute lifetime: the second request misses
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from memdir.cost import model_family
from memdir.messages import Message
from memdir.testing import _wire_anthropic, _wire_openai
from memdir.testing._base import FakeServer, sse
from memdir.testing._cache import (
    AnthropicCache,
    OpenAICache,
    anthropic_prompt_tokens,
    openai_prompt_tokens,
)
from memdir.testing._script import Fault, Handler, RecordedRequest, Reply

__all__ = [
    "DEFAULT_REASONING_TOKENS",
    "EFFORT_SHARE",
    "FakeAnthropicServer",
    "FakeOpenAIServer",
    "Fault",
    "RecordedRequest",
    "Reply",
]

DEFAULT_REASONING_TOKENS = 300
"""Reasoning tokens the fake OpenAI server reports for each answer of a reasoning model
(gpt-5*, o3, o4-mini) that shows no reasoning of its own, at ``reasoning_effort:
"medium"``: a fixed number, so that a bill can be predicted, of the order a short
tool-calling answer of gpt-5-mini spends at that effort."""

EFFORT_SHARE: Mapping[str, float] = MappingProxyType(
    {"none": 0.0, "minimal": 1 / 3, "low": 0.5, "medium": 1.0, "high": 3.0, "xhigh": 6.0}
)
"""The fake's reasoning tokens at each effort, as a share of the ``medium`` count. The API
documents only the direction (less effort, fewer reasoning tokens; ``none`` spends none);
the other shares are assumptions, of the order one public measurement of gpt-5-mini
showed (``minimal`` about a third of ``medium``'s)."""


def _refused_marker(messages: list[Any]) -> str | None:
    """The API's refusal of a ``cache_control`` on a block that cannot carry one."""
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for position, block in enumerate(content):
            if not isinstance(block, dict) or block.get("cache_control") is None:
                continue
            where = f"messages.{index}.content.{position}"
            if block.get("type") in ("thinking", "redacted_thinking"):
                return f"{where}: cache_control cannot be set for thinking blocks"
            if block.get("type") == "text" and not block.get("text"):
                return f"{where}.text: cache_control cannot be set for empty text blocks"
    return None


class FakeAnthropicServer(FakeServer):
    """A fake Anthropic Messages API: ``POST /v1/messages`` on 127.0.0.1.

    Pass :attr:`base_url` to ``AsyncAnthropic(base_url=..., api_key="test")``. Replies are
    served in order, then ``handler`` (called with the decoded request body) decides;
    with neither left the server answers 500 and records a problem. Every response
    reports ``model``.

    Usage follows Anthropic's prompt-cache rules:

    - The cache is a chain in the order tools, system, messages, headed by the request's
      ``model``. A changed tool misses everything; a changed ``speed`` misses system and
      messages; a changed ``tool_choice``, ``thinking`` setting or number of images misses
      the messages only. Blocks are compared as sent, key order included; ``cache_control``
      markers are not part of the key.
    - An entry is written at each breakpoint (a block with ``cache_control``; a top-level
      ``cache_control`` puts one on the last cacheable block) whose prefix has at least
      the model's minimum of tokens: ``min_cache_tokens`` when given, else the table of
      :func:`memdir.cost.model_family` (1,024 for a model it does not know).
    - From each breakpoint the cache looks back over at most 20 positions, the breakpoint
      itself the first, for an entry an earlier request wrote, and reads the longest hit.
    - An entry lives 5 minutes, or an hour for ``"ttl": "1h"``, on ``clock``; a hit or a
      rewrite starts its lifetime again (a rewrite keeps the longer lifetime). Writes are
      reported by lifetime in ``usage.cache_creation``.
    - On models that keep only the current turn's thinking (``keeps_thinking=False`` in
      the table, or the ``keeps_thinking`` argument), thinking blocks of assistant messages
      before the last plain user message count as absent, for the key and the tokens.

    System text blocks that start with one of ``ignored_system_prefixes`` are left out of
    the cache, for the key and the tokens: a way to model a provider that ignores a block
    added at send time (Claude Code's ``x-anthropic-billing-header: …`` attribution) when
    it caches. By default every block counts.

    Tokens are estimated as characters / 4 of each block's compact JSON. The server
    answers 400, as Anthropic does, for more than four breakpoints (the top-level one
    included), a one-hour marker after a five-minute one, a malformed ``cache_control``,
    or a marker on a thinking or empty text block; and for a prompt longer than the
    model's context window (``invalid_request_error``, "prompt is too long: N tokens >
    M maximum"): the window of :func:`memdir.cost.model_family`, or ``context_tokens``
    for every model when given. A model the table does not know (the default
    ``claude-fake-1``) has no window. Such a request is neither served nor billed, and
    takes no reply from the script.
    """

    _endpoint = "/v1/messages"
    _url_suffix = ""
    _request_id_header = "request-id"
    _first_event = "message_start"
    _provider = "anthropic"

    def __init__(
        self,
        replies: Sequence[Reply] = (),
        *,
        handler: Handler | None = None,
        min_cache_tokens: int | None = None,
        keeps_thinking: bool | None = None,
        clock: Callable[[], float] | None = None,
        model: str = "claude-fake-1",
        ignored_system_prefixes: Sequence[str] = (),
        context_tokens: int | None = None,
    ) -> None:
        super().__init__(
            replies,
            handler=handler,
            min_cache_tokens=min_cache_tokens,
            model=model,
            clock=clock,
            context_tokens=context_tokens,
        )
        self._keeps_thinking = keeps_thinking
        self._cache = AnthropicCache(
            min_cache_tokens,
            keeps_thinking=keeps_thinking,
            clock=self.clock,
            ignored_system_prefixes=ignored_system_prefixes,
        )

    def _reset_cache(self) -> None:
        self._cache.reset()

    def _error_json(self, status: int, message: str, request_id: str) -> dict[str, Any]:
        return _wire_anthropic.error_body(status, message, request_id)

    def _invalid(self, body: dict[str, Any]) -> str | None:
        if not isinstance(body.get("model"), str):
            return "model: Field required"
        if not isinstance(body.get("max_tokens"), int):
            return "max_tokens: Field required"
        if not isinstance(body.get("messages"), list):
            return "messages: Field required"
        refused = _refused_marker(body["messages"])
        if refused is not None:
            return refused
        return self._cache.refusal(body)

    def _prompt_tokens(self, body: dict[str, Any]) -> int:
        keeps = self._keeps_thinking
        if keeps is None:
            keeps = model_family(str(body.get("model")), "anthropic").keeps_thinking
        return anthropic_prompt_tokens(body, keeps_thinking=keeps)

    def _too_long(
        self, body: dict[str, Any], tokens: int, limit: int, request_id: str
    ) -> tuple[str, dict[str, Any]]:
        message = f"prompt is too long: {tokens} tokens > {limit} maximum"
        return message, _wire_anthropic.error_body(400, message, request_id)

    def _answer(
        self, body: dict[str, Any], message: Message, number: int
    ) -> tuple[dict[str, Any], Mapping[str, Any]]:
        # Build the reply before touching the cache, so a reply that fails writes nothing.
        _wire_anthropic.reply_content(message)
        usage = self._cache.account(body)
        response = _wire_anthropic.message_body(
            message, message_id=f"msg_fake_{number:06d}", model=self.model, usage=usage
        )
        return response, response["usage"]

    def _frames(self, body: dict[str, Any], response: dict[str, Any]) -> list[bytes]:
        return [sse(name, data) for name, data in _wire_anthropic.stream_events(response)]

    def _truncated_frames(self, number: int) -> list[bytes]:
        events = _wire_anthropic.truncated_events(
            message_id=f"msg_fake_{number:06d}", model=self.model
        )
        return [sse(name, data) for name, data in events]


class FakeOpenAIServer(FakeServer):
    """A fake OpenAI Chat Completions API: ``POST /v1/chat/completions`` on 127.0.0.1.

    Pass :attr:`base_url` to ``AsyncOpenAI(base_url=..., api_key="test")``. Replies are
    served as :class:`FakeAnthropicServer` serves them. Every response reports ``model``.

    Usage follows OpenAI's automatic prompt cache: ``prompt_tokens_details.cached_tokens``
    is the longest prefix shared with a live earlier prompt on the same cache machine,
    rounded down to 128 tokens, and 0 below the model's minimum (``min_cache_tokens`` when
    given, else :func:`memdir.cost.model_family`: 1,024). The prompt is the compact JSON
    of ``tools`` then each message, keys as sent, at characters / 4 tokens.

    - Routing: a request reaches only the prompts of its partition, one per model,
      ``prompt_cache_key`` and first 1,024 characters of the prompt (OpenAI hashes the
      first ~256 tokens, with the key when given).
    - Eviction, on ``clock``: a prompt unused for the model's idle lifetime (5 minutes)
      is gone, and none lives past the longest lifetime (an hour) after its oldest part
      was first written; a hit counts as a use. ``prompt_cache_retention: "24h"`` keeps
      that request's prompt for a day, idle or not, on the models OpenAI lists for it
      (:attr:`memdir.cost.ModelFamily.extended_cache_retention`: gpt-5, gpt-5.1 and
      later, gpt-4.1); on the others it is served with the in-memory lifetime.

    Reasoning models (:attr:`memdir.cost.ModelFamily.reasoning`: gpt-5*, o3, o4-mini)
    think in tokens they do not show: each answer reports ``reasoning_tokens`` of them
    (:data:`DEFAULT_REASONING_TOKENS` unless given) in
    ``completion_tokens_details.reasoning_tokens``, counted in ``completion_tokens`` and
    so billed as output, scaled by the effort the request names or the model's default
    (:data:`EFFORT_SHARE`); an effort the model does not take is refused (400), as the
    API does. A reply that shows its
    reasoning (``reasoning_content``, as OpenAI-compatible servers send it) reports that
    text's tokens instead, on any model; ``extra={"reasoning_tokens": n}`` on a scripted
    message sets the number for that answer.

    A prompt longer than the model takes (:attr:`memdir.cost.ModelFamily.prompt_limit`:
    the context window, 272,000 tokens for GPT-5's 400,000; or ``context_tokens`` for
    every model when given) is refused with 400 ``context_length_exceeded``, neither
    served nor billed. A model the table does not know (the default ``gpt-fake-1``) has
    no limit.
    """

    _endpoint = "/v1/chat/completions"
    _url_suffix = "/v1"
    _request_id_header = "x-request-id"
    _first_event = None
    _provider = "openai"

    def __init__(
        self,
        replies: Sequence[Reply] = (),
        *,
        handler: Handler | None = None,
        min_cache_tokens: int | None = None,
        clock: Callable[[], float] | None = None,
        model: str = "gpt-fake-1",
        context_tokens: int | None = None,
        reasoning_tokens: int = DEFAULT_REASONING_TOKENS,
    ) -> None:
        super().__init__(
            replies,
            handler=handler,
            min_cache_tokens=min_cache_tokens,
            model=model,
            clock=clock,
            context_tokens=context_tokens,
        )
        self._reasoning_tokens = reasoning_tokens
        self._cache = OpenAICache(min_cache_tokens, clock=self.clock)

    def _reset_cache(self) -> None:
        self._cache.reset()

    def _error_json(self, status: int, message: str, request_id: str) -> dict[str, Any]:
        return _wire_openai.error_body(status, message)

    def _invalid(self, body: dict[str, Any]) -> str | None:
        if not isinstance(body.get("model"), str):
            return "you must provide a model parameter"
        if not isinstance(body.get("messages"), list):
            return "Missing required parameter: 'messages'."
        effort = body.get("reasoning_effort")
        if effort is not None:
            family = model_family(str(body["model"]), "openai")
            if not family.reasoning:
                return "Unsupported parameter: 'reasoning_effort' is not supported with this model."
            if family.reasoning_efforts and effort not in family.reasoning_efforts:
                supported = ", ".join(f"'{e}'" for e in family.reasoning_efforts)
                return (
                    f"Unsupported value: 'reasoning_effort' does not support {effort!r} with "
                    f"this model. Supported values are: {supported}."
                )
        return None

    def _prompt_tokens(self, body: dict[str, Any]) -> int:
        return openai_prompt_tokens(body)

    def _too_long(
        self, body: dict[str, Any], tokens: int, limit: int, request_id: str
    ) -> tuple[str, dict[str, Any]]:
        family = model_family(str(body.get("model")), "openai")
        if family.max_input_tokens is not None and self._context_tokens is None:
            # GPT-5's wording: its input limit is below the window.
            message = (
                f"Input tokens exceed the configured limit of {limit} tokens. Your messages "
                f"resulted in {tokens} tokens. Please reduce the length of the messages."
            )
        else:
            message = (
                f"This model's maximum context length is {limit} tokens. However, your "
                f"messages resulted in {tokens} tokens. Please reduce the length of the "
                "messages."
            )
        return message, _wire_openai.error_body(
            400, message, code="context_length_exceeded", param="messages"
        )

    def reasoning_tokens_for(self, body: Mapping[str, Any]) -> int:
        """The hidden reasoning tokens an answer to ``body`` reports: 0 for a model that
        does not reason; else the server's count at ``medium``, scaled by
        :data:`EFFORT_SHARE` for the effort named, or the model's default effort (from
        gpt-5.1 on ``none``: no reasoning)."""
        family = model_family(str(body.get("model")), "openai")
        if not family.reasoning:
            return 0
        effort = body.get("reasoning_effort") or family.default_reasoning_effort or "medium"
        return round(self._reasoning_tokens * EFFORT_SHARE.get(str(effort), 1.0))

    def _answer(
        self, body: dict[str, Any], message: Message, number: int
    ) -> tuple[dict[str, Any], Mapping[str, Any]]:
        _wire_openai.reply_message(message)  # fails before the cache is touched
        hidden = message.extra.get("reasoning_tokens")
        if not isinstance(hidden, int) or isinstance(hidden, bool):
            hidden = self.reasoning_tokens_for(body)
        response = _wire_openai.completion_body(
            message,
            completion_id=f"chatcmpl-fake-{number:06d}",
            created=int(time.time()),
            model=self.model,
            usage=self._cache.account(body),
            reasoning_tokens=hidden,
        )
        return response, response["usage"]

    def _frames(self, body: dict[str, Any], response: dict[str, Any]) -> list[bytes]:
        options = body.get("stream_options")
        include_usage = isinstance(options, Mapping) and options.get("include_usage") is True
        chunks = _wire_openai.chunks(response, include_usage=include_usage)
        return [*(sse(None, c) for c in chunks), sse(None, "[DONE]")]

    def _truncated_frames(self, number: int) -> list[bytes]:
        chunks = _wire_openai.truncated_chunks(
            completion_id=f"chatcmpl-fake-{number:06d}", created=int(time.time()), model=self.model
        )
        return [sse(None, c) for c in chunks]
