"""Nothing stored that cannot be read back (issue 22), through the real server on both
backends: a lone surrogate or JSON nested ~270 deep is refused with 422 and nothing written;
a row stored before the boundary breaks no read, and `db check` names and quarantines it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
from sqlalchemy import update

from modelreg.registry.tables import RecordRow, VerificationRow
from tests.helpers import PASSING, add_synthetic, record_run, stored, synthetic_manifest
from tests.server.conftest import Served

Clients = Callable[[str | None], httpx.Client]
POISON = "x\ud800"


def _post(client: httpx.Client, path: str, body: Any) -> httpx.Response:
    # json.dumps escapes the lone surrogate as \ud800: valid JSON text, an invalid string.
    return client.post(path, content=json.dumps(body), headers={"Content-Type": "application/json"})


def test_a_lone_surrogate_is_refused_at_every_door(served: Served, client_of: Clients) -> None:
    verifier = client_of("verifier")
    good = add_synthetic(served.registry, 1)
    manifest = synthetic_manifest(2, notes=[POISON])
    body = {"schema_version": 1, "record_id": manifest.record_id, "manifest": manifest.model_dump()}
    refused = _post(verifier, "/api/v1/records", body)
    assert refused.status_code == 422, refused.text  # before: 500, and the row was stored
    assert "lone surrogate" in refused.json()["error"]["message"]
    assert [r.record.record_id for r in served.registry.records().records] == [good]

    located = _post(verifier, f"/api/v1/records/{good}/locations", {"urls": ["s3://b/" + POISON]})
    assert located.status_code == 422, located.text

    now = "2026-01-01T00:00:00Z"
    deep: Any = "bottom"
    for _ in range(270):
        deep = [deep]
    for evidence in ({"deep": deep}, {"text": POISON}):
        run = {
            "target": "cpu",
            "host": "gpu-box-3",
            "fingerprint": {"llama-cpp-python": "0.3.36"},
            "checks": [
                {
                    "check": c,
                    "required": True,
                    "outcome": "pass",
                    "summary": "ok",
                    "evidence": evidence,
                    "started_at": now,
                    "finished_at": now,
                }
                for c in PASSING
            ],
        }
        uploaded = _post(verifier, f"/api/v1/records/{good}/runs", run)
        assert uploaded.status_code in (400, 422), uploaded.text
    reader = client_of("reader")
    assert reader.get("/api/v1/records").status_code == 200
    assert reader.get(f"/api/v1/records/{good}").status_code == 200
    assert reader.get(f"/api/v1/records/{good}/imported-runs").json()["runs"] == []


def test_a_bad_row_from_before_breaks_no_read_and_is_quarantined(
    served: Served, client_of: Clients, cli: Any
) -> None:
    registry = served.registry
    bad, good = add_synthetic(registry, 1), add_synthetic(registry, 2)
    record_run(registry, bad)
    manifest = registry.get(bad).manifest.model_dump(mode="json")
    manifest["notes"] = ["x\\ud800"]  # placeholder replaced below by the escaped surrogate
    text = json.dumps(manifest).replace("x\\\\ud800", "x\\ud800")
    deep = json.dumps({"deep": json.loads("[" * 270 + "1" + "]" * 270)})
    # Written around the boundary, as a row from before it would be.
    with registry.store.engine.begin() as c:
        c.execute(update(RecordRow).where(RecordRow.id == bad).values(manifest_json=text))
        c.execute(
            update(VerificationRow)
            .where(VerificationRow.record_id == bad)
            .values(evidence_json=deep)
        )
    reader = client_of("reader")
    listed = reader.get("/api/v1/records")
    assert listed.status_code == 200, listed.text
    assert {r["record"]["record_id"] for r in listed.json()["records"]} == {bad, good}
    shown = reader.get(f"/api/v1/records/{bad}")
    assert shown.status_code == 200, shown.text
    assert "\ufffd" in json.dumps(shown.json()["manifest"]["notes"], ensure_ascii=False)

    code, out, err = cli("--db", registry.url, "db", "check")
    assert code == 1 and f"records {bad} manifest_json" in out
    assert "verifications" in out and "nested deeper than 64" in out
    code, out, err = cli("--db", registry.url, "db", "check", "--quarantine")
    assert code == 0 and "quarantined" in err
    code, out, err = cli("--db", registry.url, "db", "check", "--json")
    assert code == 0 and json.loads(out)["bad"] == []
    kinds = [e.kind for e in stored(registry).events(registry.get(bad).model_id)]
    assert "db-quarantine" not in kinds  # registry-wide events carry no model
    assert cli("--db", registry.url, "show", bad)[0] == 0
