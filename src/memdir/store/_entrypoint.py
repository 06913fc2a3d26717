"""``MEMORY.md``, the index: how much of it is loaded into a conversation.

The index is loaded into every conversation, so it is capped. The caps and the order in
which they apply are Claude Code's: lines first, then characters (cut at a line end
where possible), then one warning line that says which cap fired, so the model knows it
is seeing part of the index and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memdir.store._frontmatter import split_frontmatter

__all__ = [
    "ENTRYPOINT_NAME",
    "MAX_ENTRYPOINT_CHARS",
    "MAX_ENTRYPOINT_LINES",
    "EntrypointContent",
    "strip_entrypoint_noise",
    "truncate_entrypoint",
]

ENTRYPOINT_NAME = "MEMORY.md"
# 200 lines / 25,000 chars: the caps Claude Code applies when it loads MEMORY.md.
MAX_ENTRYPOINT_LINES = 200
MAX_ENTRYPOINT_CHARS = 25_000

# Non-greedy, so two comments on one line do not swallow the text between them.
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


@dataclass(frozen=True, kw_only=True)
class EntrypointContent:
    """The index as it is loaded, and what the caps did to it."""

    content: str
    """The text to load: the trimmed index, or its kept part followed by a warning line."""

    line_count: int
    """Lines in the trimmed input (0 when it is empty)."""

    byte_count: int
    """Characters (not UTF-8 bytes) in the trimmed input.

    The name follows Claude Code, which counts the length of a JavaScript string here.
    """

    was_line_truncated: bool
    """Whether the input had more than :data:`MAX_ENTRYPOINT_LINES` lines."""

    was_byte_truncated: bool
    """Whether the input had more than :data:`MAX_ENTRYPOINT_CHARS` characters."""


def truncate_entrypoint(text: str) -> EntrypointContent:
    """Apply the index's line and character caps to ``text``.

    The text is trimmed first. Within both caps it is returned as is. Otherwise the first
    :data:`MAX_ENTRYPOINT_LINES` lines are kept; if those are still longer than
    :data:`MAX_ENTRYPOINT_CHARS`, they are cut at the last newline within the limit (or
    at the limit itself when there is none). A blank line and a warning naming the cap
    that fired follow.
    """
    trimmed = text.strip()
    lines = trimmed.split("\n")
    line_count = len(lines) if trimmed else 0
    char_count = len(trimmed)
    over_lines = line_count > MAX_ENTRYPOINT_LINES
    # Claude Code tests the untruncated length, so the flag also tells telemetry that the
    # file itself is too big even when the line cap already brought it under the limit.
    over_chars = char_count > MAX_ENTRYPOINT_CHARS
    if not over_lines and not over_chars:
        return EntrypointContent(
            content=trimmed,
            line_count=line_count,
            byte_count=char_count,
            was_line_truncated=False,
            was_byte_truncated=False,
        )

    kept = "\n".join(lines[:MAX_ENTRYPOINT_LINES]) if over_lines else trimmed
    if len(kept) > MAX_ENTRYPOINT_CHARS:
        # A newline exactly at the limit still leaves a kept part within the limit.
        cut = kept.rfind("\n", 0, MAX_ENTRYPOINT_CHARS + 1)
        kept = kept[:cut] if cut > 0 else kept[:MAX_ENTRYPOINT_CHARS]

    reasons = []
    if over_lines:
        reasons.append(f"{line_count} lines (limit: {MAX_ENTRYPOINT_LINES})")
    if over_chars:
        reasons.append(
            f"{_format_size(char_count)} (limit: {_format_size(MAX_ENTRYPOINT_CHARS)})"
            " — index entries are too long"
        )
    warning = (
        f"> WARNING: {ENTRYPOINT_NAME} is {' and '.join(reasons)}. Only part of it was"
        " loaded. Keep index entries to one line under ~200 chars; move detail into"
        " topic files."
    )
    return EntrypointContent(
        content=f"{kept}\n\n{warning}",
        line_count=line_count,
        byte_count=char_count,
        was_line_truncated=over_lines,
        was_byte_truncated=over_chars,
    )


def strip_entrypoint_noise(text: str) -> str:
    """Remove what is not meant for the model: a leading frontmatter block, HTML comments.

    The index should have neither, but a hand-edited one may, and Claude Code strips
    both before loading it. A comment left open (``<!--`` without ``-->``) is kept, since
    cutting to the end of the file would lose every entry after it.
    """
    _, body = split_frontmatter(text)
    return _HTML_COMMENT.sub("", body)


def _format_size(chars: int) -> str:
    """A size for people: ``812 chars``, ``24.4 KB``, ``1.2 MB`` (1 KB = 1024)."""
    if chars < 1024:
        return f"{chars} chars"
    if chars < 1024 * 1024:
        return f"{chars / 1024:.1f} KB"
    return f"{chars / (1024 * 1024):.1f} MB"
