"""8 processes × 50 mixed operations on one registry; the invariants must hold afterwards.

Operations: add (five manifests shared by every worker, so adds race), a verification write
(all checks pass), promote, and rollback --apply. Each worker reports what it did; the database
must agree: one record per manifest, one add event per record, every verification and every
promotion logged, and each model's promotion chain unbroken (the production pointer never
forks).
"""

from __future__ import annotations

import itertools
import multiprocessing
import random
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest

from modelreg.errors import NoRollbackCandidate, NotDeployable
from modelreg.registry.store import Registry, open_registry
from modelreg.schemas.manifest import (
    Count,
    FileEntry,
    License,
    Manifest,
    ParameterLedger,
    RuntimeRequirements,
)
from modelreg.schemas.verification import CheckResult, Outcome

WORKERS, OPERATIONS = 8, 50
MODELS = ("stress/alpha", "stress/beta")


def _manifest(i: int) -> Manifest:
    return Manifest(
        model_id=MODELS[i % 2],
        source=f"pypi://stress-model=={i}.0",
        license=License(id="mit", source="cli"),
        format="gguf",
        files=[FileEntry(path=f"m{i}.gguf", bytes=1000 + i, sha256=f"{i:064x}")],
        parameters=ParameterLedger(total=Count(value=1000 + i, provenance="tensors")),
        runtime=RuntimeRequirements(runtime="llama.cpp"),
    )


MANIFESTS = [_manifest(i) for i in range(5)]


def _passing_run() -> list[CheckResult]:
    now = datetime.now(UTC)
    return [
        CheckResult(
            check=name,
            required=True,
            outcome=Outcome.PASS,
            summary="ok",
            started_at=now,
            finished_at=now,
        )
        for name in ("digest", "host-compat", "gguf-cpu-smoke")
    ]


def _worker(url: str, seed: int) -> dict[str, int]:
    registry = open_registry(url)
    rng = random.Random(seed)
    done: Counter[str] = Counter()
    for _ in range(OPERATIONS):
        op = rng.choice(["add", "add", "verify", "verify", "promote", "rollback"])
        manifest = rng.choice(MANIFESTS)
        if op == "add":
            _, created = registry.add(manifest, _root(), f"worker{seed}")
            done["created" if created else "already"] += 1
            continue
        try:
            record = registry.get(manifest.record_id)
        except Exception:
            done["skipped"] += 1
            continue
        if op == "verify":
            registry.save_verification(record, "cpu", _passing_run(), f"worker{seed}", "h")
            done["verify"] += 1
        elif op == "promote":
            try:
                registry.promote(record, "cpu", f"worker{seed}")
                done["promote"] += 1
            except NotDeployable:
                done["refused"] += 1
        else:
            try:
                plan = registry.rollback_plan(record.model_id, "cpu")
                registry.apply_rollback(plan, f"worker{seed}", "stress")
                done["rollback"] += 1
            except NoRollbackCandidate:
                done["no_candidate"] += 1
    return dict(done)


def _root() -> Any:
    from pathlib import Path

    return Path("/stress")


@pytest.mark.slow
def test_concurrent_writers_keep_every_invariant(db_url: str) -> None:
    open_registry(db_url)  # migrate once, before the workers race
    context = multiprocessing.get_context("spawn")
    with context.Pool(WORKERS) as pool:
        reports = pool.starmap(_worker, [(db_url, seed) for seed in range(WORKERS)])
    total: Counter[str] = Counter()
    for report in reports:
        total.update(report)
    assert sum(total.values()) == WORKERS * OPERATIONS

    registry: Registry = open_registry(db_url)
    records = registry.records()
    assert len(records) == len({r.id for r in records}) == total["created"]
    assert {r.id for r in records} <= {m.record_id for m in MANIFESTS}

    events: Counter[str] = Counter()
    for model in {r.model_id for r in records}:
        history = registry.history(model)
        events.update(e.kind for e in history)
        assert [e.id for e in history] == sorted(e.id for e in history)
        chain = registry.promotions(model, "cpu")
        for before, after in itertools.pairwise(chain):
            assert after.previous_record_id == before.record_id, "the production pointer forked"
        if chain:
            assert chain[0].previous_record_id is None
    assert events["add"] == total["created"]
    assert events["verify"] == total["verify"]
    assert events["promote"] == total["promote"]
    assert events["rollback"] == total["rollback"]
    verifications = sum(len(registry.verifications(r.id)) for r in records)
    assert verifications == 3 * total["verify"]
