"""Webhooks against hostile receivers (``tests.hostile``) and hostile timing (issue 44, item 4):
removal is final for pending and in-flight attempts; each attempt has a total deadline however
slowly a receiver drips; a slow receiver delays no other webhook; URLs to loopback, link-local
and private addresses are refused unless allowed by name; answers are shown by status only;
secrets are stored sealed with a key outside the database."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from sqlalchemy import text

import modelreg
from modelreg import sealing, webhooks
from modelreg.errors import InvalidInput
from modelreg.registry.hooks import Webhooks
from modelreg.webhook_sender import Policy, begin, busy_lanes, end, send, signing_secret
from tests.helpers import add_synthetic
from tests.hostile.server import Answer, HostileServer, Request

LOOPBACK = ["127.0.0.1"]


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    with HostileServer() as server:
        yield server


@pytest.fixture
def registry(tmp_path) -> modelreg.Registry:  # type: ignore[no-untyped-def]
    opened = modelreg.open(f"sqlite:///{tmp_path / 'registry.db'}")
    opened.allow_webhook_hosts(LOOPBACK, why="the tests' receivers")
    return opened


def _rows(registry: modelreg.Registry, sql: str) -> list[tuple[object, ...]]:
    with registry.store.engine.connect() as connection:
        return [tuple(row) for row in connection.execute(text(sql)).all()]


def _due_now(registry: modelreg.Registry) -> None:
    with registry.store.engine.begin() as connection:
        connection.execute(
            text("UPDATE webhook_deliveries SET next_attempt_at = '2000-01-01 00:00:00'")
        )


# -- removal is final -------------------------------------------------------------------------


def test_a_hook_removed_while_its_attempt_is_in_flight_is_sent_nothing_more(
    registry: modelreg.Registry, hostile: HostileServer
) -> None:
    """The issue's reproduction: an attempt in flight during ``remove`` used to reset its
    cancelled row to pending, re-sent 16 … 206 s later. Here the receiver holds the POST,
    the hook is removed meanwhile, the receiver then fails it (a retry, had the hook lived):
    the delivery stays cancelled and no later pass sends it."""
    arrived, release = threading.Event(), threading.Event()

    def held(request: Request) -> Answer:
        arrived.set()
        release.wait(10)
        return Answer(500, b"try again")

    hostile.route("POST", "/hook", held)
    hook = registry.add_webhook(f"{hostile.url}/hook", ["hold"]).webhook
    registry.hold(add_synthetic(registry, 1), "audit")
    passed: list[object] = []
    sender = threading.Thread(target=lambda: passed.append(registry.deliver_webhooks()))
    sender.start()
    assert arrived.wait(10)
    removed = registry.remove_webhook(hook.id, why="receiver compromised")
    assert removed.cancelled == 1  # the in-flight one, claimed and pending, is cancelled
    release.set()
    sender.join(10)
    (attempt,) = passed[0].attempts  # type: ignore[attr-defined]
    assert (attempt.status, attempt.http_status, attempt.retry_in_s) == ("cancelled", 500, None)
    assert _rows(registry, "SELECT status, last_error FROM webhook_deliveries") == [
        ("cancelled", "webhook removed")
    ]
    _due_now(registry)  # even were it due: nothing of a removed hook is sent
    assert registry.deliver_webhooks().attempts == []
    assert len(hostile.requests_to("/hook")) == 1


def test_the_attempt_steps_the_state_machine_can_interleave(
    registry: modelreg.Registry, hostile: HostileServer
) -> None:
    """begin (claim) → remove → send → end, as the rules' state machine runs them: the
    outcome is not recorded, the delivery stays cancelled, nothing is sent again."""
    hostile.route("POST", "/hook", Answer(200, b"ok"))
    hook = registry.add_webhook(f"{hostile.url}/hook", ["hold"]).webhook
    registry.hold(add_synthetic(registry, 1), "audit")
    hooks = Webhooks(registry.store)
    policy = Policy(timeout_s=5, backoff_s=0, max_attempts=8)
    (due,) = hooks.due()
    flight = begin(hooks, due, policy.timeout_s)
    assert flight is not None and flight.attempt == 1
    assert begin(hooks, due, policy.timeout_s) is None  # claimed: nobody else sends it
    registry.remove_webhook(hook.id)
    secret = signing_secret(hooks, due, sealing.host_key())
    sent = send(flight, secret, policy.timeout_s, LOOPBACK)
    assert sent.delivered  # the receiver did get this one attempt
    assert end(hooks, flight, sent, policy).status == "cancelled"
    assert _rows(registry, "SELECT status FROM webhook_deliveries") == [("cancelled",)]
    assert hooks.due() == [] and registry.deliver_webhooks().attempts == []


def test_a_delivery_enqueued_for_a_hook_removed_meanwhile_is_never_sent(
    registry: modelreg.Registry, hostile: HostileServer
) -> None:
    """An event whose transaction read the hook as live commits after ``remove``: its row is
    pending for a removed hook. ``due`` and ``claim`` skip it."""
    hostile.route("POST", "/hook", Answer(200, b"ok"))
    hook = registry.add_webhook(f"{hostile.url}/hook", ["hold"]).webhook
    registry.hold(add_synthetic(registry, 1), "audit")
    hooks = Webhooks(registry.store)
    (due,) = hooks.due()
    registry.remove_webhook(hook.id)
    with registry.store.engine.begin() as connection:  # the late commit's row
        connection.execute(text("UPDATE webhook_deliveries SET status = 'pending'"))
    assert hooks.due() == [] and not hooks.claim(due, 60)
    assert registry.deliver_webhooks().attempts == [] and hostile.requests == []


# -- deadlines and lanes ----------------------------------------------------------------------


def test_a_dripping_receiver_costs_one_deadline_per_attempt(
    registry: modelreg.Registry, hostile: HostileServer
) -> None:
    """One byte of the answer every 0.3 s never trips a per-read timeout (the issue's
    receiver was recorded as delivered after 150 s); the attempt's total deadline ends it."""
    hostile.route("POST", "/drip", Answer(200, b"ok", drip_s=0.3, drip_headers=True))
    registry.add_webhook(f"{hostile.url}/drip", ["hold"])
    registry.hold(add_synthetic(registry, 1), "audit")
    started = time.monotonic()
    (attempt,) = registry.deliver_webhooks(timeout_s=1.0, backoff_s=0).attempts
    assert time.monotonic() - started < 2.5
    assert (attempt.status, attempt.error) == ("pending", "timed out after 1 s")


def test_a_slow_receiver_delays_no_other_webhook(
    registry: modelreg.Registry, hostile: HostileServer
) -> None:
    hostile.route("POST", "/slow", Answer(200, b"ok", drip_s=0.5, drip_headers=True))
    hostile.route("POST", "/fast", Answer(204))
    registry.add_webhook(f"{hostile.url}/slow", ["hold", "release"])
    registry.add_webhook(f"{hostile.url}/fast", ["hold", "release"])
    record = add_synthetic(registry, 1)
    registry.hold(record, "audit")

    # The server's loop does not wait for lanes: the fast hook is sent at once, and again
    # in the next pass while the slow one's lane is still busy with its first attempt.
    started = time.monotonic()
    first = registry.deliver_webhooks(timeout_s=3.0, wait=False)
    assert first.attempts == [] and time.monotonic() - started < 1.0
    registry.release(record, "fixed")
    deadline = time.monotonic() + 5
    while len(hostile.requests_to("/fast")) < 2 and time.monotonic() < deadline:
        registry.deliver_webhooks(timeout_s=3.0, wait=False)
        time.sleep(0.05)
    fast = hostile.requests_to("/fast")
    assert len(fast) == 2 and all(r.at - started < 1.5 for r in fast)
    assert len(hostile.requests_to("/slow")) == 1  # its lane still holds the first attempt
    while busy_lanes() and time.monotonic() < started + 10:
        time.sleep(0.05)
    (slow,) = (h for h in registry.webhooks().webhooks if h.url.endswith("/slow"))
    assert slow.last_delivery is not None and slow.last_delivery.error == "timed out after 3 s"

    # A pass that waits returns with every lane's attempts; the slow one's costs its deadline.
    _due_now(registry)
    started = time.monotonic()
    passed = registry.deliver_webhooks(timeout_s=1.0, backoff_s=0)
    assert {(a.event, a.status) for a in passed.attempts} == {("hold", "pending")}
    assert time.monotonic() - started < 2.5


# -- destinations -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://localhost:8080/h", "loopback"),
        ("http://127.0.0.2/h", "loopback"),
        ("http://[::1]/h", "loopback"),
        ("http://[::ffff:127.0.0.1]/h", "loopback"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://[fe80::1]/h", "link-local"),
        ("http://10.1.2.3/h", "private"),
        ("https://192.168.0.7/h", "private"),
        ("http://172.16.5.5/h", "private"),
        ("http://100.64.0.1/h", "non-public"),
        ("http://0.0.0.0/h", "unspecified"),
        ("http://[2001:db8::1]/h", "private"),
    ],
)
def test_a_url_to_a_non_public_address_is_refused_unless_allowed(
    registry: modelreg.Registry, url: str, kind: str
) -> None:
    with pytest.raises(webhooks.DestinationRefused) as caught:
        registry.add_webhook(url, ["hold"])
    assert f"is a {kind} address; deliveries to it are refused" in caught.value.message
    host = webhooks.parse_host(urlsplit(url).hostname or "")
    assert caught.value.step is not None and caught.value.step.args == {"hosts": [host]}
    assert registry.webhooks().webhooks == []
    registry.allow_webhook_hosts([host])
    assert registry.add_webhook(url, ["hold"]).webhook.url == url


def test_a_host_taken_off_the_list_is_refused_at_the_next_attempt(
    registry: modelreg.Registry, hostile: HostileServer
) -> None:
    hostile.route("POST", "/hook", Answer(200))
    registry.add_webhook(f"{hostile.url}/hook", ["hold"])
    allowed = registry.allow_webhook_hosts(remove=["127.0.0.1"], why="no more local hooks")
    assert allowed.allowed_hosts == [] and allowed.changed
    registry.hold(add_synthetic(registry, 1), "audit")
    (attempt,) = registry.deliver_webhooks(backoff_s=0).attempts
    assert attempt.http_status is None and "127.0.0.1 is a loopback address" in (
        attempt.error or ""
    )
    assert hostile.requests == []
    kinds = _rows(registry, "SELECT kind FROM events WHERE kind = 'setting'")
    assert kinds == [("setting",), ("setting",)]
    with pytest.raises(InvalidInput, match="is not a host name or IP address"):
        registry.allow_webhook_hosts(["bad host!"])


# -- secrets ----------------------------------------------------------------------------------


def test_a_secret_is_stored_sealed_and_signs_what_the_receiver_checks(
    registry: modelreg.Registry, hostile: HostileServer
) -> None:
    hostile.route("POST", "/hook", Answer(200))
    created = registry.add_webhook(f"{hostile.url}/hook", ["hold"])
    secret = created.secret
    ((stored, sealed),) = _rows(registry, "SELECT secret, sealed_secret FROM webhooks")
    assert stored == "" and isinstance(sealed, str) and sealed.startswith("aesgcm1:k_")
    assert secret not in sealed and secret[6:20] not in sealed
    with registry.store.engine.connect() as connection:  # a dump of the whole database
        dump = "\n".join(connection.connection.driver_connection.iterdump())  # type: ignore[union-attr]
    assert secret not in dump
    registry.hold(add_synthetic(registry, 1), "audit")
    assert registry.deliver_webhooks().delivered == 1
    (request,) = hostile.requests_to("/hook")
    assert webhooks.verify_signature(secret, request.headers, request.body)


def test_a_host_without_the_key_claims_nothing_and_says_which_key(
    registry: modelreg.Registry, hostile: HostileServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    hostile.route("POST", "/hook", Answer(200))
    registry.add_webhook(f"{hostile.url}/hook", ["hold"])
    registry.hold(add_synthetic(registry, 1), "audit")
    made = sealing.key_id(sealing.host_key())
    monkeypatch.setenv(sealing.KEY_ENV, "A" * 43 + "=")  # another host's key
    passed = registry.deliver_webhooks()
    assert passed.attempts == [] and passed.unsigned == 1 and passed.pending == 1
    assert f"sealed with key {made}" in (passed.unsigned_reason or "")
    assert hostile.requests == [] and _rows(
        registry, "SELECT attempts FROM webhook_deliveries"
    ) == [(0,)]
    monkeypatch.delenv(sealing.KEY_ENV)
    assert registry.deliver_webhooks().delivered == 1


def test_a_sealed_secret_moved_to_another_url_does_not_open(
    registry: modelreg.Registry, hostile: HostileServer
) -> None:
    """Someone who can write the database points a webhook at their own URL: its sealed
    secret was sealed for the old URL and does not open, so nothing is signed for them."""
    hostile.route("POST", "/theirs", Answer(200))
    registry.add_webhook("https://ci.example/hook", ["hold"])
    with registry.store.engine.begin() as connection:
        connection.execute(text(f"UPDATE webhooks SET url = '{hostile.url}/theirs'"))
    registry.hold(add_synthetic(registry, 1), "audit")
    passed = registry.deliver_webhooks()
    assert passed.unsigned == 1 and "does not open for this URL" in (passed.unsigned_reason or "")
    assert hostile.requests == []


def test_a_secret_stored_before_sealing_is_sealed_by_the_first_sender_with_a_key(
    registry: modelreg.Registry, hostile: HostileServer
) -> None:
    hostile.route("POST", "/hook", Answer(200))
    registry.add_webhook(f"{hostile.url}/hook", ["hold"])
    old = "whsec_an-old-secret-stored-as-given"
    with registry.store.engine.begin() as connection:  # as migration 0010 left it
        connection.execute(
            text("UPDATE webhooks SET secret = :s, sealed_secret = NULL"), {"s": old}
        )
    registry.hold(add_synthetic(registry, 1), "audit")
    assert registry.deliver_webhooks().delivered == 1
    (request,) = hostile.requests_to("/hook")
    assert webhooks.verify_signature(old, request.headers, request.body)
    ((stored, sealed),) = _rows(registry, "SELECT secret, sealed_secret FROM webhooks")
    assert stored == "" and str(sealed).startswith("aesgcm1:")


def test_a_key_file_others_can_read_is_refused(registry: modelreg.Registry) -> None:
    registry.add_webhook("https://ci.example/hook", ["hold"])  # makes this host's key
    sealing.key_path().chmod(0o644)
    with pytest.raises(sealing.NoKey, match=r"may be read by others \(chmod 600 it\)"):
        sealing.host_key()
    with pytest.raises(InvalidInput, match="cannot seal the webhook's secret"):
        registry.add_webhook("https://ci.example/other", ["hold"])


def test_migration_0012_keeps_0010_webhooks_and_their_deliveries(
    db_url: str, hostile: HostileServer
) -> None:
    """From 0010: a webhook whose secret was stored as given keeps working (sealed by the
    first sender with a key); the settings table exists from 0011, the sealed column from
    0012."""
    from modelreg.registry.db import create_registry_engine, current_revision, migrate
    from modelreg.registry.db_head import SCHEMA_HEAD

    engine = create_registry_engine(db_url)
    migrate(engine, "0010")
    old = "whsec_stored-by-0010-as-given"
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO webhooks (url, events, secret, created_at, created_by) "
                "VALUES (:url, 'hold', :secret, '2026-01-01 00:00:00', 'ops')"
            ),
            {"url": f"{hostile.url}/hook", "secret": old},
        )
    migrate(engine)
    assert current_revision(engine) == SCHEMA_HEAD
    hostile.route("POST", "/hook", Answer(200))
    registry = modelreg.open(db_url)
    assert registry.allow_webhook_hosts(LOOPBACK).allowed_hosts == LOOPBACK
    registry.hold(add_synthetic(registry, 1), "audit")
    assert registry.deliver_webhooks().delivered == 1  # a host without a key: as it was
    assert _rows(registry, "SELECT secret, sealed_secret FROM webhooks") == [(old, None)]
    sealing.host_key(create=True)  # a sender with a key seals it
    registry.hold(add_synthetic(registry, 2), "audit")
    assert registry.deliver_webhooks().delivered == 1
    for request in hostile.requests_to("/hook"):
        assert webhooks.verify_signature(old, request.headers, request.body)
    ((stored, sealed),) = _rows(registry, "SELECT secret, sealed_secret FROM webhooks")
    assert stored == "" and str(sealed).startswith("aesgcm1:")
