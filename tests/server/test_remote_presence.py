"""The deploy gate counts an S3 copy after a HEAD of each file — and the server's event loop
never waits on that round trip: there a remote copy's presence comes from the cache, and a
read that would have to ask S3 goes to a worker thread."""

from __future__ import annotations

import shutil
import threading
from typing import Any

import pytest

from tests.helpers import add_synthetic, record_run, stored, synthetic_bytes
from tests.server.conftest import Served

MODEL = "rules/alpha"


def test_an_s3_presence_check_never_runs_on_the_event_loop(
    served: Served, tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from modelreg import s3

    registry = served.registry
    record = add_synthetic(registry, 1)
    record_run(registry, record)
    registry.promote(record, "cpu", why="v1")
    registry.locate(record, ["s3://models/alpha/v1/"])
    shutil.rmtree(synthetic_bytes() / record)  # only the S3 copy is left
    # ... and S3 is a port nobody listens on: every HEAD is a refused connection, retried.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "y")
    s3.reset()
    asked: list[str] = []
    has_copy = s3.has_copy

    def watched(*args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("cached_only"):
            asked.append(threading.current_thread().name)
        return has_copy(*args, **kwargs)

    monkeypatch.setattr(s3, "has_copy", watched)
    sha = stored(registry).files([record])[record][0].sha256
    reader = served.client(tokens["reader"])
    gate = f"/api/v1/gate?model={MODEL}&target=cpu&sha256={sha}"
    for _ in range(3):
        assert reader.get(gate).status_code == 409
        assert reader.get(f"/api/v1/status?model={MODEL}").status_code == 200
    assert asked, "the presence was never asked"
    assert all(name.startswith("AnyIO worker thread") for name in asked), asked
    refused = reader.get(gate)
    assert refused.status_code == 409 and "cannot reach S3" in refused.text
