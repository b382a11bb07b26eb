"""Alembic environment: runs on the connection modelreg hands over (no alembic.ini)."""

from alembic import context
from sqlmodel import SQLModel

import modelreg.registry.tables  # noqa: F401 - the tables, registered in its metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=SQLModel.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
