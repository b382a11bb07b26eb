"""``GET /metrics``: the team service in Prometheus' text exposition (prometheus-client).

- ``modelreg_http_requests_total{route,method,status}`` and
  ``modelreg_http_request_duration_seconds{route,method}`` (a histogram): every request,
  counted by the guard in front of the app (the event loop's fast reads too). ``route`` is the
  endpoint's path template (``/api/v1/records/{record_id}``), never the raw path: a scanner
  asking a million paths adds one series, ``unmatched``. ``method`` is one of the methods of
  RFC 9110 or ``other``: the HTTP parser accepts any token as a method, and a label per token
  let anyone grow the exposition without bound.
- ``modelreg_production_entries{target,verdict}``: production entries by their verdict now
  (deployable, stale, held, failing, uncounted, unverified) — from the same derivation
  ``status`` serves, at scrape time.
- ``modelreg_records{state}``: records by stored state (active, held, retired).
- ``modelreg_verify_duration_seconds{target,deployable}`` and
  ``modelreg_fetch_duration_seconds{outcome}``: verify and fetch runs made by this process
  (``modelreg.api``; the histograms exist in any process that imports prometheus-client).

Each app has its own registry of these (``CollectorRegistry``), so two apps in one process
(the tests) never share counts. With ``serve --workers N`` the request metrics are
prometheus-client's multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``, set by ``serve``): any
worker's ``/metrics`` answers the sum over all of them. Run metrics stay per process.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client import Counter as PromCounter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from modelreg import runmetrics

if TYPE_CHECKING:
    from starlette.types import Message, Scope, Send

    from modelreg.api import Registry

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
VERDICTS = ("deployable", "stale", "held", "failing", "uncounted", "unverified")
METHODS = frozenset(
    ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT")
)


class _RegistryState(Collector):
    """The registry's state, read at scrape time."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        entries = GaugeMetricFamily(
            "modelreg_production_entries",
            "Production entries (model, target) by their verdict now.",
            labels=["target", "verdict"],
        )
        counted: Counter[tuple[str, str]] = Counter()
        targets: set[str] = set()
        for entry in self.registry.status().entries:
            counted[(entry.target, entry.deployability.now)] += 1
            targets.add(entry.target)
        for target in sorted(targets):
            for verdict in VERDICTS:
                entries.add_metric([target, verdict], counted[(target, verdict)])
        yield entries
        records = GaugeMetricFamily(
            "modelreg_records", "Records by stored state.", labels=["state"]
        )
        for state, count in sorted(self.registry.record_counts().items()):
            records.add_metric([state], count)
        yield records


class Metrics:
    """The counters of one server, and the exposition of them and of the registry's state."""

    def __init__(self, registry: Registry) -> None:
        import os

        self.collectors = CollectorRegistry(auto_describe=True)
        shared = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        if shared:  # every worker's counts, from the files they write
            from prometheus_client import multiprocess

            multiprocess.MultiProcessCollector(self.collectors)  # type: ignore[no-untyped-call]
        own = None if shared else self.collectors
        self.requests = PromCounter(
            "modelreg_http_requests",
            "HTTP requests by route template, method and status.",
            ["route", "method", "status"],
            registry=own,
        )
        self.latency = Histogram(
            "modelreg_http_request_duration_seconds",
            "Time from a request's arrival to its response's last byte, by route and method.",
            ["route", "method"],
            buckets=_BUCKETS,
            registry=own,
        )
        self.collectors.register(_RegistryState(registry))
        self.collectors.register(runmetrics.collector())

    def exposition(self) -> bytes:
        return generate_latest(self.collectors)

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route, method, str(status)).inc()
        self.latency.labels(route, method).observe(seconds)


def route_of(scope: Scope) -> str:
    """The endpoint's path template once the app has routed ``scope``; ``unmatched``
    otherwise (a 404, or a request refused before routing is named by its path only when it
    is one of the fixed paths)."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    return scope.get("modelreg.route") or "unmatched"


def method_of(scope: Scope) -> str:
    """The request's method as a label: a method of RFC 9110 as it is, any other ``other``."""
    method = scope.get("method", "GET")
    return method if method in METHODS else "other"


def timed(
    metrics: Metrics, scope: Scope, send: Send
) -> tuple[Callable[[Message], Any], Callable[[], None]]:
    """A ``send`` that notes the response's status, and what to call once it is sent."""
    started = time.perf_counter()
    status = [500]

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            status[0] = int(message["status"])
        await send(message)

    def done() -> None:
        metrics.observe(route_of(scope), method_of(scope), status[0], time.perf_counter() - started)

    return sending, done
