"""runs (origin, signed envelope), artifact signatures, suites attached to models

Revision ID: 0005
Revises: 0004

Every existing run becomes a local run (it was produced by verify against a registry; runs
imported before this revision cannot be told apart and keep counting as they did).
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(32), primary_key=True),
        sa.Column("record_id", sa.String(32), sa.ForeignKey("records.id"), nullable=False),
        sa.Column("target", sa.String(100), nullable=False),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("origin_detail", sa.Text(), nullable=True),
        sa.Column("envelope_json", sa.Text(), nullable=True),
        sa.Column("signer_key_id", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_runs_record_id", "runs", ["record_id"])
    op.execute(
        "INSERT INTO runs (run_id, record_id, target, origin, created_at) "
        "SELECT run_id, MIN(record_id), MIN(target), 'local', MIN(started_at) "
        "FROM verifications GROUP BY run_id"
    )
    op.create_table(
        "artifact_signatures",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("record_id", sa.String(32), sa.ForeignKey("records.id"), nullable=False),
        sa.Column("bundle_sha256", sa.String(64), nullable=False),
        sa.Column("key_hint", sa.String(64), nullable=True),
        sa.Column("bundle_json", sa.Text(), nullable=False),
        sa.Column("added_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
    )
    op.create_index("ix_artifact_signatures_record_id", "artifact_signatures", ["record_id"])
    op.create_index(
        "uq_artifact_signatures_record_bundle",
        "artifact_signatures",
        ["record_id", "bundle_sha256"],
        unique=True,
    )
    op.create_table(
        "model_suites",
        sa.Column("model_id", sa.String(200), sa.ForeignKey("models.model_id"), primary_key=True),
        sa.Column("suite_sha256", sa.String(64), nullable=False),
        sa.Column("suite_json", sa.Text(), nullable=False),
        sa.Column("attached_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("model_suites")
    op.drop_index("uq_artifact_signatures_record_bundle", table_name="artifact_signatures")
    op.drop_index("ix_artifact_signatures_record_id", table_name="artifact_signatures")
    op.drop_table("artifact_signatures")
    op.drop_index("ix_runs_record_id", table_name="runs")
    op.drop_table("runs")
