"""A worker's reconnect loop: a life that ends by itself is never taken for a stop
request, and the backoff starts afresh only after a life that lasted."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")

from memdir.queue import _lifecycle
from memdir.queue._lifecycle import Supervisor, run_life


class _Connector:
    async def close_async(self) -> None:
        return None


class _SlowToUnwind:
    """A worker whose database went away and which takes longer to unwind than the
    life waits for it (a cancelled query on a silent server)."""

    def __init__(self, unwind: float) -> None:
        self.stopping = asyncio.Event()
        self.unwind = unwind

    async def run(self) -> None:
        await self.stopping.wait()
        await asyncio.shield(asyncio.sleep(self.unwind))

    def stop(self) -> None:
        self.stopping.set()


def test_a_life_left_behind_on_a_lost_database_is_not_a_stop_request() -> None:
    async def main() -> tuple[bool, bool]:
        supervisor = Supervisor(stop_timeout=0.4, backoff_base=0.01, backoff_max=0.02)
        lost = asyncio.Event()
        worker = _SlowToUnwind(unwind=2.5)  # past the 1.0 + 1.2 s the life waits
        worker.stop()
        lost.set()
        stopped = await run_life(worker, supervisor, lost, _Connector())  # type: ignore[arg-type]
        return stopped, supervisor.stopping.is_set()

    stopped, asked = asyncio.run(main())
    assert (stopped, asked) == (False, False)  # so the worker reconnects, not exits 0


def test_the_backoff_starts_afresh_only_after_a_life_that_lasted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    delays: list[float] = []

    async def fake_wait_for(awaitable: Any, timeout: float) -> None:  # noqa: ASYNC109 (its signature)
        delays.append(timeout)
        awaitable.close()
        raise TimeoutError

    monkeypatch.setattr(asyncio, "wait_for", fake_wait_for)

    async def main() -> None:
        supervisor = Supervisor(stop_timeout=10, backoff_base=0.2, backoff_max=2.0)
        for _ in range(5):  # each life fails right after it started
            supervisor.succeeded()
            await supervisor.wait_before_retry("LISTEN refused")
        supervisor.succeeded()
        # A life that lasted: it started longer ago than the steady time.
        assert supervisor._up_since is not None
        supervisor._up_since -= _lifecycle.STEADY_SECONDS + 1
        await supervisor.wait_before_retry("server restarted")

    asyncio.run(main())
    assert delays == [0.2, 0.4, 0.8, 1.6, 2.0, 0.2]
