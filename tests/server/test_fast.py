"""The plain status and gate reads answered past the framework (``server.fast``) answer what
the app answers: the same status, body and content type — compared request by request with
the app's own answer (an unknown parameter, which FastAPI ignores, sends a request to the
app) — and a write from another process counts from the next request."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers import PASSING, add_synthetic, record_run, stored
from tests.server.conftest import Served

MODEL = "rules/alpha"


def _both(client: httpx.Client, path: str) -> tuple[httpx.Response, httpx.Response]:
    fast = client.get(path)
    app = client.get(path + ("&" if "?" in path else "?") + "through=app")
    return fast, app


def _same(fast: httpx.Response, app: httpx.Response) -> None:
    assert (fast.status_code, fast.content) == (app.status_code, app.content), path_of(fast)
    assert fast.headers["content-type"] == app.headers["content-type"]
    for name in ("content-security-policy", "x-content-type-options", "x-frame-options"):
        assert fast.headers[name] == app.headers[name]


def path_of(response: httpx.Response) -> str:
    return str(response.request.url)


def test_fast_reads_answer_what_the_app_answers(
    served: Served, tokens: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from modelreg.server.fast import FastReads

    answered: list[bool] = []
    answer = FastReads.answer

    async def counted(self: FastReads, scope: Any, send: Any) -> bool:
        answered.append(await answer(self, scope, send))
        return answered[-1]

    monkeypatch.setattr(FastReads, "answer", counted)
    registry = served.registry
    production = add_synthetic(registry, 1)
    other = add_synthetic(registry, 2)
    record_run(registry, production)
    record_run(registry, other, outcomes={**PASSING, "gguf-cpu-smoke": "fail"})
    registry.promote(production, "cpu", why="v1")
    sha = stored(registry).files([production])[production][0].sha256
    sha_other = stored(registry).files([other])[other][0].sha256
    reader = served.client(tokens["reader"])
    paths = [
        f"/api/v1/status?model={MODEL}",
        f"/api/v1/status?model={MODEL}&target=cpu",
        f"/api/v1/status?model={MODEL}&target=inf2.xlarge",
        f"/api/v1/gate?model={MODEL}&target=cpu&sha256={sha}",
        f"/api/v1/gate?model={MODEL}&target=cpu&sha256={sha.upper()}",
        f"/api/v1/gate?model={MODEL}&target=cpu&sha256={sha_other}",
        f"/api/v1/gate?model={MODEL}&target=inf2.xlarge&sha256={sha}",
        f"/api/v1/gate?model={MODEL}&target=cpu&sha256=nothex",
        f"/api/v1/gate?model={MODEL}&target=nowhere&sha256={sha}",
        "/api/v1/status?model=rules/unknown",
        f"/api/v1/gate?model={MODEL}&target=cpu",
        f"/api/v1/status?model={MODEL}&model={MODEL}",
        "/api/v1/status?model=",
    ]
    fast_answered = []
    for path in paths:
        before = len(answered)
        _same(*_both(reader, path))
        fast_answered.append(answered[before])  # the first request of the pair is plain
    for client in (served.client(), served.client("not-a-token")):
        _same(*_both(client, f"/api/v1/gate?model={MODEL}&target=cpu&sha256={sha}"))
    assert reader.get(f"/api/v1/gate?model={MODEL}&target=cpu&sha256={sha}").status_code == 200
    # The plain requests were answered past the framework; errors went to the app.
    assert fast_answered == [True] * 7 + [False] * 6, list(zip(paths, fast_answered, strict=True))


def test_a_write_elsewhere_counts_from_the_next_request(
    served: Served, tokens: dict[str, str]
) -> None:
    # ``served.registry`` is another process's view: its writes reach the server only through
    # the database (the generations), never through the server's memory.
    registry = served.registry
    record = add_synthetic(registry, 1)
    record_run(registry, record)
    registry.promote(record, "cpu", why="v1")
    sha = stored(registry).files([record])[record][0].sha256
    reader = served.client(tokens["reader"])
    gate = f"/api/v1/gate?model={MODEL}&target=cpu&sha256={sha}"
    assert reader.get(gate).status_code == 200
    assert reader.get(gate).status_code == 200  # answered from what the server derived
    registry.hold(record, "incident")
    held = reader.get(gate)
    assert held.status_code == 409 and "held" in held.text
    registry.release(record, why="fixed")
    assert reader.get(gate).status_code == 200
    registry.revoke_token("reader-rita", actor="admin")
    refused = reader.get(gate)
    assert refused.status_code == 401 and "revoked" in refused.text
