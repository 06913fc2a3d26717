"""Which memory files a run's new messages touch, read from the files' headers alone.

Past the listing budget memdir's prompt lists only these (see ``_prompts``): each line
listed is sent uncached on every run, so a loose match costs as much as a good one.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from memdir.messages import Message
from memdir.store import MemoryHeader

__all__ = ["relevance_text", "relevant_files"]

_RELEVANCE_CHARS = 40_000
_WORD = re.compile(r"[a-z0-9]+")
# Words too common to tell one memory from another.
_STOP_WORDS = frozenset(
    [
        "the",
        "and",
        "for",
        "are",
        "but",
        "not",
        "you",
        "your",
        "with",
        "this",
        "that",
        "from",
        "have",
        "has",
        "was",
        "were",
        "will",
        "would",
        "can",
        "could",
        "should",
        "what",
        "when",
        "where",
        "which",
        "who",
        "how",
        "all",
        "any",
        "its",
        "into",
        "out",
        "use",
        "used",
        "about",
        "they",
        "them",
        "then",
        "than",
        "there",
        "here",
        "just",
        "also",
        "only",
        "more",
        "most",
        "some",
        "such",
        "very",
        "one",
        "two",
    ]
)
# BM25's usual constants: term-frequency saturation and document-length normalisation.
_K1 = 1.2
_B = 0.75
# The least BM25 score that makes a memory "touched": one word rare in the store (held by
# less than about a fifth of its memories), or several commoner ones. Below it, a memory
# shares only words most memories have ("service", "team"), and listing it would fill the
# list with what the new messages do not touch.
_MIN_SCORE = 1.5
# And at least this share of the best memory's score.
_NEAR_BEST = 0.5
# A file name's type prefix (`project_`, …) is shared by a quarter of the store: no topic.
_TYPE_PREFIX = re.compile(r"^(?:user|feedback|project|reference)_")

_FEW_WORDS = 3
"""Fewer distinct words than this in what the person wrote ("yes, do that") say nothing
of a subject: the rest of the new messages then say what the turn was about."""


def relevance_text(messages: Sequence[Message]) -> str:
    """The text to judge which memories ``messages`` touch: what the person wrote in them.

    A memory is mostly about what the person said: who they are, what they want, what
    they decided or corrected. The assistant's answers and tool results around it are
    long and range wide (an answer restating the whole design names half the store),
    so matching on them lists memories the turn never touched. Only where the person
    wrote next to nothing do the other messages stand in.
    """
    said = "\n".join(
        m.text for m in messages if m.role == "user" and not m.is_tool_result and not m.is_meta
    )
    if len(set(_WORD.findall(said.lower()))) >= _FEW_WORDS:
        return said
    return "\n".join(m.text for m in messages if m.role in ("user", "assistant"))


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOP_WORDS]


def relevant_files(memories: Sequence[MemoryHeader], new_text: str, limit: int) -> frozenset[str]:
    """The file names of at most ``limit`` memories the new messages touch: those they
    name first, then the best by BM25 over each file's name, file name and description.

    Lexical and read from the headers alone, so it costs no request and no file read;
    the memory agent finds anything it misses with `Grep`.
    """
    # The newest part of a long backlog is enough to tell what it touches, and keeps this
    # work (it runs on the host's event loop) small whatever the backlog's length.
    new_text = new_text[-_RELEVANCE_CHARS:]
    lowered = new_text.lower()
    named = [h.filename for h in memories if h.filename.lower() in lowered]
    terms = set(_words(new_text))
    documents = [
        Counter(_words(" ".join((_topic_of(h.filename), h.name or "", h.description or ""))))
        for h in memories
    ]
    lengths = [sum(doc.values()) for doc in documents]
    average = sum(lengths) / len(lengths) or 1.0
    holders = Counter(term for doc in documents for term in doc if term in terms)
    count = len(documents)
    scored: list[tuple[float, int]] = []
    for index, (doc, length) in enumerate(zip(documents, lengths, strict=True)):
        score = 0.0
        for term in terms & doc.keys():
            idf = math.log(1 + (count - holders[term] + 0.5) / (holders[term] + 0.5))
            norm = _K1 * (1 - _B + _B * length / average)
            score += idf * doc[term] * (_K1 + 1) / (doc[term] + norm)
        if score >= _MIN_SCORE:
            scored.append((score, index))
    # Highest score first; a tie keeps the caller's order. A memory scoring well under the
    # best one shares a word or two with the new messages, not their subject.
    scored.sort(key=lambda item: (-item[0], item[1]))
    if scored:
        floor = scored[0][0] * _NEAR_BEST
        scored = [item for item in scored if item[0] >= floor]
    ranked = [*named, *(memories[index].filename for _, index in scored)]
    return frozenset(list(dict.fromkeys(ranked))[:limit])


def _topic_of(filename: str) -> str:
    """The words of a memory's file name that say what it is about."""
    stem = filename.rsplit("/", 1)[-1].removesuffix(".md")
    return _TYPE_PREFIX.sub("", stem)
