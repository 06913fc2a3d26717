"""What an imported conversation looks like."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from memdir.messages import Message
from memdir.transcripts._canonical_json import canonical_json, sha256_hex

__all__ = [
    "CacheControlMarker",
    "ClaudeCodeRequest",
    "SkippedLine",
    "Transcript",
    "TranscriptFormat",
    "host_model",
]

TranscriptFormat: TypeAlias = Literal["claude-code", "anthropic", "openai"]

# The parts of a request that Claude Code leaves out of its digest (and of the record).
_UNHASHED = frozenset({"metadata", "stream", "thread", "diagnostics", "safeguards", "data_flow"})


@dataclass(frozen=True, kw_only=True)
class SkippedLine:
    """A line of a JSONL transcript that was left out, and why."""

    line: int
    """1-based line number in the file."""
    reason: str
    """What was wrong with it, in a few words."""


@dataclass(frozen=True, kw_only=True)
class CacheControlMarker:
    """One ``cache_control`` marker of a recorded request, where it sat and what it said."""

    path: tuple[str | int, ...]
    """Keys and list indices from the request body to the object that carried the marker,
    e.g. ``("messages", 3, "content", 0)``."""
    value: Any
    """The marker's value, e.g. ``{"type": "ephemeral"}``."""


@dataclass(frozen=True, kw_only=True)
class ClaudeCodeRequest:
    """A model request that Claude Code (2.1.332 and later) recorded in its session file.

    Claude Code writes one ``api-request`` line per request it sends, with the system
    prompt and tools stored once per shape (``api-request-shape``) and each message once
    by content hash (``api-request-blob``, or the transcript's own lines when they hold
    the same message). This is the request put back together, with its ``cache_control``
    markers where they were sent.

    :meth:`body` is the request body as Claude Code built it, except for what it adds or
    moves at send time: the SDK sends ``params["betas"]`` as the ``anthropic-beta``
    header and adds ``stream`` and ``metadata``, and Claude Code puts a first system block
    ``x-anthropic-billing-header: …`` in front, which it does not record and which is not
    added here. A message whose content went out as a plain string may come back as a
    list holding one text block (a recorded message stands for both forms); the two are
    the same request to the API and to :meth:`verify`.

    ``system``, ``tools`` and ``messages`` share their objects with other requests of the
    same transcript; use :meth:`body` for a copy to change or send.
    """

    id: str
    """Claude Code's id for the request (assistant lines name it in ``requestRef``)."""
    line: int
    """1-based line number of the ``api-request`` line."""
    query_source: str | None
    """What sent it: ``repl_main_thread`` (or ``repl_main_thread:outputStyle:<style>``)
    and ``sdk`` for the main thread, ``agent:<kind>`` and ``hook_agent`` for subagents."""
    agent_id: str | None
    """The subagent that sent it; None for the main thread."""
    model: str
    """The model asked."""
    system: str | tuple[Mapping[str, Any], ...] | None
    """The system prompt as sent, billing block left out: usually a list of text blocks."""
    tools: tuple[Mapping[str, Any], ...] | None
    """The tool definitions, all of them, in order; None when the request sent none."""
    messages: tuple[Mapping[str, Any], ...]
    """The messages as sent, in Anthropic wire form."""
    params: Mapping[str, Any]
    """Every other recorded parameter: ``max_tokens``, ``thinking``, ``betas``,
    ``context_management``, ``output_config``, …"""
    cache_control: tuple[CacheControlMarker, ...] = ()
    """The recorded ``cache_control`` markers, already applied to system, tools and messages."""
    request_digest: str | None = None
    """Claude Code's digest of the request, which :meth:`verify` checks."""
    cut: Mapping[str, Any] | None = None
    """Set when Claude Code cut the messages before recording them (its ``cut`` field):
    the rebuilt messages are then the cut ones, not those sent."""
    withheld: tuple[str, ...] = ()
    """Parameters that were sent but not recorded (Claude Code's ``withheld`` list)."""

    @property
    def is_main_thread(self) -> bool:
        """Whether the main conversation sent it, rather than a subagent."""
        source = self.query_source
        if self.agent_id is not None or source is None:
            return False
        return source == "sdk" or source.startswith("repl_main_thread")

    def body(self) -> dict[str, Any]:
        """A fresh copy of the request body (see the class docstring for what differs)."""
        out: dict[str, Any] = {"model": self.model}
        out.update(copy.deepcopy(dict(self.params)))
        if isinstance(self.system, str):
            out["system"] = self.system
        elif self.system is not None:
            out["system"] = copy.deepcopy(list(self.system))
        if self.tools is not None:
            out["tools"] = copy.deepcopy(list(self.tools))
        out["messages"] = copy.deepcopy(list(self.messages))
        return out

    def verify(self) -> bool:
        """Whether the rebuilt request is the one Claude Code digested; False without a digest.

        Claude Code 2.1.332 computes ``requestDigest`` as the lower-case hex SHA-256 of the
        canonical JSON of the body (keys sorted at every level, no whitespace, see
        ``_canonical_json``), taken *with* the ``cache_control`` markers and ``betas``,
        *without* the billing system block, ``metadata``, ``stream`` and the withheld
        parameters, and with each message whose content is a string written as one text
        block. This was read from the serialiser in Claude Code's bundle and then
        confirmed: for every request of sessions run with Claude Code 2.1.332 against a
        local server, the digest of the body that server received (billing block removed,
        the ``anthropic-beta`` header put back as ``betas``) equals the recorded one, and so
        does the digest of the rebuilt request. Without the markers, with the billing
        block, or with string contents kept as strings, the digests differ.
        """
        if self.request_digest is None:
            return False
        body: dict[str, Any] = {
            "model": self.model,
            **self.params,
            "messages": [_content_as_blocks(m) for m in self.messages],
        }
        if self.system is not None:
            body["system"] = self.system
        if self.tools is not None:
            body["tools"] = self.tools
        try:
            text = canonical_json({k: v for k, v in body.items() if k not in _UNHASHED})
        except RecursionError:
            return False
        return sha256_hex(text) == self.request_digest


def _content_as_blocks(message: Any) -> Any:
    if isinstance(message, Mapping) and isinstance(message.get("content"), str):
        return {**message, "content": [{"type": "text", "text": message["content"]}]}
    return message


@dataclass(frozen=True, kw_only=True)
class Transcript:
    """A conversation read from a file: the main thread in order, plus what came with it."""

    path: Path
    """The file it was read from."""
    format: TranscriptFormat
    """Which format the file was recognised as."""
    messages: tuple[Message, ...]
    """The main thread's current branch, oldest first; compaction summaries are flagged."""
    session_id: str | None = None
    """The session's id, where the format records one."""
    title: str | None = None
    """The session's title: Claude Code's custom title, else its AI title, else its summary."""
    cwd: str | None = None
    """The working directory the session ran in, where recorded (the newest one seen)."""
    system: str | None = None
    """The system prompt, for Anthropic-format files that carry one at the top level."""
    sidechains: Mapping[str, tuple[Message, ...]] = field(default_factory=dict)
    """Subagent conversations found with the session, by agent id; never in ``messages``."""
    skipped: tuple[SkippedLine, ...] = ()
    """Lines that were not JSON objects, of an unknown type, or malformed."""
    requests: tuple[ClaudeCodeRequest, ...] = ()
    """The model requests Claude Code recorded in the file, in file order."""
    unusable_requests: tuple[SkippedLine, ...] = ()
    """Recorded requests that could not be rebuilt (a shape or message missing from the
    file, a malformed record), by the line of their ``api-request`` record."""

    def last_main_request(self) -> ClaudeCodeRequest | None:
        """The newest recorded request of the main thread, if it is whole.

        None when the file recorded none, when a request recorded after it could not be
        rebuilt (it may have been the main thread's newest), or when its messages were cut
        before recording: an older request is not the conversation's current prefix.
        """
        main = [r for r in self.requests if r.is_main_thread]
        if not main:
            return None
        newest = main[-1]
        if newest.cut is not None or any(s.line > newest.line for s in self.unusable_requests):
            return None
        return newest


def host_model(transcript: Transcript) -> str | None:
    """The model of the host's own last request in ``transcript``, as the host named it.

    The newest request of the main thread that Claude Code recorded (``api-request``,
    its ``params.model``) where there is one, else the ``model`` of the last assistant
    message that carries one (Claude Code's ``message.model``, an Anthropic or OpenAI
    response's ``model``). Claude Code's placeholder for answers no model wrote
    (``<synthetic>``) and a context-size suffix (``[1m]``) are left out; None when the
    transcript names no model.
    """
    for request in reversed(transcript.requests):
        if request.is_main_thread:
            name = _model_name(request.model)
            if name is not None:
                return name
    for message in reversed(transcript.messages):
        if message.role == "assistant" and not message.is_sidechain:
            name = _model_name(message.extra.get("model"))
            if name is not None:
                return name
    return None


def _model_name(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    name = value.strip()
    if name.endswith("]") and "[" in name:
        name = name[: name.rindex("[")]
    return name if name and not name.startswith("<") else None
