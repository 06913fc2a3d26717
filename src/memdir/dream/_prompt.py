"""The consolidation ("dream") prompt."""

from __future__ import annotations

from collections.abc import Sequence

from memdir.errors import UsageError
from memdir.store import MAX_ENTRYPOINT_CHARS, MAX_ENTRYPOINT_LINES, MEMORY_FORMATS, MemoryFormat

__all__ = ["build_consolidation_prompt"]

_FORMATS: dict[MemoryFormat, str] = {
    "current": (
        "Keep the format: frontmatter with `name` (short, in kebab-case), `description`, "
        "and a `metadata` map holding `type` (user, feedback, project or reference) and "
        "whatever else the file already has there (keep `originSessionId` as it is), "
        "then the body."
    ),
    "2.1.88": (
        "Keep the format: frontmatter with `name`, `description` and `type` (user, "
        "feedback, project or reference), then the body."
    ),
}


def build_consolidation_prompt(
    memory_dir: str,
    transcript_dir: str | None = None,
    *,
    session_ids: Sequence[str] = (),
    format: MemoryFormat = "current",
) -> str:
    """The instructions for one consolidation pass over ``memory_dir``.

    ``transcript_dir`` holds the session transcripts the pass may search (narrowly);
    ``session_ids`` names the sessions touched since the last pass; ``format`` is the
    frontmatter layout the memories are kept in. Either way the pass is told to keep the
    ``[[name]]`` links between memories working through its merges and renames.
    """
    if format not in MEMORY_FORMATS:
        raise UsageError(f"unknown memory format {format!r}; expected one of {MEMORY_FORMATS}")
    sessions = ""
    if transcript_dir:
        listed = ", ".join(session_ids) if session_ids else "the recent ones"
        sessions = (
            f"\nSession transcripts are in `{transcript_dir}` (JSONL, one file per session; "
            f"touched since the last pass: {listed}). Search them only narrowly — "
            f'`grep -rn "<term>" {transcript_dir} --include="*.jsonl" | tail -50` — and never '
            "read one whole.\n"
        )
    return f"""# Memory consolidation

You are tidying the memory directory `{memory_dir}`, as one would tidy notes at the end of \
a week: the goal is a small set of memory files that are correct, current and not repeated, \
and an index that points at exactly those files.

You may use Read, Grep and Glob anywhere, Bash for read-only commands only, and Write and \
Edit for files inside the memory directory. There is no `rm`: to retire a memory file, \
Write it with empty content; memdir removes empty memory files after the pass.
{sessions}
## 1. Look around
List the directory, Read `MEMORY.md`, and Read the memory files (their frontmatter tells \
the `name`, `description` and `type` of each).

## 2. Gather
Note which memories say the same thing, which contradict each other or what a session \
showed since, which have relative dates ("next week") that have turned ambiguous, and \
which pointers in `MEMORY.md` lead to files that do not exist — or which files have no \
pointer.

## 3. Consolidate
- Merge memories that cover the same fact into one file (keep the clearest name; combine \
what each adds) and retire the others.
- Where two memories contradict each other, keep the one the evidence supports (the newer \
one, unless a session shows otherwise) and drop the other fact.
- Rewrite relative dates as absolute dates (YYYY-MM-DD).
- {_FORMATS[format]} Feedback and project bodies end with a `**Why:**` and a \
`**How to apply:**` line.
- Memories refer to each other as `[[name]]`, by the other memory's `name`. Keep these \
links: a merged file keeps the links of both memories, and when a memory is merged into \
another or gets a new `name`, change every `[[old-name]]` in the other files to the name \
that remains. A link to a memory that does not exist yet is fine; leave it.
- Never write a secret (key, token, password) into any file.

## 4. Prune and re-index
Rewrite `MEMORY.md` so that it has exactly one line per remaining memory file, \
`- [Title](file.md) — one-line hook`, each under ~150 characters, grouped by topic, with \
no frontmatter. It must stay under {MAX_ENTRYPOINT_LINES} lines and \
{MAX_ENTRYPOINT_CHARS:,} characters: move detail into the topic files, never into the index.

Finish with a short summary of what you merged, retired, corrected and re-indexed — or \
say that nothing needed to change.
"""
