"""Extracting a transcript turn by turn, resuming where the last process stopped."""

from __future__ import annotations

import asyncio
import datetime
import itertools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memdir._cli._recorded import recorded_host
from memdir.extract import ExtractConfig, MemoryExtractor, MemorySaved, TurnContext
from memdir.extract._planner import Mode
from memdir.extract._standalone import rendered_tokens
from memdir.messages import Message
from memdir.models import Model, OfflineModel
from memdir.state import SessionState, StateFile
from memdir.store import MemoryDir, MemoryFormat
from memdir.telemetry import CollectingSink, Sink, fan_out
from memdir.transcripts import Transcript, load_transcript

# Runs of separate processes on one memory directory take turns: each reads the memory
# files and writes them back, and two at once would each miss the other's changes.
RUN_LOCK = "extraction"
"""The lock every extraction run of one memory folder holds, whatever runs it."""
RUN_LOCK_TIMEOUT = 900.0
_DRAIN_TIMEOUT = 900.0


def completed_turn_ends(messages: Sequence[Message]) -> list[int]:
    """Indices of the assistant answers that end a turn (no tool call left pending)."""
    return [
        i
        for i, m in enumerate(messages)
        if m.role == "assistant" and not m.tool_uses and not m.is_sidechain
    ]


@dataclass
class TranscriptReport:
    """What one transcript's extraction did."""

    path: str
    session_id: str
    memory_dir: str
    turns: int = 0
    runs: int = 0
    errors: int = 0
    memories_saved: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    skipped_lines: list[tuple[int, str]] = field(default_factory=list)
    saved_paths: list[str] = field(default_factory=list)
    host_request: str = ""
    """For the last turn: the recorded request a fork may share, or why there is none."""
    modes: list[str] = field(default_factory=list)
    """How each run went: ``fork`` or ``standalone``."""
    plans: list[str] = field(default_factory=list)
    """Why each run went that way, with both estimated costs."""
    error_reasons: list[str] = field(default_factory=list)
    """Why each failed run failed, one line each."""
    errors_detail: list[dict[str, object]] = field(default_factory=list)
    """Each failed run's error for machines: ``kind``, the provider's ``status``, and
    ``message`` (its entry of :attr:`error_reasons`)."""
    usage_estimated: bool = False
    """The token figures are estimates of what the request would take: the offline model
    calls no provider, so nobody spent them."""
    skipped_messages: int = 0
    """Messages past the cursor left unread, the cursor moved past them: older than
    ``--since``, or beyond the backlog policy (see :class:`Skip`)."""
    skipped_turns: int = 0
    """The completed turns among :attr:`skipped_messages`."""
    skipped_why: str = ""
    """Why they were skipped, for people (empty when none was)."""

    @property
    def cache_share(self) -> float:
        """The share of input tokens read from the prompt cache."""
        total = self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens
        return self.cache_read_input_tokens / total if total else 0.0

    def as_dict(self) -> dict[str, object]:
        """The report as plain JSON values."""
        out = dict(vars(self))
        out["cache_share"] = round(self.cache_share, 4)
        out["skipped_lines"] = [{"line": n, "reason": r} for n, r in self.skipped_lines]
        out["error"] = self.errors_detail[0] if self.errors_detail else None
        return out


MEMORY_FORMAT_ENV = "MEMDIR_MEMORY_FORMAT"


def memory_format(env: Mapping[str, str] | None = None) -> MemoryFormat:
    """``$MEMDIR_MEMORY_FORMAT``: ``2.1.88`` keeps memory files as the memory agent wrote
    them; anything else (or nothing) stores them as today's Claude Code does."""
    value = (os.environ if env is None else env).get(MEMORY_FORMAT_ENV, "")
    return "2.1.88" if value.strip() == "2.1.88" else "current"


def _epoch(stamp: str | None) -> float | None:
    """An ISO-8601 time as seconds since the epoch; None when absent or unreadable."""
    if not stamp:
        return None
    try:
        return datetime.datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def session_of(transcript: Transcript) -> str:
    """The key a transcript's cursor is kept under."""
    return transcript.session_id or transcript.path.stem


def new_report(
    transcript: Transcript,
    session: str,
    memory: MemoryDir,
    ends: Sequence[int],
    **fields: Any,
) -> TranscriptReport:
    """The report of a run over ``transcript``'s turns ending at ``ends``, whichever
    way it runs (``fields``: what that way adds)."""
    return TranscriptReport(
        path=str(transcript.path),
        session_id=session,
        memory_dir=str(memory.root),
        turns=len(ends),
        skipped_lines=[(s.line, s.reason) for s in transcript.skipped],
        **fields,
    )


async def caught_up(transcript: Transcript, cursor: str | None) -> Transcript:
    """``transcript``, read again from its file when the saved ``cursor`` is not in this
    copy: a run for a later turn of the session (the hook of the next answer) went first
    and read further than this copy goes. Starting the session over instead would save
    its memories twice and move the cursor back."""
    if cursor is None or resume_index(transcript.messages, cursor) or not transcript.path.is_file():
        return transcript
    return await asyncio.to_thread(load_transcript, transcript.path)


def resume_index(messages: Sequence[Message], cursor: str | None) -> int:
    """Where a session's saved ``cursor`` (the id of the last message read) leaves off in
    ``messages``: the index after it, or 0 when there is none or it is no longer there."""
    if cursor is None:
        return 0
    found = [i for i, m in enumerate(messages) if m.uuid == cursor]
    return found[-1] + 1 if found else 0


_DEFAULT_BACKLOG = ExtractConfig().backlog_tokens
_RENDER_LIMIT = ExtractConfig().tool_result_chars


@dataclass(frozen=True, kw_only=True)
class Skip:
    """Where a transcript's extraction starts past its cursor, and why."""

    start: int
    """The index of the first message read (the cursor's own start when nothing is
    skipped); always the start of a turn."""
    why: str = ""


def _aware(stamp: datetime.datetime) -> datetime.datetime:
    """``stamp`` with a time zone, local time when it has none (as Claude Code's are)."""
    return stamp if stamp.tzinfo is not None else stamp.astimezone()


def _turn_starts(start: int, ends: Sequence[int]) -> list[int]:
    return [start, *(e + 1 for e in ends[:-1])]


def skip_before(
    messages: Sequence[Message],
    start: int,
    *,
    since: datetime.datetime | None = None,
    backlog_tokens: int | None = None,
) -> Skip:
    """Where extraction from ``start`` begins: at the first turn with a message written at
    or after ``since``, and, when the turns past the cursor hold more than
    ``backlog_tokens`` (estimated as the extractor estimates them), at the first whole
    turn of the most recent ``backlog_tokens``; the session's last turn is always read.
    Messages that say nothing of when they were written are read."""
    ends = [e for e in completed_turn_ends(messages) if e >= start]
    if not ends:
        return Skip(start=start)
    starts = _turn_starts(start, ends)
    begin, why = start, ""
    if since is not None:
        for first, end in zip(starts, ends, strict=True):
            stamps = [_aware(m.timestamp) for m in messages[first : end + 1] if m.timestamp]
            if not stamps or max(stamps) >= _aware(since):
                begin = first
                break
        else:
            begin = ends[-1] + 1
        why = f"older than --since {_aware(since).isoformat(timespec='minutes')}"
    if backlog_tokens is not None:
        # Tokens before each message, counted from ``start``.
        before = [
            0,
            *itertools.accumulate(rendered_tokens(m, _RENDER_LIMIT) for m in messages[start:]),
        ]
        total = before[-1]
        if total > backlog_tokens:
            # The first turn whose start leaves at most backlog_tokens to read.
            cut = next(
                (f for f in starts if total - before[f - start] <= backlog_tokens), starts[-1]
            )
            if cut > begin:
                begin = cut
                why = f"beyond the most recent ~{backlog_tokens:,} tokens of the backlog"
    return Skip(start=begin, why=why if begin > start else "")


async def extract_transcript(
    transcript: Transcript,
    memory: MemoryDir,
    model: Model,
    *,
    every: int = 1,
    batch: bool = False,
    team: bool = False,
    mode: Mode = "auto",
    sink: Sink | None = None,
    on_turn: Callable[[], object] | None = None,
    on_saved: Callable[[MemorySaved], object] | None = None,
    since: datetime.datetime | None = None,
    backlog_tokens: int | None = _DEFAULT_BACKLOG,
) -> TranscriptReport:
    """Run the extractor over the turns completed since the session's saved cursor.

    Turn by turn, as a live session would have been (``every`` throttles as
    ``every_n_turns`` does); with ``batch`` one run covers everything new. The cursor is
    saved after every turn, so an interrupted run resumes where it stopped.

    Turns older than ``since``, and, past a backlog of more than ``backlog_tokens``
    (the extractor's default policy; None reads it all), its older turns, are skipped:
    the cursor moves past them and the report says how many.
    """
    states = StateFile(memory)
    session = session_of(transcript)
    saved = states.get(session)
    transcript = await caught_up(transcript, saved.cursor)
    messages = transcript.messages
    resumed = resume_index(messages, saved.cursor)
    skip = skip_before(messages, resumed, since=since, backlog_tokens=backlog_tokens)
    start = skip.start
    ends = [e for e in completed_turn_ends(messages) if e >= start]
    report = new_report(
        transcript,
        session,
        memory,
        ends,
        usage_estimated=isinstance(model, OfflineModel),
        skipped_messages=start - resumed,
        skipped_turns=sum(1 for e in completed_turn_ends(messages) if resumed <= e < start),
        skipped_why=skip.why,
    )
    cursor = saved.cursor
    if start > resumed:
        # The skipped turns count as read: the next run starts after them.
        cursor = messages[start - 1].uuid
        saved = SessionState(cursor=cursor, turns_since_run=0, updated=saved.updated)
        states.put(session, SessionState(cursor=cursor, turns_since_run=0))
    if not ends:
        return report
    collected = CollectingSink()
    config = ExtractConfig(
        every_n_turns=1 if batch else every,
        team=team,
        mode=mode,
        memory_format=memory_format(),
        backlog_tokens=backlog_tokens,
        user_layer=_user_layer(),
    )
    extractor = MemoryExtractor(memory, model, config, sink=fan_out(collected, sink))
    extractor.restore(saved.cursor, saved.turns_since_run, covered_at=_epoch(saved.updated))

    def notice(event: MemorySaved) -> None:
        report.saved_paths.extend(str(p) for p in event.paths)
        if on_saved is not None:
            on_saved(event)

    host = recorded_host(transcript, model)
    report.host_request = host.reason
    for end in [ends[-1]] if batch else ends:
        # The recorded request is the one the session's last answer answered: only the
        # last turn can fork from it.
        last = end == len(messages) - 1 and host.params is not None
        turn = TurnContext(
            messages=messages[: end + 1],
            cwd=transcript.cwd,
            session_id=transcript.session_id,
            params=host.params if last else None,
            last_request_at=host.sent_at if last else None,
        )
        with memory.lock(RUN_LOCK, timeout=RUN_LOCK_TIMEOUT):
            # Another run of the same session (the hook of a later turn) may have gone on
            # since this one read the cursor: carry on from where it left off.
            current = states.get(session)
            if current.cursor != extractor.cursor:
                done = resume_index(messages, current.cursor)
                if current.cursor is not None and done == 0:
                    break  # it read further than this copy of the transcript goes
                extractor.restore(
                    current.cursor, current.turns_since_run, covered_at=_epoch(current.updated)
                )
                if end < done:
                    continue  # that run covered this turn
            extractor.on_turn_end(turn, notify=notice)
            await extractor.drain(timeout=_DRAIN_TIMEOUT)
            # Saved before the lock goes, so that the next run reads where this one is.
            states.put(
                session,
                SessionState(cursor=extractor.cursor, turns_since_run=extractor.turns_since_run),
            )
        if on_turn is not None:
            on_turn()
    for event in collected.events:
        if event.name == "extract.run":
            report.runs += 1
            fields = event.fields
            report.memories_saved += int(fields.get("memories_saved", 0))
            report.input_tokens += int(fields.get("input_tokens", 0))
            report.output_tokens += int(fields.get("output_tokens", 0))
            report.cache_read_input_tokens += int(fields.get("cache_read_input_tokens", 0))
            report.cache_creation_input_tokens += int(fields.get("cache_creation_input_tokens", 0))
            report.modes.append(str(fields.get("mode", "")))
            report.plans.append(
                f"{fields.get('plan_reason')} (estimated cost: fork "
                f"{fields.get('estimated_cost_fork')}, standalone "
                f"{fields.get('estimated_cost_standalone')})"
            )
        elif event.name == "extract.error":
            report.errors += 1
            reason = event.fields.get("reason") or event.fields.get("error_type") or "unknown"
            report.error_reasons.append(str(reason))
            status = event.fields.get("status")
            report.errors_detail.append(
                {
                    "kind": event.fields.get("error_kind") or "internal",
                    "status": status if isinstance(status, int) else None,
                    "message": str(reason),
                }
            )
    return report


def _user_layer() -> MemoryDir | bool:
    """The user layer, when it is on (see :func:`memdir._claude_user_layer.user_layer_on`)."""
    from memdir._claude_user_layer import user_layer_on

    return user_layer_on() or False
