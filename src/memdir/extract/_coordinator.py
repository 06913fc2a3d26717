"""The turn coordinator: what one turn calls for, decided from values alone.

Every backend asks the same questions of a finished turn — has the host saved memory
itself since the cursor, is a run due yet, which messages would it cover — and must
answer them alike, or a conversation is remembered differently depending on where it
runs. :func:`decide` answers them as a pure function of the conversation's
:class:`~memdir.extract._types.Position` and the turn's messages, and returns a
:class:`Decision`; the caller applies it (the in-process extractor under its lock, the
queue's worker in its commit). :class:`Outcome` is what carrying a turn out did, as a
value the caller reads instead of its telemetry.

The order is DESIGN §4's: gates (:func:`admitted`) → (coalescing, the scheduler's) →
direct write → throttle → (stamped by the session, which reads the memory, the
caller's) → run.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from memdir.extract._types import ExtractConfig, Position, TurnContext
from memdir.messages import Message, model_visible
from memdir.store import MemoryDir
from memdir.tools import writes_into

__all__ = [
    "Decision",
    "InMemory",
    "Outcome",
    "admitted",
    "decide",
    "host_memory_paths",
    "start_after",
    "wrote_memory",
]

InMemory = Callable[[object], bool]
"""Whether a path the host's agent wrote to (a tool input's ``file_path``, any value)
is inside its memory directory."""


def admitted(turn: TurnContext, config: ExtractConfig) -> bool:
    """The gates: extraction is on, and this is the main agent's turn."""
    return config.enabled and not turn.is_subagent


def wrote_memory(
    messages: Sequence[Message],
    in_memory: InMemory,
    *,
    memory_dir: MemoryDir | None = None,
    cwd: str | None = None,
) -> bool:
    """Whether the host's agent saved memory itself in ``messages``: one of its tool
    calls writes a path that ``in_memory`` accepts.

    Calls are judged by their effects (:func:`memdir.tools.writes_into`), never by the
    tool's name: a Write or Edit of a file, a changing command of Anthropic's ``memory``
    tool (whose ``/memories`` is ``memory_dir``), whichever tool made it. Relative paths
    are taken against ``cwd``; without it they reach ``in_memory`` as the host wrote
    them. The one place that tells a direct write; every backend asks it.
    """
    return writes_into(messages, in_memory, cwd=cwd, memory_dir=memory_dir)


def host_memory_paths(root: str | None, cwd: str | None) -> InMemory:
    """:data:`InMemory` for a host on another machine whose memory directory is ``root``
    there: its paths cannot be resolved here, so they are compared as text (normalized,
    relative ones taken against the host's ``cwd``). None: the host has no memory
    directory of its own to write to."""
    if not root:
        return lambda path: False
    base = posixpath.normpath(root).rstrip("/") + "/"

    def inside(path: object) -> bool:
        if not isinstance(path, str) or "\0" in path:
            return False
        return posixpath.normpath(posixpath.join(cwd or "/", path)).startswith(base)

    return inside


def start_after(messages: Sequence[Message], cursor: str | None) -> int:
    """The index after the cursor's message; 0 when there is none or it is gone (a
    compaction removed it: then everything counts, and is scanned for direct writes)."""
    if cursor is None:
        return 0
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].uuid == cursor:
            return index + 1
    return 0


Action = Literal["skip_direct_write", "throttled", "run"]


@dataclass(frozen=True, kw_only=True)
class Decision:
    """What one turn calls for, and where the conversation stands after it."""

    action: Action
    """``skip_direct_write``: the host saved memory itself, the turn is covered without a
    run; ``throttled``: not yet, the messages wait for the next run; ``run``: a run
    over ``messages[start:end]`` is due."""
    start: int
    """The first message after the cursor."""
    end: int
    """The index after the turn's last message."""
    message_count: int
    """Model-visible messages in ``messages[start:end]``."""
    position: Position
    """The position once the decision is applied (a run's own move comes after it)."""
    event: str | None = None
    """The event the decision is reported by (None for ``run``: the run reports)."""
    fields: Mapping[str, object] = field(default_factory=dict)
    """That event's fields."""


def decide(
    position: Position,
    messages: Sequence[Message],
    *,
    trailing: bool,
    every_n_turns: int,
    in_memory: InMemory,
    now: float,
    turns: int = 1,
    memory_dir: MemoryDir | None = None,
    cwd: str | None = None,
) -> Decision:
    """Decide a turn whose conversation is ``messages``, from ``position``.

    ``trailing``: the run stashed behind another (the throttle does not apply);
    ``every_n_turns``: the throttle's current value; ``in_memory``: how the host's paths
    are told to be in its memory directory; ``now``: the time a direct write is covered
    at; ``turns``: how many turns the call stands for (a queue may bring several);
    ``memory_dir`` and ``cwd``: where the host's tool calls write (see
    :func:`wrote_memory`).
    """
    start = start_after(messages, position.cursor)
    end = len(messages)
    new = messages[start:]
    count = len(model_visible(new))
    if wrote_memory(new, in_memory, memory_dir=memory_dir, cwd=cwd):
        # The throttle counter is left alone: a direct write is no turn for it.
        cursor = messages[-1].uuid if messages else position.cursor
        return Decision(
            action="skip_direct_write",
            start=start,
            end=end,
            message_count=count,
            position=Position(
                cursor=cursor, turns_since_run=position.turns_since_run, covered_at=now
            ),
            event="extract.skipped_direct_write",
            fields={"message_count": count, "source": "tool_call"},
        )
    every = max(1, every_n_turns)
    if not trailing:
        since = position.turns_since_run + max(1, turns)
        if since < every:
            return Decision(
                action="throttled",
                start=start,
                end=end,
                message_count=count,
                position=Position(
                    cursor=position.cursor, turns_since_run=since, covered_at=position.covered_at
                ),
                event="extract.throttled",
                fields={"turns_since_last": since, "every_n_turns": every},
            )
    return Decision(
        action="run",
        start=start,
        end=end,
        message_count=count,
        position=Position(
            cursor=position.cursor, turns_since_run=0, covered_at=position.covered_at
        ),
    )


Status = Literal["ignored", "coalesced", "skipped", "throttled", "ran", "failed"]


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What carrying out one turn did: the value a backend acts on (never its events)."""

    status: Status
    """``ignored``: a gate held it back (disabled, a subagent's turn); ``coalesced``:
    stashed behind a run in progress; ``skipped``: covered by the host's own write (by a
    tool call, or a memory stamped with its session); ``throttled``; ``ran``: one run or
    more covered messages; ``failed``: nothing was covered, the messages wait for the
    next turn."""
    start: int = 0
    """The first message after the cursor when the turn was decided."""
    end: int = 0
    """The index after the last message now covered (``start`` when none was)."""
    message_count: int = 0
    """Model-visible messages newly covered."""
    source: str | None = None
    """For ``skipped``: ``tool_call`` or ``origin_session``."""
    runs: int = 0
    """Runs that returned normally."""
    memories: tuple[Path, ...] = ()
    """Memory files the runs wrote (``MEMORY.md`` left out)."""
    error: str | None = None
    """Why a run failed (the last failure), when one did."""
