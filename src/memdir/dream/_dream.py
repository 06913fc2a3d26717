"""autoDream: a periodic consolidation pass over the memory directory.

Cheapest checks first, as in Claude Code: enough time since the last pass (the lock
file's modification time), not scanned for sessions in the last ten minutes, enough
sessions touched since the last pass (the current one excluded), and the lock. Then the
memory agent runs with the consolidation prompt — inside the host's prompt cache when
the host passes its request, standalone otherwise — with the same gate as extraction and
no cap on its turns. A failure rolls the lock's time back, so the next chance comes soon.

The files it rewrites are stored as Claude Code stores them (``DreamConfig.memory_format``,
see :class:`~memdir.tools.MemoryFiles`): a stamped memory keeps its ``originSessionId``
and gets a new ``modified``; a new one is attributed to the current session when known.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from memdir.dream._lock import last_consolidated_at, release_failed, try_acquire
from memdir.dream._prompt import build_consolidation_prompt
from memdir.errors import StoreError, error_fields
from memdir.extract import STANDALONE_SYSTEM_PROMPT, MemorySaved, Notify, TurnContext
from memdir.fork import CacheSafeParams, run_forked_agent
from memdir.messages import Message, messages_from_native
from memdir.models import Model
from memdir.permissions import auto_mem_can_use_tool, memory_write_guard
from memdir.store import (
    ENTRYPOINT_NAME,
    MemoryDir,
    MemoryFormat,
    empty_trash,
    repair_memory_dir,
)
from memdir.store._provenance import record_changes
from memdir.telemetry import Sink, emit
from memdir.tools import MemoryFiles, ToolContext, builtin_tools

__all__ = ["AutoDream", "DreamConfig", "sessions_touched_since"]


@dataclass(frozen=True, kw_only=True)
class DreamConfig:
    """When consolidation runs."""

    min_hours: float = 24.0
    """Hours since the last pass before another may run."""
    min_sessions: int = 5
    """Sessions touched since the last pass (the current one not counted)."""
    scan_interval_seconds: float = 600.0
    """The least time between two looks at the sessions folder (the time gate alone would
    pass on every turn while too few sessions have been touched)."""
    enabled: bool = True
    """When False, :meth:`AutoDream.maybe_run` never runs."""
    memory_format: MemoryFormat = "current"
    """The frontmatter layout the pass keeps memories in: ``current`` (Claude Code
    2.1.332's, which Write and Edit then stamp) or ``2.1.88`` (the older one, files
    stored as written)."""


def sessions_touched_since(
    transcript_dir: Path | None, since: float, *, exclude: str | None = None
) -> list[str]:
    """The ids of ``<id>.jsonl`` sessions modified after ``since`` (subagent files aside)."""
    if transcript_dir is None:
        return []
    found: list[str] = []
    try:
        entries = list(os.scandir(transcript_dir))
    except OSError:
        return []
    for entry in entries:
        name = entry.name
        if not name.endswith(".jsonl") or name.startswith("agent-"):
            continue
        session = name.removesuffix(".jsonl")
        if session == exclude:
            continue
        try:
            if entry.is_file() and entry.stat().st_mtime > since:
                found.append(session)
        except OSError:
            continue
    return sorted(found)


class AutoDream:
    """Consolidates one memory directory now and then.

    Call :meth:`maybe_run` after a turn (it returns at once when a gate is closed) or
    :meth:`run` to consolidate now (``memdir dream --force``).
    """

    def __init__(
        self,
        memory_dir: MemoryDir | str | os.PathLike[str],
        model: Model,
        *,
        transcript_dir: str | os.PathLike[str] | None = None,
        config: DreamConfig | None = None,
        sink: Sink | None = None,
    ) -> None:
        self.memory_dir = memory_dir if isinstance(memory_dir, MemoryDir) else MemoryDir(memory_dir)
        self.model = model
        self.transcript_dir = Path(transcript_dir) if transcript_dir is not None else None
        self.config = config or DreamConfig()
        self.sink = sink
        self._last_scan = float("-inf")

    async def maybe_run(
        self,
        turn: TurnContext | None = None,
        *,
        current_session: str | None = None,
        notify: Notify | None = None,
        now: float | None = None,
    ) -> bool:
        """Consolidate if every gate is open; returns whether a pass ran and succeeded."""
        if not self.config.enabled or (turn is not None and turn.is_subagent):
            return False
        now = time.time() if now is None else now
        last = last_consolidated_at(self.memory_dir)
        hours = (now - last) / 3600
        if hours < self.config.min_hours:
            return self._not_yet(
                f"{hours:.1f} of {self.config.min_hours:g} hours since the last pass"
            )
        if now - self._last_scan < self.config.scan_interval_seconds:
            return self._not_yet("the sessions were looked at less than ten minutes ago")
        self._last_scan = now
        sessions = sessions_touched_since(self.transcript_dir, last, exclude=current_session)
        if len(sessions) < self.config.min_sessions:
            return self._not_yet(
                f"{len(sessions)} of {self.config.min_sessions} sessions since the last pass"
            )
        return await self._consolidate(
            turn,
            sessions,
            notify,
            hours_since=(now - last) / 3600,
            session_id=current_session,
            now=now,
        )

    async def run(
        self,
        turn: TurnContext | None = None,
        *,
        notify: Notify | None = None,
        session_id: str | None = None,
    ) -> bool:
        """Consolidate now, whatever the time and session gates say (the lock still holds).

        ``session_id`` is the session the pass runs in, recorded as the origin of any
        memory file it creates; ``None`` when there is none.
        """
        last = last_consolidated_at(self.memory_dir)
        sessions = sessions_touched_since(self.transcript_dir, last)
        hours = (time.time() - last) / 3600 if last else 0.0
        return await self._consolidate(
            turn, sessions, notify, hours_since=hours, session_id=session_id
        )

    def _not_yet(self, why: str) -> bool:
        """A closed gate: say which (``dream.skipped``); no pass ran."""
        emit(self.sink, "dream.skipped", reason=f"not yet: {why}")
        return False

    async def _consolidate(
        self,
        turn: TurnContext | None,
        sessions: list[str],
        notify: Notify | None,
        *,
        hours_since: float,
        session_id: str | None,
        now: float | None = None,
    ) -> bool:
        md = self.memory_dir
        # Read before the lock is taken: a conversation that does not read must not leave
        # the lock stamped as if a pass had run.
        context = (
            messages_from_native(turn.messages)
            if turn is not None and turn.params is not None
            else []
        )
        try:
            prior = try_acquire(md)
        except StoreError as exc:
            emit(
                self.sink,
                "dream.failed",
                duration_ms=0,
                error_type=type(exc).__name__,
                **error_fields(exc),
            )
            return False
        if prior is None:
            emit(self.sink, "dream.skipped", reason="another consolidation pass is running")
            return False
        # What an earlier pass, extraction or forget killed midway left behind (empty
        # retired memories still indexed, memories without a line) is put right first,
        # so the pass starts from a consistent folder.
        for repair in await asyncio.to_thread(repair_memory_dir, md):
            emit(self.sink, "memory.repaired", kind=repair.kind, path=repair.path)
        # What `memdir forget` put in the trash over a week ago is kept for --undo no more.
        emptied = empty_trash(md, now=now)
        emit(
            self.sink,
            "dream.fired",
            hours_since=round(hours_since, 2),
            sessions_since=len(sessions),
        )
        started = time.monotonic()
        prompt = build_consolidation_prompt(
            str(md.root),
            str(self.transcript_dir) if self.transcript_dir else None,
            session_ids=sessions,
            format=self.config.memory_format,
        )
        cwd = (turn.cwd if turn is not None else None) or os.getcwd()
        tools = builtin_tools(cwd)
        if turn is not None and turn.params is not None:
            params = turn.params
        else:
            definitions = [t.definition() for t in tools]
            params = CacheSafeParams(
                model=self.model, system=STANDALONE_SYSTEM_PROMPT, tools=definitions
            )
        tool_context = ToolContext(
            write_guard=memory_write_guard(md),
            memory_files=MemoryFiles(
                memory_dir=md, format=self.config.memory_format, session_id=session_id
            ),
        )
        try:
            result = await run_forked_agent(
                params,
                context,
                [Message.user(prompt)],
                tools=tools,
                can_use_tool=auto_mem_can_use_tool(md, cwd=cwd, sink=self.sink),
                max_turns=None,
                context=tool_context,
            )
        except Exception as exc:
            release_failed(md, prior)
            emit(
                self.sink,
                "dream.failed",
                duration_ms=int((time.monotonic() - started) * 1000),
                error_type=type(exc).__name__,
                **error_fields(exc),
            )
            return False
        # The files the pass emptied are retired: deleted, with any index line the pass
        # left them (a write of the index refused because another process changed it
        # meanwhile, say), by the same repair that starts the pass.
        settled = await asyncio.to_thread(repair_memory_dir, md)
        retired = [md.root / r.path for r in settled if r.kind == "empty_removed"]
        for repair in settled:
            if repair.kind != "empty_removed":
                emit(self.sink, "memory.repaired", kind=repair.kind, path=repair.path)
        # A file the pass emptied was retired, not improved: it is gone.
        gone = set(retired)
        touched = [p for p in result.written_paths if p.name != ENTRYPOINT_NAME and p not in gone]
        await asyncio.to_thread(
            _record_pass, md, touched, retired, tool_context.created, session_id
        )
        usage = result.usage
        emit(
            self.sink,
            "dream.completed",
            cache_read=usage.cache_read_input_tokens,
            cache_created=usage.cache_creation_input_tokens,
            output=usage.output_tokens,
            sessions_reviewed=len(sessions),
            files_touched=len(touched),
            files_retired=len(retired),
            trash_emptied=len(emptied),
            duration_ms=int((time.monotonic() - started) * 1000),
        )
        if touched and notify is not None:
            team = sum(1 for p in touched if md.is_team_path(p))
            notify(MemorySaved(paths=tuple(touched), team_count=team, verb="Improved"))
        return True


def _record_pass(
    md: MemoryDir,
    touched: Sequence[Path],
    retired: Sequence[Path],
    created: Iterable[str],
    session_id: str | None,
) -> None:
    """Log the pass in the memories' history: what it wrote and what it retired, under
    one run id, so a retired memory's history points at the pass that took it in."""
    run = uuid.uuid4().hex
    record_changes(md, touched, by="dream", run=run, session=session_id, created=created)
    record_changes(md, retired, by="dream", run=run, session=session_id, what="removed")
