"""promotion labels

Revision ID: 0014
Revises: 0013

Additive: ``promotions.label``, an optional name a releaser gives a promotion
(``promote --label release-14``), so a person can type ``acme/chat@release-14`` for the record
it promoted; NULL for every promotion before this migration and for every one given none.
An index on (model_id, label) serves that lookup.
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        # As in 0013: no ALTER TABLE with trigger events pending from an earlier migration.
        op.execute("SET CONSTRAINTS ALL IMMEDIATE")
    op.add_column("promotions", sa.Column("label", sa.String(length=64), nullable=True))
    op.create_index("ix_promotions_model_label", "promotions", ["model_id", "label"])


def downgrade() -> None:
    op.drop_index("ix_promotions_model_label", table_name="promotions")
    op.execute("ALTER TABLE promotions DROP COLUMN label")
