"""Which memory files a run's new messages touch, read from the files' headers alone.

Past the listing budget memdir's prompt lists only these (see ``_prompts``): each line
listed is sent uncached on every run, so a loose match costs as much as a good one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memdir.messages import Message

__all__ = ["relevance_text"]

_WORD = re.compile(r"[a-z0-9]+")
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
