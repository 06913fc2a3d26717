"""The host core: what every framework integration does the same way."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from memdir.errors import UsageError
from memdir.extract import ExtractConfig, MemoryExtractor, Notify, TurnContext
from memdir.extract import MemoryBackend as Backend
from memdir.fork import CacheSafeParams
from memdir.integrations._host._backend import default_backend
from memdir.integrations._host._client import (
    Endpoint,
    HostModel,
    HostModels,
    warm_ssl_contexts,
)
from memdir.integrations._host._requests import SentRequest, fork_params
from memdir.messages import AnyMessage
from memdir.models import Model, resolve_model
from memdir.models._choice import model_spec
from memdir.permissions import auto_mem_can_use_tool, memory_write_guard
from memdir.recall import (
    MemoryStamp,
    memory_change_notice,
    memory_prompt,
    memory_reminder,
    memory_stamp,
)
from memdir.store import MemoryDir, contains_secret, default_memory_dir, resolve_user_layer
from memdir.store._provenance import record_shown
from memdir.telemetry import Sink, emit
from memdir.tools import MemoryFiles, ToolContext, ToolError
from memdir.tools import Tool as MemdirTool

__all__ = ["HostCore", "HostTurn", "LoadedMemory", "Sessions"]

_log = logging.getLogger("memdir.integrations")

S = TypeVar("S")


@dataclass(frozen=True, kw_only=True)
class HostTurn:
    """A finished turn, as an adapter reports it to :meth:`HostCore.report`."""

    messages: Sequence[AnyMessage]
    """The conversation at the turn's end, final answer included (memdir messages, or a
    wire format :func:`memdir.messages.messages_from_native` reads)."""
    conversation: str | None = None
    """The framework's own id of the conversation (a session's id, a thread's, …); the
    backend keeps one cursor per id, across processes."""
    request: SentRequest | None = None
    """The host's last request as sent, when the adapter saw it: the fork's prefix."""
    endpoint: Endpoint | None = None
    """The host model's endpoint: the fork runs there, and so do standalone runs when
    memdir was given no model."""
    fallback: str | None = None
    """Why there is no ``request`` (for :attr:`HostCore.fallback_reason`)."""
    last_request_at: float | None = None
    is_subagent: bool = False
    cwd: str | None = None


@dataclass(frozen=True)
class LoadedMemory:
    """What a new conversation is shown of memory: the same for all its requests, so
    that they share one cached prefix."""

    instructions: str
    """memdir's memory instructions: the same text for the same settings (cacheable)."""
    index: str
    """The ``MEMORY.md`` index in a ``<system-reminder>``, as loaded when the
    conversation began."""
    stamp: MemoryStamp | None = None
    """The memory folder as it was when this conversation last looked (to tell when it
    changed)."""
    notice: str | None = None
    """Set once after the memory folder changed: a ``<system-reminder>`` telling the
    model that its loaded copy of the index is stale (see
    :func:`memdir.recall.memory_change_notice`). ``instructions`` and ``index`` stay as
    they were, for the cached prefix; an adapter adds the notice as a user message
    (``is_meta``) before the next request and keeps it in the conversation."""


class Sessions(Generic[S]):
    """An adapter's state per conversation, the least recently used let go past
    ``limit`` (state it can rebuild: a reader reads the conversation again)."""

    def __init__(self, factory: Callable[[], S], limit: int = 256) -> None:
        self._factory = factory
        self._limit = max(1, limit)
        self._items: OrderedDict[str | None, S] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, conversation: str | None) -> S:
        """The state of ``conversation``, made on first use (thread-safe)."""
        with self._lock:
            state = self._items.get(conversation)
            if state is None:
                state = self._items[conversation] = self._factory()
            self._items.move_to_end(conversation)
            while len(self._items) > self._limit:
                self._items.popitem(last=False)
            return state

    def peek(self, conversation: str | None) -> S | None:
        with self._lock:
            return self._items.get(conversation)

    def __len__(self) -> int:
        return len(self._items)


class HostCore:
    """One integration object's memory: its backend, models, sessions and policies.

    ``memory_dir``: default ``$MEMDIR_DIR``, else Claude Code's folder for ``cwd``.
    ``model``: memdir's model for standalone runs (a :class:`~memdir.models.Model` or a
    spec, with ``base_url``); default the host's own model on its endpoint (a client of
    memdir's own with the host's settings), else ``$MEMDIR_MODEL``, else the default model
    of the provider whose key is set (never the offline engine unless named). A fork
    always runs on the host's model. ``backend``: where turns go (default: extraction in
    this process, at most ``max_conversations`` conversations held at once).
    """

    def __init__(
        self,
        memory_dir: MemoryDir | str | os.PathLike[str] | None = None,
        model: Model | str | None = None,
        *,
        config: ExtractConfig | None = None,
        sink: Sink | None = None,
        notify: Notify | None = None,
        cwd: str | os.PathLike[str] | None = None,
        base_url: str | None = None,
        backend: Backend | None = None,
        max_conversations: int = 256,
    ) -> None:
        self.cwd = str(cwd) if cwd is not None else None
        if memory_dir is None:
            memory_dir = default_memory_dir(self.cwd or os.getcwd())
        self.memory_dir = memory_dir if isinstance(memory_dir, MemoryDir) else MemoryDir(memory_dir)
        self.config = config or ExtractConfig()
        self.sink = sink
        self.notify = notify
        self.model: Model | None = (
            resolve_model(model, base_url=base_url) if isinstance(model, str) else model
        )
        self.host_models = HostModels()
        self.fallback_reason: str | None = None
        """Why the last turn reported carried no request to fork (None when it did)."""
        self._standalone: OrderedDict[str | None, Model] = OrderedDict()
        self._fallback_model: Model | None = None
        self._backend = backend or default_backend(
            self.memory_dir,
            self._standalone_model,
            self.config,
            sink,
            max_conversations=max_conversations,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loaded: OrderedDict[str | None, LoadedMemory] = OrderedDict()
        self._lock = threading.Lock()
        """Guards the per-conversation maps: sync hosts report from several threads."""
        self._max_conversations = max(1, max_conversations)
        _warm_up()

    @property
    def backend(self) -> Backend:
        return self._backend

    def extractor(self, conversation: str | None) -> MemoryExtractor | None:
        """The in-process extractor of ``conversation``, while the backend holds it."""
        find = getattr(self._backend, "extractor", None)
        found = find(conversation) if callable(find) else None
        return found if isinstance(found, MemoryExtractor) else None

    # --- the host's model ---------------------------------------------------------------------

    def host_model(self, endpoint: Endpoint) -> HostModel:
        """memdir's model on the host's endpoint (its client built in a thread now, so
        call this as soon as the endpoint is known: the turn's end then waits for
        nothing)."""
        return self.host_models.get(endpoint)

    def _standalone_model(self, turn: TurnContext) -> Model:
        if self.model is not None:
            return self.model
        with self._lock:
            known = self._standalone.get(turn.session_id)
        if known is not None:
            return known
        if self._fallback_model is None:
            # Never the offline engine unasked: a run with no model fails, saying why.
            spec = model_spec(None)
            if spec is None:
                raise UsageError(
                    "no model for memdir's own run (the host's model cannot be reached "
                    "through memdir): pass model=..., or set MEMDIR_MODEL or a provider's "
                    "key; model='offline' is the rule-based engine"
                )
            self._fallback_model = resolve_model(spec)
        return self._fallback_model

    # --- one turn -------------------------------------------------------------------------------

    def report(self, turn: HostTurn | Callable[[], HostTurn | None]) -> None:
        """Hand a finished turn to the backend; never raises (a failure becomes an
        ``extract.error`` event). ``turn`` may be a function that builds it, so that a
        failure while reading the host's state is reported the same way."""
        try:
            built = turn() if callable(turn) else turn
            if built is None:
                return
            self.submit(built)
        except Exception as exc:  # the host's turn must never fail because of memory
            self.failed(exc)

    def failed(self, exc: BaseException) -> None:
        """The error policy: a turn that could not be reported is logged and becomes an
        ``extract.error`` event, in every integration."""
        _log.warning("memdir: turn not reported: %s: %s", type(exc).__name__, exc)
        emit(
            self.sink,
            "extract.error",
            duration_ms=0,
            error_type=type(exc).__name__,
            reason=str(exc).splitlines()[0] if str(exc) else "",
        )

    def submit(self, turn: HostTurn) -> None:
        """:meth:`report` that raises: for an adapter that tries another reading of the
        turn when the backend cannot read this one (a :class:`TypeError`)."""
        params: CacheSafeParams | None = None
        fallback = turn.fallback
        host = self.host_model(turn.endpoint) if turn.endpoint is not None else None
        if host is not None:
            with self._lock:
                self._standalone[turn.conversation] = host
                self._standalone.move_to_end(turn.conversation)
                while len(self._standalone) > self._max_conversations:
                    self._standalone.popitem(last=False)
        if turn.request is not None and host is not None:
            params, fallback = fork_params(host, turn.request)
        elif turn.request is not None and host is None:
            fallback = "the host's endpoint is not known"
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        request = turn.request
        report = TurnContext(
            messages=tuple(turn.messages),
            params=params,
            is_subagent=turn.is_subagent,
            cwd=turn.cwd or self.cwd,
            last_request_at=turn.last_request_at
            if turn.last_request_at is not None
            else (request.sent_at if request is not None else None),
            session_id=turn.conversation,
        )
        self._backend.on_turn_end(report, notify=self.notify)
        self.fallback_reason = fallback
        if fallback is not None:
            _log.debug("memdir: standalone run: %s", fallback)

    # --- memory loaded back ---------------------------------------------------------------------

    def load_memory(self, conversation: str | None) -> LoadedMemory | None:
        """What ``conversation`` is shown of memory: read once, when it first asks, then
        the same for all its requests (blocking: reads ``MEMORY.md``; see
        :meth:`aload_memory`). None when it cannot be read: the host's request goes on
        without it (logged), never fails for it.

        Each later call compares the memory folder with how it was at the last look: the
        first call after it changed returns the same instructions and index with a
        :attr:`LoadedMemory.notice` for the model (once per change)."""
        with self._lock:
            loaded = self._loaded.get(conversation)
        earlier = loaded is not None
        if loaded is None:
            config = self.config
            try:
                # Stamped before the index is read: a save during the read is reported.
                stamp = memory_stamp(self.memory_dir)
                # The user layer, when on, is loaded before the project's index, which wins.
                user = resolve_user_layer(config.user_layer)
                loaded = LoadedMemory(
                    instructions=memory_prompt(
                        self.memory_dir,
                        team=config.team,
                        skip_index=config.skip_index,
                        format=config.memory_format,
                        user_dir=user,
                    ),
                    index=memory_reminder(self.memory_dir, team=config.team, user_dir=user),
                    stamp=stamp,
                )
            except Exception as exc:
                _log.warning("memdir: memory not shown: %s: %s", type(exc).__name__, exc)
                return None
            if conversation is not None:
                # What `memdir why` reads back for this conversation: the index it was shown.
                record_shown(
                    self.memory_dir,
                    conversation,
                    "loaded",
                    [self.memory_dir.entrypoint],
                    cut="only part of it was loaded" in loaded.index.lower(),
                )
        with self._lock:
            loaded = self._loaded.setdefault(conversation, loaded)
            self._loaded.move_to_end(conversation)
            while len(self._loaded) > self._max_conversations:
                self._loaded.popitem(last=False)
        return self._noticed(conversation, loaded) if earlier else loaded

    async def aload_memory(self, conversation: str | None) -> LoadedMemory | None:
        """:meth:`load_memory` in a worker thread (it reads the folder every time)."""
        return await asyncio.to_thread(self.load_memory, conversation)

    def _noticed(self, conversation: str | None, loaded: LoadedMemory) -> LoadedMemory:
        """``loaded``, with a notice when the memory folder changed since its stamp."""
        if loaded.stamp is None:
            return loaded
        try:
            now = memory_stamp(self.memory_dir)
            notice = memory_change_notice(self.memory_dir, loaded.stamp, now)
        except Exception as exc:  # a hint: the request goes on without it
            _log.debug("memdir: memory changes not checked: %s: %s", type(exc).__name__, exc)
            return loaded
        if notice is None:
            return loaded
        updated = replace(loaded, stamp=now)
        with self._lock:
            if self._loaded.get(conversation) is not loaded:
                # Another request of the conversation took this change and reports it.
                return self._loaded.get(conversation) or loaded
            self._loaded[conversation] = updated
        return replace(updated, notice=notice)

    # --- the memory tools -----------------------------------------------------------------------

    def tool_context(self, conversation: str | None) -> ToolContext:
        """The context memdir's tools run in for the host's agent: memory writes checked
        by the credential guard, memory files stamped with the conversation."""
        md = self.memory_dir
        return ToolContext(
            write_guard=memory_write_guard(
                md, allow_private_secrets=self.config.allow_private_secrets
            ),
            memory_files=MemoryFiles(
                memory_dir=md, format=self.config.memory_format, session_id=conversation
            ),
        )

    async def run_tool(
        self,
        tool: MemdirTool,
        tool_input: dict[str, object],
        *,
        cwd: str,
        conversation: str | None,
    ) -> str:
        """One call of memdir's ``Read``/``Write``/``Edit`` by the host's agent, inside
        the memory directory only, past the memory agent's gate. Returns the text for
        the model (a refusal or an error is text too)."""
        md = self.memory_dir
        path = tool_input.get("file_path")
        if not md.is_memory_path(path, cwd=cwd):
            return f"{tool.name} is limited to files inside the memory directory {md.root}."
        if _hidden_part(md, str(path), cwd):
            # memdir's own bookkeeping (.memdir/: cursors, logs, the trash) is not memory.
            return f"{tool.name} is limited to memory files; hidden names are not memories."
        gate = auto_mem_can_use_tool(
            md, cwd=cwd, allow_private_secrets=self.config.allow_private_secrets, sink=self.sink
        )
        decision = await gate(tool, tool_input)
        if not decision.allowed:
            return decision.message or f"{tool.name} is not allowed here."
        try:
            await asyncio.to_thread(md.ensure)
            output = await tool.run(tool_input, self.tool_context(conversation))
        except ToolError as exc:
            return str(exc)
        return output.content

    # --- the end --------------------------------------------------------------------------------

    async def drain(self, timeout: float = 60.0) -> None:  # noqa: ASYNC109 (the contract)
        """Wait up to ``timeout`` seconds for the memory runs still going."""
        await self._backend.drain(timeout)

    def drain_sync(self, timeout: float = 60.0) -> None:
        """:meth:`drain` for a host whose loop stays between calls (``run_sync``,
        ``invoke``): runs that loop until its memory runs end, then waits for the rest.

        memdir's connections on that loop are closed too: such a host closes the loop
        without shutting it down, which would leave them open; a later run opens new
        ones."""
        deadline = time.monotonic() + timeout
        loop = self._loop
        if loop is not None and not loop.is_closed() and not loop.is_running():
            loop.run_until_complete(self._backend.drain(timeout))
            loop.run_until_complete(self.host_models.aclose())
        self._backend.drain_sync(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        """Stop the backend's background work (threads of sync hosts)."""
        self._backend.close()


_warmed = threading.Event()


def _warm_up() -> None:
    """Once per process, in a worker thread, ahead of the host's first turn: the SSL
    context memdir's clients share, and the credential scanner's expressions (the first
    memory write scans its text). Made later, on the host's loop or beside it, either
    would stall the loop (the memory runs are tasks on it)."""
    if _warmed.is_set():
        return
    _warmed.set()
    threading.Thread(target=_warm, name="memdir-warm-up", daemon=True).start()


def _warm() -> None:
    warm_ssl_contexts()
    contains_secret("memdir warm-up")


def _hidden_part(md: MemoryDir, path: str, cwd: str) -> bool:
    """Whether ``path``, inside the memory directory, goes through a hidden name there."""
    from pathlib import Path

    full = os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))
    try:
        relative = Path(full).relative_to(md.root)
    except ValueError:
        relative = Path(os.path.relpath(os.path.realpath(full), os.path.realpath(md.root)))
    return any(part.startswith(".") for part in relative.parts)
