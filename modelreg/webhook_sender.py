"""Sending the webhooks' outbox: each webhook in its own lane, none waiting for another.

A pass reads what is due and hands each webhook's deliveries (oldest event first) to that
webhook's lane: a task on a pool of ``LANES`` threads shared by the process. A webhook whose
lane is still busy — a slow receiver from an earlier pass — is left for a later pass, so a
slow or failing receiver holds its own lane and nothing else (until ``LANES`` of them are slow
at once: the pool is bounded). A lane sends its webhook's deliveries one at a time, in order,
until one fails (the rest wait for the next pass) or it has spent an attempt's timeout
(``Policy.timeout_s``, each attempt's total deadline) — so a lane ends within about twice that.

One attempt is three steps, public so that the rules' state machine can put a step between
them: ``begin`` claims the delivery (nobody else sends it; it is counted), ``send`` POSTs it
(no database), ``end`` records the outcome — unless the webhook was removed meanwhile, which
leaves the delivery cancelled for good (``registry.hooks``).

A webhook's secret is opened with this host's key (``modelreg.sealing``); a host without the
key the secret was sealed with claims none of that webhook's deliveries and says so
(``unsigned``): they stay pending for a host that has it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from modelreg import sealing
from modelreg.registry.hooks import CANCELLED, DueDelivery, Webhooks
from modelreg.registry.settings import Settings
from modelreg.registry.store import Store
from modelreg.schemas.output import WebhookAttemptOut, WebhookDeliverOutput
from modelreg.webhooks import Attempt, backoff_s, headers_for, payload, post

LANES = 8  # webhooks sent to at once by one process
LANE_DELIVERIES = 20  # deliveries one lane sends in one pass at most


@dataclass(frozen=True)
class Policy:
    timeout_s: float  # an attempt's total time
    backoff_s: float  # the wait after a first failed attempt (doubling)
    max_attempts: int


@dataclass(frozen=True)
class InFlight:
    """A claimed attempt: ``attempt`` is its number (1 for the first)."""

    due: DueDelivery
    attempt: int


def lease_s(timeout_s: float) -> float:
    """How long a claim keeps others off: the attempt's deadline and a margin. A sender that
    dies mid-attempt leaves the delivery due again after it."""
    return timeout_s + 30.0


def begin(hooks: Webhooks, due: DueDelivery, timeout_s: float) -> InFlight | None:
    """Claim ``due``'s next attempt; None when another sender took it or the webhook was
    removed."""
    if not hooks.claim(due, lease_s(timeout_s)):
        return None
    return InFlight(due, due.attempts + 1)


def send(flight: InFlight, secret: str, timeout_s: float, allowed: Sequence[str]) -> Attempt:
    """POST the claimed delivery, signed with ``secret``, within ``timeout_s`` in all."""
    due = flight.due
    body = payload(due.event, due.delivery_id)
    headers = headers_for(secret, due.event.kind, due.delivery_id, body)
    return post(due.url, body, headers, timeout_s, allowed)


def end(hooks: Webhooks, flight: InFlight, sent: Attempt, policy: Policy) -> WebhookAttemptOut:
    """Record the attempt's outcome (nothing, if the webhook was removed meanwhile: the
    delivery stays cancelled) and describe it."""
    retry = None
    if not sent.delivered and flight.attempt < policy.max_attempts:
        retry = backoff_s(flight.attempt, policy.backoff_s)
    status = hooks.finish(flight.due, sent.status, sent.error, retry)
    due = flight.due
    return WebhookAttemptOut(
        webhook_id=due.webhook_id,
        delivery_id=due.delivery_id,
        event=due.event.kind,
        event_id=due.event.id,
        attempt=flight.attempt,
        status=status,
        http_status=sent.status,
        error=sent.error,
        retry_in_s=retry if status == "pending" else None,
    )


def signing_secret(hooks: Webhooks, due: DueDelivery, key: bytes | None) -> str:
    """The secret that signs ``due``: its webhook's sealed secret opened with ``key``; a
    secret stored as given (before migration 0011) is sealed now when this host has a key.
    ``sealing.NoKey`` when it cannot be had."""
    if due.sealed_secret is not None:
        if key is None:
            raise sealing.NoKey(
                f"this host has no webhook key; the secret is sealed with "
                f"{sealing.sealed_with(due.sealed_secret)} (set ${sealing.KEY_ENV})"
            )
        return sealing.open_sealed(due.sealed_secret, due.url, key)
    if key is not None:
        hooks.seal_secret(due.webhook_id, sealing.seal(due.secret, due.url, key))
    return due.secret


# -- lanes ------------------------------------------------------------------------------------


class _Lanes:
    """This process's pool of lanes and which webhook each is sending to."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pool: ThreadPoolExecutor | None = None
        self.pid = 0
        self.busy: dict[tuple[str, int], Future[list[WebhookAttemptOut]]] = {}

    def executor(self) -> ThreadPoolExecutor:
        if self.pool is None or self.pid != os.getpid():  # a forked worker makes its own
            self.pool = ThreadPoolExecutor(LANES, thread_name_prefix="webhook-lane")
            self.pid = os.getpid()
            self.busy = {}
        return self.pool


_lanes = _Lanes()


def busy_lanes() -> int:
    """Lanes of this process still sending."""
    with _lanes.lock:
        return sum(not f.done() for f in _lanes.busy.values())


def _lane(
    store: Store, dues: list[DueDelivery], secret: str, policy: Policy, allowed: Sequence[str]
) -> list[WebhookAttemptOut]:
    hooks = Webhooks(store)
    started = time.monotonic()
    done: list[WebhookAttemptOut] = []
    for due in dues:
        flight = begin(hooks, due, policy.timeout_s)
        if flight is None:
            continue
        outcome = end(hooks, flight, send(flight, secret, policy.timeout_s, allowed), policy)
        done.append(outcome)
        if outcome.status != "delivered" or time.monotonic() - started > policy.timeout_s:
            break  # the rest wait for a later pass: this lane never holds for long
    return done


def _log_failure(future: Future[list[WebhookAttemptOut]]) -> None:
    """A lane that failed (the database went away) says so; its claims run out by lease."""
    if not future.cancelled() and (error := future.exception()) is not None:
        logging.getLogger("modelreg.webhooks").warning(
            "a webhook lane failed: %s", error, exc_info=error
        )


def deliver_pass(
    store: Store, policy: Policy, *, limit: int = 50, wait: bool = True
) -> WebhookDeliverOutput:
    """One pass over the outbox (at most ``limit`` due deliveries), each webhook in its lane.
    ``wait``: return once the lanes this pass started have ended, with their attempts; else
    at once, with none (the lanes record their outcomes themselves: a server's loop)."""
    hooks = Webhooks(store)
    allowed = Settings(store).webhook_hosts()
    try:
        key: bytes | None = sealing.host_key()
    except sealing.NoKey:
        key = None
    by_hook: dict[int, list[DueDelivery]] = {}
    for due in hooks.due(limit):
        by_hook.setdefault(due.webhook_id, []).append(due)
    unsigned, why_unsigned = 0, None
    started: list[Future[list[WebhookAttemptOut]]] = []
    engine = str(store.engine.url)
    with _lanes.lock:
        pool = _lanes.executor()
        _lanes.busy = {k: f for k, f in _lanes.busy.items() if not f.done()}
        for hook_id, dues in by_hook.items():
            lane = _lanes.busy.get((engine, hook_id))
            if lane is not None and not lane.done():
                continue  # still sending from an earlier pass: it keeps its own lane
            try:
                secret = signing_secret(hooks, dues[0], key)
            except sealing.NoKey as exc:
                unsigned += len(dues)
                why_unsigned = str(exc)
                continue
            future = pool.submit(_lane, store, dues[:LANE_DELIVERIES], secret, policy, allowed)
            future.add_done_callback(_log_failure)
            _lanes.busy[(engine, hook_id)] = future
            started.append(future)
    attempts: list[WebhookAttemptOut] = []
    if wait:
        for future in started:
            attempts += future.result()
    return WebhookDeliverOutput(
        attempts=attempts,
        delivered=sum(a.status == "delivered" for a in attempts),
        retrying=sum(a.status == "pending" for a in attempts),
        failed=sum(a.status == "failed" for a in attempts),
        cancelled=sum(a.status == CANCELLED for a in attempts),
        unsigned=unsigned,
        unsigned_reason=why_unsigned,
        pending=hooks.pending(),
    )
