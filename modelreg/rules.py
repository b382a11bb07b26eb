"""The decision rules, in one module: deployability, which outcomes block, staleness, the rollback
candidate, and the one-variable attribution warning.

Every rule returns structured reasons (``Reason``: a code, a message and the command that
fixes it). The store only stores; the API, the CLI, history, ``--json`` and the HTTP server
render these structures and never parse message text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from modelreg.fingerprint import Fingerprint, describe_change
from modelreg.schemas.verification import Outcome

if TYPE_CHECKING:
    from modelreg.schemas.manifest import Manifest


class ReasonCode(StrEnum):
    """Why a record is not deployable on a target."""

    FACT_UNKNOWN = "fact_unknown"  # the manifest does not know something that matters
    HELD = "held"
    RETIRED = "retired"
    TARGET_UNDEFINED = "target_undefined"
    NEVER_VERIFIED = "never_verified"
    CHECK_FAILED = "check_failed"
    CHECK_UNAVAILABLE = "check_unavailable"  # a required check could not run: never a pass
    STALE_RUNTIME = "stale_runtime"


# Reasons that mean "the evidence is out of date", as opposed to "the record is bad".
STALE_CODES = frozenset({ReasonCode.STALE_RUNTIME})
# Reasons that come from the record's state or facts, whatever the evidence says.
HOLD_CODES = frozenset({ReasonCode.FACT_UNKNOWN, ReasonCode.HELD, ReasonCode.RETIRED})


@dataclass(frozen=True, slots=True)
class Reason:
    code: ReasonCode
    message: str
    hint: str | None = None


class RecordStateKind(StrEnum):
    ACTIVE = "active"
    HELD = "held"
    RETIRED = "retired"


@dataclass(frozen=True, slots=True)
class RecordState:
    state: RecordStateKind = RecordStateKind.ACTIVE
    reason: str | None = None
    at: datetime | None = None
    actor: str | None = None


ACTIVE = RecordState()


@dataclass(frozen=True, slots=True)
class CheckVerdict:
    """The part of a stored check result that decides deployability."""

    check: str
    required: bool
    outcome: str
    classification: str | None
    finished_at: datetime
    run_id: str
    fingerprint: Fingerprint


@dataclass(frozen=True)
class Deployability:
    record_id: str
    target: str
    deployable: bool
    reasons: tuple[Reason, ...] = ()
    run_id: str | None = None
    verified_at: datetime | None = None

    @property
    def stale(self) -> bool:
        return any(r.code in STALE_CODES for r in self.reasons)

    @property
    def held(self) -> bool:
        return any(r.code in HOLD_CODES for r in self.reasons)

    @property
    def summary(self) -> str:
        return "deployable" if self.deployable else "; ".join(r.message for r in self.reasons)


def blocks(required: bool, outcome: str) -> bool:
    """A required check blocks deployment unless it passed or does not apply (skipped).

    ``unavailable`` (could not run here) blocks: it is never a pass.
    """
    return required and outcome not in (Outcome.PASS, Outcome.SKIPPED)


@dataclass(frozen=True, slots=True)
class BlockingCheck:
    check: str
    outcome: str
    classification: str | None

    def describe(self) -> str:
        text = f"{self.check}: {self.outcome}"
        return f"{text} ({self.classification})" if self.classification else text


@dataclass(frozen=True)
class RunVerdict:
    """Did a verify run pass, and which checks kept it from passing."""

    passed: bool
    blocking: list[BlockingCheck] = field(default_factory=list)


def run_verdict(checks: Iterable[tuple[str, bool, str, str | None]]) -> RunVerdict:
    """(check, required, outcome, classification)… -> the run's verdict, by ``blocks``."""
    blocking = [
        BlockingCheck(check, outcome, classification)
        for check, required, outcome, classification in checks
        if blocks(required, outcome)
    ]
    return RunVerdict(not blocking, blocking)


def judge(
    record_id: str,
    target: str,
    hold_reasons: Sequence[str],
    state: RecordState,
    run: Sequence[CheckVerdict],
    fingerprint: Fingerprint | None,
) -> Deployability:
    """Deployable on ``target`` iff the record is active, its manifest knows every fact that
    matters, and its latest run there passed every required check with evidence produced by
    the target's current runtime (``fingerprint``; None skips that comparison — only for
    callers that have no target definition, never for a gate)."""
    reasons = [
        Reason(ReasonCode.FACT_UNKNOWN, f"on hold: {r}", "re-add the artifact with the fact given")
        for r in hold_reasons
    ]
    if state.state is RecordStateKind.HELD:
        reasons.append(
            Reason(ReasonCode.HELD, f"on hold: {state.reason}", f"modelreg release {record_id}")
        )
    elif state.state is RecordStateKind.RETIRED:
        reasons.append(Reason(ReasonCode.RETIRED, f"retired: {state.reason}"))
    if not run:
        reasons.append(
            Reason(
                ReasonCode.NEVER_VERIFIED,
                f"never verified on {target}",
                f"modelreg verify {record_id} --target {target}",
            )
        )
        return Deployability(record_id, target, False, tuple(reasons))
    verdict = run_verdict((v.check, v.required, v.outcome, v.classification) for v in run)
    for check in verdict.blocking:
        code = (
            ReasonCode.CHECK_UNAVAILABLE
            if check.outcome == Outcome.UNAVAILABLE
            else ReasonCode.CHECK_FAILED
        )
        reasons.append(Reason(code, check.describe(), f"modelreg show {record_id}"))
    if verdict.passed and fingerprint is not None and run[0].fingerprint != fingerprint:
        reasons.append(
            Reason(
                ReasonCode.STALE_RUNTIME,
                f"stale: runtime changed ({describe_change(run[0].fingerprint, fingerprint)})",
                f"modelreg verify {record_id} --target {target}",
            )
        )
    return Deployability(
        record_id,
        target,
        not reasons,
        tuple(reasons),
        run[0].run_id,
        max(v.finished_at for v in run),
    )


def target_undefined(record_id: str, target: str) -> Deployability:
    """A target that is no longer defined cannot be deployed to: its evidence cannot count."""
    return Deployability(
        record_id,
        target,
        False,
        (
            Reason(
                ReasonCode.TARGET_UNDEFINED,
                f"target {target!r} is no longer defined",
                "define it again (modelreg targets) or verify on a defined target",
            ),
        ),
    )


@dataclass(frozen=True, slots=True)
class PromotionStep:
    """One change of a (model, target)'s production record, as the rules need it."""

    record_id: str
    previous_record_id: str | None
    action: str  # "promote" or "rollback"


def rolled_back_from(history: Sequence[PromotionStep]) -> set[str]:
    """Records production was rolled back away from: never rollback candidates again."""
    return {
        p.previous_record_id
        for p in history
        if p.action == "rollback" and p.previous_record_id is not None
    }


def rollback_candidates(history: Sequence[PromotionStep]) -> list[str]:
    """Records that were production before the current one, newest first, without the current
    record and without any record production was rolled back from. The first of these that is
    deployable now is the rollback candidate."""
    if not history:
        return []
    current = history[-1].record_id
    excluded = rolled_back_from(history) | {current}
    candidates: list[str] = []
    for step in reversed(history[:-1]):
        if step.record_id not in excluded and step.record_id not in candidates:
            candidates.append(step.record_id)
    return candidates


def attribution_warning(current: Manifest, candidate: Manifest) -> str | None:
    """Say when more than one of weights / quantization / tokenizer / runtime changed between
    the production record and a candidate: a regression could not be attributed."""
    from modelreg.manifests.diff import diff_manifests

    return diff_manifests(current, candidate).attribution_warning
