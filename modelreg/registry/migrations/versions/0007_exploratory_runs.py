"""one-off runs (``runs.exploratory``) and signed time (``runs.signed_at``)

Revision ID: 0007
Revises: 0006

A run of ``verify --suite S`` where S is not the suite in force for (model, target) is
recorded and shown, and never decides a verdict. Existing runs are not exploratory: before
this migration every local run could count, and the judge already calls a run whose suite
differs from the one in force stale.

``runs.signed_at`` is a signed run's signed time, read from its statement: the newest signed
run is the one signed last, not the one whose checks claim the latest finish (an uploader
chooses those). Existing signed runs get it from their envelopes here.
"""

import json
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def _signed_at(envelope_json: str) -> datetime | None:
    import base64

    try:
        envelope = json.loads(envelope_json)
        statement = json.loads(base64.b64decode(envelope["payload"]))
        when = datetime.fromisoformat(statement["predicate"]["signed_at"])
    except (KeyError, TypeError, ValueError):
        return None
    return when.astimezone(UTC) if when.tzinfo is not None else None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(
            sa.Column("exploratory", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("signed_at", sa.DateTime(timezone=True), nullable=True))
    runs = sa.table(
        "runs",
        sa.column("run_id", sa.String),
        sa.column("envelope_json", sa.Text),
        sa.column("signed_at", sa.DateTime(timezone=True)),
    )
    connection = op.get_bind()
    signed = connection.execute(
        sa.select(runs.c.run_id, runs.c.envelope_json).where(runs.c.envelope_json.is_not(None))
    ).all()
    for run_id, envelope_json in signed:
        connection.execute(
            runs.update().where(runs.c.run_id == run_id).values(signed_at=_signed_at(envelope_json))
        )


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("signed_at")
        batch.drop_column("exploratory")
