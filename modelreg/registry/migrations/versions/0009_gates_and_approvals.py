"""gate terms of runs (``runs.gate_terms_json``); the approval record of a promotion

Revision ID: 0009
Revises: 0008

``runs.gate_terms_json``: what a run's suite verdict was judged against (``rules.GateTerms``:
the suite, pass rates, limits, a digest per case), read from its stored suite result. A pass
under terms weaker than ones the same record failed is not deployable until a releaser
accepts it (``gate_relaxed_after_failure``). Existing runs get theirs from their evidence here.

``promotions.owner``, ``limitations_json`` and ``retest_by``: who answers for a production
record, what it is known not to do, and when it must be tested again.

Every record's ``hold_reasons_json`` is re-derived (its stated holds and those its manifest's
facts imply under today's rules: identity, provenance, recipe): a record added before a rule
existed is held like one added after it.

Columns are added with plain ``ALTER TABLE … ADD COLUMN`` (no batch copy on SQLite, which
would drop the generation triggers of migration 0008).
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("gate_terms_json", sa.Text(), nullable=True))
    op.add_column("promotions", sa.Column("owner", sa.String(length=200), nullable=True))
    op.add_column("promotions", sa.Column("limitations_json", sa.Text(), nullable=True))
    op.add_column("promotions", sa.Column("retest_by", sa.DateTime(timezone=True), nullable=True))
    from modelreg.suites import run_gate_terms

    connection = op.get_bind()
    v = sa.table(
        "verifications",
        sa.column("run_id", sa.String),
        sa.column("target", sa.String),
        sa.column("required", sa.Boolean),
        sa.column("evidence_json", sa.Text),
    )
    runs = sa.table("runs", sa.column("run_id", sa.String), sa.column("gate_terms_json", sa.Text))
    rows = connection.execute(
        sa.select(v.c.run_id, v.c.target, v.c.required, v.c.evidence_json).where(
            v.c.evidence_json.like('%"suite_result"%')
        )
    ).all()
    by_run: dict[str, tuple[str, list[tuple[bool, dict[str, object]]]]] = {}
    for run_id, target, required, evidence_json in rows:
        try:
            evidence = json.loads(evidence_json)
        except ValueError:
            continue
        if isinstance(evidence, dict):
            by_run.setdefault(run_id, (target, []))[1].append((bool(required), evidence))
    for run_id, (target, evidence) in by_run.items():
        terms = run_gate_terms(evidence, target)
        if terms is not None:
            connection.execute(
                runs.update().where(runs.c.run_id == run_id).values(gate_terms_json=terms.to_json())
            )
    _rederive_holds(connection)


def _rederive_holds(connection: sa.engine.Connection) -> None:
    from pydantic import ValidationError

    from modelreg.registry.rows import effective_holds
    from modelreg.schemas.manifest import Manifest

    records = sa.table(
        "records",
        sa.column("id", sa.String),
        sa.column("manifest_json", sa.Text),
        sa.column("hold_reasons_json", sa.Text),
    )
    rows = connection.execute(
        sa.select(records.c.id, records.c.manifest_json, records.c.hold_reasons_json)
    ).all()
    for record_id, manifest_json, holds_json in rows:
        try:
            manifest = Manifest.model_validate_json(manifest_json)
            stated = json.loads(holds_json or "[]")
        except (ValidationError, ValueError):
            continue  # `modelreg db check` reports a row that cannot be read
        holds = effective_holds(stated, manifest)
        if holds != stated:
            connection.execute(
                records.update()
                .where(records.c.id == record_id)
                .values(hold_reasons_json=json.dumps(holds))
            )


def downgrade() -> None:
    op.drop_column("promotions", "retest_by")
    op.drop_column("promotions", "limitations_json")
    op.drop_column("promotions", "owner")
    op.drop_column("runs", "gate_terms_json")
