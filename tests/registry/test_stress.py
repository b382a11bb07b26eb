"""8 processes × 50 mixed operations on one registry; the invariants must hold afterwards.

Operations, through the public API: add (five manifests shared by every worker, so adds race),
a verification write (all checks pass), promote, rollback --apply and release. Each worker
counts what it did and what was refused; the database must agree: one record per manifest,
one add event per record, every verification, promotion, rollback and release logged, and each
model's promotion chain unbroken (the production pointer never forks). An operation that
fails in any other way fails the test.
"""

from __future__ import annotations

import itertools
import multiprocessing
import random
from collections import Counter
from pathlib import Path

import pytest

import modelreg
from modelreg.errors import InvalidInput, NoRollbackCandidate, NotDeployable
from tests.helpers import (
    located_as_added,
    record_run,
    stored,
    synthetic_bytes,
    synthetic_manifest,
)

WORKERS, OPERATIONS = 8, 50
MODELS = ("stress/alpha", "stress/beta")
MANIFESTS = [synthetic_manifest(i, MODELS[i % 2]) for i in range(5)]


def _copy_of(manifest: object) -> str:
    from modelreg.locations import file_url

    directory = synthetic_bytes() / f"stress-{manifest.record_id}"  # type: ignore[attr-defined]
    directory.mkdir(parents=True, exist_ok=True)
    for f in manifest.files:  # type: ignore[attr-defined]
        (directory / f.path).write_bytes(b"\0" * f.bytes)
    return file_url(directory)


def _worker(url: str, seed: int) -> dict[str, int]:
    registry = modelreg.open(url)
    rng = random.Random(seed)
    done: Counter[str] = Counter()
    for _ in range(OPERATIONS):
        op = rng.choice(["add", "add", "verify", "verify", "promote", "rollback", "release"])
        manifest = rng.choice(MANIFESTS)
        if op == "add":
            record, created = registry.store.add(manifest, Path("/stress"), f"worker{seed}")
            if created:  # its one copy, as add leaves it (rollback needs a fetchable copy)
                located_as_added(registry, record, _copy_of(manifest), f"worker{seed}")
            done["created" if created else "already"] += 1
            continue
        if stored(registry).record_by_identity(manifest.identity_digest()) is None:
            done["not_added_yet"] += 1
            continue
        if op == "verify":
            record_run(registry, manifest.record_id)
            done["verify"] += 1
        elif op == "promote":
            try:
                changed = registry.promote(manifest.record_id, "cpu").changed
                done["promote" if changed else "already_production"] += 1
            except NotDeployable:
                done["refused"] += 1
        elif op == "rollback":
            try:
                applied = registry.rollback(str(manifest.model_id), "cpu", why="stress").applied
                done["rollback" if applied else "already_rolled_back"] += 1
            except NoRollbackCandidate:
                done["no_candidate"] += 1
        else:
            try:
                registry.release(manifest.record_id, "stress")
                done["release"] += 1
            except InvalidInput as exc:
                assert "not on hold" in str(exc), exc
                done["not_on_hold"] += 1
    return dict(done)


@pytest.mark.slow
def test_concurrent_writers_keep_every_invariant(db_url: str) -> None:
    modelreg.open(db_url)  # create the schema once; the race on a fresh one is tested apart
    context = multiprocessing.get_context("spawn")
    with context.Pool(WORKERS) as pool:
        reports = pool.starmap(_worker, [(db_url, seed) for seed in range(WORKERS)])
    total: Counter[str] = Counter()
    for report in reports:
        total.update(report)
    assert sum(total.values()) == WORKERS * OPERATIONS
    # Every kind of operation really happened (a run where everything errored is a failure).
    for kind in ("created", "verify", "promote", "rollback", "release"):
        assert total[kind] > 0, total

    registry = modelreg.open(db_url)
    records = stored(registry).records()
    assert len(records) == len({r.id for r in records}) == total["created"]
    assert {r.id for r in records} <= {m.record_id for m in MANIFESTS}

    events: Counter[str] = Counter()
    for model in {r.model_id for r in records}:
        history = stored(registry).events(model)
        events.update(e.kind for e in history)
        assert [e.id for e in history] == sorted(e.id for e in history)
        chain = stored(registry).promotions(model, "cpu")
        for before, after in itertools.pairwise(chain):
            assert after.previous_record_id == before.record_id, "the production pointer forked"
        if chain:
            assert chain[0].previous_record_id is None
    assert events["add"] == total["created"]
    assert events["verify"] == total["verify"]
    assert events["promote"] == total["promote"]
    assert events["rollback"] == total["rollback"]
    assert events["release"] == total["release"]
    # Each applied rollback held the record it rolled back from, unless it was held already.
    assert events["hold"] <= total["rollback"]
    verifications = sum(len(stored(registry).verifications(r.id)) for r in records)
    assert verifications == 3 * total["verify"]
