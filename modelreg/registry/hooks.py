"""Webhooks' storage: the hooks and their outbox (migration 0010).

``enqueue`` runs inside the transaction that writes an event (``Writes.event``): the outbox
rows commit with it or not at all. Sending (``modelreg.webhook_sender``) claims one due row at
a time with a conditional UPDATE, so any number of senders (server workers, a ``webhooks
deliver`` loop) share one outbox without sending an attempt twice.

Removal is final: ``remove`` cancels every pending row of the hook, those claimed by an
attempt in flight included; ``due`` and ``claim`` skip removed hooks (a row enqueued by an
event that committed after the hook was read as live is never sent); and ``finish`` records
an outcome only on a row still pending, still claimed by that attempt, of a hook not
removed — an attempt that ends after the removal leaves the row cancelled.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import exists, update
from sqlmodel import Session, col, func, select

from modelreg.clock import utcnow
from modelreg.registry.rows import Event, aware, event_row
from modelreg.registry.tables import EventRow, WebhookDeliveryRow, WebhookRow
from modelreg.webhooks import EVENTS

if TYPE_CHECKING:
    from modelreg.registry.store import Store

PENDING, DELIVERED, FAILED, CANCELLED = "pending", "delivered", "failed", "cancelled"


@dataclass(frozen=True)
class LastDelivery:
    event_kind: str
    status: str
    attempts: int
    at: datetime | None
    http_status: int | None
    error: str | None


@dataclass(frozen=True)
class StoredWebhook:
    id: int
    url: str
    events: tuple[str, ...]
    created_at: datetime
    created_by: str
    removed_at: datetime | None
    removed_by: str | None
    counts: dict[str, int]  # delivery status -> how many
    last: LastDelivery | None  # the newest attempted delivery


@dataclass(frozen=True)
class DueDelivery:
    id: int
    webhook_id: int
    delivery_id: str
    attempts: int
    url: str
    secret: str  # as given: only a webhook added before migration 0011 has one here
    sealed_secret: str | None  # modelreg.sealing: every other webhook's secret
    event: Event


def enqueue(session: Session, event: EventRow) -> None:
    """An outbox row for each live webhook sent ``event``'s kind (in its transaction)."""
    if event.kind not in EVENTS:
        return
    assert event.id is not None
    hooks = session.exec(
        select(WebhookRow.id, WebhookRow.events).where(col(WebhookRow.removed_at).is_(None))
    ).all()
    for hook_id, kinds in hooks:
        if event.kind in kinds.split(","):
            assert hook_id is not None
            session.add(
                WebhookDeliveryRow(
                    webhook_id=hook_id,
                    event_id=event.id,
                    delivery_id=str(uuid.uuid4()),
                    status=PENDING,
                    attempts=0,
                    next_attempt_at=event.at,
                )
            )


class Webhooks:
    """The webhooks of one registry database."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add(
        self, url: str, events: tuple[str, ...], sealed_secret: str, actor: str
    ) -> StoredWebhook:
        """A new webhook; its secret is given sealed (``modelreg.sealing``)."""
        with self.store.write() as tx:
            row = WebhookRow(
                url=url,
                events=",".join(events),
                secret="",
                sealed_secret=sealed_secret,
                created_at=utcnow(),
                created_by=actor,
            )
            tx.session.add(row)
            tx.session.flush()
            detail = {"webhook_id": row.id, "url": _shown(url), "events": list(events)}
            tx.session.add(event_row("webhook-add", actor, detail=detail))
            return _stored(row, {}, None)  # new: no delivery counted, none attempted

    def remove(self, hook_id: int, actor: str, why: str | None) -> tuple[bool, int]:
        """Stop sending to a webhook; its pending deliveries are cancelled, those an attempt
        in flight has claimed too (its outcome will not be recorded). Returns whether this
        removed it (False: removed before) and how many deliveries it cancelled;
        ``LookupError`` when there is no such webhook."""
        with self.store.write() as tx:
            row = tx.session.get(WebhookRow, hook_id)
            if row is None:
                raise LookupError(hook_id)
            if row.removed_at is not None:
                return False, 0
            row.removed_at, row.removed_by = utcnow(), actor
            tx.session.add(row)
            d = WebhookDeliveryRow
            cancelled = tx.session.execute(
                update(d)
                .where(col(d.webhook_id) == hook_id, col(d.status) == PENDING)
                .values(status=CANCELLED, last_error="webhook removed")
            ).rowcount  # type: ignore[attr-defined]
            detail = {"webhook_id": hook_id, "url": _shown(row.url), "cancelled": cancelled}
            tx.session.add(event_row("webhook-remove", actor, why=why, detail=detail))
            tx.session.flush()
            return True, int(cancelled)

    def get(self, hook_id: int) -> StoredWebhook:
        """One webhook, removed or not, with its delivery counts; ``LookupError`` when there
        is no such webhook."""
        found = self.listed(include_removed=True, only=hook_id)
        if not found:
            raise LookupError(hook_id)
        return found[0]

    def listed(
        self, include_removed: bool = False, *, only: int | None = None
    ) -> list[StoredWebhook]:
        """Every webhook (``only``: that one), with its deliveries counted by status and its
        newest attempt."""
        d = WebhookDeliveryRow
        with self.store.read() as reads:
            session = reads.session
            query = select(WebhookRow).order_by(col(WebhookRow.id))
            counting = select(d.webhook_id, d.status, func.count()).group_by(
                col(d.webhook_id), col(d.status)
            )
            if not include_removed:
                query = query.where(col(WebhookRow.removed_at).is_(None))
            if only is not None:
                query = query.where(col(WebhookRow.id) == only)
                counting = counting.where(col(d.webhook_id) == only)
            rows = session.exec(query).all()
            counts: dict[int, dict[str, int]] = {}
            for hook_id, status, n in session.exec(counting).all():
                counts.setdefault(hook_id, {})[status] = n
            hooks = []
            for row in rows:
                assert row.id is not None
                last = session.exec(
                    select(d, EventRow.kind)
                    .join(EventRow, col(EventRow.id) == col(d.event_id))
                    .where(col(d.webhook_id) == row.id, col(d.last_attempt_at).is_not(None))
                    .order_by(col(d.last_attempt_at).desc(), col(d.id).desc())
                    .limit(1)
                ).first()
                newest = None
                if last is not None:
                    delivery, kind = last
                    newest = LastDelivery(
                        kind,
                        delivery.status,
                        delivery.attempts,
                        aware(delivery.last_attempt_at) if delivery.last_attempt_at else None,
                        delivery.last_status,
                        delivery.last_error,
                    )
                hooks.append(_stored(row, counts.get(row.id, {}), newest))
            return hooks

    def pending(self) -> int:
        """Deliveries not yet delivered, failed or cancelled (due now or later)."""
        d = WebhookDeliveryRow
        with self.store.read() as reads:
            return int(
                reads.session.exec(
                    select(func.count()).select_from(d).where(col(d.status) == PENDING)
                ).one()
            )

    def due(self, limit: int = 50) -> list[DueDelivery]:
        """Pending deliveries of live webhooks whose next attempt is due, oldest event
        first."""
        d, w = WebhookDeliveryRow, WebhookRow
        with self.store.read() as reads:
            rows = reads.session.exec(
                select(d, w, EventRow)
                .join(w, col(w.id) == col(d.webhook_id))
                .join(EventRow, col(EventRow.id) == col(d.event_id))
                .where(
                    col(d.status) == PENDING,
                    col(d.next_attempt_at) <= utcnow(),
                    col(w.removed_at).is_(None),
                )
                .order_by(col(d.event_id), col(d.id))
                .limit(limit)
            ).all()
            due = []
            for delivery, hook, event in rows:
                assert delivery.id is not None
                due.append(
                    DueDelivery(
                        delivery.id,
                        delivery.webhook_id,
                        delivery.delivery_id,
                        delivery.attempts,
                        hook.url,
                        hook.secret,
                        hook.sealed_secret,
                        Event.from_row(event),
                    )
                )
            return due

    def seal_secret(self, hook_id: int, sealed_secret: str) -> None:
        """Replace a webhook's secret as given (added before migration 0011) by its sealed
        value."""
        with self.store.write() as tx:
            tx.session.execute(
                update(WebhookRow)
                .where(col(WebhookRow.id) == hook_id, col(WebhookRow.sealed_secret).is_(None))
                .values(secret="", sealed_secret=sealed_secret)
            )

    def claim(self, due: DueDelivery, lease_s: float) -> bool:
        """Take ``due``'s next attempt: True when no other sender took it first. The attempt
        is counted now; a sender that dies before ``finish`` leaves it due after the lease."""
        d = WebhookDeliveryRow
        now = utcnow()
        with self.store.write() as tx:
            claimed = tx.session.execute(
                update(d)
                .where(
                    col(d.id) == due.id,
                    col(d.status) == PENDING,
                    col(d.attempts) == due.attempts,
                    col(d.next_attempt_at) <= now,
                    _hook_live(),
                )
                .values(
                    attempts=due.attempts + 1,
                    last_attempt_at=now,
                    next_attempt_at=now + timedelta(seconds=lease_s),
                )
            )
            return bool(claimed.rowcount == 1)  # type: ignore[attr-defined]

    def finish(
        self, due: DueDelivery, status: int | None, error: str | None, retry_in_s: float | None
    ) -> str:
        """Record a claimed attempt's outcome: delivered, due again in ``retry_in_s`` or (None)
        failed for good — only while the row is still pending, still this attempt's (no lease
        ran out and let another sender claim it) and its webhook not removed. Returns the
        delivery's status: the outcome, or the row's own status when it was not this
        attempt's to record (``cancelled`` after a removal)."""
        d = WebhookDeliveryRow
        outcome = DELIVERED if error is None else PENDING if retry_in_s is not None else FAILED
        values: dict[str, object] = {"status": outcome, "last_status": status, "last_error": error}
        if retry_in_s is not None:
            values["next_attempt_at"] = utcnow() + timedelta(seconds=retry_in_s)
        with self.store.write() as tx:
            recorded = tx.session.execute(
                update(d)
                .where(
                    col(d.id) == due.id,
                    col(d.attempts) == due.attempts + 1,
                    col(d.status) == PENDING,
                    _hook_live(),
                )
                .values(**values)
            )
            if recorded.rowcount == 1:  # type: ignore[attr-defined]
                return outcome
            row = tx.session.get(d, due.id)
            return CANCELLED if row is None else row.status


def _hook_live() -> Any:
    """The delivery row's webhook is not removed (a condition of an UPDATE of the outbox)."""
    w, d = WebhookRow, WebhookDeliveryRow
    return exists().where(col(w.id) == col(d.webhook_id), col(w.removed_at).is_(None))


def _shown(url: str) -> str:
    from modelreg.urls import redact_url

    return redact_url(url)


def _stored(row: WebhookRow, counts: dict[str, int], last: LastDelivery | None) -> StoredWebhook:
    assert row.id is not None
    return StoredWebhook(
        row.id,
        row.url,
        tuple(k for k in row.events.split(",") if k),
        aware(row.created_at),
        row.created_by,
        aware(row.removed_at) if row.removed_at else None,
        row.removed_by,
        counts,
        last,
    )
