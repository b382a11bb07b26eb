"""The JSON API against a real uvicorn on 127.0.0.1, on SQLite and PostgreSQL: the same output
models as ``--json``, the deploy gate, roles and tokens, the error shape, body limits."""

from __future__ import annotations

import html
import json
import os
import socket
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

import modelreg
from modelreg.api import Registry
from tests.helpers import (
    PASSING,
    add_synthetic,
    key_pair,
    record_run,
    synthetic_manifest,
    synthetic_sha256,
)
from tests.server.conftest import Served, serving

MODEL = "rules/alpha"
REPO = Path(__file__).resolve().parents[2]
Clients = Callable[[str | None], httpx.Client]


def _production(registry: Registry) -> list[tuple[str, str, str]]:
    return [(e.model_id, e.target, e.record.record_id) for e in registry.status().entries]


def _two_releases(registry: Registry) -> tuple[str, str]:
    r1 = add_synthetic(registry, 1)
    r2 = add_synthetic(registry, 2)
    for r in (r1, r2):
        record_run(registry, r)
    registry.promote(r1, "cpu", why="v1", actor="admin")
    registry.promote(r2, "cpu", why="v2", actor="admin")
    return r1, r2


def _error(response: httpx.Response, status: int, code: str) -> dict[str, str]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    return dict(body["error"])


def test_reads_return_the_models_json_prints(served: Served, client_of: Clients) -> None:
    registry = served.registry
    r1, r2 = _two_releases(registry)
    registry.locate(r1, ["s3://models-bucket/alpha/v1"], actor="admin")
    reader = client_of("reader")
    expected = {
        "/api/v1/status": registry.status(),
        f"/api/v1/status?model={MODEL}&target=cpu": registry.status(MODEL, "cpu"),
        "/api/v1/records": registry.records(),
        f"/api/v1/records?model={MODEL}&state=active&deployable_on=cpu": registry.records(
            MODEL, deployable_on="cpu", state="active"
        ),
        f"/api/v1/records/{r1}": registry.show(r1),
        f"/api/v1/records/{r1[:8]}/locations": registry.locations(r1),
        f"/api/v1/history?model={MODEL}": registry.history(MODEL),
        f"/api/v1/diff?a={r1}&b={r2}": registry.diff(r1, r2),
        f"/api/v1/fit?record={r1}&target=cpu&context=512": registry.fit(r1, "cpu", context=512),
        "/api/v1/targets": registry.targets(),
        "/api/v1/matrix": registry.matrix(),
        f"/api/v1/rollback-plan?model={MODEL}&target=cpu": registry.rollback_plan(MODEL, "cpu"),
    }
    for path, output in expected.items():
        response = reader.get(path)
        assert response.status_code == 200, (path, response.text)
        assert response.json() == output.model_dump(mode="json"), path
    plan = reader.get(f"/api/v1/rollback-plan?model={MODEL}&target=cpu").json()
    assert plan["candidate"]["record"]["record_id"] == r1
    assert plan["candidate"]["locations"][1:] == ["s3://models-bucket/alpha/v1"]


def test_the_matrix_pages_through_models(served: Served, client_of: Clients) -> None:
    registry = served.registry
    r1, _ = _two_releases(registry)
    for i, model in enumerate(["other/beta", "other/gamma", "third/delta"], start=10):
        add_synthetic(registry, i, model_id=model)
    registry.hold(r1, "x", actor="admin")  # not production: does not change the matrix
    reader = client_of("reader")
    first = reader.get("/api/v1/matrix", params={"limit": 2}).json()
    assert first["models"] == ["other/beta", "other/gamma"] and first["total_models"] == 4
    assert first["cells"] == []
    second = reader.get("/api/v1/matrix", params={"limit": 2, "offset": 2}).json()
    assert second["models"] == ["rules/alpha", "third/delta"]
    (cell,) = second["cells"]
    assert (cell["model_id"], cell["target"], cell["now"]) == (MODEL, "cpu", "deployable")
    assert (cell["actor"], cell["why"], cell["action"]) == ("admin", "v2", "promote")
    other = reader.get("/api/v1/matrix", params={"q": "OTHER"}).json()
    assert other["models"] == ["other/beta", "other/gamma"] and other["total_models"] == 2
    literal = reader.get("/api/v1/matrix", params={"q": "%"}).json()
    assert literal["models"] == [] and literal["total_models"] == 0
    _error(reader.get("/api/v1/matrix", params={"limit": 0}), 422, "invalid_input")


def test_the_deploy_gate_is_200_only_for_the_deployable_production_digest(
    served: Served, client_of: Clients
) -> None:
    _, r2 = _two_releases(served.registry)
    reader = client_of("reader")
    good = synthetic_sha256(2)  # r2's file (synthetic digests)
    passed = reader.get("/api/v1/gate", params={"model": MODEL, "target": "cpu", "sha256": good})
    assert passed.status_code == 200
    assert passed.json()["passed"] is True and passed.json()["record_id"] == r2

    old = synthetic_sha256(1)
    wrong = reader.get("/api/v1/gate", params={"model": MODEL, "target": "cpu", "sha256": old})
    assert wrong.status_code == 409 and wrong.json()["passed"] is False
    assert f"is not a file of {r2}" in wrong.json()["reasons"][0]["message"]

    served.registry.hold(r2, "bad outputs in canary", actor="admin")
    held = reader.get("/api/v1/gate", params={"model": MODEL, "target": "cpu", "sha256": good})
    assert held.status_code == 409
    assert [r["code"] for r in held.json()["reasons"]] == ["held"]
    assert held.json()["reasons"][0]["message"] == "on hold: bad outputs in canary"

    malformed = reader.get(
        "/api/v1/gate", params={"model": MODEL, "target": "cpu", "sha256": "xyz"}
    )
    assert "query parameter 'sha256'" in _error(malformed, 422, "invalid_input")["message"]
    unknown = reader.get(
        "/api/v1/gate", params={"model": "rules/ALPHA", "target": "cpu", "sha256": good}
    )
    error = _error(unknown, 404, "model_not_found")
    assert error["message"] == "model 'rules/ALPHA' not found"
    assert "did you mean 'rules/alpha'?" in (error["hint"] or "")
    missing = reader.get("/api/v1/gate", params={"model": MODEL, "target": "cpu"})
    assert _error(missing, 422, "invalid_input")["message"] == (
        "query parameter 'sha256': Field required"
    )


def test_a_reader_cannot_promote_and_nothing_changes(served: Served, client_of: Clients) -> None:
    r1, r2 = _two_releases(served.registry)
    before = (_production(served.registry), len(served.registry.history(MODEL).events))
    response = client_of("reader").post(
        f"/api/v1/records/{r1}/promote", json={"target": "cpu", "why": "sneaky"}
    )
    error = _error(response, 403, "forbidden")
    assert error["message"] == "token 'reader-rita' has role reader, which may not decide"
    assert error["hint"] == "use a token with role releaser"
    verifier = client_of("verifier").post(
        "/api/v1/rollback", json={"model": MODEL, "target": "cpu", "why": "x"}
    )
    _error(verifier, 403, "forbidden")
    assert (_production(served.registry), len(served.registry.history(MODEL).events)) == before
    assert _production(served.registry) == [(MODEL, "cpu", r2)]


def test_the_token_name_is_the_actor_of_every_event(served: Served, client_of: Clients) -> None:
    r1, r2 = _two_releases(served.registry)
    releaser = client_of("releaser")
    rolled = releaser.post(
        "/api/v1/rollback", json={"model": MODEL, "target": "cpu", "why": "incident 7"}
    )
    assert rolled.status_code == 200, rolled.text
    assert rolled.json()["applied"]["record_id"] == r1 and rolled.json()["held"] == r2
    again = releaser.post(
        "/api/v1/rollback", json={"model": MODEL, "target": "cpu", "why": "incident 7"}
    )
    assert again.status_code == 200 and again.json()["applied"] is None
    assert again.json()["message"].startswith("nothing changed: already rolled back")
    for body in ({}, {"why": ""}):  # release says why, as hold and retire do
        refused = releaser.post(f"/api/v1/records/{r2}/release", json=body)
        assert "'why'" in _error(refused, 422, "invalid_input")["message"]
    _error(releaser.post(f"/api/v1/records/{r2}/release"), 422, "invalid_input")
    released = releaser.post(f"/api/v1/records/{r2}/release", json={"why": "fixed"})
    assert released.status_code == 200 and released.json()["record"]["state"]["state"] == "active"
    retired = releaser.post(f"/api/v1/records/{r2}/retire", json={"why": "superseded"})
    assert retired.status_code == 200
    events = served.registry.history(MODEL).events
    mine = [(e.kind, e.actor, e.why) for e in events if e.actor == "releaser-rae"]
    assert mine == [
        ("rollback", "releaser-rae", "incident 7"),
        ("hold", "releaser-rae", f"rolled back from on cpu (to {r1}): incident 7"),
        ("release", "releaser-rae", "fixed"),
        ("retire", "releaser-rae", "superseded"),
    ]
    promote_held = releaser.post(f"/api/v1/records/{r2}/promote", json={"target": "cpu"})
    error = _error(promote_held, 409, "not_deployable")
    assert "retired: superseded" in error["message"]
    assert _production(served.registry) == [(MODEL, "cpu", r1)]


def test_promote_keeps_its_approval_and_a_relaxed_gate_needs_a_why(
    served: Served, client_of: Clients
) -> None:
    from datetime import UTC, datetime, timedelta

    record = add_synthetic(served.registry, 1)
    record_run(served.registry, record)
    releaser = client_of("releaser")
    refused = releaser.post(
        f"/api/v1/records/{record}/promote", json={"target": "cpu", "accept_relaxed_gate": True}
    )
    error = _error(refused, 422, "invalid_input")
    assert error["message"] == "accepting a relaxed gate needs a reason"
    due = (datetime.now(UTC) + timedelta(days=30)).date().isoformat()
    body = {"target": "cpu", "why": "v1", "owner": "kim", "limitations": ["English only"]}
    promoted = releaser.post(f"/api/v1/records/{record}/promote", json=body | {"retest_by": due})
    assert promoted.status_code == 200, promoted.text
    assert promoted.json()["approval"] == {
        "owner": "kim",
        "limitations": ["English only"],
        "retest_by": due,
        "retest_overdue": False,
    }
    status = client_of("reader").get("/api/v1/status", params={"model": MODEL})
    assert status.json()["entries"][0]["approval"]["owner"] == "kim"


def test_reads_need_a_token_unless_public_read(db_url: str) -> None:
    with serving(db_url) as served:
        response = served.client().get("/api/v1/status")
        error = _error(response, 401, "unauthorized")
        assert error["message"] == "this request needs a token"
        assert response.headers["www-authenticate"] == 'Bearer realm="modelreg"'
        bad = served.client("mr_not-a-token").get("/api/v1/status")
        assert _error(bad, 401, "unauthorized")["message"] == "unknown token"
        scheme = served.client().get("/api/v1/status", headers={"Authorization": "Basic eDp5"})
        assert "must be 'Bearer <secret>'" in _error(scheme, 401, "unauthorized")["message"]
    with serving(db_url, public_read=True) as served:
        record = add_synthetic(served.registry, 1)
        anonymous = served.client()
        assert anonymous.get("/api/v1/status").status_code == 200
        assert anonymous.get(f"/api/v1/records/{record}").status_code == 200
        write = anonymous.post(f"/api/v1/records/{record}/hold", json={"why": "x"})
        error = _error(write, 401, "unauthorized")
        assert error["message"] == "this request needs a token allowed to decide"
        assert served.registry.show(record).record.state.state == "active"
        # A token that is given is checked even when reads are public.
        assert served.client("mr_bogus").get("/api/v1/status").status_code == 401


def test_a_revoked_token_is_refused_from_its_next_request(
    served: Served, client_of: Clients
) -> None:
    reader = client_of("reader")
    assert reader.get("/api/v1/status").status_code == 200
    revoked = served.registry.revoke_token("reader-rita", actor="admin")
    assert revoked.changed and revoked.token.revoked_by == "admin"
    error = _error(reader.get("/api/v1/status"), 401, "unauthorized")
    assert error["message"].startswith("token 'reader-rita' was revoked on ")
    assert not served.registry.revoke_token("reader-rita", actor="admin").changed


def test_errors_have_one_json_shape(served: Served, client_of: Clients) -> None:
    record = add_synthetic(served.registry, 1)
    reader = client_of("reader")
    unknown = _error(reader.get("/api/v1/records/r_0123456789ab"), 404, "record_not_found")
    assert unknown["message"] == "record 'r_0123456789ab' not found"
    assert _error(reader.get("/api/v1/nowhere"), 404, "not_found")["message"] == (
        "no such page: /api/v1/nowhere"
    )
    not_allowed = reader.delete("/api/v1/status")
    assert _error(not_allowed, 405, "method_not_allowed")
    assert not_allowed.headers["allow"] == "GET"
    unknown_target = reader.get("/api/v1/status", params={"target": "inf3.nano"})
    assert _error(unknown_target, 404, "target_not_found")["message"] == (
        "target 'inf3.nano' not found"
    )
    for path, message in [
        (
            "/api/v1/records?state=bogus",
            "query parameter 'state': Input should be 'active', 'held' or 'retired'",
        ),
        (
            f"/api/v1/fit?record={record}&target=cpu&context=many",
            "query parameter 'context': Input should be a valid integer, unable to parse "
            "string as an integer",
        ),
        ("/api/v1/records/zz", "path parameter 'record_id': String should match pattern"),
        ("/api/v1/diff?a=/etc/passwd.json&b=r_0000", "'/etc/passwd.json' is not a record id"),
    ]:
        error = _error(reader.get(path), 422, "invalid_input")
        assert error["message"].startswith(message), (path, error)
        assert "\n" not in error["message"]
    releaser = client_of("releaser")
    not_json = releaser.post(
        f"/api/v1/records/{record}/hold",
        content=b"{not json",
        headers={"Content-Type": "application/json"},
    )
    assert _error(not_json, 422, "invalid_input")["message"].startswith("body field")
    extra = releaser.post(f"/api/v1/records/{record}/hold", json={"why": "x", "force": True})
    assert (
        "'force': Extra inputs are not permitted" in _error(extra, 422, "invalid_input")["message"]
    )
    assert served.registry.show(record).record.state.state == "active"


def test_oversized_bodies_are_refused_before_parsing(served: Served, client_of: Clients) -> None:
    verifier = client_of("verifier")
    manifest = synthetic_manifest(5).model_dump(mode="json")
    big = json.dumps({"manifest": manifest, "pad": "x" * (2 << 20)}).encode()
    response = verifier.post(
        "/api/v1/records", content=big, headers={"Content-Type": "application/json"}
    )
    error = _error(response, 413, "payload_too_large")
    assert error["message"] == (
        f"request body of {len(big)} bytes is over this server's limit of {1 << 20} bytes"
    )

    def chunks():  # no Content-Length: refused without reading it
        yield json.dumps({"manifest": manifest}).encode()

    chunked = verifier.post(
        "/api/v1/records", content=chunks(), headers={"Content-Type": "application/json"}
    )
    _error(chunked, 411, "length_required")
    assert served.registry.records().records == []


def test_a_manifest_from_inspect_is_added_with_its_locations(
    served: Served, client_of: Clients
) -> None:
    manifest = synthetic_manifest(7)
    body = {
        "schema_version": 1,
        "record_id": manifest.record_id,
        "manifest": manifest.model_dump(mode="json"),
        "locations": [
            "file://build-7/srv/out/alpha",
            "oci://registry.example/alpha@sha256:" + "a" * 64,
        ],
    }
    verifier = client_of("verifier")
    created = verifier.post("/api/v1/records", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["created"] is True
    assert created.json()["record"]["record_id"] == manifest.record_id
    assert created.json()["record"]["location"] == "/srv/out/alpha"
    assert created.json()["locations"] == body["locations"]
    again = client_of("releaser").post("/api/v1/records", json=body)
    assert again.status_code == 200 and again.json()["created"] is False
    (add,) = [e for e in served.registry.history("rules/alpha").events if e.kind == "add"]
    assert add.actor == "verifier-vic"

    edited = dict(body, manifest=synthetic_manifest(8).model_dump(mode="json"))
    error = _error(verifier.post("/api/v1/records", json=edited), 422, "invalid_input")
    assert error["message"].startswith(f"record_id '{manifest.record_id}' is not the id")
    secret_url = dict(body, locations=["s3://bucket/x?X-Amz-Signature=abc"])
    error = _error(verifier.post("/api/v1/records", json=secret_url), 422, "invalid_input")
    assert "query strings and fragments are not allowed" in error["message"]
    _error(client_of("reader").post("/api/v1/records", json=body), 403, "forbidden")
    assert [r.record.record_id for r in served.registry.records().records] == [manifest.record_id]


def test_an_unsigned_uploaded_run_is_kept_but_never_makes_a_record_deployable(
    served: Served, client_of: Clients
) -> None:
    record = add_synthetic(served.registry, 1)
    now = "2026-01-01T00:00:00Z"
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
                "started_at": now,
                "finished_at": now,
            }
            for c in PASSING
        ],
    }
    uploaded = client_of("verifier").post(f"/api/v1/records/{record}/runs", json=run)
    assert uploaded.status_code == 201, uploaded.text
    body = uploaded.json()
    assert body["run"]["origin"] == "uploaded" and body["run"]["counted"] is False
    assert body["run"]["origin_detail"] == "uploaded by verifier-vic"
    assert body["deployability"]["deployable"] is False
    (reason,) = body["deployability"]["reasons"]
    assert reason["code"] == "untrusted_evidence" and "only uploaded runs" in reason["message"]
    assert "cpu trusts no verifier keys" in body["message"]

    promote = client_of("releaser").post(
        f"/api/v1/records/{record}/promote", json={"target": "cpu"}
    )
    assert "only uploaded runs on cpu" in _error(promote, 409, "not_deployable")["message"]
    assert served.registry.status().entries == []
    listed = client_of("reader").get(f"/api/v1/records/{record}/imported-runs").json()
    assert [r["host"] for r in listed["runs"]] == ["gpu-box-3"]
    shown = client_of("reader").get(f"/api/v1/records/{record}").json()
    assert [r["origin"] for r in shown["runs"]] == ["uploaded"]
    (event,) = [e for e in served.registry.history(MODEL).events if e.kind == "upload-run"]
    assert event.actor == "verifier-vic" and event.summary.endswith("unsigned: never counted")
    # A card never says "verified on" from a run that does not count.
    assert "gpu-box-3" not in served.registry.card_render(record).text
    # Evidence is the verifier's job, not the releaser's.
    _error(client_of("releaser").post(f"/api/v1/records/{record}/runs", json=run), 403, "forbidden")
    unknown = dict(run, target="inf3.nano")
    _error(
        client_of("verifier").post(f"/api/v1/records/{record}/runs", json=unknown),
        404,
        "target_not_found",
    )
    assert len(served.registry.imported_runs(record).runs) == 1


def _signed_upload(
    registry: Registry,
    record_id: str,
    target: str,
    private: Path,
    outcomes: dict[str, str] | None = None,
) -> dict[str, object]:
    """What a target host sends: the run ``verify --sign-key`` made there (its checks, host,
    fingerprint) and the DSSE envelope over its statement (``attest --json``)."""
    from datetime import UTC, datetime

    from modelreg.fingerprint import runtime_fingerprint
    from modelreg.registry.rows import new_run_id
    from modelreg.schemas.verification import CheckResult, Outcome
    from modelreg.signing import load_private_key

    now = datetime.now(UTC)
    checks = [
        CheckResult(
            check=c, required=True, outcome=Outcome(o), summary=o, started_at=now, finished_at=now
        )
        for c, o in (outcomes or PASSING).items()
    ]
    fingerprint = runtime_fingerprint(registry.target(target), "llama.cpp")
    envelope, _ = registry._verify._sign_run(
        registry.get(record_id),
        target,
        new_run_id(),
        "edge-7",
        checks,
        fingerprint,
        load_private_key(private),
    )
    return {
        "target": target,
        "host": "edge-7",
        "fingerprint": fingerprint,
        "checks": [c.model_dump(mode="json") for c in checks],
        "envelope": envelope,
    }


def test_a_signed_upload_counts_only_when_a_trusted_key_vouches_for_exactly_it(
    served: Served, client_of: Clients, tmp_path: Path
) -> None:
    registry = served.registry
    private, public = key_pair(tmp_path, "edge-ci")
    stranger, _ = key_pair(tmp_path, "stranger")
    spec = tmp_path / "edge.yaml"
    spec.write_text(
        "targets:\n  edge:\n    hosts: ['edge-*']\n    memory_gib: 64\n"
        f"    trust: {{verifier_keys: ['{public}']}}\n"
    )
    registry.define_targets(spec, actor="admin")
    verifier = client_of("verifier")
    record = add_synthetic(registry, 1)

    def upload(payload: dict[str, object]) -> dict[str, object]:
        response = verifier.post(f"/api/v1/records/{record}/runs", json=payload)
        assert response.status_code == 201, response.text
        return dict(response.json())

    def refused(payload: dict[str, object], needle: str) -> None:
        response = verifier.post(f"/api/v1/records/{record}/runs", json=payload)
        assert needle in _error(response, 422, "invalid_input")["message"]

    # Signed by a key edge does not trust: refused, nothing stored.
    refused(_signed_upload(registry, record, "edge", stranger), "not trusted here")
    # Signed by the trusted key over a failure, uploaded as a pass: not this run's statement.
    forged = _signed_upload(registry, record, "edge", private, {**PASSING, "digest": "fail"})
    forged["checks"] = _signed_upload(registry, record, "edge", private)["checks"]
    refused(forged, "not the signed ones")
    # The signed outcomes with other answers shown: the evidence is signed too.
    dressed = _signed_upload(registry, record, "edge", private)
    checks = [dict(c) for c in dressed["checks"]]  # type: ignore[attr-defined]
    checks[-1]["evidence"] = {"generations": [{"prompt": "capital?", "output": "Paris"}]}
    refused(dict(dressed, checks=checks), "summaries or evidence")
    refused(dict(dressed, host="edge-8"), "signed on host")
    # Evidence the pages could not show is refused, signed or not.
    bad = dict(dressed, envelope=None, checks=[dict(checks[0], evidence={"generations": 5})])
    refused(bad, "must be a list of objects")
    assert registry.imported_runs(record).runs == []
    # An unsigned upload is history.
    body = upload(dict(dressed, envelope=None))
    assert body["run"]["counted"] is False and body["run"]["signed"] is False
    assert "no run on edge is signed" in body["deployability"]["reasons"][0]["message"]
    # The honest signed run counts: the record is deployable on edge and can be promoted.
    honest = _signed_upload(registry, record, "edge", private)
    body = upload(honest)
    assert body["run"]["counted"] is True and body["run"]["signed_by"]
    assert body["deployability"]["deployable"] is True
    promoted = client_of("releaser").post(
        f"/api/v1/records/{record}/promote", json={"target": "edge"}
    )
    assert promoted.status_code == 200, promoted.text
    listed = client_of("reader").get(f"/api/v1/records/{record}/imported-runs").json()
    assert [r["counted"] for r in listed["runs"]].count(True) == 1
    # The same signed run twice is refused, not stored again.
    refused(honest, "already stored")
    # An envelope that is not a signed verify run is refused at the door.
    junk = dict(honest, envelope={"payloadType": "x", "payload": "", "signatures": [{}]})
    refused(junk, "the run's envelope")
    odd_key = dict(honest, envelope=dict(honest["envelope"], signatures=[{"keyid": ["x"]}]))  # type: ignore[call-overload]
    refused(odd_key, "malformed")
    # On a target that trusts no keys, even a valid signed run is history only.
    on_cpu = upload(_signed_upload(registry, record, "cpu", private))
    assert on_cpu["run"]["counted"] is False and "trusts no verifier keys" in on_cpu["message"]
    assert registry.deployability(record, "edge").deployable


def test_locations_are_validated_and_shown_with_production(
    served: Served, client_of: Clients
) -> None:
    r1, _ = _two_releases(served.registry)
    verifier = client_of("verifier")
    added = verifier.post(
        f"/api/v1/records/{r1}/locations", json={"urls": ["hf://org/alpha@" + "b" * 40]}
    )
    assert added.status_code == 200 and added.json()["added"] == ["hf://org/alpha@" + "b" * 40]
    leaked = verifier.post(
        f"/api/v1/records/{r1}/locations", json={"urls": ["s3://user:pw@bucket/x"]}
    )
    assert "carries credentials" in _error(leaked, 422, "invalid_input")["message"]
    plan = client_of("reader").get(f"/api/v1/rollback-plan?model={MODEL}&target=cpu").json()
    # The copy add_synthetic leaves (the one a rollback can fetch from), then the added one.
    assert plan["candidate"]["locations"][1:] == ["hf://org/alpha@" + "b" * 40]
    assert plan["candidate"]["fetch_from"] == plan["candidate"]["locations"][0]


def test_version_handles_work_where_a_record_is_a_query_or_a_body_field(
    served: Served, client_of: Clients
) -> None:
    """The rollback answer's next steps name MODEL@vN: the API that gives them takes them."""
    r1, r2 = _two_releases(served.registry)
    reader, releaser = client_of("reader"), client_of("releaser")
    plan = reader.get(f"/api/v1/rollback-plan?model={MODEL}&target=cpu&to={MODEL}@v1")
    assert plan.status_code == 200, plan.text
    assert plan.json()["candidate"]["record"]["record_id"] == r1
    diff = reader.get(f"/api/v1/diff?a={MODEL}@v1&b={MODEL}@v2")
    assert diff.status_code == 200, diff.text
    assert diff.json()["same_model"] is True
    unknown = reader.get(f"/api/v1/rollback-plan?model={MODEL}&target=cpu&to={MODEL}@v9")
    _error(unknown, 404, "record_not_found")
    # x1 could be a promotion's label (none is given it); -x1 could be nothing.
    unlabelled = reader.get(f"/api/v1/rollback-plan?model={MODEL}&target=cpu&to={MODEL}@x1")
    assert "labelled 'x1'" in str(_error(unlabelled, 404, "record_not_found")["hint"])
    bad = reader.get(f"/api/v1/rollback-plan?model={MODEL}&target=cpu&to={MODEL}@-x1")
    _error(bad, 422, "invalid_input")
    done = releaser.post(
        "/api/v1/rollback",
        json={"model": MODEL, "target": "cpu", "why": "incident", "to": f"{MODEL}@v1"},
    )
    assert done.status_code == 200, done.text
    assert served.registry.status(MODEL).entries[0].record.record_id == r1
    assert r2 != r1


def test_the_service_records_a_posted_location_without_reading_it(
    served: Served, client_of: Clients
) -> None:
    """No remote call on a request thread of the team service (issue 44): a verifier's
    location at a loopback registry is recorded unread, not fetched by the service."""
    r1, _ = _two_releases(served.registry)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    url = f"oci://127.0.0.1:{port}/models/alpha@sha256:{'c' * 64}"
    with listener:
        added = client_of("verifier").post(f"/api/v1/records/{r1}/locations", json={"urls": [url]})
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing connected
    body = added.json()
    assert added.status_code == 200 and body["added"] == [url] and body["checked"] == []
    shown = {loc["url"]: loc for loc in body["locations"]}
    assert shown[url]["fetchable"] is False and shown[url]["checked"] is None


def test_accepted_connections_have_tcp_nodelay(served: Served, client_of: Clients) -> None:
    with client_of("reader") as reader:
        assert reader.get("/api/v1/targets").status_code == 200  # keep-alive: still open
        connections = list(served.server.server_state.connections)
        assert connections
        for protocol in connections:
            sock = protocol.transport.get_extra_info("socket")
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1


def test_openapi_is_served(served: Served) -> None:
    spec = served.client().get("/api/v1/openapi.json")
    assert spec.status_code == 200
    paths = spec.json()["paths"]
    assert {"/api/v1/status", "/api/v1/gate", "/api/v1/records/{record_id}/promote"} <= set(paths)
    schemas = spec.json()["components"]["schemas"]
    assert {"StatusOutput", "GateOutput", "ErrorOutput", "RunUpload"} <= set(schemas)
    assert served.client().get("/api/v1/docs").status_code == 404  # no CDN-loading UI


@pytest.mark.slow
def test_modelreg_serve_with_worker_processes(tmp_path: Path) -> None:
    """The command itself, in a subprocess: two worker processes share the socket; the
    registry is opened (and its errors shown) before serving."""
    import signal
    import subprocess
    import sys
    import time

    url = f"sqlite:///{tmp_path / 'registry.db'}"
    registry = modelreg.open(url)
    record = add_synthetic(registry, 1)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = "import sys; from modelreg.cli.main import run; sys.argv[0] = 'modelreg'; run()"
    env = {**os.environ, "PYTHONPATH": str(REPO), "MODELREG_HOME": str(tmp_path / "home")}
    argv = [sys.executable, "-c", code, "--db", url, "serve", "--port", str(port)]
    refused = subprocess.run(
        [sys.executable, "-c", code, "--db", "postgresql+psycopg://u@127.0.0.1:1/x", "serve"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert refused.returncode == 4 and "cannot be reached" in refused.stderr
    server = subprocess.Popen(
        [*argv, "--workers", "2", "--public-read"], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/api/v1/records/{record}")
                break
            except httpx.ConnectError:
                assert server.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        assert response.status_code == 200
        assert response.json()["record"]["record_id"] == record
    finally:
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=30)
    assert "2 worker processes" in err and "anyone may read" in err


def test_break_glass_over_http_is_a_releasers_explicit_force_and_is_audited(
    served: Served, client_of: Clients, tmp_path: Path
) -> None:
    """Issue 40 item 2 over HTTP: the body's ``force`` is the confirmation (no prompt on an
    API), taken from a releaser only; without it a stale earlier record is refused; with it the
    record is production, marked forced, refused by the gate unless the caller accepts forced
    entries, and the event names every unmet reason."""
    r1, r2 = _two_releases(served.registry)
    suite = tmp_path / "regress.yaml"
    suite.write_text(
        "schema_version: 1\nname: regress\nthresholds: {min_pass_rate: 1.0}\ncases:\n"
        "  - id: inc-9\n    prompt: Summarize the memo.\n"
        "    expect: {mode: contains, value: memo}\n"
    )
    served.registry.attach_suite(MODEL, suite)  # every earlier run stops counting: stale
    served.registry.hold(r2, "INC-9: drops the memo", actor="admin")
    body = {"model": MODEL, "target": "cpu", "why": "INC-9", "to": f"{MODEL}@v1"}

    refused = client_of("releaser").post("/api/v1/rollback", json=body)
    assert refused.status_code == 409, refused.text
    assert "stale: suite changed" in refused.text
    denied = client_of("verifier").post("/api/v1/rollback", json=body | {"force": True})
    assert denied.status_code == 403, denied.text
    assert served.registry.status().entries[0].record.record_id == r2  # nothing changed

    forced = client_of("releaser").post("/api/v1/rollback", json=body | {"force": True})
    assert forced.status_code == 200, forced.text
    answer = forced.json()
    assert answer["production"]["record"]["record_id"] == r1
    assert answer["forced"] and any("suite changed" in f for f in answer["forced"])

    reader = client_of("reader")
    gate = {"model": MODEL, "target": "cpu", "sha256": synthetic_sha256(1)}
    closed = reader.get("/api/v1/gate", params=gate)
    assert closed.status_code == 409 and closed.json()["passed"] is False, closed.text
    opened = reader.get("/api/v1/gate", params=gate | {"accept_forced": True})
    assert opened.status_code == 200 and opened.json()["passed"] is True, opened.text
    history = reader.get("/api/v1/history", params={"model": MODEL}).json()
    (event,) = [e for e in history["events"] if e["kind"] == "rollback"]
    assert event["actor"] == "releaser-rae" and event["why"] == "INC-9"
    assert "FORCED (break glass)" in event["summary"], event


def test_a_promotions_label_is_a_handle_over_http(served: Served, client_of: Clients) -> None:
    """Issue 40 item 6: the promote body's ``label``; ``MODEL@LABEL`` in a query or a body."""
    r1, r2 = _two_releases(served.registry)
    releaser = client_of("releaser")
    promoted = releaser.post(
        f"/api/v1/records/{r1}/promote", json={"target": "cpu", "why": "ga", "label": "ga-1"}
    )
    assert promoted.status_code == 200, promoted.text
    assert promoted.json()["promotion"]["label"] == "ga-1"
    assert f"{MODEL}@ga-1 names it" in promoted.json()["message"]
    page = client_of("reader").get(f"/records/{r1}")
    assert page.status_code == 200 and '<span class="version label">ga-1</span>' in page.text
    served.registry.promote(r2, "cpu", why="v2 again", actor="admin")
    plan = client_of("reader").get(
        "/api/v1/rollback-plan", params={"model": MODEL, "target": "cpu", "to": f"{MODEL}@ga-1"}
    )
    assert plan.status_code == 200, plan.text
    assert plan.json()["candidate"]["record"]["record_id"] == r1 and plan.json()["named"]
    diff = client_of("reader").get("/api/v1/diff", params={"a": f"{MODEL}@ga-1", "b": r2})
    assert diff.status_code == 200, diff.text
    # Refused labels, on a record that is not production (so nothing else refuses it).
    for bad, said in (
        ("v7", "reads as a version number"),
        ("V7", "reads as a version number"),
        ("no spaces", "label"),
        ("x" * 65, "label"),
    ):
        refused = releaser.post(
            f"/api/v1/records/{r1}/promote", json={"target": "cpu", "label": bad}
        )
        error = _error(refused, 422, "invalid_input")
        assert said in error["message"], (bad, error)
    assert served.registry.status(MODEL).entries[0].record.record_id == r2  # nothing moved
    unknown = client_of("reader").get("/api/v1/diff", params={"a": f"{MODEL}@nope", "b": r2})
    assert unknown.status_code == 404, unknown.text
    assert "labelled 'nope'" in unknown.json()["error"]["message"] + str(
        unknown.json()["error"]["hint"]
    )


def test_a_handle_is_resolved_to_a_record_never_read_as_a_file(
    served: Served, client_of: Clients, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A label may hold a dot, and fit / diff also read manifest files and artifacts: a
    handle from HTTP names a record or nothing (404) — the file ``rules/alpha@x.json`` beside
    the server is never read."""
    _, r2 = _two_releases(served.registry)
    monkeypatch.chdir(tmp_path)
    planted = tmp_path / "rules" / "alpha@x.json"
    planted.parent.mkdir()
    planted.write_text(json.dumps(served.registry.show(r2).manifest))
    reader = client_of("reader")
    for path, params in (
        ("/api/v1/diff", {"a": f"{MODEL}@x.json", "b": r2}),
        ("/api/v1/fit", {"record": f"{MODEL}@x.json", "target": "cpu"}),
        ("/diff", {"a": f"{MODEL}@x.json", "b": r2}),
    ):
        answer = reader.get(path, params=params)
        assert answer.status_code in (400, 404), (path, answer.text)
        assert "labelled 'x.json'" in html.unescape(answer.text), (path, answer.text)
