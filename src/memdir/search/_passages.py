"""What the search index holds: passages cut from transcript lines and memory files, and
the query a person types turned into one FTS5 can run.

A passage is what a hit shows: one turn's text, or a few paragraphs of it when the turn
is long, so that a hit points at the words that matched rather than at a whole session.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["PASSAGE_MAX_CHARS", "EntryPassage", "entry_passages", "fts_query", "split_passages"]

PASSAGE_MAX_CHARS = 1200
"""The longest passage: about a screen's paragraph or three, enough to show why a turn
matched and short enough that BM25's length normalisation still favours the focused one."""

# Words too common to tell passages apart. A query made only of them keeps them (a search
# for "the who" still means something); otherwise they would match nearly every turn.
_STOP_WORDS = frozenset(
    """
    a an and any are as at be been but by can could did do does for from had has have
    how i if in into is it its me my no not of on or our should so than that the their
    them then there these they this those to us was we were what when where which who
    whom why will with would you your
    """.split()  # noqa: SIM905 (one word list reads better than 70 quoted strings)
)
_WORD = re.compile(r"\w+", re.UNICODE)
_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True, kw_only=True)
class EntryPassage:
    """The searchable text of one transcript line, with where it came from."""

    uuid: str | None
    """The line's message uuid (Claude Code's ``uuid``)."""
    role: str
    """``user`` or ``assistant``."""
    timestamp: str | None
    """When the message was written, as the transcript gives it (ISO-8601)."""
    session_id: str | None
    """The session the line names (``sessionId``), when it names one."""
    texts: tuple[str, ...]
    """The passages: the message's text cut at :data:`PASSAGE_MAX_CHARS`."""


def fts_query(query: str) -> str | None:
    """``query`` as an FTS5 expression: its distinct words, each quoted, joined by OR.

    FTS5 would read a bare query as syntax (``AND``, ``NEAR``, a ``-`` or a ``:``) and
    would ask for every word at once; a person typing a question wants the passages that
    share the most telling words with it, which BM25 ranks. None when it has no word.
    """
    words = [word.lower() for word in _WORD.findall(query)]
    telling = [word for word in words if word not in _STOP_WORDS] or words
    distinct = list(dict.fromkeys(telling))
    if not distinct:
        return None
    return " OR ".join('"' + word.replace('"', '""') + '"' for word in distinct)


def split_passages(text: str, max_chars: int = PASSAGE_MAX_CHARS) -> list[str]:
    """``text`` cut into passages of at most ``max_chars``: at paragraphs, then at
    sentences, then (a sentence longer than that) at the limit itself."""
    text = text.strip()
    if not text:
        return []
    if len(text) <= max_chars:
        return [text]
    pieces: list[str] = []
    for paragraph in _PARAGRAPH.split(text):
        paragraph = paragraph.strip()
        if len(paragraph) <= max_chars:
            pieces.append(paragraph)
            continue
        for sentence in _SENTENCE_END.split(paragraph):
            while len(sentence) > max_chars:
                pieces.append(sentence[:max_chars])
                sentence = sentence[max_chars:]
            pieces.append(sentence)
    passages: list[str] = []
    current = ""
    for piece in (p for p in pieces if p):
        if current and len(current) + 2 + len(piece) > max_chars:
            passages.append(current)
            current = piece
        else:
            current = f"{current}\n\n{piece}" if current else piece
    if current:
        passages.append(current)
    return passages


def _message_text(content: Any) -> str:
    """The text a person or the model wrote: text blocks only (tool calls, tool results
    and thinking are the work, not what was said)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = [
        block["text"]
        for block in content
        if isinstance(block, Mapping)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]
    return "\n\n".join(texts)


def entry_passages(line: bytes) -> EntryPassage | None:
    """The passages of one Claude Code transcript line, or None when it holds nothing said.

    Only the main thread's user and assistant messages count. Lines the harness wrote
    (``isMeta``), compaction summaries (a retelling of turns indexed already) and
    sidechains (a subagent's work) are left out, as is anything that is not JSON.
    """
    try:
        entry = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(entry, dict) or entry.get("type") not in ("user", "assistant"):
        return None
    if entry.get("isMeta") or entry.get("isCompactSummary") or entry.get("isSidechain"):
        return None
    message = entry.get("message")
    if not isinstance(message, Mapping):
        return None
    texts = tuple(split_passages(_message_text(message.get("content"))))
    if not texts:
        return None
    uuid, stamp, session = entry.get("uuid"), entry.get("timestamp"), entry.get("sessionId")
    return EntryPassage(
        uuid=uuid if isinstance(uuid, str) else None,
        role=str(entry["type"]),
        timestamp=stamp if isinstance(stamp, str) else None,
        session_id=session if isinstance(session, str) else None,
        texts=texts,
    )
