"""webhooks and their outbox

Revision ID: 0010
Revises: 0009

Two new tables, nothing changed in the old ones: ``webhooks`` (receivers of events, the kinds
each is sent and the secret its deliveries are signed with) and ``webhook_deliveries`` (the
outbox: a row per event and subscribed webhook, written in the event's transaction, so no
event is lost on a crash and none is sent for a transaction that rolled back). Events before
this revision are not sent: no webhook existed to receive them.
"""

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def _when(name: str, nullable: bool = False) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "webhooks",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("url", sa.String(2000), nullable=False),
        sa.Column("events", sa.String(500), nullable=False),
        sa.Column("secret", sa.String(200), nullable=False),
        _when("created_at"),
        sa.Column("created_by", sa.String(200), nullable=False),
        _when("removed_at", nullable=True),
        sa.Column("removed_by", sa.String(200), nullable=True),
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("webhook_id", sa.Integer(), sa.ForeignKey("webhooks.id"), nullable=False),
        sa.Column("event_id", sa.Integer(), sa.ForeignKey("events.id"), nullable=False),
        sa.Column("delivery_id", sa.String(36), nullable=False, unique=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        _when("next_attempt_at"),
        _when("last_attempt_at", nullable=True),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
    )
    op.create_index(
        "ix_webhook_deliveries_due", "webhook_deliveries", ["status", "next_attempt_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_webhook_deliveries_due", table_name="webhook_deliveries")
    op.drop_table("webhook_deliveries")
    op.drop_table("webhooks")
