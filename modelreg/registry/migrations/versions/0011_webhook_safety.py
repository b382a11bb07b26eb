"""webhook secrets sealed, and registry settings

Revision ID: 0011
Revises: 0010

Additive: a nullable ``webhooks.sealed_secret`` (the secret sealed with a key outside the
database, ``modelreg.sealing``; new webhooks store it there and leave ``secret`` empty) and a
``registry_settings`` table (name -> value; the first is ``webhooks.allowed_hosts``: hosts on
loopback, link-local or private addresses webhooks may be sent to). Existing secrets stay as
they are until a sender holding a key seals them: the migration has no key to seal with.
"""

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def _when(name: str) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False)


def upgrade() -> None:
    with op.batch_alter_table("webhooks") as batch:
        batch.add_column(sa.Column("sealed_secret", sa.Text(), nullable=True))
    op.create_table(
        "registry_settings",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("value", sa.Text(), nullable=False),
        _when("updated_at"),
        sa.Column("updated_by", sa.String(200), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("registry_settings")
    with op.batch_alter_table("webhooks") as batch:
        batch.drop_column("sealed_secret")
