"""The registry at 100,000 records, on SQLite and PostgreSQL.

- rollback lookup (production + newest earlier deployable record), with our indexes vs with
  them dropped;
- `list --deployable-on T` over 1,000 verified records: batched deployability vs one
  record at a time;
- `add` of a manifest (no hashing).
Query plans of the two hot queries are printed into RESULTS.md.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import insert, text

from benchmarks.common import WORK
from modelreg import deploy
from modelreg.fingerprint import runtime_fingerprint
from modelreg.registry.store import Registry, open_registry
from modelreg.registry.tables import (
    ModelRow,
    PromotionRow,
    RecordFileRow,
    RecordRow,
    VerificationRow,
)
from modelreg.schemas.manifest import (
    Count,
    FileEntry,
    License,
    Manifest,
    ParameterLedger,
    RuntimeRequirements,
)
from modelreg.targets import get_target

RECORDS, MODELS, VERIFIED, PROMOTIONS = 100_000, 100, 1_000, 50
INDEXES = (
    "ix_verifications_record_target",
    "ix_verifications_target_record",
    "ix_promotions_model_target",
)


def _manifest(i: int) -> Manifest:
    return Manifest(
        model_id=f"bench/m{i % MODELS}",
        source=f"pypi://bench=={i}",
        license=License(id="mit", source="cli"),
        format="gguf",
        files=[FileEntry(path="m.gguf", bytes=i, sha256=hashlib.sha256(b"%d" % i).hexdigest())],
        parameters=ParameterLedger(total=Count(value=i, provenance="tensors")),
        runtime=RuntimeRequirements(runtime="llama.cpp"),
    )


def _populate(registry: Registry) -> None:
    now = datetime.now(UTC)
    fingerprint = runtime_fingerprint(get_target("cpu"), "llama.cpp")
    import json

    fp_json = json.dumps(fingerprint, sort_keys=True)
    with registry.engine.begin() as c:
        c.execute(
            insert(ModelRow),
            [{"model_id": f"bench/m{m}", "created_at": now} for m in range(MODELS)],
        )
        for start in range(0, RECORDS, 10_000):
            records, files = [], []
            for i in range(start, start + 10_000):
                m = _manifest(i)
                records.append(
                    {
                        "id": m.record_id,
                        "manifest_sha256": m.digest(),
                        "model_id": m.model_id,
                        "format": "gguf",
                        "source": m.source,
                        "license": "mit",
                        "manifest_json": m.canonical_json(),
                        "root": "/bench",
                        "created_at": now,
                        "created_by": "bench",
                    }
                )
                files.append(
                    {
                        "record_id": m.record_id,
                        "path": "m.gguf",
                        "bytes": i,
                        "sha256": m.files[0].sha256,
                    }
                )
            c.execute(insert(RecordRow), records)
            c.execute(insert(RecordFileRow), files)
        # 1,000 records of model bench/m0 verified on cpu (deployable), 20,000 others on inf2.
        runs = []
        for k in range(VERIFIED):
            record_id = _manifest(k * MODELS).record_id
            run = uuid.uuid4().hex
            runs += [
                {
                    "run_id": run,
                    "record_id": record_id,
                    "target": "cpu",
                    "check": check,
                    "required": True,
                    "outcome": "pass",
                    "summary": "ok",
                    "evidence_json": "{}",
                    "host": "bench",
                    "started_at": now,
                    "finished_at": now,
                    "fingerprint_json": fp_json,
                }
                for check in ("digest", "host-compat", "gguf-cpu-smoke")
            ]
        for k in range(20_000):
            runs.append(
                {
                    "run_id": uuid.uuid4().hex,
                    "record_id": _manifest(k).record_id,
                    "target": "inf2.xlarge",
                    "check": "digest",
                    "required": True,
                    "outcome": "pass",
                    "summary": "ok",
                    "evidence_json": "{}",
                    "host": "bench",
                    "started_at": now,
                    "finished_at": now,
                    "fingerprint_json": "{}",
                }
            )
        c.execute(insert(VerificationRow), runs)
        previous = None
        for k in range(PROMOTIONS):
            record_id = _manifest(k * MODELS).record_id
            c.execute(
                insert(PromotionRow),
                [
                    {
                        "model_id": "bench/m0",
                        "target": "cpu",
                        "record_id": record_id,
                        "previous_record_id": previous,
                        "action": "promote",
                        "at": now,
                        "actor": "bench",
                    }
                ],
            )
            previous = record_id


def _median_ms(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _plan(registry: Registry, sql: str) -> str:
    dialect = registry.engine.dialect.name
    prefix = "EXPLAIN QUERY PLAN " if dialect == "sqlite" else "EXPLAIN "
    with registry.engine.connect() as c:
        rows = c.execute(text(prefix + sql)).all()
    return " | ".join(str(r[-1]) for r in rows)


def _bench(name: str, url: str) -> list[dict[str, Any]]:
    registry = open_registry(url)
    _populate(registry)
    if registry.engine.dialect.name == "postgresql":
        with registry.engine.begin() as c:
            c.execute(text("ANALYZE"))
    rollback = _median_ms(lambda: deploy.rollback_plan(registry, "bench/m0", "cpu"), 21)
    listing = _median_ms(lambda: deploy.records_on(registry, "cpu"), 5)
    assert len(deploy.records_on(registry, "cpu")) == VERIFIED
    target = get_target("cpu")
    verified = registry.records_verified_on("cpu")
    one_by_one = _median_ms(
        lambda: [
            registry.deployability(r, "cpu", deploy.fingerprint_for(target)(r)) for r in verified
        ],
        3,
    )
    counter = iter(range(RECORDS, RECORDS + 1000))
    add = _median_ms(lambda: registry.add(_manifest(next(counter)), Path("/bench"), "bench"), 51)
    plans = {
        "latest run per record on a target": _plan(
            registry,
            "SELECT max(id) FROM verifications WHERE target = 'cpu' "
            "AND record_id IN ('r_0') GROUP BY record_id",
        ),
        "production for (model, target)": _plan(
            registry,
            "SELECT * FROM promotions WHERE model_id = 'bench/m0' AND target = 'cpu' "
            "ORDER BY id DESC LIMIT 1",
        ),
    }
    with registry.engine.begin() as c:
        for index in INDEXES:
            c.execute(text(f"DROP INDEX {index}"))
    rollback_noidx = _median_ms(lambda: deploy.rollback_plan(registry, "bench/m0", "cpu"), 5)
    listing_noidx = _median_ms(lambda: deploy.records_on(registry, "cpu"), 3)
    registry.engine.dispose()
    return [
        {
            "name": f"{name}: rollback lookup, 100k records",
            "ours_s": rollback / 1000,
            "theirs_s": rollback_noidx / 1000,
            "ratio": rollback_noidx / rollback,
            "detail": f"{rollback:.1f} ms with indexes vs {rollback_noidx:.1f} ms without; plan: "
            f"{plans['production for (model, target)']}",
            "target": "median ≤ 20 ms",
            "met": rollback <= 20,
        },
        {
            "name": f"{name}: list --deployable-on cpu, 1,000 rows of 100k",
            "ours_s": listing / 1000,
            "theirs_s": one_by_one / 1000,
            "ratio": one_by_one / listing,
            "detail": f"batched {listing:.0f} ms vs one record at a time {one_by_one:.0f} ms; "
            f"without indexes {listing_noidx:.0f} ms; plan: "
            f"{plans['latest run per record on a target']}",
            "target": "≤ 200 ms",
            "met": listing <= 200,
        },
        {
            "name": f"{name}: add of a manifest (no hashing), 100k records present",
            "ours_s": add / 1000,
            "theirs_s": None,
            "ratio": 1.0,
            "detail": f"median {add:.1f} ms over 51 adds",
            "target": "≤ 50 ms",
            "met": add <= 50,
        },
    ]


def run() -> list[dict[str, Any]]:
    WORK.mkdir(parents=True, exist_ok=True)
    sqlite_path = WORK / "bench-registry.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{sqlite_path}{suffix}").unlink(missing_ok=True)
    results = _bench("SQLite", f"sqlite:///{sqlite_path}")
    pg = os.environ.get("MODELREG_TEST_POSTGRES_URL")
    if pg:
        from sqlalchemy import create_engine

        schema = f"bench_{uuid.uuid4().hex[:8]}"
        admin = create_engine(pg)
        with admin.begin() as c:
            c.execute(text(f"CREATE SCHEMA {schema}"))
        try:
            results += _bench("PostgreSQL", f"{pg}?options=-csearch_path%3D{schema}")
        finally:
            with admin.begin() as c:
                c.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    return results


if __name__ == "__main__":
    for r in run():
        print(r)
