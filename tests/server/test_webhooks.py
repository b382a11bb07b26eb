"""Webhooks over HTTP: a releaser's to add, list and remove (a reader's or a verifier's token
is refused before anything is written), and the server's own sender delivering a hold made
through the API."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx
import pytest

from modelreg import webhooks
from modelreg.server.app import start_deliverer
from tests.helpers import Receiver, add_synthetic
from tests.server.conftest import Served

Clients = Callable[[str | None], httpx.Client]


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def test_only_a_releaser_manages_webhooks(
    served: Served, client_of: Clients, receiver: Receiver
) -> None:
    body = {"url": receiver.url, "events": ["hold", "promote"]}
    for role in ("reader", "verifier"):
        refused = client_of(role).post("/api/v1/webhooks", json=body)
        assert refused.status_code == 403, refused.text
        assert client_of(role).get("/api/v1/webhooks").status_code == 403
    assert client_of(None).get("/api/v1/webhooks").status_code == 401
    assert served.registry.webhooks(include_removed=True).webhooks == []

    bad = client_of("releaser").post("/api/v1/webhooks", json={"url": "file:///etc/passwd"})
    assert bad.status_code == 422 and "is not http(s)" in bad.json()["error"]["message"]
    inside = client_of("releaser").post("/api/v1/webhooks", json=body)  # loopback: refused
    assert inside.status_code == 422, inside.text
    assert "127.0.0.1 is a loopback address" in inside.json()["error"]["message"]
    served.registry.allow_webhook_hosts(["127.0.0.1"], why="the test's receiver")
    created = client_of("releaser").post("/api/v1/webhooks", json=body)
    assert created.status_code == 201, created.text
    hook, secret = created.json()["webhook"], created.json()["secret"]
    assert hook["created_by"] == "releaser-rae" and hook["events"] == ["hold", "promote"]
    listed = client_of("releaser").get("/api/v1/webhooks")
    assert [h["id"] for h in listed.json()["webhooks"]] == [hook["id"]]
    assert secret not in listed.text

    record = add_synthetic(served.registry, 1)
    held = client_of("releaser").post(f"/api/v1/records/{record}/hold", json={"why": "audit"})
    assert held.status_code == 200, held.text
    stop = threading.Event()
    thread = start_deliverer(served.registry, interval_s=0.05, stop=stop)
    deadline = time.monotonic() + 20
    while not receiver.posts and time.monotonic() < deadline:
        time.sleep(0.05)
    assert thread.is_alive() and len(receiver.posts) == 1
    headers, sent = receiver.posts[0]
    assert webhooks.verify_signature(secret, headers, sent)
    stop.set()
    thread.join(timeout=10)
    assert headers["X-Modelreg-Event"] == "hold" and b'"actor":"releaser-rae"' in sent

    gone = client_of("releaser").delete(f"/api/v1/webhooks/{hook['id']}", params={"why": "moved"})
    assert gone.status_code == 200 and gone.json()["changed"] is True
    assert client_of("releaser").delete("/api/v1/webhooks/99").status_code == 404
    assert client_of("releaser").get("/api/v1/webhooks").json()["webhooks"] == []
