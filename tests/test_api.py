"""The public API on a temporary registry with synthetic check results: the deployment rules as
a user meets them (promote, rollback, hold, status, gate, history), atomic under races."""

from __future__ import annotations

import itertools
import multiprocessing
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import modelreg
from modelreg.api import Registry
from modelreg.errors import (
    InvalidInput,
    ModelNotFound,
    NoRollbackCandidate,
    NotDeployable,
    TargetNotFound,
)
from modelreg.reasons import ReasonCode
from modelreg.steps import Step
from tests.helpers import add_synthetic, record_run, report_runtime, stored, synthetic_sha256

MODEL = "rules/alpha"
REPO = Path(__file__).resolve().parent.parent


def _deployed(registry: Registry, *indexes: int) -> list[str]:
    ids = []
    for i in indexes:
        record_id = add_synthetic(registry, i)
        record_run(registry, record_id)
        ids.append(record_id)
    return ids


def _production(registry: Registry, target: str = "cpu") -> str | None:
    entries = registry.status(MODEL, target).entries
    return entries[0].record.record_id if entries else None


def test_version_and_public_names() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", modelreg.__version__)
    assert set(modelreg.__all__) >= {"open", "Registry", "inspect", "__version__"}
    done = subprocess.run(
        [sys.executable, "-c", "import modelreg; print(modelreg.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == modelreg.__version__


@pytest.mark.slow
def test_the_python_page_example_runs(tmp_path: Path, smollm2: Path) -> None:
    page = (REPO / "docs" / "python.md").read_text()
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"MODELREG_HOME": str(tmp_path / "home"), "HOME": str(tmp_path), "PATH": "/usr/bin"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "deployable: True" in done.stdout and "production: r_" in done.stdout


def test_promote_rollback_and_a_second_rollback_changes_nothing(registry: Registry) -> None:
    r1, r2 = _deployed(registry, 1, 2)
    assert registry.promote(r1, "cpu", why="v1").changed
    promoted = registry.promote(r2, "cpu", why="v2")
    assert promoted.promotion is not None and promoted.promotion.previous_record_id == r1

    plan = registry.rollback_plan(MODEL, "cpu")
    assert plan.candidate is not None and plan.candidate.record.record_id == r1
    with pytest.raises(InvalidInput, match="`why`"):
        registry.rollback(MODEL, "cpu", why=" ")

    done = registry.rollback(MODEL, "cpu", why="x")
    assert done.applied is not None and done.applied.record_id == r1
    assert done.held == r2
    assert _production(registry) == r1
    assert stored(registry).state(r2).state.value == "held"
    assert "rolled back from" in (stored(registry).state(r2).reason or "")
    promotions = len(stored(registry).promotions(MODEL))

    again = registry.rollback(MODEL, "cpu", why="x")
    assert again.applied is None and again.already_rolled_back is not None
    assert "already rolled back" in again.message and "nothing changed" in again.message
    assert len(stored(registry).promotions(MODEL)) == promotions
    assert _production(registry) == r1

    # Releasing the bad build makes it promotable again, never a rollback candidate.
    registry.release(r2, "fixed")
    registry.promote(r2, "cpu", why="fixed by hand")
    plan = registry.rollback_plan(MODEL, "cpu")
    assert plan.candidate is not None and plan.candidate.record.record_id == r1


def test_rollback_skips_records_that_are_not_deployable_now(registry: Registry) -> None:
    r1, r2, r3 = _deployed(registry, 1, 2, 3)
    for record_id in (r1, r2, r3):
        registry.promote(record_id, "cpu")
    registry.hold(r2, "suspect")
    plan = registry.rollback_plan(MODEL, "cpu")
    assert plan.candidate is not None and plan.candidate.record.record_id == r1
    assert [(c.record_id, c.why) for c in plan.rejected] == [(r2, "on hold: suspect")]
    registry.retire(r1, "too old")
    # "No candidate" is an answer of the plan, not an exception (the apply raises).
    refused = registry.rollback_plan(MODEL, "cpu")
    assert refused.decision == "no_candidate" and refused.candidate is None
    assert refused.production is not None and refused.production.record.record_id == r3
    assert [c.record_id for c in refused.rejected] == [r2, r1]
    with pytest.raises(NoRollbackCandidate) as caught:
        registry.rollback(MODEL, "cpu", why="incident")
    message = str(caught.value)
    # The plan's next step is the error's: data, said by each caller its own way.
    assert refused.message == caught.value.message
    assert [s.step() for s in refused.next_steps] == [caught.value.step]
    assert f"production is {r3}" in message
    assert f"{r2} (on hold: suspect)" in message and f"{r1} (retired: too old)" in message
    assert f'registry.release(ref="{r2}", why=...)' in message


def test_no_candidate_says_what_is_in_production(registry: Registry) -> None:
    (r1,) = _deployed(registry, 1)
    plan = registry.rollback_plan(MODEL, "cpu")
    assert plan.decision == "no_candidate" and plan.production is None
    assert "nothing was ever production" in plan.message
    assert [s.step() for s in plan.next_steps] == [
        Step("promote", "promote a verified record", ref=None, target="cpu")
    ]
    registry.promote(r1, "cpu")
    with pytest.raises(NoRollbackCandidate, match=f"production is {r1}, and nothing was"):
        registry.rollback(MODEL, "cpu", why="incident")


def test_rollback_given_a_record_id_names_the_model(registry: Registry) -> None:
    (r1,) = _deployed(registry, 1)
    with pytest.raises(InvalidInput, match=f"give its model: {MODEL}"):
        registry.rollback_plan(r1, "cpu")
    with pytest.raises(ModelNotFound, match="did you mean 'rules/alpha'"):
        registry.rollback_plan("Rules/Alpha", "cpu")
    with pytest.raises(TargetNotFound, match="did you mean 'cpu'"):
        registry.rollback_plan(MODEL, "CPU")


def test_promote_refuses_every_reason_and_never_writes(registry: Registry, tmp_path: Path) -> None:
    never = add_synthetic(registry, 1)
    failed = add_synthetic(registry, 2)
    record_run(registry, failed, outcomes={"digest": "pass", "gguf-cpu-smoke": "fail"})
    unavailable = add_synthetic(registry, 3)
    record_run(registry, unavailable, outcomes={"gguf-cpu-smoke": "unavailable"})
    stale = add_synthetic(registry, 4)
    record_run(registry, stale)
    held = add_synthetic(registry, 5)
    record_run(registry, held)
    registry.hold(held, "audit")
    unknown = add_synthetic(
        registry,
        6,
        license={"id": None, "source": "unknown"},
        hold_reasons=["license unknown: give --license"],
    )
    record_run(registry, unknown)
    expected = {
        never: ReasonCode.NEVER_VERIFIED,
        failed: ReasonCode.CHECK_FAILED,
        unavailable: ReasonCode.CHECK_UNAVAILABLE,
        held: ReasonCode.HELD,
        unknown: ReasonCode.FACT_UNKNOWN,
    }
    for record_id, code in expected.items():
        with pytest.raises(NotDeployable) as caught:
            registry.promote(record_id, "cpu")
        assert [r.code for r in caught.value.reasons] == [code], record_id
    # A host of cpu reports an upgraded runtime: evidence produced under the old one is stale.
    report_runtime(registry, **{"llama-cpp-python": "0.0.1"})
    with pytest.raises(NotDeployable) as caught:
        registry.promote(stale, "cpu")
    assert [r.code for r in caught.value.reasons] == [ReasonCode.STALE_RUNTIME]
    assert "llama-cpp-python" in caught.value.reasons[0].message
    assert "upgraded-host" in caught.value.reasons[0].message
    assert stored(registry).productions() == []


def test_a_target_that_is_no_longer_defined_cannot_be_deployed_to(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    targets = tmp_path / "targets.yaml"
    targets.write_text("targets:\n  edge:\n    cpu_flags: [avx]\n    memory_gib: 8\n")
    registry.define_targets(targets)
    (r1,) = _deployed(registry, 1)
    record_run(registry, r1, "edge")
    registry.promote(r1, "edge")
    assert registry.status(MODEL, "edge").entries[0].deployability.deployable
    registry.remove_target("edge", why="decommissioned")
    entry = registry.status(MODEL).entries[0]
    assert entry.target == "edge" and not entry.deployability.deployable
    assert entry.deployability.reasons[0].code == ReasonCode.TARGET_UNDEFINED


def test_promoting_production_again_changes_nothing(registry: Registry) -> None:
    (r1,) = _deployed(registry, 1)
    registry.promote(r1, "cpu")
    again = registry.promote(r1, "cpu")
    assert not again.changed and "already production" in again.message
    assert len(stored(registry).promotions(MODEL)) == 1


def test_holding_production_says_loudly_what_production_is(registry: Registry) -> None:
    (r1,) = _deployed(registry, 1)
    registry.promote(r1, "cpu")
    held = registry.hold(r1, "bad answers")
    assert held.production_on == ["cpu"]
    assert "WARNING" in held.message and f"production is still {r1}" in held.message
    # nothing was production before it: the hold says a rollback has nowhere to go
    assert "on cpu: nothing to roll back to: nothing was production" in held.message, held.message
    assert not any(s.action == "rollback" for s in held.next_steps)
    entry = registry.status(MODEL, "cpu").entries[0]
    assert entry.deployability.held and not entry.deployability.deployable
    with pytest.raises(InvalidInput, match="not on hold"):
        registry.release(add_synthetic(registry, 2), "fixed")
    registry.retire(r1, "gone")
    with pytest.raises(InvalidInput, match="retired records stay retired"):
        registry.release(r1, "fixed")
    with pytest.raises(InvalidInput, match="needs a reason"):
        registry.hold(r1, "")


def test_gate(registry: Registry) -> None:
    r1, r2 = _deployed(registry, 1, 2)
    sha1 = registry.get(r1).manifest.files[0].sha256
    sha2 = registry.get(r2).manifest.files[0].sha256
    assert sha1 and sha2
    assert not registry.gate(MODEL, "cpu", sha1).passed  # nothing promoted
    registry.promote(r1, "cpu")
    assert registry.gate(MODEL, "cpu", sha1.upper()).passed
    wrong = registry.gate(MODEL, "cpu", sha2)
    assert not wrong.passed and f"not a file of {r1}" in wrong.reasons[0].message
    record_run(registry, r1, outcomes={"gguf-cpu-smoke": "fail"})
    failing = registry.gate(MODEL, "cpu", sha1)
    assert not failing.passed and failing.reasons[0].code == "check_failed"
    with pytest.raises(InvalidInput, match="64 hex"):
        registry.gate(MODEL, "cpu", "abc")


def test_history_summarises_verify_by_the_deployability_rule(registry: Registry) -> None:
    record_id = add_synthetic(registry, 1)
    record_run(registry, record_id, outcomes={"digest": "pass", "embed-scale": "skipped"})
    record_run(registry, record_id, outcomes={"digest": "pass", "gguf-cpu-smoke": "unavailable"})
    summaries = [e.summary for e in registry.history(MODEL).events if e.kind == "verify"]
    assert summaries == ["passed", "failed: gguf-cpu-smoke: unavailable"]


# -- races --------------------------------------------------------------------------------


def _race_worker(url: str, role: str, ids: list[str], seconds: float) -> dict[str, int]:
    registry = modelreg.open(url)
    done: dict[str, int] = {}
    deadline = time.monotonic() + seconds
    for step in itertools.count():
        if time.monotonic() > deadline:
            break
        try:
            if role == "promote":
                changed = registry.promote(ids[step % len(ids)], "cpu").changed
                key = "promoted" if changed else "already_production"
            elif role == "hold":
                # Hold one record, then release it (and whatever a rollback held), so that
                # promotions keep meeting both states.
                if step % 2 == 0:
                    registry.hold(ids[1], "race")
                    key = "held"
                else:
                    for record_id in ids:
                        if stored(registry).state(record_id).state.value == "held":
                            registry.release(record_id, "race")
                    key = "released"
            else:
                applied = registry.rollback(MODEL, "cpu", why="race").applied
                key = "rolled_back" if applied else "already_rolled_back"
        except (NotDeployable, NoRollbackCandidate) as exc:
            key = type(exc).__name__
        except InvalidInput as exc:  # release of a record the other side already released
            assert "not on hold" in str(exc), exc
            key = "not_on_hold"
        done[key] = done.get(key, 0) + 1
    return done


def race_seconds(url: str) -> float:
    # The full 20 s where row locks matter (PostgreSQL); SQLite serialises every writer.
    return 20.0 if url.startswith("postgresql") else 5.0


@pytest.mark.slow
def test_promote_versus_hold_race_never_makes_a_held_record_production(db_url: str) -> None:
    registry = modelreg.open(db_url)
    ids = _deployed(registry, 1, 2)
    seconds = race_seconds(db_url)
    context = multiprocessing.get_context("spawn")
    with context.Pool(3) as pool:
        reports = pool.starmap(
            _race_worker,
            [
                (db_url, "promote", ids, seconds),
                (db_url, "hold", ids, seconds),
                (db_url, "rollback", ids, seconds),
            ],
        )
    promote, hold, rollback = reports
    # Both sides made progress, and the gate really refused the held record.
    assert promote.get("promoted", 0) > 0 and promote.get("NotDeployable", 0) > 0, promote
    assert hold.get("held", 0) > 0 and hold.get("released", 0) > 0, hold
    assert sum(rollback.values()) > 0, rollback
    # Replay the event log in commit order: no promotion or rollback ever made a record that
    # was held or retired at that moment production.
    state: dict[str, str] = {}
    events = registry.history(MODEL).events
    assert [e.id for e in events] == sorted(e.id for e in events)
    moves = 0
    for event in events:
        if event.kind == "hold":
            state[event.record_id or ""] = "held"
        elif event.kind == "release":
            state[event.record_id or ""] = "active"
        elif event.kind in ("promote", "rollback"):
            moves += 1
            assert state.get(event.record_id or "", "active") == "active", event
    assert moves == promote.get("promoted", 0) + rollback.get("rolled_back", 0)
    # The pointer never forked: every promotion names the true previous record.
    chain = stored(registry).promotions(MODEL, "cpu")
    for before, after in itertools.pairwise(chain):
        assert after.previous_record_id == before.record_id


def test_status_lists_every_model_and_target(registry: Registry, tmp_path: Path) -> None:
    (r1,) = _deployed(registry, 1)
    beta = add_synthetic(registry, 3, model_id="rules/beta")
    record_run(registry, beta)
    registry.promote(r1, "cpu", why="first")
    registry.promote(beta, "cpu")
    entries = registry.status().entries
    assert [(e.model_id, e.target, e.record.record_id) for e in entries] == [
        (MODEL, "cpu", r1),
        ("rules/beta", "cpu", beta),
    ]
    entry = entries[0]
    assert entry.promotion.why == "first" and entry.promotion.actor == "tester"
    assert entry.record.files[0].sha256 == synthetic_sha256(1)
    assert entry.deployability.deployable
    with pytest.raises(ModelNotFound):
        registry.status("rules/gamma")
