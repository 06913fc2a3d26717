"""``run_forked_agent``: the memory agent's loop, inside the parent agent's prompt cache.

A fork sends exactly what its parent sent — the same model, system prompt, tool list
(every tool, same order, same schemas) and parameters — with the parent's conversation
plus a few prompt messages. Anything that differs in that prefix (a pruned tool list, a
changed ``max_tokens``) would start a new cache and bill the whole conversation again,
so the fork changes nothing there and confines the agent through ``can_use_tool``
instead. Each model message's tool calls run concurrently; their results go back in
call order; a refused call gets an error result carrying the gate's message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memdir.messages import Message, ToolResultBlock, ToolUseBlock
from memdir.models import Model, ModelRequest, SystemPrompt, Usage
from memdir.permissions import CanUseTool
from memdir.tools import Tool, ToolContext, ToolError, WritesPath, effects_of

__all__ = ["CacheSafeParams", "ForkResult", "run_forked_agent"]


@dataclass(frozen=True, kw_only=True)
class CacheSafeParams:
    """Everything of the parent's request that a fork must send unchanged."""

    model: Model
    """The parent's model."""
    system: SystemPrompt = None
    """The parent's system prompt."""
    tools: Sequence[Mapping[str, Any]] = ()
    """The parent's tool definitions, all of them, in order."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """The parent's other request parameters (``max_tokens``, ``thinking``, …)."""
    wire_messages: Sequence[Mapping[str, Any]] = ()
    """The parent's request messages exactly as sent (in its model's wire shape), for a
    parent whose request was recorded rather than built by memdir (Claude Code records its
    own; the framework integrations record theirs on the client): they hold what the
    conversation's messages do not, such as reminders, ``role: "system"`` messages and a
    framework's own key order. A fork sends them in place of the first ``wire_replaces``
    messages it is given."""
    wire_replaces: int = 0
    """How many of the conversation's first messages ``wire_messages`` stand for."""


@dataclass(frozen=True, kw_only=True)
class ForkResult:
    """What a fork did."""

    messages: tuple[Message, ...]
    """The fork's own messages: the prompt, then each answer and its tool results."""
    usage: Usage
    """Tokens summed over every request the fork made."""
    turn_count: int
    """Model requests made (one assistant message each)."""
    written_paths: tuple[Path, ...]
    """Files that Write/Edit calls changed successfully, each once, in first-write order."""
    tool_calls: int = 0
    """Tool calls the model made."""
    denied_calls: int = 0
    """Tool calls the gate refused."""
    hit_max_turns: bool = False
    """The run stopped because it reached ``max_turns`` while the model still wanted tools."""


def _is_write(call: ToolUseBlock, tools: Mapping[str, Tool]) -> bool:
    """Whether ``call`` changes a file, by what its tool says the call does."""
    effects = effects_of(tools.get(call.name, call.name), call.input) or ()
    return any(isinstance(effect, WritesPath) for effect in effects)


async def _run_call(
    call: ToolUseBlock,
    tools: Mapping[str, Tool],
    can_use_tool: CanUseTool,
    context: ToolContext,
) -> tuple[ToolResultBlock, Path | None, bool]:
    """One tool call: asked at the gate, then run. Returns (result, written path, denied)."""
    tool = tools.get(call.name)
    decision = await can_use_tool(tool if tool is not None else call.name, call.input)
    if not decision.allowed:
        message = decision.message or f"{call.name} is not allowed here."
        return ToolResultBlock(tool_use_id=call.id, content=message, is_error=True), None, True
    if tool is None:
        message = f"No tool named {call.name!r} is available to this agent."
        return ToolResultBlock(tool_use_id=call.id, content=message, is_error=True), None, False
    try:
        output = await tool.run(call.input, context)
    except ToolError as exc:
        return ToolResultBlock(tool_use_id=call.id, content=str(exc), is_error=True), None, False
    except Exception as exc:  # a tool bug must reach the model as an error, not end the run
        text = f"{call.name} failed: {type(exc).__name__}: {exc}"
        return ToolResultBlock(tool_use_id=call.id, content=text, is_error=True), None, False
    result = ToolResultBlock(tool_use_id=call.id, content=output.content, is_error=output.is_error)
    written = output.written if not output.is_error else None
    return result, written, False


async def run_forked_agent(
    params: CacheSafeParams,
    messages: Sequence[Message],
    prompt_messages: Sequence[Message],
    *,
    tools: Sequence[Tool],
    can_use_tool: CanUseTool,
    max_turns: int | None = 5,
    context: ToolContext | None = None,
    cache_point: int | None = None,
    cache_points: Sequence[int] = (),
    cache_ttl: str | None = None,
    end_after_writes: bool | Callable[[tuple[Path, ...]], bool] = False,
) -> ForkResult:
    """Run the agent loop on the parent's request plus ``prompt_messages``.

    Each request is ``params`` unchanged with ``messages + prompt_messages`` and the
    fork's own turns after them. Tool calls are looked up by name in ``tools`` (the tools
    the fork can actually run; the model is shown the parent's definitions); every call
    is put to ``can_use_tool`` first. The loop ends when the model answers without tool
    calls, or after ``max_turns`` requests (``None``: no cap) — the calls of that last
    answer still run, so a write in the final turn is kept. Model failures propagate
    (:class:`~memdir.errors.ModelError`); tool failures become error results.

    ``cache_point`` and ``cache_points`` mark more messages (by index in ``messages``) as
    ends of a cached prefix, for the providers that take breakpoints; the provider keeps
    the latest that fit. A fork reads its parent's cache without any; the extractor marks
    the parent's final answer, so that the parent's next request reads what the fork wrote.
    ``cache_ttl`` (:attr:`~memdir.models.ModelRequest.cache_ttl`) gives those points and
    the system prompt's a longer lifetime; only memdir's own request uses it. A fork leaves
    it None: a longer lifetime is a different ``cache_control``, and the host's markers and
    the prices of its writes are the host's to choose.

    With ``end_after_writes`` the loop also ends after a model turn whose calls were all
    writes that succeeded: the work is done, and asking the model to say so would cost a
    request for nothing. A write that failed, or any other call, still gets its answer. A
    callable is asked too, with every path written so far, and the loop goes on while it
    says the work is not complete (a memory written but not yet indexed, say).
    """
    if max_turns is not None and max_turns < 1:
        raise ValueError(f"max_turns must be at least 1 or None, got {max_turns}")
    by_name = {tool.name: tool for tool in tools}
    context = context if context is not None else ToolContext()
    skip = min(params.wire_replaces, len(messages)) if params.wire_messages else 0
    history = [*messages[skip:], *prompt_messages]
    points = tuple(cache_points) + ((cache_point,) if cache_point is not None else ())
    # Points index ``messages``; the ones inside the recorded stretch have no place left.
    points = tuple(p - skip for p in points if p >= skip)
    own: list[Message] = list(prompt_messages)
    usage = Usage()
    written: dict[Path, None] = {}
    turns = calls = denied = 0
    hit_cap = False
    while True:
        request = ModelRequest(
            system=params.system,
            tools=params.tools,
            messages=tuple(history),
            params=params.params,
            cache_points=points,
            cache_ttl=cache_ttl,
            wire_prefix=tuple(params.wire_messages),
        )
        response = await params.model.request(request)
        turns += 1
        usage = usage + response.usage
        history.append(response.message)
        own.append(response.message)
        uses = response.message.tool_uses
        if not uses:
            break
        calls += len(uses)
        outcomes = await asyncio.gather(
            *(_run_call(call, by_name, can_use_tool, context) for call in uses)
        )
        results = tuple(result for result, _, _ in outcomes)
        for _, path, was_denied in outcomes:
            denied += was_denied
            if path is not None:
                written.setdefault(path, None)
        tool_message = Message(role="user", content=results)
        history.append(tool_message)
        own.append(tool_message)
        if end_after_writes and all(
            _is_write(call, by_name) and not result.is_error
            for call, result in zip(uses, results, strict=True)
        ):
            complete = end_after_writes is True or (
                callable(end_after_writes) and end_after_writes(tuple(written))
            )
            if complete:
                break
        if max_turns is not None and turns >= max_turns:
            hit_cap = True
            break
    return ForkResult(
        messages=tuple(own),
        usage=usage,
        turn_count=turns,
        written_paths=tuple(written),
        tool_calls=calls,
        denied_calls=denied,
        hit_max_turns=hit_cap,
    )
