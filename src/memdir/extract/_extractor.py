"""``MemoryExtractor``: after each turn, a background memory agent saves what is worth keeping.

Each instance owns all of its state — the cursor, the in-progress flag, the turn
counter, the stashed turn and the runs in flight, and the conversation read so far — so
two extractors never share any. ``on_turn_end`` reads the messages the turn added (see
:class:`TurnContext`) and schedules the rest. The order of decisions for one turn
(normative, see DESIGN §4):

1. ignored when disabled or for a subagent's turn;
2. a run already in progress → stash this turn (the latest replaces any earlier stash),
   ``extract.coalesced``, done; the stash runs right after, as the trailing run;
3. the host agent wrote memory itself since the cursor → move the cursor to the end,
   ``extract.skipped_direct_write``, no fork (the throttle counter is not touched);
4. throttle: fewer than ``every_n_turns`` turns since the last run → ``extract.throttled``,
   the cursor stays, so those messages are covered by the next run (a trailing run skips
   this and resets the counter);
5. a memory stamped with the turn's ``session_id`` (``metadata.originSessionId``) changed
   since the last run, by another agent such as Claude Code's own extractor, whose writes
   leave no tool call in the transcript → as in 3 (checked off the loop, once a run is
   due);
6. scan the memory directory, build the prompt, run the fork; past a backlog longer than
   ``backlog_tokens`` (a first run over a long conversation), only its most recent part,
   the cursor moved past the rest first (``extract.backlog_skipped``);
7. only a fork that returned normally moves the cursor, to the last message of the
   snapshot the run started with; a failure leaves it for the next turn to retry.

Steps 1, 3 and 4 are the turn coordinator's (:mod:`memdir.extract._coordinator`), a pure
decision every backend shares; this class adds what needs state or the disk (2, 5, 6,
7). :meth:`MemoryExtractor.process` carries one turn out in the caller's task and
returns an :class:`~memdir.extract._coordinator.Outcome`, for the queue's worker.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from memdir.cost import provider_of
from memdir.errors import error_fields
from memdir.extract._coordinator import Decision, InMemory, Outcome, admitted, decide
from memdir.extract._loop import BackgroundLoop
from memdir.extract._run import Runner, RunOutcome
from memdir.extract._types import (
    ExtractConfig,
    MemorySaved,
    Notify,
    PendingTurn,
    Position,
    PositionStore,
    TurnContext,
)
from memdir.messages import Message, model_visible
from memdir.messages._native import ConversationReader, MessageTypeError, NativeFormat
from memdir.models import Model
from memdir.store import ENTRYPOINT_NAME, MemoryDir, parse_memory_file
from memdir.store._provenance import record_changes
from memdir.telemetry import Sink, emit
from memdir.tools import Tool

__all__ = ["MemoryExtractor"]

# Enough of a memory file for its frontmatter.
_HEAD_CHARS = 8192


class MemoryExtractor:
    """Saves memories from a host agent's conversation, in the background, turn by turn.

    Call :meth:`on_turn_end` when the host agent finishes a turn (a final answer, no
    tool calls pending, no API error), with the conversation as the agent loop holds it
    (see :class:`TurnContext`). It returns at once: from async code the run is a task on
    the running loop, from sync code it goes to one background thread with its own loop.
    Before the process exits, :meth:`drain` (or :meth:`drain_sync`) waits for what is
    still running.
    """

    def __init__(
        self,
        memory_dir: MemoryDir | str | os.PathLike[str],
        model: Model,
        config: ExtractConfig | None = None,
        sink: Sink | None = None,
        *,
        tools: Sequence[Tool] | None = None,
        clock: Callable[[], float] | None = None,
        position_store: PositionStore | None = None,
        host_memory: InMemory | None = None,
    ) -> None:
        """``position_store``: where the conversation's position (cursor, throttle count,
        when it was last covered) is kept for a later process. It is loaded before the
        first turn is decided and saved each time the position moves, both off the loop.

        ``host_memory``: how a path the host's agent wrote to is told to be in its memory
        (its own save, which covers the turn); default: inside ``memory_dir``, relative
        to the turn's ``cwd``. A backend whose host writes its memory on another machine
        passes one for the host's paths.
        """
        self.memory_dir = memory_dir if isinstance(memory_dir, MemoryDir) else MemoryDir(memory_dir)
        self.model = model
        self.config = config or ExtractConfig()
        self.sink = sink
        self._extra_tools = tuple(tools or ())
        self._clock = clock or time.time
        self._runner = Runner(
            self.memory_dir, model, self.config, sink, self._extra_tools, self._clock
        )
        self._conversation = ConversationReader()
        """The host's conversation as read so far, so each turn reads only what it adds."""
        self.cursor: str | None = None
        """The uuid of the last message covered by a successful run (or a direct write)."""
        self._covered_at: float | None = None
        """When the cursor last moved, on ``clock``: memory files changed after it were
        not changed by this extractor's runs."""
        self._lock = threading.Lock()
        self._in_progress = False
        self._turns_since_run = 0
        self._stash: PendingTurn | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._futures: set[concurrent.futures.Future[None]] = set()
        self._background = BackgroundLoop()
        """Where runs go when the host reports from sync code."""
        self._background_shared = False
        """Whether that loop is a backend's, for all its conversations (it stops it)."""
        self._position_store = position_store
        self._host_memory = host_memory
        self._restored = position_store is None
        """Whether the stored position was loaded (or there is no store)."""
        self._loading: asyncio.Future[None] | None = None
        """The load every turn waits for, on the loop that started it: turns go on in the
        order they were reported, since a future wakes its waiters in order."""
        self._store_lock = threading.Lock()
        """One load or save at a time, each reading the position as it is then: a slow
        save can never overwrite a newer one."""
        self._saved: Position | None = None
        """The position last saved (or loaded), so that an unmoved one is not written."""

    @property
    def turns_since_run(self) -> int:
        """Turns throttled since the last run."""
        with self._lock:
            return self._turns_since_run

    def restore(
        self, cursor: str | None, turns_since_run: int = 0, *, covered_at: float | None = None
    ) -> None:
        """Resume from a saved position (as the command line does between processes);
        ``covered_at``: when that position was saved, on the extractor's clock."""
        with self._lock:
            self.cursor = cursor
            self._turns_since_run = max(0, turns_since_run)
            self._covered_at = covered_at
            # What the caller restored wins over the stored position.
            self._restored = True

    @property
    def position(self) -> Position:
        """Where extraction stands now (cursor, throttle count, when last covered)."""
        with self._lock:
            return self._position()

    def _position(self) -> Position:
        return Position(
            cursor=self.cursor,
            turns_since_run=self._turns_since_run,
            covered_at=self._covered_at,
        )

    # --- scheduling -----------------------------------------------------------------------

    def on_turn_end(self, turn: TurnContext, notify: Notify | None = None) -> None:
        """Report a finished turn. Returns at once, having read the messages new since the
        turn before (converting provider-native ones); the run goes on in the background.

        Raises :class:`TypeError` when ``turn.messages`` holds something that is no message
        (naming it, and the converter to use): dropped silently, it would leave nothing to
        remember. Nothing else raises: the host's turn never fails because of memory.
        """
        try:
            if not admitted(turn, self.config):
                return
            pending = self._pending(turn, notify)
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            if loop is not None and loop is not self._background.loop:
                task = loop.create_task(self._execute(pending))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            else:
                future = asyncio.run_coroutine_threadsafe(
                    self._execute(pending), self._background.start()
                )
                with self._lock:
                    self._futures.add(future)
                future.add_done_callback(self._forget_future)
        except MessageTypeError:
            raise  # the host's own mistake, to be fixed where it calls
        except Exception as exc:  # the host's turn must never fail because of memory
            emit(
                self.sink,
                "extract.error",
                duration_ms=0,
                error_type=type(exc).__name__,
                **error_fields(exc),  # why, in one line: the only place it is said
            )

    @staticmethod
    def _ambiguous_as(turn: TurnContext) -> NativeFormat:
        """The format of the host's model: what a message that reads alike in both formats
        is marked as, so that a fork writes it back as the host sent it."""
        provider = provider_of(turn.params.model.name) if turn.params is not None else None
        return "openai" if provider == "openai" else "anthropic"

    def _forget_future(self, future: concurrent.futures.Future[None]) -> None:
        with self._lock:
            self._futures.discard(future)

    def _share_background(self, background: BackgroundLoop) -> None:
        """Run sync hosts' turns on ``background``, which its owner stops (before the
        first turn)."""
        self._background = background
        self._background_shared = True

    @property
    def in_flight(self) -> int:
        """Runs scheduled and not yet finished (a trailing run counts with its trigger)."""
        with self._lock:
            return len(self._tasks) + len(self._futures)

    async def drain(self, timeout: float = 60.0) -> None:  # noqa: ASYNC109 (the contract)
        """Wait until nothing is in flight, or ``timeout`` seconds; never raises for a run."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                tasks = set(self._tasks)
                futures = {asyncio.wrap_future(f) for f in self._futures}
            waiting = tasks | futures
            if not waiting:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                # Nothing is cancelled: the runs go on, drain only stops waiting for them.
                return
            await asyncio.wait(waiting, timeout=left)

    def drain_sync(self, timeout: float = 60.0) -> None:
        """:meth:`drain` for synchronous hosts: block until done or ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                futures = set(self._futures)
            if not futures:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                return
            concurrent.futures.wait(futures, timeout=left)

    def close(self, timeout: float = 5.0) -> None:
        """Stop the background thread (after :meth:`drain_sync`, if runs should finish).

        Runs still in flight there are abandoned. Safe to call more than once; a later
        sync :meth:`on_turn_end` starts a new thread. A thread shared with the other
        conversations of a backend is the backend's to stop.
        """
        with self._lock:
            self._futures.clear()  # what the stopped loop held will never finish
        if not self._background_shared:
            self._background.stop([self.model], timeout)

    # --- one turn ---------------------------------------------------------------------------

    async def process(self, turn: TurnContext, *, turns: int = 1) -> Outcome:
        """Decide and carry out ``turn`` now, in the caller's task, and return what it did.

        For a backend that schedules turns itself (the queue's worker); a host calls
        :meth:`on_turn_end`. ``turns``: how many of the host's turns this call stands
        for (the throttle counts each). A turn stashed meanwhile runs right after, as a
        trailing run. Raises only what :meth:`on_turn_end` raises.
        """
        if not admitted(turn, self.config):
            return Outcome(status="ignored")
        pending = self._pending(turn, None, turns)
        if not self._restored:
            await self._await_restored()
        outcome, stash = await self._execute_one(pending)
        await self._save_position()
        if stash is not None:
            await self._execute(stash)
        return outcome

    def _pending(self, turn: TurnContext, notify: Notify | None, turns: int = 1) -> PendingTurn:
        messages, length = self._conversation.read(turn.messages, self._ambiguous_as(turn))
        return PendingTurn(
            turn=turn,
            messages=messages,
            length=length,
            reported_at=self._clock(),
            notify=notify,
            turns=turns,
        )

    async def _execute(self, pending: PendingTurn) -> None:
        """Process ``pending``, then each turn stashed meanwhile, as trailing runs.

        A loop, not recursion: a host whose turns keep arriving during runs can chain any
        number of trailing runs without growing the stack.
        """
        if not self._restored:
            await self._await_restored()
        current: PendingTurn | None = pending
        while current is not None:
            _, current = await self._execute_one(current)
            await self._save_position()

    async def _execute_one(self, pending: PendingTurn) -> tuple[Outcome, PendingTurn | None]:
        """One turn: what it did, and the stashed turn to run next if this one ran."""
        started = time.monotonic()
        stash: PendingTurn | None = None
        try:
            decision = self._decide(pending)
            if decision is None:
                return Outcome(status="coalesced"), None
            if decision.action != "run":
                return _settled(decision), None
            try:
                outcome = await self._carry_out(pending, decision, started)
            finally:
                with self._lock:
                    self._in_progress = False
                    stash, self._stash = self._stash, None
        except Exception as exc:  # scheduling bugs too: never into the host
            emit(
                self.sink,
                "extract.error",
                duration_ms=_ms(started),
                error_type=type(exc).__name__,
            )
            outcome = Outcome(status="failed", error=type(exc).__name__)
        if stash is not None:
            stash.trailing = True
        return outcome, stash

    def _decide(self, pending: PendingTurn) -> Decision | None:
        """Coalescing, then the coordinator's decision, applied; claims the run when one
        is due. None: stashed behind the run in progress."""
        messages = tuple(pending.messages[: pending.length])
        with self._lock:
            if self._in_progress:
                self._stash = pending
                emit(self.sink, "extract.coalesced")
                return None
            decision = decide(
                self._position(),
                messages,
                trailing=pending.trailing,
                every_n_turns=self.config.turns_between_runs(),
                in_memory=self._in_memory(pending.turn),
                now=self._clock(),
                turns=pending.turns,
                memory_dir=self.memory_dir,
                # A host on another machine wrote paths of its own: kept as it wrote them.
                cwd=pending.turn.cwd if self._host_memory is None else None,
            )
            moved = decision.position
            self.cursor = moved.cursor
            self._turns_since_run = moved.turns_since_run
            self._covered_at = moved.covered_at
            if decision.event is not None:
                emit(self.sink, decision.event, **decision.fields)
            if decision.action == "run":
                self._in_progress = True
        return decision

    def _in_memory(self, turn: TurnContext) -> InMemory:
        md, cwd = self.memory_dir, turn.cwd
        host = self._host_memory
        if host is None:
            return lambda path: md.is_memory_path(path, cwd=cwd)

        def inside(path: object) -> bool:
            # The host's own paths, compared as text; the memory tool's, which name this
            # memory directory itself, as paths here.
            if host(path):
                return True
            return isinstance(path, str) and os.path.isabs(path) and md.is_memory_path(path)

        return inside

    async def _carry_out(self, pending: PendingTurn, decision: Decision, started: float) -> Outcome:
        """The run a decision called for, unless a memory stamped with the session says
        another agent saved this turn's memory already."""
        messages = tuple(pending.messages[: pending.length])
        if await self._stamped_by_session(pending.turn, messages, decision.start):
            with self._lock:
                if messages:
                    self.cursor = messages[-1].uuid
                    self._covered_at = self._clock()
            emit(
                self.sink,
                "extract.skipped_direct_write",
                message_count=decision.message_count,
                source="origin_session",
            )
            return Outcome(
                status="skipped",
                start=decision.start,
                end=len(messages),
                message_count=decision.message_count,
                source="origin_session",
            )
        return await self._run(pending, messages, decision.start, started)

    # --- the stored position ------------------------------------------------------------------

    async def _await_restored(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            loading = self._loading
            if loading is None or loading.get_loop() is not loop:
                loading = loop.create_task(asyncio.to_thread(self._load_position))
                self._loading = loading
        await loading

    def _load_position(self) -> None:
        """Restore the stored position, once (in a worker thread)."""
        store = self._position_store
        with self._store_lock:
            if self._restored or store is None:
                return
            try:
                loaded = store.load()
            except Exception as exc:  # an unreadable store costs re-reading, never the turn
                emit(self.sink, "extract.error", duration_ms=0, error_type=type(exc).__name__)
                loaded = Position()
            with self._lock:
                if not self._restored:
                    self.cursor = loaded.cursor
                    self._turns_since_run = max(0, loaded.turns_since_run)
                    self._covered_at = loaded.covered_at
                    self._restored = True
                self._saved = self._position()

    async def _save_position(self) -> None:
        if self._position_store is None:
            return
        with self._lock:
            if self._saved == self._position():
                return
        await asyncio.to_thread(self._store_position)

    def _store_position(self) -> None:
        """Save the position as it is now, if it moved since the last save (in a worker
        thread; reads it under the store's lock, so saves land in order)."""
        store = self._position_store
        assert store is not None
        with self._store_lock:
            with self._lock:
                position = self._position()
                if position == self._saved:
                    return
            try:
                store.save(position)
            except Exception as exc:  # the next move tries again
                emit(self.sink, "extract.error", duration_ms=0, error_type=type(exc).__name__)
                return
            self._saved = position

    async def _stamped_by_session(
        self, turn: TurnContext, messages: Sequence[Message], start: int
    ) -> bool:
        """Whether a memory stamped with the turn's session changed since the run before.

        Since: the later of the first new message's time and when the cursor last moved
        (this extractor's own writes come before that). Without a session id, or with
        neither time known, nothing can be told and the run goes ahead.
        """
        session = turn.session_id
        if not session or start >= len(messages):
            return False
        times = [self._covered_at] if self._covered_at is not None else []
        first = messages[start].timestamp
        if first is not None:
            times.append(first.timestamp())
        if not times:
            return False
        return await asyncio.to_thread(stamped_since, self.memory_dir, session, max(times))

    async def _run(
        self,
        pending: PendingTurn,
        messages: tuple[Message, ...],
        start: int,
        started: float,
    ) -> Outcome:
        """Run the memory agent from ``start`` to the end of the snapshot: one run, or, when
        a standalone run can only take part of it, one after another."""
        turn = pending.turn
        cursor = begin = await self._skip_backlog(messages, start)
        runs = 0
        covered = 0
        memories: list[Path] = []
        error: str | None = None
        while True:
            try:
                outcome = await self._runner.run(
                    turn, messages, cursor, pending.reported_at, self._note_host_model
                )
            except Exception as exc:
                fields = error_fields(exc)
                emit(
                    self.sink,
                    "extract.error",
                    duration_ms=_ms(started),
                    error_type=type(exc).__name__,
                    **fields,
                )
                error = str(fields.get("reason") or type(exc).__name__)
                break
            runs += 1
            covered += outcome.message_count
            if outcome.end > 0:
                with self._lock:
                    self.cursor = messages[outcome.end - 1].uuid
                    self._covered_at = self._clock()
                await self._save_position()
            run_id = uuid.uuid4().hex
            memories += self._report(pending, outcome, started, run_id)
            if outcome.result.written_paths:
                await asyncio.to_thread(
                    self._record_provenance, turn, messages[cursor : outcome.end], outcome, run_id
                )
            if outcome.end >= len(messages) or outcome.end <= cursor:
                cursor = max(cursor, outcome.end)
                break
            cursor = outcome.end
            started = time.monotonic()
        return Outcome(
            status="ran" if cursor > begin or runs else "failed",
            start=start,
            end=cursor,
            message_count=covered,
            runs=runs,
            memories=tuple(memories),
            error=error,
        )

    async def _skip_backlog(self, messages: tuple[Message, ...], start: int) -> int:
        """Where this turn's runs start: ``start``, or, past a backlog longer than
        ``backlog_tokens``, its most recent part, the cursor moved past the rest."""
        begin = await self._runner.backlog_start(messages, start)
        if begin <= start:
            return start
        with self._lock:
            self.cursor = messages[begin - 1].uuid
        await self._save_position()
        emit(
            self.sink,
            "extract.backlog_skipped",
            message_count=begin - start,
            tokens=self._runner.conversation.tokens_between(start, begin),
            backlog_tokens=self.config.backlog_tokens,
        )
        return begin

    def _report(
        self, pending: PendingTurn, outcome: RunOutcome, started: float, run_id: str
    ) -> list[Path]:
        """Report one run (``extract.run``, the notice); returns the memories it wrote."""
        result, plan = outcome.result, outcome.plan
        cwd = pending.turn.cwd
        memories = [p for p in result.written_paths if p.name != ENTRYPOINT_NAME]
        team = sum(1 for p in memories if self.memory_dir.is_team_path(p, cwd=cwd))
        usage = result.usage
        chosen = plan.fork if plan.mode == "fork" and plan.fork is not None else plan.standalone
        emit(
            self.sink,
            "extract.run",
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_input_tokens=usage.cache_read_input_tokens,
            cache_creation_input_tokens=usage.cache_creation_input_tokens,
            message_count=outcome.message_count,
            turn_count=result.turn_count,
            files_written=len(result.written_paths),
            memories_saved=len(memories),
            team_memories_saved=team,
            duration_ms=_ms(started),
            mode=plan.mode,
            cache_shared=plan.mode == "fork",
            plan_reason=plan.reason,
            estimated_cost_fork=round(plan.fork.cost, 1) if plan.fork is not None else None,
            estimated_cost_standalone=round(plan.standalone.cost, 1),
            cost=round(outcome.cost, 1),
            # The chosen way's estimate beside what its usage was billed, in the same
            # units, so a bench can see how far the planner is off.
            estimated_cost=round(chosen.cost, 1),
            estimated_cache_read_tokens=round(chosen.cache_read_tokens),
            estimated_cache_write_tokens=round(chosen.cache_write_tokens),
            estimate_note=chosen.note,
            # The same estimate for each outcome: whether a run saves is not known before
            # it runs, and a save's output is much of its bill.
            estimated_cost_if_saved=_rounded(chosen.cost_if_saved),
            estimated_cost_if_nothing_saved=_rounded(chosen.cost_if_nothing_saved),
            # And with the requests and output the run made, the model's choices taken as
            # they came: what is left of the gap is how the planner saw the cache.
            estimated_cost_as_run=_rounded(outcome.estimate_as_run),
            billed_cost=round(outcome.cost, 1),
            hit_max_turns=result.hit_max_turns,
            # The id the memories' history (``memdir show NAME --history``) names it by.
            run_id=run_id,
        )
        if memories and pending.notify is not None:
            with contextlib.suppress(Exception):  # the notice is a courtesy
                pending.notify(MemorySaved(paths=tuple(memories), team_count=team))
        return memories

    def _record_provenance(
        self, turn: TurnContext, covered: Sequence[Message], outcome: RunOutcome, run_id: str
    ) -> None:
        """Log what this run changed: each memory it wrote, with the session and the ids
        of the messages it covered (see :mod:`memdir.store._provenance`)."""
        written = [p for p in outcome.result.written_paths if p.name != ENTRYPOINT_NAME]
        if not written:
            return
        record_changes(
            self.memory_dir,
            written,
            by="memdir",
            run=run_id,
            session=turn.session_id,
            messages=[m.uuid for m in model_visible(covered) if m.uuid],
            created=outcome.created,
        )

    def _note_host_model(self, model: Model) -> None:
        """Remember a host's model used from the background thread, for :meth:`close`.

        Only the background thread's loop is stopped by close(); a host's own loop keeps
        its connections, and its models are the host's to close.
        """
        self._background.note_model(model)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def stamped_since(memory: MemoryDir, session: str, since: float) -> bool:
    """Whether a memory file changed at or after ``since`` (seconds since the epoch) carries
    ``metadata.originSessionId == session``. Reads only the files changed since then."""
    root = memory.root
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if not name.endswith(".md") or name == ENTRYPOINT_NAME or name.startswith("."):
                continue
            path = os.path.join(dirpath, name)
            try:
                if os.stat(path).st_mtime < since:
                    continue
                with open(path, encoding="utf-8", errors="replace") as handle:
                    head = handle.read(_HEAD_CHARS)
            except OSError:
                continue
            metadata = parse_memory_file(head).frontmatter.get("metadata")
            if isinstance(metadata, Mapping) and metadata.get("originSessionId") == session:
                return True
    return False


def _settled(decision: Decision) -> Outcome:
    """The outcome of a decision that needs no run."""
    if decision.action == "skip_direct_write":
        return Outcome(
            status="skipped",
            start=decision.start,
            end=decision.end,
            message_count=decision.message_count,
            source="tool_call",
        )
    return Outcome(status="throttled", start=decision.start, end=decision.start)


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
