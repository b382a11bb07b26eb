"""models, records, record files, verifications, promotions and events

Revision ID: 0001
Revises:
"""

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _when(name: str, index: bool = False) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False, index=index)


def upgrade() -> None:
    op.create_table(
        "models",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("model_id", sa.String(200), nullable=False, unique=True),
        _when("created_at"),
    )
    op.create_table(
        "records",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("manifest_sha256", sa.String(64), nullable=False, unique=True),
        sa.Column(
            "model_id",
            sa.String(200),
            sa.ForeignKey("models.model_id"),
            nullable=False,
            index=True,
        ),
        sa.Column("format", sa.String(16), nullable=False),
        sa.Column("source", sa.String(300), nullable=True),
        sa.Column("license", sa.String(100), nullable=True),
        sa.Column("manifest_json", sa.Text(), nullable=False),
        sa.Column("root", sa.Text(), nullable=False),
        _when("created_at", index=True),
        sa.Column("created_by", sa.String(200), nullable=False),
    )
    op.create_table(
        "record_files",
        sa.Column("record_id", sa.String(32), sa.ForeignKey("records.id"), primary_key=True),
        sa.Column("path", sa.String(1000), primary_key=True),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False, index=True),
    )
    op.create_table(
        "verifications",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.String(32), nullable=False, index=True),
        sa.Column("record_id", sa.String(32), sa.ForeignKey("records.id"), nullable=False),
        sa.Column("target", sa.String(100), nullable=False),
        sa.Column("check", sa.String(64), nullable=False),
        sa.Column("required", sa.Boolean(), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("classification", sa.String(32), nullable=True),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("evidence_json", sa.Text(), nullable=False),
        sa.Column("host", sa.String(200), nullable=False),
        _when("started_at"),
        _when("finished_at", index=True),
    )
    op.create_index(
        "ix_verifications_record_target", "verifications", ["record_id", "target", "id"]
    )
    op.create_table(
        "promotions",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("model_id", sa.String(200), sa.ForeignKey("models.model_id"), nullable=False),
        sa.Column("target", sa.String(100), nullable=False),
        sa.Column("record_id", sa.String(32), sa.ForeignKey("records.id"), nullable=False),
        sa.Column("previous_record_id", sa.String(32), nullable=True),
        sa.Column("action", sa.String(16), nullable=False),
        _when("at"),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("why", sa.Text(), nullable=True),
    )
    op.create_index("ix_promotions_model_target", "promotions", ["model_id", "target", "id"])
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), primary_key=True),
        _when("at", index=True),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("model_id", sa.String(200), nullable=True, index=True),
        sa.Column("record_id", sa.String(32), nullable=True, index=True),
        sa.Column("target", sa.String(100), nullable=True),
        sa.Column("why", sa.Text(), nullable=True),
        sa.Column("detail_json", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    for table in ("events", "promotions", "verifications", "record_files", "records", "models"):
        op.drop_table(table)
