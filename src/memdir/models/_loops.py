"""Provider clients kept per event loop.

An async HTTP client's connection pool belongs to the event loop that opened its
connections: reused from another loop, a pooled connection fails or hangs. A host may
reach one model from several loops — its own, the extractor's background thread, a new
``asyncio.run`` per turn — so a model that built its client itself hands each loop a
client of its own, and closes a loop's client when asked on that loop.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from typing import Generic, Protocol, TypeVar

__all__ = ["ClientPerLoop", "LoopClients"]


class _Closable(Protocol):
    def close(self) -> Awaitable[None]: ...


C = TypeVar("C", bound=_Closable)


class LoopClients(Generic[C]):
    """The client for the running loop: ``first`` for the first loop that asks.

    With ``factory`` None the client was given by the caller, who owns it: every loop
    gets it, and :meth:`aclose` leaves it open.
    """

    def __init__(self, first: C, factory: Callable[[], C] | None) -> None:
        self.first = first
        self._factory = factory
        self._home: asyncio.AbstractEventLoop | None = None
        self._others: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, C] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> C:
        """The running loop's client (made on first use)."""
        loop = asyncio.get_running_loop()
        if self._factory is None or self._home in (None, loop):
            self._home = loop
            return self.first
        client = self._others.get(loop)
        if client is None:
            client = self._others[loop] = self._factory()
        return client

    async def aclose(self) -> None:
        """Close the running loop's client; the next loop to ask starts with a fresh one."""
        if self._factory is None:
            return
        loop = asyncio.get_running_loop()
        client = self._others.pop(loop, None)
        if client is None and self._home is loop:
            client, self.first, self._home = self.first, self._factory(), None
        if client is not None:
            await client.close()


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
