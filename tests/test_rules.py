"""The decision rules on their own: every reason code, the blocking outcomes, staleness and the
rollback candidate order. No database, no runtime."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from modelreg import rules
from modelreg.rules import (
    ACTIVE,
    CheckVerdict,
    PromotionStep,
    ReasonCode,
    RecordState,
    RecordStateKind,
    StoredRun,
)

NOW = datetime(2026, 11, 29, tzinfo=UTC)
FP = {"llama-cpp-python": "0.3.36"}


def _run(*outcomes: str, fingerprint: dict[str, str] | None = None) -> list[StoredRun]:
    checks = tuple(
        CheckVerdict(f"check{i}", True, outcome, None, NOW, "run1", fingerprint or FP)
        for i, outcome in enumerate(outcomes)
    )
    return [StoredRun("run1", checks)] if checks else []


def _codes(verdict: rules.Deployability) -> list[ReasonCode]:
    return [r.code for r in verdict.reasons]


@pytest.mark.parametrize(
    ("outcome", "blocks"),
    [("pass", False), ("skipped", False), ("fail", True), ("unavailable", True)],
)
def test_which_outcomes_block(outcome: str, blocks: bool) -> None:
    assert rules.blocks(True, outcome) is blocks
    assert rules.blocks(False, outcome) is False  # an optional check never blocks


def test_a_passing_current_run_is_deployable() -> None:
    verdict = rules.judge("r_1", "cpu", [], ACTIVE, _run("pass", "skipped"), FP)
    assert verdict.deployable and verdict.reasons == ()
    assert verdict.run_id == "run1" and verdict.verified_at == NOW


@pytest.mark.parametrize(
    ("hold_reasons", "state", "run", "fingerprint", "code"),
    [
        (["license unknown"], ACTIVE, _run("pass"), FP, ReasonCode.FACT_UNKNOWN),
        ([], RecordState(RecordStateKind.HELD, "audit"), _run("pass"), FP, ReasonCode.HELD),
        ([], RecordState(RecordStateKind.RETIRED, "old"), _run("pass"), FP, ReasonCode.RETIRED),
        ([], ACTIVE, [], FP, ReasonCode.NEVER_VERIFIED),
        ([], ACTIVE, _run("pass", "fail"), FP, ReasonCode.CHECK_FAILED),
        ([], ACTIVE, _run("unavailable"), FP, ReasonCode.CHECK_UNAVAILABLE),
        ([], ACTIVE, _run("pass"), {"llama-cpp-python": "0.3.37"}, ReasonCode.STALE_RUNTIME),
    ],
)
def test_every_reason_code(
    hold_reasons: list[str],
    state: RecordState,
    run: list[StoredRun],
    fingerprint: dict[str, str],
    code: ReasonCode,
) -> None:
    verdict = rules.judge("r_1", "cpu", hold_reasons, state, run, fingerprint)
    assert not verdict.deployable
    assert _codes(verdict) == [code]
    reason = verdict.reasons[0]
    assert reason.message
    if code in (ReasonCode.NEVER_VERIFIED, ReasonCode.STALE_RUNTIME):
        assert reason.hint == "modelreg verify r_1 --target cpu"
    if code is ReasonCode.HELD:
        assert reason.hint == "modelreg release r_1"


def test_target_undefined_is_never_deployable() -> None:
    verdict = rules.target_undefined("r_1", "gone")
    assert not verdict.deployable and _codes(verdict) == [ReasonCode.TARGET_UNDEFINED]


def test_stale_names_what_changed_and_only_counts_for_a_passing_run() -> None:
    new = {"llama-cpp-python": "0.3.37"}
    stale = rules.judge("r_1", "cpu", [], ACTIVE, _run("pass"), new)
    assert stale.stale and not stale.held
    assert "llama-cpp-python 0.3.36 → 0.3.37" in stale.reasons[0].message
    failing = rules.judge("r_1", "cpu", [], ACTIVE, _run("fail"), new)
    assert _codes(failing) == [ReasonCode.CHECK_FAILED] and not failing.stale


def test_run_verdict_names_the_blocking_checks_and_never_a_skip() -> None:
    verdict = rules.run_verdict(
        [
            ("digest", True, "pass", None),
            ("embed-scale", True, "skipped", None),
            ("smoke", True, "fail", "degenerate"),
            ("optional", False, "fail", None),
        ]
    )
    assert not verdict.passed
    assert [b.describe() for b in verdict.blocking] == ["smoke: fail (degenerate)"]


def _steps(*spec: tuple[str, str | None, str]) -> list[PromotionStep]:
    return [PromotionStep(r, prev, action) for r, prev, action in spec]


def test_rollback_candidates_newest_first_without_current() -> None:
    history = _steps(("r1", None, "promote"), ("r2", "r1", "promote"), ("r3", "r2", "promote"))
    assert rules.rollback_candidates(history) == ["r2", "r1"]


def test_a_record_rolled_back_from_is_never_a_candidate_again() -> None:
    # promote r1, promote r2, roll back to r1: r2 must never come back by rollback.
    history = _steps(("r1", None, "promote"), ("r2", "r1", "promote"), ("r1", "r2", "rollback"))
    assert rules.rolled_back_from(history) == {"r2"}
    assert rules.rollback_candidates(history) == []
    # ...even after r3 is promoted over r1.
    history += _steps(("r3", "r1", "promote"))
    assert rules.rollback_candidates(history) == ["r1"]


def test_repromoted_record_is_listed_once() -> None:
    history = _steps(
        ("r1", None, "promote"),
        ("r2", "r1", "promote"),
        ("r1", "r2", "promote"),
        ("r3", "r1", "promote"),
    )
    assert rules.rollback_candidates(history) == ["r1", "r2"]
    assert rules.rollback_candidates([]) == []


def test_a_signed_run_without_a_readable_signed_time_blocks_every_signed_run() -> None:
    """Which signed run is newest cannot be told: nothing counts (never the older pass)."""
    from datetime import UTC, datetime

    from modelreg import rules

    check = rules.CheckVerdict("digest", True, "pass", None, datetime.now(UTC), "r1", {})
    signed = rules.StoredRun("r1", (check,), "uploaded", {"payload": "x"}, False, None)
    run, reasons = rules.counting_run(
        "r_1", "edge", [signed], rules.TrustPolicy(verifier_keys={}), None
    )
    assert run is None and "no readable signed time" in reasons[0].message
