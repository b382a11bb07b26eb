"""the team service: shared targets, record locations, API tokens

Revision ID: 0006
Revises: 0005

Three new tables, nothing changed in the old ones: ``targets`` (definitions shared through the
registry, ``modelreg targets add``), ``record_locations`` (where a record's bytes can be
fetched) and ``api_tokens`` (bearer tokens of ``modelreg serve``, the secret's sha256 only).
Runs uploaded over HTTP are ``runs`` of origin "uploaded" (migration 0005): they count only
when signed by a key the target trusts. Existing records get no location: the host that added
them was not recorded (their add path stays in ``records.root``), and a guessed host would
send a fetch to the wrong machine.
"""

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def _when(name: str, nullable: bool = False) -> sa.Column[Any]:
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


def downgrade() -> None:
    op.drop_table("api_tokens")
    op.drop_index("uq_record_locations_url", table_name="record_locations")
    op.drop_table("record_locations")
    op.drop_table("targets")
