"""Provider clients kept per event loop.

An async HTTP client's connection pool belongs to the event loop that opened its
connections: reused from another loop, a pooled connection fails or hangs. A host may
reach one model from several loops — its own, the extractor's background thread, a new
``asyncio.run`` per turn — so a model that built its client itself hands each loop a
client of its own. A loop's client is closed by :meth:`LoopClients.aclose` on that loop,
or by the loop's own shutdown when ``asyncio.run`` (or an ``asyncio.Runner``) ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Generic, Protocol, TypeVar

__all__ = ["ClientPerLoop", "LoopClients"]


class _Closable(Protocol):
    def close(self) -> Awaitable[None]: ...


C = TypeVar("C", bound=_Closable)
_Watch = AsyncGenerator[None, None]


class LoopClients(Generic[C]):
    """The client for the running loop: ``first`` for the first loop that asks.

    With ``factory`` None the client was given by the caller, who owns it: every loop
    gets it, and :meth:`aclose` leaves it open. Safe to use from several threads.
    """

    def __init__(self, first: C, factory: Callable[[], C] | None) -> None:
        self.first = first
        self._factory = factory
        self._lock = threading.Lock()
        self._home: asyncio.AbstractEventLoop | None = None
        self._others: dict[asyncio.AbstractEventLoop, C] = {}
        # Per loop with a client, an async generator parked at its first ``yield``. The
        # loop's shutdown (``shutdown_asyncgens``, run by ``asyncio.run`` while the loop
        # still runs) closes it, and its ``finally`` closes that loop's client. Unlike a
        # task, it never shows in ``asyncio.all_tasks()``.
        self._watches: dict[asyncio.AbstractEventLoop, tuple[object, _Watch]] = {}

    def get(self) -> C:
        """The running loop's client (made on first use)."""
        loop = asyncio.get_running_loop()
        if self._factory is None:
            return self.first
        with self._lock:
            stale = self._forget_closed_loops()
            if self._home is loop:
                client = self.first
            elif self._home is None:
                # A loop that already has a client of its own keeps it as it becomes home.
                own = self._others.pop(loop, None)
                if own is not None:
                    self.first = own
                self._home, client = loop, self.first
            elif loop in self._others:
                client = self._others[loop]
            else:
                client = self._others[loop] = self._factory()
            watch = None
            if loop not in self._watches:
                token = object()
                watch = self._watch(loop, token)
                self._watches[loop] = (token, watch)
        for old in stale:
            _finish(old)
        if watch is not None:
            # One step parks the generator at its yield; the loop's hook now tracks it.
            with contextlib.suppress(StopIteration):
                watch.asend(None).send(None)
        return client

    async def aclose(self) -> None:
        """Close the running loop's client; the next loop to ask starts with a fresh one."""
        if self._factory is None:
            return
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._watches.pop(loop, None)
        if entry is not None:
            _finish(entry[1])
        await self._close_client(loop)

    async def _close_client(self, loop: asyncio.AbstractEventLoop) -> None:
        assert self._factory is not None
        with self._lock:
            client = self._others.pop(loop, None)
            if client is None and self._home is loop:
                client, self.first, self._home = self.first, self._factory(), None
        if client is not None:
            await client.close()

    async def _watch(self, loop: asyncio.AbstractEventLoop, token: object) -> _Watch:
        try:
            yield
        finally:
            with self._lock:
                entry = self._watches.get(loop)
                mine = entry is not None and entry[0] is token
                if mine:
                    del self._watches[loop]
            if mine and not loop.is_closed():
                await self._close_client(loop)

    def _forget_closed_loops(self) -> list[_Watch]:
        """Drop what belongs to loops closed without a shutdown; their watches to finish.

        Their connections cannot be closed any more: dropping the client lets the garbage
        collector release them. Called with the lock held.
        """
        assert self._factory is not None
        closed = {loop for loop in (*self._watches, *self._others) if loop.is_closed()}
        if self._home is not None and self._home.is_closed():
            closed.add(self._home)
            self.first, self._home = self._factory(), None
        stale = []
        for loop in closed:
            self._others.pop(loop, None)
            entry = self._watches.pop(loop, None)
            if entry is not None:
                stale.append(entry[1])
        return stale


def _finish(watch: _Watch) -> None:
    """Close a parked watch without a loop, so that it is not finalised later on one.

    Its entry is already gone, so its ``finally`` has nothing to do and awaits nothing.
    """
    with contextlib.suppress(StopIteration, RuntimeError):
        watch.aclose().send(None)


class ClientPerLoop(Generic[C]):
    """The ``client`` and ``aclose`` of a model built on :class:`LoopClients`."""

    _clients: LoopClients[C]

    @property
    def client(self) -> C:
        """The client of the first event loop that sent a request (or the one given).

        A model that built its client gives every other loop a client of its own: a
        connection pool cannot move between loops.
        """
        return self._clients.first

    async def aclose(self) -> None:
        """Close the connections this model holds for the running event loop.

        A client passed to the constructor stays open: it is the caller's to close.
        """
        await self._clients.aclose()
