"""one-off runs: ``runs.exploratory``

Revision ID: 0007
Revises: 0006

A run of ``verify --suite S`` where S is not the suite in force for (model, target) is
recorded and shown, and never decides a verdict. Existing runs are not exploratory: before
this migration every local run could count, and the judge already calls a run whose suite
differs from the one in force stale.
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(
            sa.Column("exploratory", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("exploratory")
