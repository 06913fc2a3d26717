"""The host's request for a Claude Code session, rebuilt from what Claude Code recorded.

Claude Code 2.1.332 records every request it sends in the session file
(:meth:`memdir.transcripts.Transcript.last_main_request`). Forking from the last one, with
its model, system prompt, tools, parameters and messages exactly as sent, and then its
answer, lets the memory agent read the prefix Claude Code has just cached, as a fork
inside Claude Code would.

What is sent is only what the transcript records. Claude Code also puts an attribution
block (``x-anthropic-billing-header: …``) first in the system prompt at send time; it is
not recorded and not added here. Whether the provider caches past a system prompt that
lacks it decides whether the fork reads Claude Code's cache; ``bench/claude_code_fork.py``
measures both cases on the fake server and ``scripts/check_claude_code_cache.py``
settles it against the real API.

The rebuilt request is used only when it is the one Claude Code digested
(:meth:`~memdir.transcripts.ClaudeCodeRequest.verify`): a rebuilt request that differs
from what was sent would share nothing with Claude Code's cache and pay to write its own,
so on a mismatch, a missing digest or any other doubt the turn goes standalone, as for a
session of an older Claude Code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memdir.fork import CacheSafeParams
from memdir.integrations._wire import anthropic_fork_params
from memdir.messages import Message
from memdir.models import Model
from memdir.transcripts import ClaudeCodeRequest, Transcript

__all__ = ["RecordedHost", "recorded_host"]


@dataclass(frozen=True, kw_only=True)
class RecordedHost:
    """The host's last request of a session, ready for a fork, or why there is none."""

    params: CacheSafeParams | None
    """The request to fork from; None when the turn goes standalone."""
    reason: str
    """Why (for the log): what was used, or what was missing."""
    sent_at: float | None = None
    """When the recorded request's answer began, seconds since the epoch."""


def recorded_host(transcript: Transcript, model: Model) -> RecordedHost:
    """The fork's request for the last turn of ``transcript``, when Claude Code recorded
    it and ``model`` is an Anthropic model (whose client the fork then shares)."""
    if not model.name.startswith("anthropic:"):
        return RecordedHost(params=None, reason="memdir's model is not Anthropic's")
    request = transcript.last_main_request()
    if request is None:
        return RecordedHost(params=None, reason="no whole request recorded in the session")
    if request.request_digest is None:
        return RecordedHost(params=None, reason="the recorded request has no digest")
    if not request.verify():
        return RecordedHost(
            params=None, reason="the rebuilt request does not match Claude Code's digest"
        )
    answer_at = _answer_start(transcript.messages)
    if answer_at is None:
        return RecordedHost(params=None, reason="the session does not end with an answer")
    if not _answers(request, transcript.messages[answer_at - 1]):
        return RecordedHost(
            params=None, reason="the last recorded request is not the one the session answered"
        )
    from memdir.models import AnthropicModel

    client = getattr(model, "client", None)
    host_model = AnthropicModel(request.model, client=client) if client is not None else None
    if host_model is None:
        return RecordedHost(params=None, reason="memdir's model has no client to share")
    # The request as Claude Code sent it, through the integrations' own builder.
    body = {
        **request.params,
        "model": request.model,
        "system": list(request.system) if isinstance(request.system, tuple) else request.system,
        "tools": list(request.tools or ()),
        "messages": list(request.messages),
    }
    params = anthropic_fork_params(host_model, body, answer_at)
    first = transcript.messages[answer_at].timestamp
    return RecordedHost(
        params=params,
        reason=f"Claude Code's recorded request {request.id}",
        sent_at=first.timestamp() if first is not None else None,
    )


def _answer_start(messages: Sequence[Message]) -> int | None:
    """Where the session's final answer (its assistant messages at the end) begins."""
    index = len(messages)
    while index > 0 and messages[index - 1].role == "assistant":
        index -= 1
    if index == len(messages) or index == 0:
        return None
    return index


def _answers(request: ClaudeCodeRequest, asked: Message) -> bool:
    """Whether ``request`` ends with the message the session's final answer answered.

    Claude Code adds reminders to the messages it sends, so the recorded last message
    holds more than the transcript's: its tool results by id, or its text, must be there.
    Messages of the request with another role than user or assistant are passed over.
    """
    # Claude Code may send a ``role: "system"`` message (its environment) after the
    # conversation's last one.
    same_role = [m for m in request.messages if m.get("role") in ("user", "assistant")]
    if not same_role or same_role[-1].get("role") != asked.role:
        return False
    last = same_role[-1]
    content = last.get("content")
    blocks: list[Mapping[str, Any]] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else list(content or ())
    )
    results = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
    if asked.is_tool_result:
        return {r.tool_use_id for r in asked.tool_results} <= results
    texts = "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    return bool(asked.text) and asked.text in texts
