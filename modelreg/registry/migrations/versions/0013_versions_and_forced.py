"""record versions and forced rollbacks

Revision ID: 0013
Revises: 0012

Additive: ``promotions.forced_json``, the reasons a record was not deployable when a
break-glass rollback (``rollback --to R --force``) made it production; NULL for every other
promotion.

Additive: ``records.version``, a per-model number given at add (``v1``, ``v2``, … in the order
the records were added), so a person can type ``acme/chat@v3`` where a record id is asked for.
Existing records are numbered here in the order of their ``created_at`` (then id), model by
model; a unique index on (model_id, version) keeps a number from naming two records. Nullable
in the schema only because it is added to existing rows: every write gives one.
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        # Earlier migrations of the same upgrade may leave deferred checks pending on these
        # tables; PostgreSQL alters no table with pending trigger events.
        op.execute("SET CONSTRAINTS ALL IMMEDIATE")
    op.add_column("promotions", sa.Column("forced_json", sa.Text(), nullable=True))
    op.add_column("records", sa.Column("version", sa.Integer(), nullable=True))
    # ROW_NUMBER(): SQLite ≥ 3.25 and PostgreSQL.
    op.execute(
        "UPDATE records SET version = ("
        " SELECT n FROM ("
        "  SELECT id AS rid, ROW_NUMBER() OVER"
        "   (PARTITION BY model_id ORDER BY created_at, id) AS n FROM records"
        " ) AS numbered WHERE numbered.rid = records.id)"
    )
    op.create_index("uq_records_model_version", "records", ["model_id", "version"], unique=True)


def downgrade() -> None:
    op.drop_index("uq_records_model_version", table_name="records")
    op.execute("ALTER TABLE records DROP COLUMN version")
    op.execute("ALTER TABLE promotions DROP COLUMN forced_json")
