"""generations: ``models.generation`` per model, ``registry_generation`` for the rest

Revision ID: 0008
Revises: 0007

Reads that derive verdicts (status, the deploy gate, the matrix, record pages) keep what they
derived in each process, per model, and re-derive a model's only when its generation moved.
A generation must change in the same transaction as every write, whatever writes — this
modelreg, an older one, an import, a person with ``psql`` — so it is a trigger on every table,
not a convention of the code:

- a row of ``records``, ``promotions``, ``model_suites`` or ``events`` (by its ``model_id``),
  or of a table keyed by a record (files, verifications, runs, states, locations, artifact
  signatures: the record's model) bumps ``models.generation`` of its model;
- ``targets`` bumps ``registry_generation['targets']``, ``api_tokens`` its ``'tokens'``;
- ``registry_generation['epoch']`` is a random number drawn when the database is created:
  another database at the same URL (a restore, a re-created one) is never taken for this one.

An update that moves a row to another model bumps both.

PostgreSQL: constraint triggers deferred to the commit, so a writer locks a model's row only
while it commits — taken any earlier, a writer holding one model's generation could wait for
another model's lock held by a writer waiting for it — and once per model and transaction
(``models.generation_xid``: an import of many rows updates each model's row once). SQLite: a
row trigger per table and operation (a writer holds the database's lock already).
"""

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

BY_MODEL = ("records", "promotions", "model_suites", "events")
BY_RECORD = (
    "record_files",
    "verifications",
    "runs",
    "record_states",
    "record_locations",
    "artifact_signatures",
)
NAMED = {"targets": "targets", "api_tokens": "tokens"}
TABLES = (*BY_MODEL, *BY_RECORD, *NAMED)


def _model_of(table: str, row: str) -> str:
    if table in BY_MODEL:
        return f"{row}.model_id"
    return f"(SELECT model_id FROM records WHERE id = {row}.record_id)"


def upgrade() -> None:
    with op.batch_alter_table("models") as batch:
        batch.add_column(
            sa.Column("generation", sa.BigInteger(), nullable=False, server_default="0")
        )
        batch.add_column(
            sa.Column("generation_xid", sa.BigInteger(), nullable=True, server_default="0")
        )
    op.create_table(
        "registry_generation",
        sa.Column("name", sa.String(length=32), primary_key=True),
        sa.Column("value", sa.BigInteger(), nullable=False),
    )
    epoch = secrets.randbits(62)
    op.execute(
        "INSERT INTO registry_generation (name, value) VALUES "
        f"('epoch', {epoch}), ('targets', 0), ('tokens', 0)"
    )
    if op.get_bind().dialect.name == "postgresql":
        named = " ".join(
            f"IF TG_TABLE_NAME = '{table}' THEN UPDATE registry_generation SET value = value + 1 "
            f"WHERE name = '{name}'; RETURN NULL; END IF;"
            for table, name in NAMED.items()
        )
        by_model = ", ".join(f"'{t}'" for t in BY_MODEL)
        bump = (
            "UPDATE models SET generation = generation + 1, generation_xid = txid_current() "
            "WHERE model_id = {m} AND generation_xid IS DISTINCT FROM txid_current(); "
        )
        op.execute(
            "CREATE FUNCTION modelreg_bump_generation() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "DECLARE m text; before text; BEGIN "
            f"{named} "
            f"IF TG_TABLE_NAME IN ({by_model}) THEN "
            "IF TG_OP <> 'DELETE' THEN m := NEW.model_id; END IF; "
            "IF TG_OP <> 'INSERT' THEN before := OLD.model_id; END IF; "
            "ELSE "
            "IF TG_OP <> 'DELETE' THEN "
            "SELECT model_id INTO m FROM records WHERE id = NEW.record_id; END IF; "
            "IF TG_OP <> 'INSERT' THEN "
            "SELECT model_id INTO before FROM records WHERE id = OLD.record_id; END IF; "
            "END IF; "
            "IF m IS NOT NULL THEN " + bump.format(m="m") + "END IF; "
            "IF before IS NOT NULL AND before IS DISTINCT FROM m THEN "
            + bump.format(m="before")
            + "END IF; RETURN NULL; END $$"
        )
        for table in TABLES:
            op.execute(
                f"CREATE CONSTRAINT TRIGGER {table}_generation AFTER INSERT OR UPDATE OR DELETE "
                f"ON {table} DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "
                "modelreg_bump_generation()"
            )
        return
    for table in TABLES:
        for operation in ("INSERT", "UPDATE", "DELETE"):
            row = "OLD" if operation == "DELETE" else "NEW"
            if table in NAMED:
                bump = (
                    "UPDATE registry_generation SET value = value + 1 "
                    f"WHERE name = '{NAMED[table]}'"
                )
            else:
                # An update bumps the model the row had and the one it has.
                models = (
                    f"{_model_of(table, 'NEW')}, {_model_of(table, 'OLD')}"
                    if operation == "UPDATE"
                    else _model_of(table, row)
                )
                bump = f"UPDATE models SET generation = generation + 1 WHERE model_id IN ({models})"
            op.execute(
                f"CREATE TRIGGER {table}_{operation.lower()}_generation AFTER {operation} ON "
                f"{table} BEGIN {bump}; END"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in TABLES:
            op.execute(f"DROP TRIGGER {table}_generation ON {table}")
        op.execute("DROP FUNCTION modelreg_bump_generation()")
    else:
        for table in TABLES:
            for operation in ("insert", "update", "delete"):
                op.execute(f"DROP TRIGGER {table}_{operation}_generation")
    op.drop_table("registry_generation")
    with op.batch_alter_table("models") as batch:
        batch.drop_column("generation_xid")
        batch.drop_column("generation")
