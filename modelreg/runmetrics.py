"""Durations of the verify and fetch runs this process made, for ``/metrics``.

Recorded by ``modelreg.api`` with no dependency (a few counters under a lock); the server
exposes them as Prometheus histograms (``modelreg.server.metrics``)."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator
from typing import Any

BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0)
_lock = threading.Lock()
# (metric, labels) -> [bucket counts..., +Inf count], sum
_series: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[list[int], list[float]]] = {}
HELP = {
    "modelreg_verify_duration_seconds": "verify runs made by this process, by target and verdict.",
    "modelreg_fetch_duration_seconds": "fetches made by this process, by outcome.",
}


def observe(metric: str, seconds: float, **labels: str) -> None:
    key = (metric, tuple(sorted(labels.items())))
    with _lock:
        counts, total = _series.setdefault(key, ([0] * (len(BUCKETS) + 1), [0.0]))
        counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        total[0] += seconds


def snapshot() -> dict[tuple[str, tuple[tuple[str, str], ...]], tuple[list[int], float]]:
    with _lock:
        return {key: (list(counts), total[0]) for key, (counts, total) in _series.items()}


def collector() -> Any:
    """A prometheus-client collector of these histograms (imported only by the server)."""
    from prometheus_client.core import HistogramMetricFamily
    from prometheus_client.registry import Collector

    class Runs(Collector):
        def collect(self) -> Iterator[Any]:
            taken = snapshot()
            for metric, text in HELP.items():
                names = sorted({k for (m, labels) in taken if m == metric for k, _ in labels})
                family = HistogramMetricFamily(metric, text, labels=names or None)
                for (m, labels), (counts, total) in sorted(taken.items()):
                    if m != metric:
                        continue
                    cumulative, buckets = 0, []
                    for bound, count in zip((*BUCKETS, float("inf")), counts, strict=True):
                        cumulative += count
                        buckets.append(
                            ("+Inf" if bound == float("inf") else str(bound), cumulative)
                        )
                    family.add_metric([v for _, v in labels], buckets, total)
                yield family

    return Runs()
