"""Shared helpers: timing by best-of-N in one run, and where scratch files go."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

WORK = Path(__file__).resolve().parent / ".work"


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """Fastest wall time of ``repeat`` calls, in seconds (the least noisy figure)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def median_of(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    times.sort()
    return times[len(times) // 2]
