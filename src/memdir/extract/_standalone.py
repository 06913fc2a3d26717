"""The memory agent's own request, for runs that do not ride the host's prompt cache.

On transcripts read from disk, in a host that does not hand over its request, or when the
host's request would cost more to re-send than it saves (see ``_planner``), memdir sends a
request of its own. Its cost depends on what is new, not on how long the conversation is:

1. a static prefix — memdir's system prompt holding every instruction of the extraction
   prompt and the three file tools — the same on every run, so cached;
2. a first message with the list of memory files as it was when the window's start was
   set, and the project's instruction files: the same from run to run until the window's
   start moves, so cached;
3. a window of the conversation before the cursor, for context, of at most
   ``window_tokens``: its start stays on the same message from run to run (each run reads
   the last one's window from the cache) until the window has grown past its size or the
   cache has expired, and then restarts short (``Runner._window_floor``);
4. the messages new since the cursor, each seen as new by exactly one run: a stretch
   longer than ``chunk_tokens`` is split over several runs;
5. last, one message: the request naming the number of new messages and the memory
   directory, the memory files written or removed since the list in the first message,
   and the text of ``MEMORY.md``. A save changes only this message, so the next run
   still reads everything before it from the cache.

The conversation is rendered as plain text messages: tool calls and results become text
(the memory agent cannot call the host's tools) and long results are cut to their head.
Each message is rendered once and kept for as long as it lives; a long conversation's
first run renders it in slices, letting the event loop through in between.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from memdir.messages import (
    ImageBlock,
    Message,
    OtherBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "STANDALONE_SYSTEM_PROMPT",
    "RenderedConversation",
    "StandaloneWindow",
    "estimate_tokens",
    "rendered_tokens",
    "standalone_system_prompt",
    "wire_tokens",
]

STANDALONE_SYSTEM_PROMPT = """\
You are memdir's memory agent. From the conversation shown (its tool calls and results \
are past, shown as text) and memdir's request after it, keep the memory directory \
accurate for future conversations with this user."""

CHARS_PER_TOKEN = 4
"""Characters a token is estimated at (the fake servers' rule too)."""
_SLICE_SECONDS = 0.001  # longest stretch of rendering before the event loop gets a turn
_CHECK_EVERY = 32
RENDER_SLICE = 256
"""The most messages one call renders into a window (1-3 ms of work, bench/window_render.py):
the rest wait for the next call, so a long first window never holds a thread, or the GIL,
for long."""


def standalone_system_prompt(instructions: str) -> str:
    """The standalone request's system prompt: who the agent is, then ``instructions``."""
    return f"{STANDALONE_SYSTEM_PROMPT}\n\n{instructions}"


def estimate_tokens(text: str) -> int:
    """Tokens in ``text``, estimated as characters / 4 (the fake servers' rule too)."""
    return len(text) // CHARS_PER_TOKEN + 1


# ~25k tokens, a quarter of the standalone window's default budget, for a text block and
# for a whole message: a pasted log or dump never fills a request alone (a 50 MB message
# was once sent whole), ordinary text passes.
TEXT_BLOCK_CHARS = 100_000


def _render_block(block: object, limit: int) -> str:
    if isinstance(block, TextBlock):
        return _cut(block.text, TEXT_BLOCK_CHARS)
    if isinstance(block, ToolUseBlock):
        arguments = json.dumps(dict(block.input), ensure_ascii=False, sort_keys=True)
        return f"[called tool {block.name} with {_cut(arguments, limit)}]"
    if isinstance(block, ToolResultBlock):
        label = "tool error" if block.is_error else "tool result"
        return f"[{label}]\n{_cut(block.text, limit)}"
    if isinstance(block, ImageBlock):
        return "[image]"
    if isinstance(block, ThinkingBlock):
        return ""  # reasoning is the assistant's, not something the user said
    if isinstance(block, OtherBlock):
        return f"[{block.type}]"
    return ""


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[… {len(text) - limit} more characters cut]"


# Characters a block costs on the wire beyond its text: its type, its keys, the quotes.
_BLOCK_OVERHEAD = 40


def wire_tokens(message: Message) -> int:
    """Estimated tokens of ``message`` as a request carries it whole: text, thinking, tool
    calls and their results, each block with its keys."""
    chars = 16
    for block in message.content:
        chars += _BLOCK_OVERHEAD
        if isinstance(block, TextBlock):
            chars += len(block.text)
        elif isinstance(block, ThinkingBlock):
            chars += len(block.thinking) + len(block.signature or "")
        elif isinstance(block, ToolUseBlock):
            chars += len(block.name) + len(block.id) + _json_chars(block.input)
        elif isinstance(block, ToolResultBlock):
            chars += len(block.tool_use_id) + len(block.text)
        elif isinstance(block, ImageBlock):
            chars += len(block.data or block.url or "")
        elif isinstance(block, OtherBlock):
            chars += _json_chars(block.data)
    return chars // CHARS_PER_TOKEN + 1


def _json_chars(value: object) -> int:
    try:
        return len(json.dumps(value, ensure_ascii=False, default=str))
    except (TypeError, ValueError, RecursionError):
        return len(repr(value))


def _rendered_text(message: Message, limit: int) -> str | None:
    if message.role not in ("user", "assistant"):
        return None
    parts = [p for p in (_render_block(b, limit) for b in message.content) if p]
    if not parts:
        return None
    text = "\n\n".join(parts)
    if len(parts) > 1:  # a message of many blocks, each under the cap, is cut as a whole
        text = _cut(text, TEXT_BLOCK_CHARS)
    if message.is_compact_summary:
        text = f"[summary of the earlier conversation]\n{text}"
    return text


# A rendered message is one text block: ``{"type":"text","text":""}`` on the wire.
_TEXT_BLOCK_TOKENS = 6


def rendered_tokens(message: Message, limit: int) -> int:
    """Estimated tokens of ``message`` as a standalone run shows it (0 when it is left
    out), tool results and inputs cut at ``limit`` characters, its block's keys counted
    (a turn of many short tool calls is mostly messages of a few words)."""
    text = _rendered_text(message, limit)
    return estimate_tokens(text) + _TEXT_BLOCK_TOKENS if text is not None else 0


def render(message: Message, limit: int) -> Message | None:
    """``message`` as one text block, or None for what the memory agent need not see."""
    text = _rendered_text(message, limit)
    if text is None:
        return None
    # Timestamp and flags are not sent; they tell a rule-based model when things were said.
    return Message(
        role=message.role,
        content=(TextBlock(text=text),),
        uuid=message.uuid,
        timestamp=message.timestamp,
        is_meta=message.is_meta,
    )


@dataclass(frozen=True, kw_only=True)
class StandaloneWindow:
    """The stretch of conversation one standalone run sends."""

    messages: tuple[Message, ...]
    """The rendered messages, window first, then the new ones."""
    start: int
    """Index (in the host's conversation) of the window's first message."""
    cursor: int
    """Index of the first new message."""
    end: int
    """Index after the last new message this run covers (the rest go to the next run)."""
    window_tokens: int
    """Estimated tokens of the window."""
    new_tokens: int
    """Estimated tokens of the new messages."""


class RenderedConversation:
    """A host's conversation rendered for standalone runs, kept between the runs of one
    extractor, with running token counts for the window's steps.

    Conversations only grow between turns, or get compacted; :meth:`update` keeps what
    is still the same (by identity) and renders only the rest.
    """

    def __init__(self, tool_result_chars: int) -> None:
        self._limit = tool_result_chars
        self._messages: list[Message] = []
        self._rendered: dict[int, Message | None] = {}
        """Rendered messages by index, for the stretch the last window sent. The rest are
        kept as counts only: a long conversation rendered whole would double the objects
        the garbage collector walks, and its pauses would land on the host's loop."""
        self._cumulative: list[int] = [0]
        """``_cumulative[i]``: estimated tokens of the first ``i`` rendered messages."""
        self._raw: list[int] = [0]
        """``_raw[i]``: estimated tokens of the first ``i`` messages as the host sent them."""

    def __len__(self) -> int:
        return len(self._messages)

    def tokens_between(self, start: int, end: int) -> int:
        """Estimated tokens of messages ``start`` to ``end`` (exclusive), as rendered."""
        return self._cumulative[end] - self._cumulative[start]

    def shown_between(self, start: int, end: int) -> int:
        """How many of messages ``start`` to ``end`` (exclusive) the last window showed:
        those it left out, or did not reach, do not count."""
        return sum(1 for i in range(start, end) if self._rendered.get(i) is not None)

    def raw_tokens_between(self, start: int, end: int) -> int:
        """Estimated tokens of messages ``start`` to ``end`` (exclusive), as the host sent
        them: every block whole, with its wire overhead."""
        return self._raw[end] - self._raw[start]

    def start_of_last(self, tokens: int, start: int, end: int) -> int:
        """The first index from ``start`` on such that the messages from it to ``end``
        hold at most ``tokens`` estimated tokens (as rendered); ``end`` when one message
        alone is more."""
        floor = self._cumulative[end] - tokens
        return bisect.bisect_left(self._cumulative, floor, start, end + 1)

    async def update(self, messages: Sequence[Message]) -> None:
        """Align with ``messages``, rendering what is new, in slices."""
        kept = self._kept(messages)
        del self._messages[kept:]
        self._rendered = {i: m for i, m in self._rendered.items() if i < kept}
        del self._cumulative[kept + 1 :]
        del self._raw[kept + 1 :]
        started = time.perf_counter()
        for index in range(kept, len(messages)):
            message = messages[index]
            self._messages.append(message)
            self._cumulative.append(self._cumulative[-1] + rendered_tokens(message, self._limit))
            self._raw.append(self._raw[-1] + wire_tokens(message))
            if index % _CHECK_EVERY == 0 and time.perf_counter() - started > _SLICE_SECONDS:
                await asyncio.sleep(0)
                started = time.perf_counter()

    def _kept(self, messages: Sequence[Message]) -> int:
        """How many leading messages are the ones already rendered."""
        have = min(len(self._messages), len(messages))
        if have == 0 or messages[have - 1] is self._messages[have - 1]:
            return have
        # Something before the end changed (a compaction, a rewind): find the longest
        # common stretch, assuming, as between turns, that it is a prefix.
        low, high = 0, have - 1  # messages[:low] matches; messages[high] does not
        while low < high:
            middle = (low + high + 1) // 2
            if messages[middle - 1] is self._messages[middle - 1]:
                low = middle
            else:
                high = middle - 1
        return low

    def window(
        self,
        cursor: int,
        end: int,
        *,
        window_tokens: int,
        chunk_tokens: int,
        floor: int | None = None,
    ) -> StandaloneWindow:
        """The stretch a run sends: the messages before ``cursor`` from ``floor`` (the
        caller keeps it within ``window_tokens``), or without one up to ``window_tokens``
        from a start on a fixed grid of half that size; then new messages up to
        ``chunk_tokens`` (at least one) but not past ``end``. Rendered in one call; a run
        uses :meth:`render_window`, which renders the same stretch in slices."""
        start, stop = self._bounds(cursor, end, window_tokens, chunk_tokens, floor)
        kept = self._kept_rendered(start, stop)
        part = self._render_slice(kept, start, stop)
        return self._assemble(kept, [part], start, cursor, stop)

    async def render_window(
        self,
        cursor: int,
        end: int,
        *,
        window_tokens: int,
        chunk_tokens: int,
        floor: int | None = None,
    ) -> StandaloneWindow:
        """:meth:`window`, rendered in worker threads in slices of at most
        :data:`RENDER_SLICE` messages, one thread call each.

        A first run can render 100k messages; in one call that held a thread, and
        through the GIL the host's loop, for about 100 ms. Between slices the GIL and
        the loop are free. Runs of one extractor never overlap, so nothing else touches
        the conversation meanwhile."""
        start, stop = self._bounds(cursor, end, window_tokens, chunk_tokens, floor)
        kept = self._kept_rendered(start, stop)
        parts = []
        for low in range(start, stop, RENDER_SLICE):
            high = min(low + RENDER_SLICE, stop)
            parts.append(await asyncio.to_thread(self._render_slice, kept, low, high))
        return self._assemble(kept, parts, start, cursor, stop)

    def _bounds(
        self, cursor: int, end: int, window_tokens: int, chunk_tokens: int, floor: int | None
    ) -> tuple[int, int]:
        cumulative = self._cumulative
        if floor is not None:
            start = min(floor, cursor)
        else:
            step = max(1, window_tokens // 2)
            lowest = cumulative[cursor] - window_tokens
            grid = -(-lowest // step) * step if lowest > 0 else 0  # next grid line at or after
            start = min(bisect.bisect_left(cumulative, grid, 0, cursor + 1), cursor)
        limit = cumulative[cursor] + chunk_tokens
        stop = bisect.bisect_right(cumulative, limit, cursor, end + 1) - 1
        stop = min(max(stop, cursor + 1), end) if end > cursor else cursor
        return start, stop

    def _kept_rendered(self, start: int, stop: int) -> dict[int, Message | None]:
        """The messages of ``start`` to ``stop`` that the last window rendered already."""
        return {i: m for i, m in self._rendered.items() if start <= i < stop}

    def _render_slice(
        self, kept: dict[int, Message | None], start: int, stop: int
    ) -> list[Message]:
        """Messages ``start`` to ``stop`` rendered (those not in ``kept`` yet are added to
        it), the ones the memory agent need not see left out."""
        out: list[Message] = []
        for index in range(start, stop):
            message = kept.get(index)
            if index not in kept:
                message = kept[index] = render(self._messages[index], self._limit)
            if message is None:
                continue
            out.append(message)
        return out

    def _assemble(
        self,
        kept: dict[int, Message | None],
        parts: Sequence[list[Message]],
        start: int,
        cursor: int,
        stop: int,
    ) -> StandaloneWindow:
        rendered = [message for part in parts for message in part]
        self._rendered = kept
        return StandaloneWindow(
            messages=tuple(rendered),
            start=start,
            cursor=cursor,
            end=stop,
            window_tokens=self.tokens_between(start, cursor),
            new_tokens=self.tokens_between(cursor, stop),
        )
