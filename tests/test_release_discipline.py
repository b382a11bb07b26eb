"""The operating guide's first reproduction, on a real model: a floor lowered after a record
failed it does not pass silently — the releaser sees the before/after and signs it."""

from __future__ import annotations

from pathlib import Path

import pytest

import modelreg
from modelreg.bundled import SMOLLM2_BASE, SMOLLM2_MODEL_ID, SMOLLM2_PACKAGE
from modelreg.errors import InvalidInput, NotDeployable

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

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


def test_a_floor_lowered_after_a_failure_needs_a_signed_acceptance(
    smollm2: Path, tmp_path: Path
) -> None:
    registry = modelreg.open(
        f"sqlite:///{tmp_path / 'r.db'}", targets_file=tmp_path / "no-targets.yaml"
    )
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
