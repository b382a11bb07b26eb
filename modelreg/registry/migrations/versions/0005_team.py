"""the team service: shared targets, record locations, API tokens, imported runs

Revision ID: 0005
Revises: 0004

Four new tables, nothing changed in the old ones: ``targets`` (definitions shared through the
registry, ``modelreg targets add``), ``record_locations`` (where a record's bytes can be
fetched), ``api_tokens`` (bearer tokens of ``modelreg serve``, the secret's sha256 only) and
``imported_runs`` (verification runs uploaded over HTTP, kept apart from ``verifications`` so
that they can never make a record deployable). Existing records get no location: the host that
added them was not recorded (their add path stays in ``records.root``), and a guessed host would
send a fetch to the wrong machine.
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _when(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "targets",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("spec_json", sa.Text(), nullable=False),
        sa.Column("spec_sha256", sa.String(64), nullable=False),
        _when("defined_at"),
        sa.Column("defined_by", sa.String(200), nullable=False),
    )
    op.create_table(
        "record_locations",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("record_id", sa.String(32), sa.ForeignKey("records.id"), nullable=False),
        sa.Column("url", sa.String(2000), nullable=False),
        _when("added_at"),
        sa.Column("added_by", sa.String(200), nullable=False),
    )
    op.create_index(
        "uq_record_locations_url", "record_locations", ["record_id", "url"], unique=True
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(100), nullable=False, unique=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("secret_sha256", sa.String(64), nullable=False, unique=True),
        _when("created_at"),
        sa.Column("created_by", sa.String(200), nullable=False),
        _when("revoked_at", nullable=True),
        sa.Column("revoked_by", sa.String(200), nullable=True),
    )
    op.create_table(
        "imported_runs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.String(32), nullable=False, unique=True),
        sa.Column("record_id", sa.String(32), sa.ForeignKey("records.id"), nullable=False),
        sa.Column("target", sa.String(100), nullable=False),
        sa.Column("host", sa.String(200), nullable=False),
        sa.Column("fingerprint_json", sa.Text(), nullable=False),
        sa.Column("checks_json", sa.Text(), nullable=False),
        sa.Column("signature", sa.Text(), nullable=True),
        sa.Column("trust", sa.String(16), nullable=False),
        _when("uploaded_at"),
        sa.Column("uploaded_by", sa.String(200), nullable=False),
    )
    op.create_index(
        "ix_imported_runs_record_target", "imported_runs", ["record_id", "target", "id"]
    )


def downgrade() -> None:
    op.drop_index("ix_imported_runs_record_target", table_name="imported_runs")
    op.drop_table("imported_runs")
    op.drop_table("api_tokens")
    op.drop_index("uq_record_locations_url", table_name="record_locations")
    op.drop_table("record_locations")
    op.drop_table("targets")
