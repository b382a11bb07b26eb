"""The HTTP API does what its OpenAPI document says (issue 44 item 7), checked by schemathesis
against a real team service on loopback (uvicorn in a thread; SQLite, and PostgreSQL where
``make test`` starts one — it found a webhook id past PostgreSQL's INTEGER answered 500) over a
seeded registry:
every operation of /api/v1/openapi.json, in schemathesis' three phases — the schema's examples,
its boundary values (every limit, pattern and enum, each side of it, and every method the path
does not take) and random cases, valid and invalid by the schema. Checks: no 5xx; every status,
content type, header and body as documented; what the schema refuses is refused; what it allows
is accepted (writes may answer 422 for what the registry holds: see ``REGISTRY_STATE``); a
method a path does not take is 405 with every method it does take in ``Allow``.

Bounded in random examples per operation (``EXAMPLES``), with a fixed seed
(``MODELREG_CONFORMANCE_SEED`` to explore others): about 45 s on two cores for SQLite.

Beside it, ``test_every_http_limit_is_in_the_openapi_document``: each bound the handlers check
(``modelreg/limits.py`` and the constants beside their readers) is the one the document states,
so the two cannot drift apart."""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig
from schemathesis.core.failures import Failure

from tests.helpers import add_synthetic, record_run, synthetic_sha256
from tests.server.conftest import serving

# Random cases per operation, besides the examples and boundary values: fewer on PostgreSQL,
# where each request costs more (the boundaries, what finds a backend's own limits, are all
# sent on both).
EXAMPLES = {"sqlite": 25, "postgresql": 8}
SEED = int(os.environ.get("MODELREG_CONFORMANCE_SEED", "44"))
# The writes whose valid requests may be refused for what the registry holds, with why. Each
# may answer 422 to a request the schema allows; every other refusal of one is still a failure.
REGISTRY_STATE = {
    ("POST", "/api/v1/records"): "the manifest's record_id must be the id its facts give",
    ("POST", "/api/v1/records/{record_id}/locations"): (
        "each scheme's grammar (a pinned hf revision, an OCI digest, a file path without '..' "
        "or control characters, decoded) is checked by locations.parse_location"
    ),
    ("POST", "/api/v1/records/{record_id}/runs"): (
        "a run is judged against its record and target: each check once, finished by now, "
        "an envelope that covers exactly it"
    ),
    ("POST", "/api/v1/records/{record_id}/promote"): (
        "already production with another approval; a re-test day that has passed"
    ),
    ("POST", "/api/v1/records/{record_id}/hold"): "a retired record stays retired",
    ("POST", "/api/v1/records/{record_id}/release"): "a record not on hold, or retired",
    ("POST", "/api/v1/records/{record_id}/retire"): "a retired record stays retired",
    ("POST", "/api/v1/rollback"): "a record to roll back to that is not the model's",
    ("POST", "/api/v1/webhooks"): (
        "a destination that is, or resolves to, a loopback, private or unspecified address"
    ),
    ("GET", "/api/v1/trend"): "a model or a record, not both and not neither",
}


# How a refusal reads when it comes from a bound or from the request's validation — never a
# refusal of a request the schema allows, whatever the registry holds (check_length,
# limits.bounded, FastAPI's validation as http.py words it).
_UNSTATED_BOUND = re.compile(
    r"characters long; at most|is beyond the limit|^(body field|query parameter|path parameter) "
)


@schemathesis.check
def refuses_no_bound_the_schema_omits(ctx: Any, response: Any, case: Any) -> bool | None:
    """A request the schema allows is not refused for its size or shape — on the writes of
    ``REGISTRY_STATE`` too, where a 422 for what the registry holds is allowed."""
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or response.status_code != 422:
        return None
    try:
        message = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return None
    if _UNSTATED_BOUND.search(message):
        raise Failure(
            operation=case.operation.label,
            title="A bound the schema does not state",
            message=f"a request the schema allows was refused: {message}",
        )
    return None


def _no_dns(real: Any) -> Any:
    """``socket.getaddrinfo`` that resolves addresses and localhost only: the webhook URLs
    schemathesis makes up name hosts this test must not look up (a name that does not
    resolve is accepted, as where there is no DNS)."""

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        import ipaddress

        name = host.decode() if isinstance(host, bytes) else str(host)
        try:
            ipaddress.ip_address(name.strip("[]"))
        except ValueError:
            if name != "localhost":
                raise socket.gaierror(socket.EAI_NONAME, "not resolved in this test") from None
        return real(host, *args, **kwargs)

    return getaddrinfo


@pytest.fixture
def api_schema(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The served OpenAPI document with schemathesis' configuration: the service's address,
    a releaser's token (a verifier's for uploads), and the seeded ids to draw from."""
    monkeypatch.setattr(socket, "getaddrinfo", _no_dns(socket.getaddrinfo))
    backend = "sqlite" if db_url.startswith("sqlite") else "postgresql"
    with serving(db_url) as served:
        registry = served.registry
        releaser = registry.create_token("fuzz-releaser", "releaser", actor="admin").secret
        verifier = registry.create_token("fuzz-verifier", "verifier", actor="admin").secret
        records = []
        for i in (1, 2, 3):  # two productions to roll back between, one record held
            record = add_synthetic(registry, i)
            record_run(registry, record)
            records.append(record)
        registry.promote(records[0], "cpu", why="v1")
        registry.promote(records[1], "cpu", why="v2")
        registry.hold(records[2], "seeded")
        hook = registry.add_webhook("https://ci.example/hooks/modelreg", actor="admin")
        spec = httpx.get(f"{served.url}/api/v1/openapi.json").json()
        bearer = {"Authorization": f"Bearer {releaser}"}
        config = SchemathesisConfig.from_dict(
            {
                "base-url": served.url,
                "seed": SEED,
                "headers": bearer,
                "request-timeout": 30,
                "suppress-health-check": ["all"],
                "generation": {"max-examples": EXAMPLES[backend], "database": "none"},
                "phases": {
                    "examples": {"enabled": True},
                    "coverage": {"enabled": True},
                    "fuzzing": {"enabled": True},
                    "stateful": {"enabled": False},
                },
                "checks": {
                    "not_a_server_error": {"enabled": True},
                    "status_code_conformance": {"enabled": True},
                    "content_type_conformance": {"enabled": True},
                    "response_headers_conformance": {"enabled": True},
                    "response_schema_conformance": {"enabled": True},
                    "negative_data_rejection": {"enabled": True},
                    "positive_data_acceptance": {"enabled": True},
                    "unsupported_method": {"enabled": True},
                    "allow_header_conformance": {"enabled": True},
                    "missing_required_header": {"enabled": True},
                    "refuses_no_bound_the_schema_omits": {"enabled": True},
                    # what a second token role would see: not this test's subject
                    "ignored_auth": {"enabled": False},
                    "use_after_free": {"enabled": False},
                    "ensure_resource_availability": {"enabled": False},
                },
                "dictionaries": {
                    "records": {"values": records},
                    "models": {"values": ["rules/alpha"]},
                    "targets": {"values": ["cpu"]},
                    "sha256s": {"values": [synthetic_sha256(1), synthetic_sha256(2)]},
                    "webhooks": {"values": [hook.webhook.id]},
                },
                "parameters": {
                    **{
                        f"{where}.{name}": {"dictionary": "records", "probability": 0.5}
                        for where, name in [
                            ("path", "record_id"),
                            ("query", "record"),
                            ("query", "a"),
                            ("query", "b"),
                            ("query", "to"),
                        ]
                    },
                    "query.model": {"dictionary": "models", "probability": 0.5},
                    "query.target": {"dictionary": "targets", "probability": 0.5},
                    "query.sha256": {"dictionary": "sha256s", "probability": 0.5},
                    "path.webhook_id": {"dictionary": "webhooks", "probability": 0.5},
                },
                "operations": [
                    {
                        "include-path": "/api/v1/records/{record_id}/runs",
                        "headers": {"Authorization": f"Bearer {verifier}"},
                    },
                    # Half the boundary cases are the manifest's (every count it may name):
                    # validated before anything reaches the database, so once is enough.
                    *(
                        [
                            {
                                "include-method": "POST",
                                "include-path": "/api/v1/records",
                                "phases": {"coverage": {"enabled": False}},
                            }
                        ]
                        if backend == "postgresql"
                        else []
                    ),
                    *(
                        {
                            "include-method": method,
                            "include-path": path,
                            "checks": {
                                "positive_data_acceptance": {
                                    "expected-statuses": ["2XX", 401, 403, 404, 409, 422]
                                }
                            },
                        }
                        for method, path in REGISTRY_STATE
                    ),
                ],
            }
        )
        yield schemathesis.openapi.from_dict(spec, config=config)


def _failures(event: Any) -> list[str]:
    """Each distinct check that failed in a finished scenario, with its answer and a curl."""
    from schemathesis.engine import Status

    recorder = event.recorder
    found = {}
    for case_id, checks in recorder.checks.items():
        for check in checks:
            if check.status is not Status.FAILURE or check.failure_info is None:
                continue
            failure = check.failure_info.failure
            response = recorder.find_response(case_id=case_id)
            answer = (
                f"[{response.status_code}] {response.content[:300]!r}" if response else "(none)"
            )
            found.setdefault(
                (failure.code, failure.title),
                f"{recorder.label}: {failure.code} {failure.title}: "
                f"{' '.join(failure.message.split())}\n    answer: {answer}\n"
                f"    {check.failure_info.code_sample[:400]}",
            )
    return list(found.values())


@pytest.mark.conformance  # tens of seconds: make test runs it, make check's fast tier does not
def test_the_api_does_what_its_schema_says(api_schema: Any) -> None:
    from schemathesis.engine import events, from_schema

    started = time.monotonic()
    covered: dict[str, int] = {}
    failures: list[str] = []
    for event in from_schema(api_schema).execute():
        if isinstance(event, events.ScenarioFinished):
            label = event.recorder.label
            covered[label] = covered.get(label, 0) + len(event.recorder.cases)
            failures += _failures(event)
        elif isinstance(event, events.NonFatalError):
            failures.append(f"{event.label}: {event.info.title}: {event.info.message}")
        elif isinstance(event, events.FatalError):
            raise event.exception
    seconds = time.monotonic() - started
    operations = {
        f"{method.upper()} {path}"
        for path, item in api_schema.raw_schema["paths"].items()
        for method in item
    }
    print(
        f"schemathesis: {sum(covered.values())} cases over {len(covered)} operations "
        f"in {seconds:.1f} s"
    )
    assert not failures, "\n".join(failures)
    assert operations <= set(covered), sorted(operations - set(covered))
    assert len(operations) >= 25


# -- the limits the handlers check, as the document states them ------------------------------


def _resolved(spec: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with a $ref followed and an optional (``anyOf`` with null) unwrapped."""
    while True:
        if "$ref" in node:
            node = spec["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
        elif "anyOf" in node and sum(s.get("type") != "null" for s in node["anyOf"]) == 1:
            node = next(s for s in node["anyOf"] if s.get("type") != "null")
        else:
            return node


def _stated(spec: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """Every parameter and body field of the document: ("GET /api/v1/fit", "query context")
    or ("POST /api/v1/rollback", "body why") -> its schema."""
    found = {}
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            label = f"{method.upper()} {path}"
            for parameter in operation.get("parameters", []):
                where = f"{parameter['in']} {parameter['name']}"
                found[(label, where)] = _resolved(spec, parameter["schema"])
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body is not None:
                properties = _resolved(spec, body["schema"])["properties"]
                for name, schema in properties.items():
                    found[(label, f"body {name}")] = _resolved(spec, schema)
    return found


def test_every_http_limit_is_in_the_openapi_document(tmp_path: Path) -> None:
    """Each bound the handlers check (``modelreg.limits`` and the constants beside their
    readers) is the one /api/v1/openapi.json states, for every parameter and body field that
    carries it; and every parameter or field is accounted for here, so a new one comes with
    its bound (or a reason it has none)."""
    from modelreg import limits
    from modelreg.api.browse import SEARCH_MAX, SEARCH_MIN
    from modelreg.limits import MAX_LIMITATIONS
    from modelreg.locations import MAX_URL_CHARS
    from modelreg.manifests.fit import KV_BYTES_PER_ELEMENT, MAX_WHAT_IF_BITS
    from modelreg.rules import RecordStateKind
    from modelreg.schemas.manifest import HANDLE, LABEL
    from modelreg.server.http import _RECORD_REF_RE
    from modelreg.server.inputs import QUANT_NAME_MAX
    from modelreg.webhooks import EVENTS

    with serving(f"sqlite:///{tmp_path / 'spec.db'}") as served:
        spec = httpx.get(f"{served.url}/api/v1/openapi.json").json()
    stated = _stated(spec)
    record_ref = {"maxLength": limits.RECORD_REF_MAX, "pattern": f"^({_RECORD_REF_RE.pattern})$"}
    # Where a slash can go (a query, a body): a version handle too (http.record_or_handle).
    handle = {
        "maxLength": limits.HANDLE_MAX,
        "pattern": f"^({_RECORD_REF_RE.pattern}|{HANDLE})$",
    }
    model = {"maxLength": limits.MODEL_ID_MAX}
    target = {"maxLength": limits.TARGET_NAME_MAX}
    why = {"maxLength": limits.WHY_MAX}
    # (operation or "*", where) -> what its schema must state; {}: no bound, on purpose.
    expected: dict[tuple[str, str], dict[str, Any]] = {
        ("*", "path record_id"): record_ref,
        ("*", "query record"): handle,
        ("*", "query a"): handle,
        ("*", "query b"): handle,
        ("*", "query to"): handle,
        ("*", "query model"): model,
        ("*", "query target"): target,
        ("*", "query deployable_on"): target,
        ("*", "query why"): why,
        ("GET /api/v1/matrix", "query q"): model,  # a part of a model id
        ("GET /api/v1/matrix", "query offset"): {"minimum": 0},
        ("GET /api/v1/matrix", "query limit"): {"minimum": 1, "maximum": 1000},
        ("GET /api/v1/records", "query state"): {"enum": [s.value for s in RecordStateKind]},
        ("GET /api/v1/gate", "query sha256"): {"minLength": 64, "maxLength": 64},
        ("GET /api/v1/search", "query q"): {"minLength": SEARCH_MIN},
        ("GET /api/v1/search", "query limit"): {"minimum": 1, "maximum": SEARCH_MAX},
        ("GET /api/v1/history", "query limit"): {"minimum": 1, "maximum": 1_000_000},
        ("GET /api/v1/history", "query since"): {},  # a date, a time or an age: its anyOf
        ("GET /api/v1/fit", "query context"): {"maximum": limits.MAX_CONTEXT_TOKENS},
        ("GET /api/v1/fit", "query concurrency"): {"maximum": limits.MAX_BATCH},
        ("GET /api/v1/fit", "query kv_dtype"): {"enum": list(KV_BYTES_PER_ELEMENT)},
        ("GET /api/v1/fit", "query overhead"): {"minimum": 0, "exclusiveMaximum": 10},
        ("GET /api/v1/fit", "query headroom"): {"minimum": 0, "exclusiveMaximum": 1},
        ("GET /api/v1/fit", "query bits"): {"exclusiveMinimum": 0, "maximum": MAX_WHAT_IF_BITS},
        ("GET /api/v1/fit", "query quant"): {"maxLength": QUANT_NAME_MAX},
        ("GET /api/v1/webhooks", "query removed"): {"type": "boolean"},
        ("DELETE /api/v1/webhooks/{webhook_id}", "path webhook_id"): {
            "minimum": 1,
            "maximum": 2**31 - 1,  # webhooks.id: an INTEGER on PostgreSQL
        },
        ("*", "body target"): target,
        ("*", "body why"): why,
        ("POST /api/v1/records/{record_id}/promote", "body owner"): {"maxLength": limits.ACTOR_MAX},
        ("POST /api/v1/records/{record_id}/promote", "body limitations"): {
            "maxItems": MAX_LIMITATIONS,
            "items": {"maxLength": limits.WHY_MAX},
        },
        ("POST /api/v1/records/{record_id}/promote", "body retest_by"): {"format": "date"},
        ("POST /api/v1/records/{record_id}/promote", "body accept_relaxed_gate"): {},
        ("POST /api/v1/records/{record_id}/promote", "body label"): {
            "maxLength": limits.LABEL_MAX,
            "pattern": f"^{LABEL}$",
        },
        ("POST /api/v1/rollback", "body model"): model,
        ("POST /api/v1/rollback", "body to"): handle,
        ("POST /api/v1/rollback", "body force"): {"type": "boolean"},
        ("GET /api/v1/gate", "query accept_forced"): {"type": "boolean"},
        ("POST /api/v1/records/{record_id}/runs", "body host"): {"maxLength": limits.HOST_MAX},
        ("POST /api/v1/records/{record_id}/runs", "body fingerprint"): {"maxProperties": 200},
        ("POST /api/v1/records/{record_id}/runs", "body checks"): {"maxItems": 100},
        ("POST /api/v1/records/{record_id}/runs", "body envelope"): {},  # a DSSE envelope
        ("POST /api/v1/records/{record_id}/locations", "body urls"): {
            "maxItems": 100,
            "items": {"maxLength": MAX_URL_CHARS},
        },
        ("POST /api/v1/records", "body locations"): {
            "maxItems": 100,
            "items": {"maxLength": MAX_URL_CHARS},
        },
        ("POST /api/v1/records", "body record_id"): {"maxLength": 64},
        ("POST /api/v1/records", "body schema_version"): {},
        ("POST /api/v1/records", "body next_steps"): {"maxItems": 20},
        ("POST /api/v1/records", "body manifest"): {},  # below: the manifest's own schema
        ("POST /api/v1/webhooks", "body url"): {"maxLength": 2000},
        ("POST /api/v1/webhooks", "body events"): {"maxItems": 20, "items": {"enum": list(EVENTS)}},
        ("POST /api/v1/webhooks", "body secret"): {"minLength": 16, "maxLength": 200},
    }

    def contains(schema: dict[str, Any], wanted: dict[str, Any]) -> bool:
        for key, value in wanted.items():
            if isinstance(value, dict):
                if not contains(_resolved(spec, schema.get(key, {})), value):
                    return False
            elif key == "enum":
                if sorted(schema.get("enum", [])) != sorted(value):
                    return False
            elif schema.get(key) != value:
                return False
        return True

    unaccounted, wrong = [], []
    for (operation, where), schema in stated.items():
        wanted = expected.get((operation, where), expected.get(("*", where)))
        if wanted is None:
            unaccounted.append(f"{operation} {where}")
        elif not contains(schema, wanted):
            wrong.append(f"{operation} {where}: states {schema}, the handler checks {wanted}")
    assert not unaccounted, unaccounted
    assert not wrong, "\n".join(wrong)

    # POST /api/v1/records states the manifest as the manifest schema: every count a
    # manifest may name, with the bound every door checks (limits.bounded).
    from modelreg.schemas.manifest import Manifest

    def normalized(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: normalized(v.rsplit("/", 1)[1] if k == "$ref" else v)
                for k, v in node.items()
                if k not in ("$defs", "default", "title")  # FastAPI leaves some defaults out
            }
        return [normalized(v) for v in node] if isinstance(node, list) else node

    own = Manifest.model_json_schema()
    body = stated[("POST /api/v1/records", "body manifest")]
    assert normalized(body) == normalized(own)
    for name, definition in own["$defs"].items():
        assert normalized(spec["components"]["schemas"][name]) == normalized(definition), name
    architecture = _resolved(spec, spec["components"]["schemas"]["ArchitectureFacts"])
    assert _resolved(spec, architecture["properties"]["block_count"])["maximum"] == (
        limits.MAX_LAYERS
    )
