"""runtime fingerprint per verification; record states (held, retired)

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Verifications from before this revision have no fingerprint: '{}' means unknown, and
    # such evidence counts as stale.
    with op.batch_alter_table("verifications") as batch:
        batch.add_column(
            sa.Column("fingerprint_json", sa.Text(), nullable=False, server_default="{}")
        )
    op.create_table(
        "record_states",
        sa.Column("record_id", sa.String(32), sa.ForeignKey("records.id"), primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("record_states")
    with op.batch_alter_table("verifications") as batch:
        batch.drop_column("fingerprint_json")
