"""record identity from facts only; hold reasons as a column

Revision ID: 0004
Revises: 0003

Records keep their ids. Each gets ``identity_sha256``, the digest of its facts without the
judgments about them (``Manifest.identity_digest``), which is what makes a re-added artifact
the same record from now on, and ``hold_reasons_json``, so deployability over many records needs
no manifest parsing. Two existing records whose facts are equal (added under different wording
of a judgment) stay two records: the older one owns the identity, the newer keeps its
whole-manifest digest as identity, which no new manifest can produce.
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    from modelreg.schemas.manifest import Manifest

    # Plain ADD COLUMN, not a batch rebuild: SQLite cannot drop and recreate a table other
    # tables refer to while foreign keys are enforced. So identity_sha256 stays nullable in the
    # schema (every row gets one below, and the store always writes one).
    op.add_column("records", sa.Column("identity_sha256", sa.String(64), nullable=True))
    op.add_column(
        "records", sa.Column("hold_reasons_json", sa.Text(), nullable=False, server_default="[]")
    )
    connection = op.get_bind()
    rows = connection.execute(
        sa.text("SELECT id, manifest_sha256, manifest_json FROM records ORDER BY created_at, id")
    ).all()
    owned: set[str] = set()
    for record_id, manifest_sha256, manifest_json in rows:
        manifest = Manifest.model_validate_json(manifest_json)
        identity = manifest.identity_digest()
        if identity in owned:
            identity = manifest_sha256
        owned.add(identity)
        connection.execute(
            sa.text(
                "UPDATE records SET identity_sha256 = :identity, hold_reasons_json = :holds "
                "WHERE id = :id"
            ),
            {"identity": identity, "holds": json.dumps(manifest.hold_reasons), "id": record_id},
        )
    op.create_index("uq_records_identity_sha256", "records", ["identity_sha256"], unique=True)


def downgrade() -> None:
    op.drop_index("uq_records_identity_sha256", table_name="records")
    op.drop_column("records", "hold_reasons_json")
    op.drop_column("records", "identity_sha256")
