"""The operating guide's first reproduction, on a real model: a floor lowered after a record
failed it does not pass silently — the releaser sees the before/after and signs it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import modelreg
from modelreg.bundled import SMOLLM2_BASE, SMOLLM2_MODEL_ID, SMOLLM2_PACKAGE
from modelreg.errors import InvalidInput, NotDeployable
from tests.helpers import stored, suite_evidence

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning")]

SUITE = """schema_version: 1
name: release
thresholds: {{min_pass_rate: {rate}}}
cases:
  - id: paris
    prompt: What is the capital of France? Answer in one word.
    chat: true
    max_tokens: 16
    expect: {{mode: contains, value: Paris}}
  - id: impossible
    prompt: Reply with the single word OK and nothing else.
    chat: true
    max_tokens: 4
    expect: {{mode: exact, value: NOT-OK-7}}
"""


@pytest.mark.slow
def test_a_floor_lowered_after_a_failure_needs_a_signed_acceptance(
    smollm2: Path, tmp_path: Path
) -> None:
    registry = modelreg.open(f"sqlite:///{tmp_path / 'r.db'}")
    record = registry.add(
        [smollm2],
        model_id=SMOLLM2_MODEL_ID,
        source=f"pypi://{SMOLLM2_PACKAGE}",
        base_model=SMOLLM2_BASE,
    ).record.record_id
    suite = tmp_path / "release.yaml"
    suite.write_text(SUITE.format(rate=1.0))
    registry.attach_suite(SMOLLM2_MODEL_ID, suite, actor="qa")
    failed = registry.verify(record, "cpu", actor="qa")
    assert not failed.passed  # 1/2 < 100 %

    # Lowered after the result: a new version needs a reason, and says it weakens the gate.
    suite.write_text(SUITE.format(rate=0.5))
    with pytest.raises(InvalidInput, match="needs a reason"):
        registry.attach_suite(SMOLLM2_MODEL_ID, suite, actor="qa")
    attached = registry.attach_suite(SMOLLM2_MODEL_ID, suite, why="too strict", actor="qa")
    assert attached.weakens == ["min_pass_rate 1.0 → 0.5"]
    passed = registry.verify(record, "cpu", actor="qa")
    assert passed.passed  # the check passes the new floor ...
    verdict = passed.deployability
    assert not verdict.deployable  # ... and the record is not deployable for it
    assert [r.code for r in verdict.reasons] == ["gate_relaxed_after_failure"]
    assert "min_pass_rate 1.0 → 0.5" in verdict.reasons[0].message
    assert failed.run_id in verdict.reasons[0].message
    with pytest.raises(NotDeployable):
        registry.promote(record, "cpu", why="ship it", actor="rel")

    # History shows the change as a diff, with its reason.
    (change,) = [e for e in registry.history(SMOLLM2_MODEL_ID).events if e.kind == "suite-attach"][
        -1:
    ]
    assert change.why == "too strict" and "WEAKENS: min_pass_rate 1.0 → 0.5" in change.summary

    # The releaser accepts it explicitly: recorded with the before/after values.
    with pytest.raises(InvalidInput):
        registry.promote(record, "cpu", accept_relaxed_gate=True, actor="rel")
    promoted = registry.promote(
        record, "cpu", accept_relaxed_gate=True, why="case is wrong, fixed in v3", actor="rel"
    )
    assert promoted.changed
    assert registry.deployability(record, "cpu").deployable
    accepted = [
        e for e in registry.history(SMOLLM2_MODEL_ID).events if e.kind == "gate-relaxation-accepted"
    ]
    assert len(accepted) == 1 and accepted[0].actor == "rel"
    assert accepted[0].detail["changes"][0] | {"failed_run": None} == {
        "what": "min_pass_rate",
        "before": 1.0,
        "after": 0.5,
        "failed_run": None,
    }
    assert "min_pass_rate 1.0 → 0.5" in accepted[0].summary

    # A later version weaker still needs its own acceptance.
    suite.write_text(SUITE.format(rate=0.4))
    registry.attach_suite(SMOLLM2_MODEL_ID, suite, why="lower again", actor="qa")
    again = registry.verify(record, "cpu", actor="qa")
    assert [r.code for r in again.deployability.reasons] == ["gate_relaxed_after_failure"]


@pytest.mark.slow
def test_a_suite_first_attached_after_a_stricter_one_off_failed_is_a_relaxation(
    smollm2: Path, tmp_path: Path
) -> None:
    """Issue 42 item 2: gates are fixed before results, one-off runs included. The team
    tries the strict suite as a one-off, sees it fail, and attaches a looser one: the pass
    under it counts only once a releaser signs it. A one-off run recorded while a suite is
    in force changes nothing (invariant 5)."""
    registry = modelreg.open(f"sqlite:///{tmp_path / 'r.db'}")
    record = registry.add(
        [smollm2],
        model_id=SMOLLM2_MODEL_ID,
        source=f"pypi://{SMOLLM2_PACKAGE}",
        base_model=SMOLLM2_BASE,
    ).record.record_id
    strict, loose = tmp_path / "strict.yaml", tmp_path / "loose.yaml"
    strict.write_text(SUITE.format(rate=1.0))
    loose.write_text(SUITE.format(rate=0.5))
    tried = registry.verify(record, "cpu", suite=strict, actor="qa")
    assert tried.exploratory and not tried.passed
    registry.attach_suite(SMOLLM2_MODEL_ID, loose, actor="qa")  # chosen after seeing that
    passed = registry.verify(record, "cpu", actor="qa")
    assert passed.passed and not passed.exploratory
    verdict = passed.deployability
    assert [r.code for r in verdict.reasons] == ["gate_relaxed_after_failure"]
    assert "min_pass_rate 1.0 → 0.5" in verdict.reasons[0].message
    assert tried.run_id in verdict.reasons[0].message
    registry.promote(record, "cpu", accept_relaxed_gate=True, why="1.0 was never met", actor="rel")
    assert registry.deployability(record, "cpu").deployable
    # Now a suite is in force: another strict one-off failing changes no verdict.
    again = registry.verify(record, "cpu", suite=strict, actor="qa")
    assert again.exploratory and not again.passed
    assert registry.deployability(record, "cpu").deployable


BASELINE_SUITE = """schema_version: 1
name: baseline
thresholds:
  min_pass_rate: 0.5
  max_pass_rate_drop_vs: production
  max_pass_rate_drop: 0.01
cases:
  - {id: paris, prompt: "Capital of France?", expect: {value: Paris}}
  - {id: tokyo, prompt: "Capital of Japan?", expect: {value: Tokyo}}
"""


def _suite_run(registry: Any, record_id: str, answers: dict[str, str]) -> Any:
    """verify's own recording path (``_record_results``) with a suite result judged from
    ``answers`` — the runtime aside, everything after it is verify's code."""
    from datetime import UTC, datetime

    from modelreg.schemas.suite import SuiteResult
    from modelreg.schemas.verification import CheckResult, Outcome

    record = registry.get(record_id)
    target = registry.target("cpu")
    attached = stored(registry).model_suites().get(record.model_id)
    plan = registry._verify._verify_plan(record, target, None, None, attached, None, None)
    evidence = suite_evidence(plan.suite, answers)
    result = SuiteResult.model_validate(evidence["suite_result"])
    now = datetime.now(UTC)
    check = CheckResult(
        check="gguf-cpu-smoke",
        required=True,
        outcome=Outcome.PASS if result.passed else Outcome.FAIL,
        summary="synthetic suite run",
        evidence=evidence,
        started_at=now,
        finished_at=now,
    )
    return registry._verify._record_results(record, target, [check], plan, "tester")


def test_a_pass_rate_drop_is_judged_against_productions_own_run(
    registry: Any, tmp_path: Path
) -> None:
    from tests.helpers import add_synthetic

    first, second = add_synthetic(registry, 1), add_synthetic(registry, 2)
    model = registry.get(first).model_id
    both = {"paris": "Paris", "tokyo": "Tokyo"}
    suite = tmp_path / "baseline.yaml"
    suite.write_text(BASELINE_SUITE)
    registry.attach_suite(model, suite, actor="qa")

    # Nothing was ever production: the first release is judged by the absolute gates, and
    # the relative gate says so (issue 40) ...
    out = _suite_run(registry, second, both)
    assert out.passed and out.deployability.deployable
    (gate,) = [
        g for g in out.checks[0].evidence["suite_result"]["gates"] if g["source"] == "baseline"
    ]
    assert gate["outcome"] == "skipped" and gate["message"] == (
        "max_pass_rate_drop: no production yet: the first release is judged by the absolute gates"
    )
    # ... which still fail what fails them.
    below = _suite_run(registry, second, {})  # 0/2 < the 50 % floor
    assert not below.passed and not below.deployability.deployable
    reasons = below.checks[0].evidence["suite_result"]["reasons"]
    assert reasons == ["pass rate 0/2 = 0% < min_pass_rate 50%"]
    # The first release under a suite without the relative gate; production is then its own
    # baseline, and a candidate is judged against production's run on this suite version.
    plain = tmp_path / "plain.yaml"
    plain.write_text(
        BASELINE_SUITE.replace("  max_pass_rate_drop_vs: production\n", "").replace(
            "  max_pass_rate_drop: 0.01\n", ""
        )
    )
    registry.attach_suite(model, plain, why="the first release has no baseline", actor="qa")
    _suite_run(registry, first, both)
    registry.promote(first, "cpu", why="v1", actor="rel")
    registry.attach_suite(model, suite, why="gate on production from now on", actor="qa")
    stale = _suite_run(registry, second, both)
    assert not stale.passed and "is not on suite baseline sha256:" in stale.checks[0].summary
    assert _suite_run(registry, first, both).passed  # production: its own baseline
    dropped = _suite_run(registry, second, {"paris": "Paris"})  # 50 %: passes the floor ...
    assert not dropped.passed  # ... not the drop from production's 100 %
    assert "a drop of 50.0 pp > 1.0 pp" in dropped.checks[0].summary
    assert dropped.checks[0].evidence["baseline"] == first
    same = _suite_run(registry, second, both)
    assert same.passed and same.deployability.deployable
