"""``MEMORY.md``, the index: how much of it is loaded into a conversation.

The index is loaded into every conversation, so it is capped. The caps and the order in
which they apply are Claude Code's: lines first, then characters (cut at a line end
where possible), then one warning line, as Claude Code 2.1.332 writes one: which cap
fired, how many lines were left out and from which line, and where to read them, so the
model knows it is seeing part of the index and can fetch the rest.
"""

from __future__ import annotations

import os
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

# 80 characters: how much of the first line left out the warning quotes, so the model
# can find where the rest starts.
_PREVIEW_CHARS = 80

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


def truncate_entrypoint(text: str, path: str | os.PathLike[str] | None = None) -> EntrypointContent:
    """Apply the index's line and character caps to ``text``.

    The text is trimmed first. Within both caps it is returned as is. Otherwise the first
    :data:`MAX_ENTRYPOINT_LINES` lines are kept; if those are still longer than
    :data:`MAX_ENTRYPOINT_CHARS`, they are cut at the last newline within the limit (or
    at the limit itself when there is none). A blank line and a one-line warning follow:
    the cap that fired, how many lines were left out from which line (quoting its start),
    and where to read them: ``path``, the index file, when given (else its name). Line
    numbers count the trimmed text.
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

    where = str(path) if path is not None else ENTRYPOINT_NAME
    warning = (
        f"> WARNING: {ENTRYPOINT_NAME} {_oversize(line_count, char_count, over_lines, over_chars)},"
        f" so only part of it was loaded: {_left_out(trimmed, kept, line_count)}."
        f" Read {where} for the rest, and keep the index short: one line of under ~200"
        " characters per entry, with the details in the topic files."
    )
    return EntrypointContent(
        content=f"{kept}\n\n{warning}",
        line_count=line_count,
        byte_count=char_count,
        was_line_truncated=over_lines,
        was_byte_truncated=over_chars,
    )


def _oversize(line_count: int, char_count: int, over_lines: bool, over_chars: bool) -> str:
    """Which cap the index passed: ``has 300 lines, over the 200-line limit`` and so on."""
    size = _format_size(char_count)
    limit = _format_size(MAX_ENTRYPOINT_CHARS)
    if over_lines and over_chars:
        return (
            f"has {line_count} lines and is {size}, over the {MAX_ENTRYPOINT_LINES}-line and"
            f" {limit} limits (its entries are too long)"
        )
    if over_lines:
        return f"has {line_count} lines, over the {MAX_ENTRYPOINT_LINES}-line limit"
    return f"is {size}, over the {limit} limit (its entries are too long)"


def _left_out(trimmed: str, kept: str, line_count: int) -> str:
    """What the caps left out of ``trimmed``, which starts with ``kept``: how many lines,
    from which line, quoting its start; or the rest of line 1 when it was cut itself."""
    if trimmed[len(kept) : len(kept) + 1] != "\n":
        return f"everything after the first {len(kept)} characters of line 1 was left out"
    kept_lines = kept.count("\n") + 1
    rest = trimmed[len(kept) + 1 :]
    first = rest.split("\n", 1)[0].strip()
    if len(first) > _PREVIEW_CHARS:
        first = first[: _PREVIEW_CHARS - 1].rstrip() + "…"
    quoted = f' ("{first}")' if first else ""
    cut = line_count - kept_lines
    verb = "was" if cut == 1 else "were"
    return f"{cut} of its {line_count} lines {verb} left out, from line {kept_lines + 1}{quoted} on"


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
