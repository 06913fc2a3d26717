"""What memdir's own requests leave in the provider's cache, and what the next one reads.

A standalone request is the system prompt (memdir's instructions), an opening message
(the list of memory files and the project's files), the window of conversation, the new
messages and a final message. On Claude the cache keeps entries only at breakpoints,
four a request at most: the system prompt and the final message take two; the opening
message and the window's last message take the others, unless the run before's entry is
too far back for a look back to find it (:func:`previous_point`). An entry read or
written again keeps the longer of its lifetimes. OpenAI caches any prefix, for as long as
the request asked.

:class:`SentRequest` is the last request as the cache holds it; :func:`cached_prefix`
says how much of the next one it serves. The planner prices a run with that.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memdir.extract._standalone import CHARS_PER_TOKEN, StandaloneWindow, estimate_tokens

__all__ = [
    "LOOKBACK_REACH",
    "SentRequest",
    "cached_prefix",
    "previous_point",
    "record_sent",
    "shared_opening_tokens",
    "text_message_tokens",
]

TEXT_MESSAGE_OVERHEAD = 8
"""Tokens a message of one text block adds to its text on the wire."""

LOOKBACK_REACH = 16
"""Claude looks for an earlier cache entry up to 20 blocks back from a breakpoint; within
this many blocks after the run before's entry (a margin for blocks the wire form adds),
the look back from the request's last window message reaches it."""


@dataclass(frozen=True, kw_only=True)
class SentRequest:
    """memdir's last standalone request, as the cache holds it."""

    at: float
    """When it went out."""
    instructions: str
    """Its instructions (the system prompt's variable part)."""
    opening: str
    """Its first message's text: the list of memory files and the project's files."""
    key: str
    """What its prefix held before its new messages (the window's key)."""
    end: int
    """The index (in the host's conversation) after its last message."""
    lifetime: float
    """How long that prefix lives unused."""
    static_until: float
    """When the entry for its instructions (the system prompt's breakpoint, in every
    request) expires: an entry read or written again keeps the longer of its lifetimes,
    so one written for an hour outlives the five-minute requests after it."""
    static_life: float
    """That entry's lifetime."""
    opening_until: float | None
    """When the entry at its opening message's own breakpoint expires, by the same rule;
    None if the message has had none since it changed."""
    opening_life: float
    """That entry's lifetime (0 without one)."""


def text_message_tokens(text: str) -> int:
    """Estimated tokens of a message of one text block, ``text`` (the opening message, the
    final one)."""
    return estimate_tokens(text) + TEXT_MESSAGE_OVERHEAD


def previous_point(window: StandaloneWindow, entry: int | None) -> int | None:
    """Where a request needs a breakpoint to read the run before's entry, or None.

    ``entry`` is the position in ``window.messages`` of the message that entry ends on
    (None when the window does not hold it: it started afresh). The look back from the
    window's last message reaches it within :data:`LOOKBACK_REACH` blocks; past that
    (a coding agent's turn of tool calls, or the messages a fork covered in between) the
    entry gets a breakpoint of its own, at its index in the request (the opening message
    first), and takes the opening message's place."""
    if entry is None or entry < 0:
        return None
    after = window.messages[entry + 1 :]
    if sum(len(m.content) for m in after) < LOOKBACK_REACH:
        return None
    return entry + 1


def shared_opening_tokens(before: str, now: str, provider: str | None) -> int:
    """Tokens of the opening message ``now`` that a live cache written with ``before``
    serves: the whole message when it is unchanged (on Claude from its breakpoint); on
    OpenAI, which caches any prefix, a list grown at its end up to where it changed."""
    if before == now:
        return text_message_tokens(now)
    if provider != "openai":
        return 0
    common = next(
        (n for n, (a, b) in enumerate(zip(before, now, strict=False)) if a != b),
        min(len(before), len(now)),
    )
    return common // CHARS_PER_TOKEN


def record_sent(
    before: SentRequest | None,
    *,
    now: float,
    instructions: str,
    opening: str,
    key: str,
    end: int,
    lifetime: float,
    opening_marked: bool,
) -> SentRequest:
    """The request just sent (at ``now``, its prefix written for ``lifetime``), after
    ``before``: the instructions' entry, read or written again, keeps the longer of the
    two lifetimes, and so does the opening message's where ``opening_marked`` (it had a
    breakpoint of its own); unmarked, it lives on from the last one."""
    if before is not None and before.instructions != instructions:
        before = None
    static_life = lifetime
    if before is not None and now < before.static_until:
        static_life = max(lifetime, before.static_life)
    opening_until: float | None = None
    opening_life = 0.0
    if (
        before is not None
        and before.opening == opening
        and before.opening_until is not None
        and now < before.opening_until
    ):
        opening_until, opening_life = before.opening_until, before.opening_life
    if opening_marked:
        opening_life = max(lifetime, opening_life)
        opening_until = now + opening_life
    return SentRequest(
        at=now,
        instructions=instructions,
        opening=opening,
        key=key,
        end=end,
        lifetime=lifetime,
        static_until=now + static_life,
        static_life=static_life,
        opening_until=opening_until,
        opening_life=opening_life,
    )


def cached_prefix(
    sent: SentRequest | None,
    *,
    now: float | None,
    provider: str | None,
    instructions: str,
    opening: str,
    key: str,
    static: int,
    seen: Callable[[int], int],
) -> tuple[int, str]:
    """How many tokens of the next request, from its start, the cache serves, and why.

    ``static`` is the instructions' and tools' tokens; ``seen(end)`` the window's tokens
    up to the host's index ``end``. The instructions while their entry lives; the window
    up to where the last request ended while that request's prefix lives and the window
    continues it; else, a window started afresh, the opening message where its own entry
    lives (see :func:`shared_opening_tokens`)."""
    if sent is None or now is None or now >= sent.static_until or sent.instructions != instructions:
        return 0, "memdir's cache cold"
    alive = now - sent.at < sent.lifetime
    if alive and sent.key == key:
        return static + text_message_tokens(opening) + seen(sent.end), "memdir's window cached"
    opening_lives = (
        alive
        if provider == "openai"
        else sent.opening_until is not None and now < sent.opening_until
    )
    shared = shared_opening_tokens(sent.opening, opening, provider) if opening_lives else 0
    if shared:
        return static + shared, "memdir's instructions and list cached"
    return static, "memdir's instructions cached"
