"""A clock the test moves by hand, for the fake servers' cache lifetimes and anything else.

The fake servers decide on every request whether a cache entry has expired. On the real
clock a test of a five-minute lifetime would have to wait five minutes; on a
:class:`FakeClock` it calls :meth:`FakeClock.advance` instead.
"""

from __future__ import annotations

import math
import threading

__all__ = ["FakeClock"]


class FakeClock:
    """A monotonic clock in seconds that moves only when :meth:`advance` is called.

    Call it to read the time, as one calls ``time.monotonic``; pass it wherever memdir
    takes ``clock=`` (the fake servers, :class:`~memdir.extract.MemoryExtractor`)::

        clock = FakeClock()
        with FakeAnthropicServer(replies, clock=clock) as server:
            ...  # a request writes the cache
            clock.advance(301)  # five minutes and a second: the entry has expired

    Safe to read and move from several threads: the servers read it from their own.
    """

    def __init__(self, start: float = 0.0) -> None:
        if not math.isfinite(start):
            raise ValueError(f"a clock starts at a finite time, not {start!r}")
        self._now = float(start)
        self._lock = threading.Lock()

    def __call__(self) -> float:
        """The time now, in seconds."""
        with self._lock:
            return self._now

    @property
    def now(self) -> float:
        """The time now, in seconds (the same as calling the clock)."""
        return self()

    def advance(self, seconds: float) -> float:
        """Move the clock ``seconds`` forward and return the new time.

        A monotonic clock never goes back, so a negative (or not finite) step is refused
        with ValueError rather than letting a cache entry come back to life.
        """
        if not (math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f"a clock only moves forward by a finite step, not {seconds!r}")
        with self._lock:
            self._now += seconds
            return self._now

    def __repr__(self) -> str:
        return f"FakeClock(now={self.now!r})"
