"""The extractor's configuration, what it is told at each turn, and what it tells back."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Literal, Protocol

from memdir.cost import Prices
from memdir.extract._planner import Mode
from memdir.fork import CacheSafeParams
from memdir.messages import AnyMessage, Message
from memdir.store import MemoryFormat

__all__ = ["ExtractConfig", "MemorySaved", "Notify", "Position", "PositionStore", "TurnContext"]


@dataclass(frozen=True, kw_only=True)
class ExtractConfig:
    """How the extractor behaves. Every field has a sensible default."""

    every_n_turns: int | Callable[[], int] = 1
    """Run after every Nth eligible turn. A callable is read at every turn (like a remote
    flag, it may change while the agent runs); skipped turns are covered by the next run."""
    max_turns: int = 5
    """Model requests one run may make (good runs need two: read, then write)."""
    team: bool = False
    """Also save shared team memory in ``team/`` (private and team scopes)."""
    user_layer: bool | str | PathLike[str] = False
    """Also save memories about the person (their role, their preferences, how they want
    work done) in the user layer that every project loads: ``True`` for the default one
    (:func:`memdir.store.user_memory_dir`), or its folder. Never with a credential."""
    skip_index: bool = False
    """Write memory files only, without maintaining ``MEMORY.md``."""
    enabled: bool = True
    """When False, turns are ignored."""
    always_allow_tools: frozenset[str] = frozenset()
    """Tools the gate lets through unchecked (for a wrapper that checks its own calls)."""
    allow_private_secrets: bool = False
    """Let a credential be written to private memory (never to team memory)."""
    mode: Mode = "auto"
    """How runs reach the model. ``auto``: each run takes the cheaper of the fork (inside
    the host's prompt cache) and memdir's own standalone request, by the estimate of
    both; ``fork``: always the fork when the host passed its request (and it fits the
    model); ``standalone``: never the fork."""
    memory_format: MemoryFormat = "current"
    """How memory files are stored. ``current``: as Claude Code 2.1.332 writes them (slug
    ``name``, ``metadata`` with ``type``, ``originSessionId`` and ``modified``), so a
    file is the same whoever wrote it; ``2.1.88``: exactly as the memory agent wrote
    them (top-level ``name``, ``description``, ``type``)."""
    prices: Mapping[str, Prices] = field(default_factory=dict)
    """Prices that override :data:`memdir.cost.MODEL_FAMILIES`, by model name, spec
    (``openai:gpt-4o``) or a prefix of either; the longest key that matches wins."""
    window_tokens: int = 2_000
    """Standalone runs: the most earlier conversation (estimated tokens) sent as context
    before the new messages. The window keeps its start from run to run (read from the
    cache) and grows with the conversation until it passes this size, or memdir's cache
    has expired; it then restarts with the last quarter of it (and at least the message
    before the new ones, where that fits). 2,000 tokens is a few
    exchanges: enough to read "yes, do that" against what it answers, while a run late in
    a long conversation costs what an early one does."""
    context_budget_tokens: int = 100_000
    """Standalone runs: the most new conversation (estimated tokens) one run looks at; a
    longer stretch is split over several runs, each message still seen once."""
    backlog_tokens: int | None = 100_000
    """The most unseen conversation (estimated tokens) one turn's runs cover. A run that
    finds more (the first run over a long conversation, a host that told memdir late, a
    cursor left far behind) covers only the most recent ``backlog_tokens`` of it: the
    older messages are skipped, the cursor moves past them, and
    ``extract.backlog_skipped`` says how many (they still show as the window's context).
    So a first run costs at most this much conversation, not the whole history. ``None``
    covers all of it, in runs of :attr:`context_budget_tokens` one after another (what
    ``memdir extract`` does once a person has seen the cost, or limited it with
    ``--since``)."""
    memory_list_entries: int = 15
    """The most memory files the memory agent's prompt lists. A store with more lists
    only those the new messages touch (a lexical match) and counts the rest by type, so
    what every run sends stays the same size however large the store grows; the agent
    finds the others with ``Grep`` and ``Glob``."""
    reasoning_effort: str | None = "lowest"
    """The ``reasoning_effort`` memdir's requests send to an OpenAI reasoning model (gpt-5,
    o3, …). ``lowest``: the least the model takes (``minimal`` on gpt-5, -mini and -nano,
    ``none`` from gpt-5.1 on, ``low`` on the o-series): saving memories is extraction,
    not deduction, and each reasoning token is billed as output. A value of OpenAI's
    (``low``, ``medium``, …) is sent as it is; ``None`` sends none, leaving the model's
    default (``medium`` before gpt-5.1). Other models are sent nothing."""
    tool_result_chars: int = 2_000
    """Standalone runs: tool results and tool inputs longer than this are cut to their
    head."""
    load_instructions: bool = True
    """Standalone runs: show the memory agent the project's instruction files
    (``CLAUDE.md`` and the like, found from the turn's ``cwd`` as Claude Code finds
    them), so it does not save what they already say. A fork sees whatever its host's
    request holds instead."""

    def turns_between_runs(self) -> int:
        """The current value of :attr:`every_n_turns`, at least 1."""
        value = self.every_n_turns() if callable(self.every_n_turns) else self.every_n_turns
        return max(1, int(value))


@dataclass(frozen=True, kw_only=True)
class TurnContext:
    """One completed turn of the host agent.

    ``messages`` may hold the conversation as the agent loop keeps it: memdir
    :class:`~memdir.messages.Message` s, Anthropic message dicts (``{"role", "content"}``,
    content a string or a list of blocks), OpenAI Chat Completions dicts (``system`` and
    ``tool`` roles, ``tool_calls``), the ``anthropic`` and ``openai`` SDKs' objects (a
    response ``Message``, a ``ChatCompletionMessage``, content blocks inside a dict), or
    any mix of these; see :func:`memdir.messages.messages_from_native`.

    :meth:`MemoryExtractor.on_turn_end` reads only the messages new since the turn
    before: those it has read already are told by identity (or, for a loop that rebuilds
    its dicts, by equality), so a turn costs what it adds, however long the conversation
    (the first turn an extractor is told of reads it all). Pass a tuple, or a list that
    is only ever appended to; a message is read once, so one changed in place after its
    turn was reported stays as it was read. The messages as of the call are what the run
    sees. Something that is no message raises :class:`TypeError` there, naming the
    converter to use.
    """

    messages: Sequence[AnyMessage]
    """The whole conversation at the end of the turn, the final answer included."""
    params: CacheSafeParams | None = None
    """The host's request (model, system, tools, parameters). With it, the memory agent
    runs inside the host's prompt cache; without it, memdir sends a request of its own."""
    is_subagent: bool = False
    """A subagent's turn: ignored, only the main agent's conversation is remembered."""
    cwd: str | None = None
    """The host's working directory, for relative paths; default: the process's."""
    last_request_at: float | None = None
    """When the host's last model request of this turn was sent, on the extractor's clock
    (``time.time()`` unless it was given another); default: when the turn is reported.
    It tells whether the host's prompt cache still holds the request."""
    session_id: str | None = None
    """The host's session, when it has one (Claude Code's ``sessionId``). Memories that
    another agent saved since the last run and stamped with this session (Claude Code's
    own extractor writes ``metadata.originSessionId``) count as that turn's direct write,
    so memdir does not save the same memory a second time."""


@dataclass(frozen=True, kw_only=True)
class MemorySaved:
    """A notice for the user (not the model): memories were saved or improved."""

    paths: tuple[Path, ...]
    """The memory files written (``MEMORY.md`` left out)."""
    team_count: int = 0
    """How many of them are team memories."""
    verb: Literal["Saved", "Improved"] = "Saved"
    """``Saved`` after extraction, ``Improved`` after consolidation."""

    def __str__(self) -> str:
        count = len(self.paths)
        private = count - self.team_count
        parts = [f"{self.verb} {private} memor{'y' if private == 1 else 'ies'}"]
        if self.team_count:
            parts.append(f"{self.team_count} team memor{'y' if self.team_count == 1 else 'ies'}")
        return " · ".join(parts) + "".join(f"\n  {p}" for p in self.paths)


Notify = Callable[[MemorySaved], object]
"""Receives :class:`MemorySaved` notices."""


@dataclass
class PendingTurn:
    """A turn waiting to be processed."""

    turn: TurnContext
    """The turn as the host reported it."""
    messages: Sequence[Message]
    """Its conversation as read when it was reported: the first :attr:`length` entries."""
    length: int
    """How many messages the conversation had then."""
    reported_at: float
    """When it was reported, on the extractor's clock."""
    notify: Notify | None = None
    """Where its notice goes."""
    trailing: bool = False
    """Stashed during a run and run right after it (the throttle does not apply)."""
    turns: int = 1
    """How many of the host's turns it stands for (for the throttle)."""


@dataclass(frozen=True, kw_only=True)
class Position:
    """Where extraction of one conversation stands: what carries over between processes."""

    cursor: str | None = None
    """The uuid of the last message covered (by a run or by the host's own write)."""
    turns_since_run: int = 0
    """Turns throttled since the last run."""
    covered_at: float | None = None
    """When the cursor last moved, on the extractor's clock: memory files changed after
    it were not changed by this conversation's runs."""


class PositionStore(Protocol):
    """Keeps one conversation's :class:`Position` where a later process finds it.

    Both calls block (they touch a file or a database): the extractor makes them off
    the event loop, one at a time, and never lets them raise into a run.
    """

    def load(self) -> Position:
        """The saved position (a fresh one when nothing was saved)."""
        ...

    def save(self, position: Position) -> None:
        """Record ``position``, replacing the one saved before."""
        ...
