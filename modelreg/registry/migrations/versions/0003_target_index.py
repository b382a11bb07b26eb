"""index verifications by target first, for "what is deployable on T"

Revision ID: 0003
Revises: 0002
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_verifications_target_record", "verifications", ["target", "record_id", "id"]
    )


def downgrade() -> None:
    op.drop_index("ix_verifications_target_record", table_name="verifications")
