"""fleet-true verdicts: runtime reports, location checks, materialised verdicts

Revision ID: 0011
Revises: 0010

A verdict is a function of the registry's rows alone, whichever host asks:

- ``runtime_reports``: what a host of a target runs for one runtime (from a verify that
  exercised it, or ``modelreg host report``); the newest per (target, runtime) is what the
  target runs, and evidence produced under another runtime is stale for every reader.
- ``location_checks``: each check of a location's bytes (every sha256, by which host, when);
  a location is fetchable when its newest check verified it. The location ``add`` recorded
  for a record was verified by it (``add`` hashes every file there): it is checked here, at
  the record's creation, by the host its URL names. Other locations are unchecked until a
  fetch, a push or ``modelreg locate RECORD --check`` verifies them.
- ``verdicts``: each record's verdict on each target it has runs or promotions on, written
  with every write that can change it; ``registry_settings`` holds the rules version they
  were derived under (modelreg derives them all when it is not its own: the first process of
  a modelreg that opens the registry, or ``modelreg db upgrade``), and later other registry-wide
  settings (``registry.settings``).
- ``runs.purpose``: why a run that never counts was made (one_off, missing_bytes,
  investigate, drill).
- Shared target definitions carry their trusted keys and suite with them: each key or suite
  file a stored definition names is read here when this host has it (else the target keeps
  the name only, and nothing signed counts there until it is applied again).

The per-process derivation caches of revision 0008 are gone, and with them its generation
triggers, ``models.generation`` and ``registry_generation``.
"""

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_GENERATION_TABLES = (
    "records",
    "promotions",
    "model_suites",
    "events",
    "record_files",
    "verifications",
    "runs",
    "record_states",
    "record_locations",
    "artifact_signatures",
    "targets",
    "api_tokens",
)


def _when(name: str, nullable: bool = False) -> sa.Column[Any]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _drop_generations() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in _GENERATION_TABLES:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_generation ON {table}")
        op.execute("DROP FUNCTION IF EXISTS modelreg_bump_generation()")
    else:
        for table in _GENERATION_TABLES:
            for operation in ("insert", "update", "delete"):
                op.execute(f"DROP TRIGGER IF EXISTS {table}_{operation}_generation")
    op.drop_table("registry_generation")
    # ALTER TABLE … DROP COLUMN (SQLite 3.35+, PostgreSQL): not a batch copy of ``models``,
    # which every model's rows refer to.
    op.execute("ALTER TABLE models DROP COLUMN generation_xid")
    op.execute("ALTER TABLE models DROP COLUMN generation")


def _embedded(spec: dict[str, Any]) -> dict[str, Any]:
    """A stored definition with the key and suite files it names read into it, where this
    host has them."""
    from pathlib import Path

    trust = dict(spec.get("trust") or {})
    for kind in ("artifact", "verifier"):
        paths = trust.get(f"{kind}_keys") or []
        if paths and not trust.get(f"{kind}_key_pems"):
            try:
                from modelreg.targets import _key_pem

                trust[f"{kind}_key_pems"] = [_key_pem(p, "migration 0011") for p in paths]
            except Exception:
                pass
    if trust:
        spec = spec | {"trust": trust}
    suite = spec.get("suite")
    if suite and suite != "default-chat" and "suite_content" not in spec:
        try:
            from modelreg.suites import load_suite

            spec = spec | {"suite_content": load_suite(Path(suite)).model_dump(mode="json")}
        except Exception:
            pass
    return spec


def upgrade() -> None:
    import hashlib

    _drop_generations()
    op.create_table(
        "runtime_reports",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("target", sa.String(100), nullable=False),
        sa.Column("runtime", sa.String(32), nullable=False),
        sa.Column("host", sa.String(200), nullable=False),
        sa.Column("fingerprint_json", sa.Text(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=True),
        _when("at"),
        sa.Column("actor", sa.String(200), nullable=False),
    )
    op.create_index(
        "ix_runtime_reports_target_runtime", "runtime_reports", ["target", "runtime", "id"]
    )
    op.create_table(
        "location_checks",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("record_id", sa.String(32), sa.ForeignKey("records.id"), nullable=False),
        sa.Column("url", sa.String(2000), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("host", sa.String(200), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        _when("at"),
        sa.Column("actor", sa.String(200), nullable=False),
    )
    op.create_index("ix_location_checks_record", "location_checks", ["record_id", "url", "id"])
    op.create_table(
        "verdicts",
        sa.Column("record_id", sa.String(32), sa.ForeignKey("records.id"), primary_key=True),
        sa.Column("target", sa.String(100), primary_key=True),
        sa.Column("model_id", sa.String(200), nullable=False),
        sa.Column("deployable", sa.Boolean(), nullable=False),
        sa.Column("stale", sa.Boolean(), nullable=False),
        sa.Column("held", sa.Boolean(), nullable=False),
        sa.Column("reasons_json", sa.Text(), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=True),
        _when("verified_at", nullable=True),
        sa.Column("rules_version", sa.Integer(), nullable=False),
    )
    op.create_index("ix_verdicts_target", "verdicts", ["target", "deployable"])
    op.create_index("ix_verdicts_model", "verdicts", ["model_id", "target"])
    op.create_table(
        "registry_settings",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("value", sa.Text(), nullable=False),
        _when("updated_at"),
        sa.Column("updated_by", sa.String(200), nullable=False),
    )
    op.add_column("runs", sa.Column("purpose", sa.String(16), nullable=True))

    connection = op.get_bind()
    rows = connection.execute(sa.text("SELECT name, spec_json FROM targets")).all()
    for name, spec_json in rows:
        spec = _embedded(json.loads(spec_json))
        text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
        connection.execute(
            sa.text("UPDATE targets SET spec_json = :j, spec_sha256 = :d WHERE name = :n"),
            {"j": text, "d": hashlib.sha256(text.encode()).hexdigest(), "n": name},
        )
    # The location add recorded (each record's first, a file:// or hf:// one) was verified by
    # add itself, which hashed every file there.
    first = connection.execute(
        sa.text(
            "SELECT l.record_id, l.url, r.created_at, r.created_by FROM record_locations l "
            "JOIN records r ON r.id = l.record_id WHERE l.id IN "
            "(SELECT MIN(id) FROM record_locations GROUP BY record_id)"
        )
    ).all()
    for record_id, url, created_at, created_by in first:
        if not (url.startswith("file://") or url.startswith("hf://")):
            continue
        where = url.removeprefix("file://").split("/", 1)[0] if url.startswith("file://") else ""
        connection.execute(
            sa.text(
                "INSERT INTO location_checks (record_id, url, ok, detail, host, source, at, "
                "actor) VALUES (:r, :u, :ok, :d, :h, 'add', :at, :a)"
            ),
            {
                "r": record_id,
                "u": url,
                "ok": True,
                "d": "every sha256, when the record was added",
                "h": where or "unknown",
                "at": created_at,
                "a": created_by,
            },
        )


def downgrade() -> None:
    raise NotImplementedError("0011 drops the generation triggers of 0008: restore a backup")
