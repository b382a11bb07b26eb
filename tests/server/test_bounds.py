"""The team service over a manifest that names 2,147,483,648 layers: POST /api/v1/records
refuses it (422, the field and its limit named), and a record stored before the bound existed
is fitted by GET /api/v1/fit in one request's time (it took 16.9 GB)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx

from modelreg.schemas.manifest import Manifest
from tests.helpers import synthetic_manifest
from tests.server.conftest import Served

Clients = Callable[[str | None], httpx.Client]
LAYERS = 2_147_483_648


def _hostile(i: int) -> dict:  # type: ignore[type-arg]
    data = synthetic_manifest(i).model_dump(mode="json")
    data["architecture"] |= {
        "block_count": LAYERS,
        "head_count_kv": 4,
        "key_length": 128,
        "context_length": 4096,
    }
    return data


def test_a_manifest_beyond_a_limit_is_refused_at_the_door(
    served: Served, client_of: Clients
) -> None:
    response = client_of("verifier").post("/api/v1/records", json={"manifest": _hostile(1)})
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert "architecture.block_count: 2,147,483,648 is beyond the limit: 0 to 65,536" in message
    assert served.registry.records().records == []


def test_a_record_stored_before_the_bound_is_fitted_in_one_requests_time(
    served: Served, client_of: Clients
) -> None:
    stored = Manifest.model_validate(_hostile(2), context={"stored": True})
    record, _ = served.registry.store.add(stored, Path("."), "admin", {"from": "test"})
    start = time.perf_counter()
    response = client_of("reader").get(
        "/api/v1/fit", params={"record": record.id, "target": "cpu", "context": 4096}
    )
    assert time.perf_counter() - start < 10
    assert response.status_code == 200, response.text
    (kv,) = [line for line in response.json()["lines"] if line["key"] == "kv_cache"]
    assert kv["sizes"]["bytes"] == 2 * LAYERS * 4 * 128 * 4096 * 2


def test_fit_over_http_weighs_a_what_if_and_says_it_in_the_apis_words(
    served: Served, client_of: Clients
) -> None:
    """Issue 42 item 6 over HTTP: ``bits`` / ``quant`` as for ``modelreg fit``; a refusal names
    the API's parameters (``bits``), not the CLI's flags, and Python's names them as its own."""
    import pytest

    from modelreg.errors import InvalidInput

    record = served.registry.add_manifest(synthetic_manifest(3).model_dump(mode="json"))
    ref = record.record.record_id
    reader = client_of("reader")
    answer = reader.get("/api/v1/fit", params={"record": ref, "target": "cpu", "quant": "Q8_0"})
    assert answer.status_code == 200, answer.text
    what_if = answer.json()["what_if"]
    assert what_if["quant"] == "Q8_0" and what_if["bits"] == 8.5
    (weights,) = [line for line in answer.json()["lines"] if line["key"] == "weights"]
    assert "what-if" in weights["note"]

    both = reader.get(
        "/api/v1/fit", params={"record": ref, "target": "cpu", "bits": 4, "quant": "Q8_0"}
    )
    assert both.status_code == 422, both.text
    assert both.json()["error"]["message"] == "give bits or quant, not both"
    unknown = reader.get("/api/v1/fit", params={"record": ref, "target": "cpu", "quant": "Q4_Z"})
    assert unknown.status_code == 422 and "quant 'Q4_Z' is not a llama.cpp" in unknown.text
    for bad in ({"bits": 0}, {"bits": 33}, {"bits": "nan"}, {"quant": "Q4;rm"}):
        refused = reader.get("/api/v1/fit", params={"record": ref, "target": "cpu", **bad})
        assert refused.status_code == 422, (bad, refused.text)

    with pytest.raises(InvalidInput, match="give `bits` or `quant`, not both"):
        served.registry.fit(ref, "cpu", bits=4, quant="Q8_0")
