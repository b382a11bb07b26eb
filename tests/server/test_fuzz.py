"""A property-based fuzz of the HTTP API against its own served OpenAPI document (issue 22):
schemathesis generates requests for every operation — valid and invalid by the schema — and
sends them to a real uvicorn on loopback with a releaser's token. No response may be a 5xx,
and every response must match what the document declares for it. Bounded in examples per
operation and in time, so it runs in the fast tier of CI."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.helpers import add_synthetic, record_run
from tests.server.conftest import serving

EXAMPLES = 12
BUDGET_SECONDS = 100


def test_the_api_survives_its_own_schema(tmp_path: Path) -> None:
    with serving(f"sqlite:///{tmp_path / 'fuzz.db'}") as served:
        registry = served.registry
        secret = registry.create_token("fuzzer", "releaser", actor="admin").secret
        for i in (1, 2):  # something to read, promote and roll back
            record = add_synthetic(registry, i)
            record_run(registry, record)
            registry.promote(record, "cpu", why=f"v{i}")
        spec = httpx.get(f"{served.url}/api/v1/openapi.json").json()
        schema = schemathesis.openapi.from_dict(spec)
        headers = {"Authorization": f"Bearer {secret}"}
        started = time.monotonic()
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 15
        for operation in operations:
            if time.monotonic() - started > BUDGET_SECONDS:
                pytest.fail(f"the fuzz took over {BUDGET_SECONDS} s before {operation.label}")

            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy())
            def fuzz(case: schemathesis.Case) -> None:
                response = case.call(base_url=served.url, headers=headers, timeout=30)
                case.validate_response(
                    response,
                    checks=[
                        not_a_server_error,
                        content_type_conformance,
                        status_code_conformance,
                        response_schema_conformance,
                    ],
                )

            fuzz()
