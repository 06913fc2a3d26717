"""The memory agent's own request, for hosts that pass no request of theirs to share.

On transcripts read from disk, or in a host that does not hand over its request, there is
no parent prompt cache to ride. memdir then sends a request of its own that is built to be
cached across the runs of one session: a fixed system prompt, memdir's own tool
definitions, and the conversation as plain messages — tool calls and results written out
as text (the memory agent cannot call the host's tools, and long results are cut to their
head) — with a cache breakpoint at the end of the conversation, before the per-run prompt.
When the conversation outgrows the token budget, the oldest messages before the cursor
go first, cut at a fixed step so that consecutive runs keep the same start and so the same
cached prefix.
"""

from __future__ import annotations

import json
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

__all__ = ["STANDALONE_SYSTEM_PROMPT", "StandaloneContext", "build_standalone_context"]

STANDALONE_SYSTEM_PROMPT = """\
You are memdir's memory agent. You are shown a conversation between a user and an AI \
assistant, followed by instructions from memdir. Your only job is to keep the memory \
directory those instructions name accurate and useful for future conversations with the \
same user: save what is worth keeping, update what changed, and remove what the user asks \
to forget. Tool calls and tool results from the conversation are shown as text; they \
happened in the past and cannot be repeated. Use only the tools you are given, and follow \
memdir's instructions exactly."""

# Messages are dropped in whole steps of this many, so the start of the conversation
# moves rarely and the cached prefix survives many runs.
_DROP_STEP = 32
_CHARS_PER_TOKEN = 4


@dataclass(frozen=True, kw_only=True)
class StandaloneContext:
    """The conversation as the standalone request carries it."""

    messages: tuple[Message, ...]
    """Rendered messages, oldest first, starting with a user message."""
    dropped: int
    """How many of the original messages were left out to fit the budget."""


def _render_block(block: object, limit: int) -> str:
    if isinstance(block, TextBlock):
        return block.text
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


def _render(message: Message, limit: int) -> Message | None:
    if message.role not in ("user", "assistant"):
        return None
    parts = [p for p in (_render_block(b, limit) for b in message.content) if p]
    if not parts:
        return None
    text = "\n\n".join(parts)
    if message.is_compact_summary:
        text = f"[summary of the earlier conversation]\n{text}"
    # Timestamp and flags are not sent; they tell a rule-based model when things were said.
    return Message(
        role=message.role,
        content=(TextBlock(text=text),),
        uuid=message.uuid,
        timestamp=message.timestamp,
        is_meta=message.is_meta,
    )


def _tokens(message: Message) -> int:
    return len(message.text) // _CHARS_PER_TOKEN + 1


def build_standalone_context(
    messages: Sequence[Message],
    *,
    cursor_index: int,
    budget_tokens: int,
    tool_result_chars: int,
) -> StandaloneContext:
    """The conversation rendered for a standalone run, within ``budget_tokens``.

    ``cursor_index`` is the number of messages already handled by earlier runs; those
    are the first to go when the budget is tight, a step at a time. If even the new
    messages do not fit, the oldest of them go too, so the most recent always stay.
    """
    rendered = [_render(m, tool_result_chars) for m in messages]
    costs = [_tokens(r) if r is not None else 0 for r in rendered]
    total = sum(costs)
    start = 0
    while total > budget_tokens and start < len(messages):
        step = _DROP_STEP if start + _DROP_STEP <= cursor_index else 1
        total -= sum(costs[start : start + step])
        start += step
    kept = [r for r in rendered[start:] if r is not None]
    if kept and kept[0].role != "user":
        # Anthropic's API wants a user message first.
        kept.insert(0, Message.user("[the conversation so far begins with the assistant]"))
    return StandaloneContext(messages=tuple(kept), dropped=start)
