"""The newest migration's revision. Checked against alembic's view in the tests; lets an
up-to-date database open without importing alembic."""

SCHEMA_HEAD = "0014"
