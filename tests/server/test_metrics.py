"""``GET /metrics``: Prometheus' text exposition of the team service — requests by route
template and status (the event loop's fast reads included), production entries by verdict per
target, records by state, verify and fetch durations — for a reader's token, or anyone with
``--public-metrics``. Parsed with prometheus-client's own parser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import PASSING, add_synthetic, record_of_files, record_run, stored
from tests.server.conftest import Served, serving

MODEL = "rules/alpha"


def _samples(response: httpx.Response) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def _value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_count_requests_and_the_registrys_state(
    served: Served, tokens: dict[str, str]
) -> None:
    registry = served.registry
    production, failing, held = (add_synthetic(registry, i) for i in (1, 2, 3))
    record_run(registry, production)
    registry.promote(production, "cpu", why="v1")
    record_run(registry, failing, outcomes={**PASSING, "gguf-cpu-smoke": "fail"})
    registry.hold(held, "incident")
    sha = stored(registry).files([production])[production][0].sha256
    reader = served.client(tokens["reader"])
    for _ in range(3):
        assert reader.get(f"/api/v1/gate?model={MODEL}&target=cpu&sha256={sha}").status_code == 200
    assert reader.get(f"/api/v1/records/{production}").status_code == 200
    assert reader.get("/api/v1/records/r_ffffffffffff").status_code == 404
    assert reader.get("/no/such/page/12345").status_code == 404

    samples = _samples(reader.get("/metrics"))
    requests = "modelreg_http_requests_total"
    assert _value(samples, requests, route="/api/v1/gate", method="GET", status="200") == 3
    record_route = "/api/v1/records/{record_id}"
    assert _value(samples, requests, route=record_route, method="GET", status="200") == 1
    assert _value(samples, requests, route=record_route, method="GET", status="404") == 1
    # A path that matches no route is one series, whatever the path.
    assert _value(samples, requests, route="unmatched", method="GET", status="404") == 1
    assert not any("12345" in str(labels) for _, labels in samples)
    latency = "modelreg_http_request_duration_seconds_count"
    assert _value(samples, latency, route="/api/v1/gate", method="GET") == 3
    assert _value(samples, "modelreg_production_entries", target="cpu", verdict="deployable") == 1
    assert _value(samples, "modelreg_production_entries", target="cpu", verdict="stale") == 0
    assert _value(samples, "modelreg_records", state="active") == 2
    assert _value(samples, "modelreg_records", state="held") == 1
    assert _value(samples, "modelreg_records", state="retired") == 0

    # The verdict follows the registry: held production counts as held from the next scrape.
    registry.hold(production, "incident")
    samples = _samples(reader.get("/metrics"))
    assert _value(samples, "modelreg_production_entries", target="cpu", verdict="held") == 1
    assert _value(samples, "modelreg_production_entries", target="cpu", verdict="deployable") == 0


def test_metrics_need_a_reader_unless_public(served: Served, db_url: str) -> None:
    refused = served.client().get("/metrics")
    assert refused.status_code == 401  # a scraper gets a status, never the sign-in page
    assert refused.headers["content-type"].startswith("application/json")
    assert served.client("mr_not_a_token").get("/metrics").status_code == 401
    with serving(db_url, public_metrics=True) as public:
        assert public.client().get("/metrics").status_code == 200
        # Only the metrics are public: the API still needs a token.
        assert public.client().get(f"/api/v1/status?model={MODEL}").status_code == 401


def test_fetch_and_verify_durations_are_histograms_of_this_process(
    served: Served, tokens: dict[str, str], tmp_path: Path
) -> None:
    """The server runs in this process (a thread): a real fetch here is one it counts."""
    from modelreg import runmetrics
    from modelreg.locations import file_url

    registry = served.registry
    files = {"m.gguf": b"w" * 1000}
    record = record_of_files(registry, files)
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "m.gguf").write_bytes(files["m.gguf"])
    registry.locate(record, [file_url(tmp_path / "copy")])
    reader = served.client(tokens["reader"])
    before = _samples(reader.get("/metrics"))
    registry.fetch(record, tmp_path / "out")
    after = _samples(reader.get("/metrics"))
    count = "modelreg_fetch_duration_seconds_count"
    assert _value(after, count, outcome="fetched") == _value(before, count, outcome="fetched") + 1
    inf = _value(after, "modelreg_fetch_duration_seconds_bucket", outcome="fetched", le="+Inf")
    assert inf >= 1
    runmetrics.observe("modelreg_verify_duration_seconds", 3.0, target="cpu", verdict="deployable")
    samples = _samples(reader.get("/metrics"))
    bucket = "modelreg_verify_duration_seconds_bucket"
    labels = {"target": "cpu", "verdict": "deployable"}
    assert _value(samples, bucket, **labels, le="2.5") < _value(samples, bucket, **labels, le="5.0")
