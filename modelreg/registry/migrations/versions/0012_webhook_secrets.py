"""webhook secrets sealed

Revision ID: 0012
Revises: 0011

Additive: a nullable ``webhooks.sealed_secret`` (the secret sealed with a key outside the
database, ``modelreg.sealing``; new webhooks store it there and leave ``secret`` empty).
Existing secrets stay as they are until a sender holding a key seals them: the migration has
no key to seal with. (Hosts on loopback, link-local or private addresses webhooks may be sent
to are the setting ``webhooks.allowed_hosts`` of ``registry_settings``, migration 0011.)
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN (not a batch copy of the table on SQLite).
    op.add_column("webhooks", sa.Column("sealed_secret", sa.Text(), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE webhooks DROP COLUMN sealed_secret")
