"""The script a fake provider server follows, and what it records.

A :data:`Reply` is what the server answers one request with; a :class:`RecordedRequest`
is what it keeps of each request it received.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from memdir.errors import UsageError
from memdir.messages import Message

__all__ = ["Fault", "Handler", "RecordedRequest", "Reply", "check_reply"]


@dataclass(frozen=True)
class Fault:
    """A scripted failure, answered in place of one reply.

    By default the server answers ``status`` with the provider's error body for it. With
    ``malformed`` or ``truncate_stream`` the answer is a 200 that goes wrong instead, and
    ``status`` is not used.
    """

    status: int = 500
    """The HTTP status to answer with."""
    body: str | Mapping[str, Any] | None = None
    """The error body; None gives the provider's error JSON for ``status``."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra response headers, such as ``retry-after``."""
    delay: float = 0.0
    """Seconds to wait before answering (for timeouts); ``stop()`` cuts the wait short."""
    malformed: bool = False
    """Answer 200 with a body (or stream event) that is not valid JSON."""
    truncate_stream: bool = False
    """Send the first stream events, then close the connection mid-body.

    A request that did not ask for a stream gets half of a JSON body instead.
    """


Reply: TypeAlias = str | Message | Fault
"""One scripted answer: an assistant text, an assistant :class:`Message`, or a :class:`Fault`."""

Handler: TypeAlias = Callable[[dict[str, Any]], Reply]
"""Decides the reply once the script runs out; called with the decoded request body."""


@dataclass(frozen=True, kw_only=True)
class RecordedRequest:
    """One request the server received."""

    path: str
    """The URL path, without the query string."""
    headers: Mapping[str, str]
    """The request headers, names lower-cased."""
    raw: bytes
    """The body exactly as it arrived."""
    body: dict[str, Any]
    """The body decoded from JSON (empty when it was not a JSON object)."""
    status: int
    """The HTTP status the server answered with (200 for malformed and truncated faults)."""
    usage: Mapping[str, Any] | None = None
    """The ``usage`` object the server reported, in the provider's shape; None for errors."""

    @property
    def stream(self) -> bool:
        """Whether the client asked for a streamed answer."""
        return self.body.get("stream") is True


def check_reply(reply: object) -> Reply:
    """``reply`` if the server can send it, else a :class:`~memdir.errors.UsageError`."""
    if isinstance(reply, Message):
        if reply.role != "assistant":
            raise UsageError(f"a scripted reply must be an assistant message, not {reply.role!r}")
        return reply
    if isinstance(reply, str | Fault):
        return reply
    raise UsageError(f"a reply must be a str, an assistant Message or a Fault, not {reply!r}")
