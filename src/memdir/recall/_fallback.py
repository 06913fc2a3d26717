"""When no memory is relevant: passages of past sessions that match the query.

The memory agent saves what it judges worth keeping, and a fact it passed over is still
in the transcript. So when the selector finds no memory for a query, the search index
(:mod:`memdir.search`) may give the turns of earlier sessions that match it, surfaced
like memories but headed with the session and the time they were said, and framed as
what was said then, not as something remembered on purpose.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection

from memdir.errors import MemdirError
from memdir.search import SearchHit, search
from memdir.store import MemoryDir

__all__ = ["PASSAGE_PREFIX", "surfaced_passages"]

_log = logging.getLogger("memdir.recall")

PASSAGE_PREFIX = "session:"
"""How a surfaced passage is named among surfaced memories: ``session:<id>#<uuid>``."""

_FRAMING = (
    "No saved memory matched this request; this passage of an earlier session did. It "
    "is what was said then, not something remembered on purpose: use it only if it "
    "really bears on what the user asked, and check it against the current state."
)


def _name(hit: SearchHit, index: int) -> str:
    return f"{PASSAGE_PREFIX}{hit.session_id}#{hit.uuid or index}"


def _header(hit: SearchHit) -> str:
    when = hit.timestamp.strftime("%Y-%m-%d %H:%M UTC") if hit.timestamp else "at an unknown time"
    who = "the user" if hit.role == "user" else "the assistant"
    return f"Said by {who} in session {hit.session_id} ({hit.path}), {when}:"


async def surfaced_passages(
    query: str,
    memory: MemoryDir,
    limit: int,
    excluded: Collection[str],
    current_session: str | None,
) -> list[tuple[str, SearchHit, str, str]]:
    """The best ``limit`` passages of past sessions for ``query``, each as (name, hit,
    header, reminder text); those named in ``excluded`` (surfaced before) left out, and
    the turns of ``current_session`` too (they are in its context already). [] when the
    index cannot be used: surfacing is a hint and never breaks a turn."""
    exclude = [current_session] if current_session else []
    try:
        hits = await asyncio.to_thread(
            search,
            memory,
            query,
            limit=limit + len(excluded),
            memories=False,
            exclude_sessions=exclude,
        )
    except (MemdirError, OSError) as exc:
        _log.debug("search fallback failed: %s: %s", type(exc).__name__, exc)
        return []
    found = []
    for index, hit in enumerate(hits):
        name = _name(hit, index)
        if name in excluded:
            continue
        header = _header(hit)
        text = f"<system-reminder>\n{_FRAMING}\n\n{header}\n\n{hit.text}\n</system-reminder>"
        found.append((name, hit, header, text))
        if len(found) == limit:
            break
    return found
