"""The newest migration's revision. Checked against alembic's view in the tests; lets an
up-to-date database open without importing alembic (and ``quick`` read one without even
SQLAlchemy)."""

SCHEMA_HEAD = "0011"
