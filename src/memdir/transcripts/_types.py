"""What an imported conversation looks like."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeAlias

from memdir.messages import Message

__all__ = ["SkippedLine", "Transcript", "TranscriptFormat"]

TranscriptFormat: TypeAlias = Literal["claude-code", "anthropic", "openai"]


@dataclass(frozen=True, kw_only=True)
class SkippedLine:
    """A line of a JSONL transcript that was left out, and why."""

    line: int
    """1-based line number in the file."""
    reason: str
    """What was wrong with it, in a few words."""


@dataclass(frozen=True, kw_only=True)
class Transcript:
    """A conversation read from a file: the main thread in order, plus what came with it."""

    path: Path
    """The file it was read from."""
    format: TranscriptFormat
    """Which format the file was recognised as."""
    messages: tuple[Message, ...]
    """The main thread's current branch, oldest first; compaction summaries are flagged."""
    session_id: str | None = None
    """The session's id, where the format records one."""
    title: str | None = None
    """The session's title (Claude Code's summary or custom title)."""
    cwd: str | None = None
    """The working directory the session ran in, where recorded (the newest one seen)."""
    system: str | None = None
    """The system prompt, for Anthropic-format files that carry one at the top level."""
    sidechains: Mapping[str, tuple[Message, ...]] = field(default_factory=dict)
    """Subagent conversations found with the session, by agent id; never in ``messages``."""
    skipped: tuple[SkippedLine, ...] = ()
    """Lines that were not JSON objects, of an unknown type, or malformed."""
