"""Webhooks end to end against a real HTTP receiver on loopback: the outbox written with the
event (nothing for a rolled-back transaction), signed deliveries a receiver can check, a
receiver that is down or too slow retried with backoff and given up after the bound, and the
CLI's bad input refused before anything is written."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from sqlalchemy import text

import modelreg
from modelreg import webhooks
from tests.helpers import Receiver, add_synthetic, closed_port_url


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def _rows(registry: modelreg.Registry, sql: str) -> list[tuple[object, ...]]:
    with registry.store.engine.connect() as connection:
        return [tuple(row) for row in connection.execute(text(sql)).all()]


def test_an_event_is_delivered_signed_once(db_url: str, receiver: Receiver) -> None:
    registry = modelreg.open(db_url)
    registry.allow_webhook_hosts(["127.0.0.1"])  # the receiver is on loopback
    created = registry.add_webhook(receiver.url, ["add", "hold"], actor="ops")
    secret = created.secret
    assert secret.startswith("whsec_") and created.webhook.events == ["add", "hold"]
    record = add_synthetic(registry, 1)
    registry.hold(record, "license under review", actor="rae")
    registry.release(record, "fixed", actor="rae")  # not subscribed: no delivery

    first = registry.deliver_webhooks()
    assert (first.delivered, first.retrying, first.failed, first.pending) == (2, 0, 0, 0)
    assert [a.event for a in first.attempts] == ["add", "hold"]
    assert registry.deliver_webhooks().attempts == []  # each event once
    assert len(receiver.posts) == 2

    headers, body = receiver.posts[1]
    assert webhooks.verify_signature(secret, headers, body)
    assert not webhooks.verify_signature(secret, headers, body.replace(b"license", b"licence"))
    assert not webhooks.verify_signature("whsec_another-secret-entirely", headers, body)
    assert not webhooks.verify_signature(secret, headers, body, now=time_of(headers) + 301)
    sent = json.loads(body)
    assert sent["event"] == headers["X-Modelreg-Event"] == "hold"
    assert sent["delivery_id"] == headers["X-Modelreg-Delivery-Id"]
    assert (sent["record_id"], sent["model_id"], sent["why"], sent["actor"]) == (
        record,
        "rules/alpha",
        "license under review",
        "rae",
    )
    (hook,) = registry.webhooks().webhooks
    assert hook.deliveries == {"delivered": 2}
    assert hook.last_delivery is not None
    assert (hook.last_delivery.event, hook.last_delivery.http_status) == ("hold", 200)
    assert secret not in registry.webhooks().model_dump_json()


def time_of(headers: dict[str, str]) -> int:
    return int(headers["X-Modelreg-Timestamp"])


def test_a_receiver_that_is_down_is_retried_with_backoff_then_given_up(registry) -> None:
    registry.allow_webhook_hosts(["127.0.0.1"])
    registry.add_webhook(closed_port_url(), ["hold"])
    record = add_synthetic(registry, 1)
    registry.hold(record, "audit")

    waited = registry.deliver_webhooks(backoff_s=60)
    (attempt,) = waited.attempts
    assert attempt.status == "pending" and attempt.retry_in_s == 60
    assert attempt.http_status is None and "ConnectionRefused" in (attempt.error or "")
    assert registry.deliver_webhooks().attempts == []  # not due for a minute

    registry.store.engine.dispose()
    _due_now(registry)
    statuses = []
    for _ in range(3):
        passed = registry.deliver_webhooks(backoff_s=0, max_attempts=3)
        statuses += [(a.attempt, a.status) for a in passed.attempts]
    assert statuses == [(2, "pending"), (3, "failed")]  # the third attempt is the last
    (hook,) = registry.webhooks().webhooks
    assert hook.deliveries == {"failed": 1}
    assert hook.last_delivery is not None and hook.last_delivery.attempts == 3
    assert webhooks.backoff_s(1) == 5 and webhooks.backoff_s(4) == 40
    assert webhooks.backoff_s(30) == webhooks.MAX_BACKOFF_S


def _due_now(registry: modelreg.Registry) -> None:
    with registry.store.engine.begin() as connection:
        connection.execute(
            text("UPDATE webhook_deliveries SET next_attempt_at = '2000-01-01 00:00:00'")
        )


def test_a_receiver_that_times_out_gets_the_same_delivery_again(
    registry, receiver: Receiver
) -> None:
    registry.allow_webhook_hosts(["127.0.0.1"])
    registry.add_webhook(receiver.url, ["hold"])
    registry.hold(add_synthetic(registry, 1), "audit")
    receiver.delay_s = 2.0
    (slow,) = registry.deliver_webhooks(timeout_s=0.3, backoff_s=0).attempts
    assert slow.status == "pending" and slow.error == "timed out after 0.3 s"
    receiver.delay_s = 0.0
    (fine,) = registry.deliver_webhooks(timeout_s=5, backoff_s=0).attempts
    assert (fine.status, fine.attempt, fine.http_status) == ("delivered", 2, 200)
    ids = {h["X-Modelreg-Delivery-Id"] for h, _ in receiver.posts}
    assert ids == {slow.delivery_id} == {fine.delivery_id}  # the receiver can drop the repeat


def test_a_non_2xx_answer_is_a_failed_attempt_shown_by_its_status_only(
    registry, receiver: Receiver
) -> None:
    """A receiver's answer is never shown (a webhook must not be a way to read what a host on
    the sender's network answers): its status is all that is kept."""
    registry.allow_webhook_hosts(["127.0.0.1"])
    registry.add_webhook(receiver.url, ["hold"])
    registry.hold(add_synthetic(registry, 1), "audit")
    receiver.status, receiver.answer = 500, b"internal: db password is hunter2"
    (attempt,) = registry.deliver_webhooks(max_attempts=1).attempts
    assert (attempt.status, attempt.http_status, attempt.error) == ("failed", 500, "HTTP 500")
    (hook,) = registry.webhooks().webhooks
    assert "hunter2" not in hook.model_dump_json()


def test_a_rolled_back_transaction_leaves_nothing_to_send(registry, receiver: Receiver) -> None:
    registry.allow_webhook_hosts(["127.0.0.1"])
    registry.add_webhook(receiver.url, ["hold", "promote"])
    record = add_synthetic(registry, 1)
    with pytest.raises(RuntimeError), registry.store.locked("rules/alpha") as tx:
        tx.event("hold", "tester", record, None, "never committed")
        # In the event's own transaction, and only there.
        assert tx.session.execute(text("SELECT count(*) FROM webhook_deliveries")).scalar() == 1
        raise RuntimeError("the transaction fails after its event")
    assert _rows(registry, "SELECT count(*) FROM webhook_deliveries") == [(0,)]
    assert registry.deliver_webhooks().attempts == [] and receiver.posts == []


def test_a_removed_webhook_is_sent_nothing_more(registry, receiver: Receiver) -> None:
    registry.allow_webhook_hosts(["127.0.0.1"])
    hook = registry.add_webhook(receiver.url, ["hold", "release"]).webhook
    record = add_synthetic(registry, 1)
    registry.hold(record, "audit")
    removed = registry.remove_webhook(hook.id, why="receiver moved")
    assert removed.changed and removed.cancelled == 1
    assert removed.webhook.deliveries == {"cancelled": 1}
    registry.release(record, "fixed")
    assert registry.deliver_webhooks().attempts == [] and receiver.posts == []
    assert not registry.remove_webhook(hook.id).changed
    assert registry.webhooks().webhooks == []
    assert [h.id for h in registry.webhooks(include_removed=True).webhooks] == [hook.id]
    with pytest.raises(modelreg.errors.NotFound, match="webhook 99 not found"):
        registry.remove_webhook(99)


def test_the_cli_adds_lists_and_refuses_bad_input_writing_nothing(cli, receiver: Receiver) -> None:
    for args, said in [
        (["ftp://example.com/hook"], "is not http(s)"),
        (["http://ops:hunter2@example.com/hook"], "carries credentials"),
        (["https:///nohost"], "has no host"),
        (["http://example.com:99999/"], "does not parse"),
        ([receiver.url, "--events", "promote,deploy"], "unknown webhook event 'deploy'"),
        ([receiver.url, "--events", ","], "no webhook events given"),
    ]:
        code, out, err = cli("webhooks", "add", *args)
        assert (code, out) == (2, ""), args
        assert err.startswith("error: ") and said in err and err.count("\n") == 1, err
        assert "hunter2" not in err
    code, out, _ = cli("webhooks", "list", "--json")
    assert json.loads(out)["webhooks"] == []
    assert _rows(modelreg.open(), "SELECT count(*) FROM events") == [(0,)]

    code, out, err = cli("webhooks", "add", receiver.url, "--events", "hold,retire")
    assert code == 2 and "127.0.0.1 is a loopback address" in err
    assert "modelreg webhooks permit 127.0.0.1" in err
    code, out, err = cli("webhooks", "permit", "127.0.0.1", "--why", "the test's receiver")
    assert (code, out) == (0, "127.0.0.1\n")
    code, out, err = cli("webhooks", "add", receiver.url, "--events", "hold,retire")
    secret = out.strip()
    assert code == 0 and secret.startswith("whsec_") and "shown only now" in err
    registry = modelreg.open()
    registry.hold(add_synthetic(registry, 1), "audit")
    code, out, err = cli("webhooks", "deliver")
    assert code == 0 and "1 delivered, 0 to retry, 0 given up; 0 pending" in err
    code, out, _ = cli("webhooks", "list")
    assert code == 0 and receiver.url in out and "1 delivered" in out and secret not in out
    assert "hold delivered (HTTP 200, attempt 1)" in out
    code, _, err = cli("webhooks", "remove", "7")
    assert code == 2 and "webhook 7 not found" in err
    code, _, err = cli("webhooks", "remove", "1", "--why", "done")
    assert code == 0 and "webhook 1 removed" in err


def test_cli_deliver_exits_1_when_a_delivery_is_given_up(cli) -> None:
    registry = modelreg.open()
    registry.allow_webhook_hosts(["127.0.0.1"])
    registry.add_webhook(closed_port_url(), ["hold"])
    registry.hold(add_synthetic(registry, 1), "audit")
    for _ in range(webhooks.MAX_ATTEMPTS - 1):
        _due_now(registry)
        code, _, err = cli("webhooks", "deliver")
        assert code == 0 and "pending" in err
    _due_now(registry)
    code, out, _ = cli("webhooks", "deliver", "--json")
    passed = json.loads(out)
    assert code == 1 and passed["failed"] == 1 and passed["attempts"][0]["attempt"] == 8


def test_a_stored_secret_signs_and_a_bad_one_is_refused(registry) -> None:
    given = "a-receiver-chosen-secret-0123"
    assert registry.add_webhook("https://ci.example/h", ["verify"], secret=given).secret == given
    with pytest.raises(modelreg.errors.InvalidInput, match="16-200 printable"):
        registry.add_webhook("https://ci.example/h", ["verify"], secret="short")
    body = b'{"a":1}'
    headers = webhooks.headers_for(given, "verify", "d-1", body)
    assert webhooks.verify_signature(given, {k.lower(): v for k, v in headers.items()}, body)
    # The MLflow 3 scheme: v1, base64(HMAC-SHA256(secret, "{id}.{timestamp}.{body}")).
    import base64
    import hashlib
    import hmac

    signed = f"d-1.{headers['X-Modelreg-Timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(given.encode(), signed, hashlib.sha256).digest())
    assert headers["X-Modelreg-Signature"] == "v1," + expected.decode()


def test_the_documented_receiver_check_accepts_a_delivery_and_refuses_a_forgery() -> None:
    from pathlib import Path

    page = Path(__file__).resolve().parents[1] / "docs" / "team-service.md"
    after = page.read_text(encoding="utf-8").split("A receiver checks it before it acts:", 1)[1]
    code = after.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, object] = {}
    exec(compile(code, "docs/team-service.md", "exec"), namespace)
    check = namespace["verified"]
    assert callable(check)
    body = b'{"event":"promote"}'
    headers = webhooks.headers_for("whsec_readme-example-secret", "promote", "d-7", body)
    assert check("whsec_readme-example-secret", headers, body)
    assert not check("whsec_readme-example-secret", headers, body + b" ")
    assert not check("whsec_another-one-entirely-x", headers, body)
