"""One run of the memory agent: read the memory's state, plan, and run the fork or memdir's
own request.

The extractor decides *whether* a turn gets a run (its state machine); this module decides
*how*. Both ways see the same new messages and the same list of memory files; neither sees
``MEMORY.md``: memdir's file tools write a new memory's index line themselves
(:attr:`memdir.tools.MemoryFiles.index`), so a save is one turn of ``Write`` calls and its
output is the memory alone. Both end as soon as a turn's calls have all written
successfully. What a fork would cost is worked out in
``_fork_shape``; memdir's own request is built and priced here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import hashlib
import itertools
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memdir.cost import CostEstimate, ModelFamily, Prices, bill, model_family, provider_of
from memdir.extract._fork_shape import (
    EXTENDED_RETENTION_SECONDS,
    fork_request_shape,
    host_has_memory_section,
)
from memdir.extract._instructions import format_instruction_files, load_instruction_files
from memdir.extract._own_cache import (
    SentRequest,
    cached_prefix,
    previous_point,
    record_sent,
    text_message_tokens,
)
from memdir.extract._planner import (
    LONG_TTL_SECONDS,
    RequestShape,
    RunPlan,
    RunStats,
    estimate,
    long_ttl_pays,
    plan_run,
    priced_as_run,
)
from memdir.extract._prompts import PromptParts, changed_section, extract_prompt_parts
from memdir.extract._relevance import relevance_text
from memdir.extract._standalone import (
    RenderedConversation,
    StandaloneWindow,
    estimate_tokens,
    standalone_system_prompt,
    wire_tokens,
)
from memdir.extract._types import ExtractConfig, TurnContext
from memdir.fork import CacheSafeParams, ForkResult, run_forked_agent
from memdir.messages import Message, TextBlock, model_visible
from memdir.models import Model
from memdir.permissions import auto_mem_can_use_tool, memory_write_guard
from memdir.store import (
    ENTRYPOINT_NAME,
    MemoryDir,
    MemoryHeader,
    format_manifest,
    resolve_user_layer,
)
from memdir.telemetry import Sink
from memdir.tools import (
    BashTool,
    GrepTool,
    MemoryFiles,
    MemoryTool,
    Tool,
    ToolContext,
    builtin_tools,
)

__all__ = ["RunOutcome", "Runner"]

_SEEDED_GAPS = 10
"""How many of a conversation's last gaps between the person's turns stand in for the
gaps between runs before an extractor has seen any."""

# The standalone request shows only what saving memories needs; the host's other tools
# are not there to share a cache with.
_STANDALONE_TOOLS = ("Read", "Grep", "Write", "Edit")


@dataclass(frozen=True, kw_only=True)
class RunOutcome:
    """What one run did, for the extractor to report and move its cursor by."""

    result: ForkResult
    """The agent loop's result."""
    plan: RunPlan
    """The way chosen, with both estimates."""
    end: int
    """Index after the last message this run covered."""
    message_count: int
    """Model-visible messages it covered as new."""
    cost: float
    """Its usage at the prices of the model it called."""
    created: frozenset[str] = frozenset()
    """Real paths of the files its Writes created (the rest of ``written_paths`` existed)."""
    estimate_as_run: float | None = None
    """The chosen way priced with the requests and output the run then made
    (:func:`~memdir.extract._planner.priced_as_run`)."""


def _growth_per_request(result: ForkResult) -> float:
    """What each request of a run after its first added to the one before: the answer
    before it and that answer's tool results, tool calls and all (0 for a run of one)."""
    answers = [n for n, m in enumerate(result.messages) if m.role == "assistant"]
    if len(answers) < 2:
        return 0.0
    # Request k carries everything before the k-th answer: the last request, everything
    # before the last answer.
    added = sum(wire_tokens(m) for m in result.messages[1 : answers[-1]])
    return added / (len(answers) - 1)


_EMPTY_STATE = "The memory directory is empty."

_OPENING = "The conversation follows; memdir's request comes after it."

_LISTED_BEFORE = "The memory files are listed before the conversation."


def _memory_agent_tools(home: str, cwd: str) -> list[Tool]:
    """memdir's six tools as the memory agent runs them: the file tools start from the
    memory directory (a memory written as `user_role.md` lands there, and a relative path
    costs fewer output tokens than the directory's absolute one in every call); Bash stays
    in the project's folder. A read-only command run where the agent has just written
    would obey what it wrote there: `git status` in a folder shaped as a repository runs
    the programs its config names."""
    return [BashTool(cwd) if t.name == "Bash" else t for t in builtin_tools(home)]


def _opening_text(opening: str) -> str:
    """The standalone request's first message: the list of memory files as it was when
    the window's start was set, and the project's instruction files (``opening`` holds
    both, either may be empty).

    Both change rarely, so they sit before the conversation, in the cached prefix; the
    message is there even without them, so that the conversation after it may start with
    either role."""
    return f"{_OPENING}\n\n{opening}" if opening else _OPENING


def _opening_message(opening: str) -> Message:
    # Meta: memdir's words, not the user's, for anything that reads the conversation.
    return Message(role="user", content=(TextBlock(text=_opening_text(opening)),), is_meta=True)


def _final_text(parts: PromptParts) -> str:
    """The standalone request's last message: the request, then what memory holds now.

    Both change from run to run (a save changes the state), so both come after the
    conversation: the prefix the next run reads from the cache (instructions, tools,
    the window and the messages this run covered) is never changed by a save."""
    return f"{parts.request}\n\n{parts.memory or _EMPTY_STATE}"


def _turn_date(
    messages: Sequence[Message], start: int, end: int, reported_at: float
) -> datetime.date | None:
    """The date of the newest message a run covers that says when it was written (a
    Claude Code transcript stamps every line), in local time as Claude Code gives it;
    else the date the turn was reported. None when neither makes a date."""
    for index in range(min(end, len(messages)) - 1, start - 1, -1):
        stamp = messages[index].timestamp
        if stamp is not None:
            return stamp.astimezone().date()
    try:
        return datetime.datetime.fromtimestamp(reported_at).date()
    except (OverflowError, OSError, ValueError):
        return None


class Runner:
    """Runs the memory agent for one extractor, and keeps what carries over between runs:
    the conversation rendered for standalone requests, the standalone cache's state, and
    how earlier runs went."""

    def __init__(
        self,
        memory_dir: MemoryDir,
        model: Model,
        config: ExtractConfig,
        sink: Sink | None,
        extra_tools: Sequence[Tool],
        clock: Callable[[], float],
    ) -> None:
        self._md = memory_dir
        self._model = model
        self._config = config
        self._sink = sink
        self._extra_tools = tuple(extra_tools)
        self._clock = clock
        self.conversation = RenderedConversation(config.tool_result_chars)
        self.stats = RunStats.for_family(self._family(model), self._effort(model))
        self._standalone_cache: SentRequest | None = None
        self._static_tokens: dict[str, int] = {}
        self._listed: tuple[int, str, dict[str, str]] | None = None
        """The list of memory files memdir's own request shows before the conversation:
        the window's start it was made for, its text, and each file's line in it."""
        self._floor = 0
        """The earliest start of the standalone window (see :meth:`_window_floor`)."""
        self._last_run_at: float | None = None
        self._user_dir = resolve_user_layer(config.user_layer)
        """The user layer the memory agent may save to, or None."""

    def _family(self, model: Model) -> Any:
        prices: Mapping[str, Prices] = self._config.prices
        return model_family(model.name, provider_of(model.name), prices=prices)

    async def backlog_start(self, messages: Sequence[Message], cursor: int) -> int:
        """Where runs over ``messages`` from ``cursor`` start under the backlog policy
        (:attr:`ExtractConfig.backlog_tokens`): ``cursor``, or past the older messages
        when more than the policy's tokens are unseen."""
        limit = self._config.backlog_tokens
        if limit is None or cursor >= len(messages):
            return cursor
        await self.conversation.update(messages)
        end = len(messages)
        if self.conversation.tokens_between(cursor, end) <= limit:
            return cursor
        # At least the last message is covered, however long it is.
        return min(self.conversation.start_of_last(limit, cursor, end), end - 1)

    async def run(
        self,
        turn: TurnContext,
        messages: Sequence[Message],
        cursor: int,
        reported_at: float,
        on_host_model: Callable[[Model], None],
    ) -> RunOutcome:
        """Run the memory agent on the messages from ``cursor`` on (or the first stretch
        of them that fits one standalone run)."""
        md = self._md
        await self.conversation.update(messages)
        cwd = turn.cwd or os.getcwd()
        headers, project, user_listing = await asyncio.to_thread(self._read_state, cwd)
        end = len(messages)
        # Rendering a window (a first one can hold 100k tokens of conversation) is work
        # for worker threads, in slices: on the host's loop, or in one call holding the
        # GIL, it would stall the host for it.
        window = await self.conversation.render_window(
            cursor,
            end,
            window_tokens=self._config.window_tokens,
            chunk_tokens=self._config.context_budget_tokens,
            floor=self._window_floor(cursor),
        )
        team = self._config.team
        user = self._user_dir

        def parts_for(
            count: int, newest_first: bool, end: int, host_memory: bool = False
        ) -> PromptParts:
            # Oldest first is memdir's own request (a list grown at its end keeps its
            # cached start); newest first, the fork's single prompt.
            standalone = not newest_first
            listed = headers if newest_first else list(reversed(headers))
            new = relevance_text(messages[cursor:end])
            return extract_prompt_parts(
                count,
                "",
                self._config.skip_index,
                memory_dir=str(md.root),
                team=team,
                team_dir=str(md.team_dir) if team else None,
                user_dir=str(user.root) if user is not None else None,
                user_listing=user_listing,
                today=_turn_date(messages, cursor, end, reported_at),
                memory_format=self._config.memory_format,
                host_memory=host_memory,
                memories=listed,
                new_text=new,
                list_budget=self._config.memory_list_entries,
                # memdir's tools write each new memory's index line (MemoryFiles.index):
                # the agent neither sees nor edits the index.
                memdir_indexes=True,
                # memdir's own tools, from the memory directory, run the agent's calls.
                own_tools=True,
                standalone=standalone,
            )

        now = self._clock()
        if self._last_run_at is None and self.stats.gaps == 0:
            self._seed_gaps(messages[:end])
        if self._last_run_at is not None:
            lifetime = self._standalone_lifetime(None)
            self.stats.record_gap(now - self._last_run_at, lifetime)
        self._last_run_at = now
        alone_count = len(model_visible(messages[cursor : window.end]))
        # memdir's own request shows the list of memory files before the conversation, as
        # it was when the window's start was set, and what changed since after it: a save
        # then changes nothing the next run reads from the cache.
        alone_parts = parts_for(alone_count, newest_first=False, end=window.end)
        listed, changed = self._listing(alone_parts.listing, headers, window.start)
        opening = "\n\n".join(p for p in (listed, project) if p)
        state = "\n\n".join(p for p in (changed, alone_parts.state) if p)
        if not state and headers:
            state = _LISTED_BEFORE  # not "empty": the list is in the first message
        alone_parts = dataclasses.replace(alone_parts, listing="", state=state)
        alone_shape = self._standalone_shape(alone_parts, opening, window, now)
        fork_shape: RequestShape | None = None
        fork_parts: PromptParts | None = None
        if turn.params is not None:
            fork_parts = parts_for(
                len(model_visible(messages[cursor:])),
                newest_first=True,
                end=end,
                # The host's own memory section rules the format; memdir's prompt defers.
                host_memory=host_has_memory_section(turn.params, messages),
            )
            sent = turn.last_request_at if turn.last_request_at is not None else reported_at
            fork_shape = fork_request_shape(
                turn.params,
                self._family(turn.params.model),
                self.conversation,
                messages,
                estimate_tokens(fork_parts.whole),
                now - sent,
                runnable={"Write", "Edit", "memory", *(t.name for t in self._extra_tools)},
            )
        # How often the next run finds what this one writes: within an hour where it is
        # written for one, else within the default lifetime.
        long = alone_shape.cache_ttl == "1h"
        share = self.stats.hour_share if long else self.stats.warm_share
        warm = self._standalone_warm(alone_parts, opening, window, long)
        # After the next run, a warm run on Claude may write for an hour at little cost
        # (`long_ttl_pays`), keeping memdir's cache over the pauses under an hour.
        hour = provider_of(self._model.name) == "anthropic"
        later = self.stats.hour_share if hour else share
        plan = plan_run(self._config.mode, fork_shape, alone_shape, self.stats, warm, share, later)

        context = ToolContext(
            write_guard=memory_write_guard(
                md, allow_private_secrets=self._config.allow_private_secrets, user_dir=user
            ),
            memory_files=MemoryFiles(
                memory_dir=md,
                user_dir=user,
                format=self._config.memory_format,
                session_id=turn.session_id,
                index=not self._config.skip_index,
            ),
        )
        gate = auto_mem_can_use_tool(
            md,
            # For a tool that declares no effects, judged by its name: it runs in the
            # project's folder. memdir's own tools declare theirs from their own folder.
            cwd=cwd,
            always_allow_tools=self._config.always_allow_tools,
            allow_private_secrets=self._config.allow_private_secrets,
            sink=self._sink,
            user_dir=user,
        )
        # The memory tool runs too, for hosts built on Anthropic's client-side memory tool:
        # their fork sees that tool's definition and may save through it.
        tools = [*_memory_agent_tools(str(md.root), cwd), MemoryTool(md), *self._extra_tools]
        await asyncio.to_thread(md.ensure)
        if user is not None:
            await asyncio.to_thread(user.ensure)
        if plan.mode == "fork":
            assert turn.params is not None
            assert fork_parts is not None
            on_host_model(turn.params.model)
            result = await run_forked_agent(
                self._with_effort(turn.params),
                messages,
                [Message.user(fork_parts.whole)],
                tools=tools,
                can_use_tool=gate,
                max_turns=self._config.max_turns,
                context=context,
                # A breakpoint on the host's final answer too: the fork writes that answer
                # to the cache anyway, and the host's next request then reads it instead of
                # writing it again.
                cache_point=len(messages) - 1 if messages else None,
                end_after_writes=self._indexed,
            )
            covered, count, family = (
                end,
                len(model_visible(messages[cursor:])),
                self._family(turn.params.model),
            )
        else:
            ttl = alone_shape.cache_ttl
            key = self._cache_key(alone_parts, opening, window)
            point = previous_point(window, self._previous_entry(window, key))
            result = await self._standalone(
                alone_parts, opening, window, tools, gate, context, ttl, point
            )
            self._standalone_cache = record_sent(
                self._standalone_cache,
                now=self._clock(),
                instructions=alone_parts.instructions,
                opening=_opening_text(opening),
                key=key,
                end=window.end,
                lifetime=self._standalone_lifetime(ttl),
                opening_marked=point is None,
            )
            covered, count, family = window.end, alone_count, self._family(self._model)
        growth = _growth_per_request(result)
        shape = fork_shape if plan.mode == "fork" and fork_shape is not None else alone_shape
        as_run = priced_as_run(shape, result.turn_count, result.usage.output_tokens, growth)
        self.stats.record(
            result.turn_count, result.usage.output_tokens, growth, saved=bool(result.written_paths)
        )
        return RunOutcome(
            result=result,
            plan=plan,
            end=covered,
            message_count=count,
            cost=bill(result.usage, family.prices),
            created=frozenset(context.created),
            estimate_as_run=as_run,
        )

    def _previous_entry(self, window: StandaloneWindow, key: str) -> int | None:
        """Where in ``window.messages`` the last standalone request's entry ends (its last
        message), or None where the window does not continue that request's: runs that
        forked since leave their messages between it and the new ones."""
        sent = self._standalone_cache
        if sent is None or sent.key != key:
            return None
        return self.conversation.shown_between(window.start, min(sent.end, window.cursor)) - 1

    def _listing(
        self, listing: str, headers: Sequence[MemoryHeader], start: int
    ) -> tuple[str, str]:
        """The list of memory files memdir's own request shows before the conversation, and
        what changed in the directory since that list was made.

        The list is remade whenever the window's start moves (the message after the list
        is then new anyway, and nothing after it is read from the cache); until then each
        run shows the same list, and a short section after the conversation names the
        memories written or removed since. Past the listing budget there is no list."""
        # Each file as its line shows it (type, time, description), so a change that
        # keeps the time (a coarse clock, two writes in one tick) still shows.
        signature = {h.filename: format_manifest([h]) for h in headers}
        kept = self._listed
        listable = len(headers) <= self._config.memory_list_entries
        if not listable or kept is None or kept[0] != start:
            self._listed = (start, listing, signature) if listable else None
            return listing, ""
        _, text, before = kept
        if not text:
            # The store was empty when the list was made: nothing to name changes against,
            # so the whole list goes after the conversation.
            return "", listing
        changed = [h for h in headers if before.get(h.filename) != signature[h.filename]]
        removed = sorted(set(before) - set(signature))
        return text, changed_section(changed, removed)

    def _window_floor(self, cursor: int) -> int:
        """Where the standalone window starts: the same message from run to run, so that
        each run reads the window the last one sent from the cache, until it must move.

        It moves when the window has grown past ``window_tokens``, and when none of it
        would be read anyway: memdir's cache has expired (the first run of this extractor,
        or a pause longer than the lifetime it was written for). Then it restarts short,
        with the last quarter of ``window_tokens`` before the new messages, and at least
        the one message before them where it fits the window: a window re-sent whole is
        paid at the full input price, so a short one, grown turn by turn while cached,
        costs less for the same recent context."""
        last = self._standalone_cache
        window = self._config.window_tokens
        conversation = self.conversation
        if (
            last is None
            or self._clock() - last.at >= last.lifetime
            or cursor < self._floor
            or conversation.tokens_between(self._floor, cursor) > window
        ):
            start = conversation.start_of_last(max(window // 4, 1), 0, cursor)
            if start >= cursor > 0 and conversation.tokens_between(cursor - 1, cursor) <= window:
                start = cursor - 1  # what "yes, do that" answers
            self._floor = start
        return self._floor

    def _seed_gaps(self, messages: Sequence[Message]) -> None:
        """Before its first run an extractor has seen no pause between runs. A conversation
        whose messages say when they were written (a Claude Code transcript stamps every
        line) shows how far apart the person's turns come, and runs follow turns: its last
        few gaps stand in for the runs' until runs of its own are seen. A process that
        runs once per turn (the Claude Code hook) has no other way to know them."""
        stamps = [
            m.timestamp
            for m in messages
            if m.role == "user" and m.timestamp is not None and not m.is_tool_result
        ]
        lifetime = self._standalone_lifetime(None)
        for earlier, later in itertools.pairwise(stamps[-(_SEEDED_GAPS + 1) :]):
            try:
                seconds = (later - earlier).total_seconds()
            except TypeError:  # one stamp with a zone, one without
                continue
            if seconds >= 0:
                self.stats.record_gap(seconds, lifetime)

    def _read_state(self, cwd: str) -> tuple[list[Any], str, str]:
        md = self._md
        headers = md.scan()
        # Read for memdir's own request only; a fork's host has loaded them already.
        files = load_instruction_files(cwd) if self._config.load_instructions else ()
        user = self._user_dir
        # The newest of the user layer's memories, as many as the project's list shows.
        held = user.scan(limit=self._config.memory_list_entries) if user is not None else []
        return headers, format_instruction_files(files), format_manifest(held, day_only=True)

    # --- the two shapes ---------------------------------------------------------------------

    def _standalone_tools(self, cwd: str) -> list[dict[str, Any]]:
        # Grep, in short, so that a memory the request does not list (a store too large
        # to list) can be found before a new file duplicates it.
        return [
            t.short_definition() if isinstance(t, GrepTool) else t.definition()
            for t in builtin_tools(cwd)
            if t.name in _STANDALONE_TOOLS
        ]

    def _standalone_shape(
        self, parts: PromptParts, opening: str, window: StandaloneWindow, now: float | None
    ) -> RequestShape:
        family = self._family(self._model)
        static = self._static(parts)
        opening_size = text_message_tokens(_opening_text(opening))
        final = text_message_tokens(_final_text(parts))
        stable = static + opening_size + window.window_tokens + window.new_tokens
        prompt = stable + final
        warm, note = cached_prefix(
            self._standalone_cache,
            now=now,
            provider=family.provider,
            instructions=parts.instructions,
            opening=_opening_text(opening),
            key=self._cache_key(parts, opening, window),
            static=static,
            seen=lambda end: self.conversation.tokens_between(
                window.start, min(end, window.cursor)
            ),
        )
        if 0 < warm < family.min_cache_tokens:
            # A prefix shorter than the model's cache minimum was never written (Opus 4.5
            # caches from 4,096 tokens): instructions alone may be below it.
            warm, note = 0, "memdir's prefix below the cache minimum"
        # Everything before the final message is the same in the next run, which reads it
        # if it still lives: an hour's life costs more to write, and pays where this
        # session's pauses are mostly longer than five minutes and shorter than an hour.
        long = provider_of(self._model.name) == "anthropic" and long_ttl_pays(
            family, self.stats, stable, stable - warm
        )
        return RequestShape(
            family=family,
            model=self._model.name,
            prompt_tokens=prompt,
            warm_tokens=warm,
            note=note + (", written for an hour" if long else ""),
            priced=provider_of(self._model.name) is not None,
            cache_ttl="1h" if long else None,
            long_tokens=stable if long else 0,
        )

    def _standalone_lifetime(self, ttl: str | None) -> float:
        """How long memdir's own cached prefix lives unused: an hour with ``ttl: "1h"``,
        a day on the OpenAI models that take ``prompt_cache_retention: "24h"``, else the
        provider's default (five minutes)."""
        family = self._family(self._model)
        if ttl == "1h":
            return LONG_TTL_SECONDS
        if self._extended_retention():
            return EXTENDED_RETENTION_SECONDS
        return float(family.cache_ttl_seconds)

    def _extended_retention(self) -> bool:
        """Whether memdir's own requests ask OpenAI for its 24-hour retention: only on the
        models its prompt-caching page lists (the model table's
        ``extended_cache_retention``); others reject or ignore the parameter."""
        if provider_of(self._model.name) != "openai":
            return False
        return bool(self._family(self._model).extended_cache_retention)

    def _standalone_warm(
        self,
        parts: PromptParts,
        opening: str,
        window: StandaloneWindow,
        long: bool,
    ) -> CostEstimate:
        """A standalone run that finds memdir's cache as a standalone run now would leave
        it: what writing the cache now makes the next run cost, if it comes in time (see
        ``plan_run``). Written for an hour if ``long``, it writes its new messages at the
        hour's price too."""
        hot = self._standalone_shape(parts, opening, window, None)
        static = self._static(parts)
        opening_size = text_message_tokens(_opening_text(opening))
        # A save changes only what follows the conversation: the window stays cached, and
        # each run writes its new messages (at the hour's price if ``long``).
        stable = static + opening_size + window.window_tokens + window.new_tokens
        hot = dataclasses.replace(
            hot,
            warm_tokens=static + opening_size + window.window_tokens,
            note="memdir's cache warm",
            long_tokens=stable if long else 0,
        )
        return estimate("standalone", hot, self.stats)

    def _static(self, parts: PromptParts) -> int:
        key = parts.instructions
        tokens = self._static_tokens.get(key)
        if tokens is None:
            tools = json.dumps(self._standalone_tools(os.getcwd()), ensure_ascii=False)
            tokens = estimate_tokens(standalone_system_prompt(parts.instructions))
            tokens += estimate_tokens(tools)
            self._static_tokens = {key: tokens}
        return tokens

    def _cache_key(self, parts: PromptParts, opening: str, window: StandaloneWindow) -> str:
        """What the standalone request's cached prefix holds, before the new messages."""
        # The first message sent after the opening one, window or new: a run whose window
        # was empty cached its new messages from the same place.
        start = window.messages[0].uuid if window.messages else ""
        digest = hashlib.sha256()
        for piece in (parts.instructions, opening, str(window.start), start):
            digest.update(piece.encode("utf-8", "surrogatepass"))
            digest.update(b"\0")
        return digest.hexdigest()

    # --- the standalone request -------------------------------------------------------------

    async def _standalone(
        self,
        parts: PromptParts,
        opening: str,
        window: StandaloneWindow,
        tools: Sequence[Tool],
        gate: Any,
        context: ToolContext,
        cache_ttl: str | None = None,
        entry_point: int | None = None,
    ) -> ForkResult:
        params: dict[str, Any] = {}
        if provider_of(self._model.name) == "openai":
            # Routes every run of this memory directory to the same cache.
            key = hashlib.sha256(str(self._md.root).encode("utf-8", "surrogatepass"))
            params["prompt_cache_key"] = "memdir-" + key.hexdigest()[:24]
            if self._extended_retention():
                # Keeps the prefix a day, not minutes, at no extra price: a run after a
                # long pause still reads instructions, tools and window. The fork never
                # adds it: a host's retention is its own data-handling choice (24 hours
                # is not zero-data-retention eligible), it changes neither the prefix nor
                # the price, so the fork reads the host's cache without it.
                params["prompt_cache_retention"] = "24h"
        cwd = os.getcwd()
        request = self._with_effort(
            CacheSafeParams(
                model=self._model,
                system=standalone_system_prompt(parts.instructions),
                tools=self._standalone_tools(cwd),
                params=params,
            )
        )
        messages = [_opening_message(opening), *window.messages]
        points = [0, len(messages) - 1]
        if entry_point is not None:
            points.append(entry_point)
        return await run_forked_agent(
            request,
            messages,
            [Message.user(_final_text(parts))],
            tools=tools,
            can_use_tool=gate,
            max_turns=self._config.max_turns,
            context=context,
            cache_points=sorted(set(points)),
            cache_ttl=cache_ttl,
            end_after_writes=self._indexed,
        )

    def _with_effort(self, request: CacheSafeParams) -> CacheSafeParams:
        """``request`` with :attr:`ExtractConfig.reasoning_effort` for an OpenAI reasoning
        model. OpenAI caches the prompt, not the generation settings, so a fork that
        reasons less still reads the host's cache."""
        effort = self._effort(request.model)
        if effort is None:
            return request
        return dataclasses.replace(request, params={**request.params, "reasoning_effort": effort})

    def _effort(self, model: Model) -> str | None:
        """The ``reasoning_effort`` memdir's requests to ``model`` send, if any."""
        wanted = self._config.reasoning_effort
        if wanted is None or provider_of(model.name) != "openai":
            return None
        family: ModelFamily = self._family(model)
        if not family.reasoning or not family.reasoning_efforts:
            return None
        if wanted == "lowest":
            return family.reasoning_efforts[0]
        # A fork runs on the host's model, which may not take the effort asked for.
        return wanted if wanted in family.reasoning_efforts else None

    def _indexed(self, written: tuple[Path, ...]) -> bool:
        """Whether every memory written so far has its pointer in its directory's index.

        A run ends after a turn of successful writes only then. memdir's tools write the
        pointer with the file, so this holds after the turn that saves it; it fails only
        where they could not (the index locked for long by another process), and the
        model's next turn is the chance to see that before the repair step adds it.
        """
        if self._config.skip_index:
            return True
        md = self._md
        indexes: dict[Path, str] = {}
        for path in written:
            if path.name == ENTRYPOINT_NAME or path.suffix != ".md":
                continue
            in_team = self._config.team and md.is_team_path(path)
            user = self._user_dir
            in_user = user is not None and user.is_memory_path(path)
            index = (
                user.entrypoint
                if user is not None and in_user
                else md.team_entrypoint
                if in_team
                else md.entrypoint
            )
            try:
                if not path.read_text(encoding="utf-8", errors="replace").strip():
                    continue  # emptied: a forgotten memory needs no pointer
                if index not in indexes:
                    indexes[index] = index.read_text(encoding="utf-8", errors="replace")
            except OSError:
                return False
            # Both resolved: a memory directory reached through a symlink has its files
            # written at their real paths, and its index links them relative to itself.
            real_parent = os.path.realpath(index.parent)
            link = os.path.relpath(os.path.realpath(path), real_parent).replace(os.sep, "/")
            if f"]({link})" not in indexes[index]:
                return False
        return True
