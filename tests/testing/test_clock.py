"""FakeClock: a clock the test moves, safe to read and move from several threads."""

from __future__ import annotations

import math
import threading

import pytest

import memdir.testing
from memdir.testing import FakeClock


def test_it_reads_like_a_monotonic_clock_and_moves_only_when_told() -> None:
    clock = FakeClock()
    assert clock() == clock.now == 0.0
    assert clock.advance(299.5) == 299.5
    assert clock() == 299.5
    assert clock.advance(0) == 299.5
    assert FakeClock(start=1_000.0).now == 1_000.0
    assert "FakeClock" in memdir.testing.__all__


@pytest.mark.parametrize("step", [-1.0, -0.001, math.nan, math.inf])
def test_it_never_goes_back_nor_jumps_to_infinity(step: float) -> None:
    clock = FakeClock(10.0)
    with pytest.raises(ValueError, match="forward"):
        clock.advance(step)
    assert clock.now == 10.0


def test_it_refuses_a_start_that_is_not_finite() -> None:
    with pytest.raises(ValueError, match="finite"):
        FakeClock(math.nan)


def test_steps_from_several_threads_all_count() -> None:
    clock = FakeClock()
    start = threading.Barrier(8)

    def move() -> None:
        start.wait()
        for _ in range(1_000):
            clock.advance(1)
            assert clock() >= 0

    threads = [threading.Thread(target=move) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert clock.now == 8_000
