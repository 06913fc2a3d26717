"""The event loop that runs a synchronous host's extraction, on a thread of its own.

A host that reports turns from sync code has no loop for memdir's runs, so they go to
one on a daemon thread. A :class:`~memdir.MemoryExtractor` makes its own; an
:class:`~memdir.extract.InProcessBackend` gives one to all its conversations, so a sync
host with many conversations has one thread, and one model connection pool, not one per
conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterable

from memdir.models import Model

__all__ = ["BackgroundLoop"]


class BackgroundLoop:
    """An event loop on a daemon thread, started on first use, stopped by :meth:`stop`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._models: list[Model] = []
        """Hosts' models called on this loop: their connections here die with it."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop while it runs (None before the first use and after :meth:`stop`)."""
        return self._loop

    def start(self) -> asyncio.AbstractEventLoop:
        """The running loop, started if need be (again after a stop)."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="memdir-extractor", daemon=True
                )
                thread.start()
                self._loop = loop
                self._thread = thread
            return self._loop

    def note_model(self, model: Model) -> None:
        """Remember a host's model used on this loop (from the loop's thread), for
        :meth:`stop` to close what it holds here."""
        with self._lock:
            if asyncio.get_running_loop() is self._loop and all(
                m is not model for m in self._models
            ):
                self._models.append(model)

    def release(self, model: Model) -> None:
        """Let ``model`` close what it holds on this loop, without waiting (for a model
        nobody here uses any more; a later request opens a fresh connection)."""
        loop = self._loop
        aclose = getattr(model, "aclose", None)
        if loop is None or aclose is None:
            return
        with contextlib.suppress(RuntimeError):  # stopped meanwhile: nothing left to close
            asyncio.run_coroutine_threadsafe(_quietly(aclose), loop)

    def stop(self, models: Iterable[Model] = (), timeout: float = 5.0) -> None:
        """Cancel what still runs there, let ``models`` and the hosts' models close their
        connections on it, and stop the thread. Safe to call more than once."""
        with self._lock:
            loop, self._loop = self._loop, None
            thread, self._thread = self._thread, None
            used, self._models = self._models, []
        if loop is None or thread is None:
            return
        if thread.is_alive() and thread is not threading.current_thread():
            # Connections opened on that loop die with it: close them while it still runs.
            unique = {id(m): m for m in (*models, *used)}
            release = asyncio.run_coroutine_threadsafe(_release(unique.values()), loop)
            with contextlib.suppress(Exception):
                release.result(timeout)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()


async def _release(models: Iterable[Model]) -> None:
    """Stop the runs still on this loop, then let each model close what it holds here.

    The runs go first: one still going could open a connection after its model was
    released, and nothing could close that one once the loop has stopped.
    """
    current = asyncio.current_task()
    runs = [task for task in asyncio.all_tasks() if task is not current]
    for task in runs:
        task.cancel()
    if runs:
        await asyncio.wait(runs)
    for model in models:
        aclose = getattr(model, "aclose", None)
        if aclose is not None:
            await _quietly(aclose)


async def _quietly(aclose: Callable[[], Awaitable[object]]) -> None:
    with contextlib.suppress(Exception):
        await aclose()
