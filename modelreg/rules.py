"""The decision rules, in one module: deployability, which outcomes block, staleness, the rollback
candidate, and the one-variable attribution warning.

Every rule returns structured reasons (``Reason``: a code, a message and the command that
fixes it). The store only stores; the API, the CLI, history, ``--json`` and the HTTP server
render these structures and never parse message text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from modelreg.fingerprint import (
    TARGET_PREFIX,
    UNIT_PREFIX,
    Fingerprint,
    describe_change,
    inference_view,
)
from modelreg.reasons import HOLD_CODES, STALE_CODES, Reason, ReasonCode, hold_code
from modelreg.schemas.verification import Outcome
from modelreg.steps import Step

if TYPE_CHECKING:
    from modelreg.schemas.manifest import Manifest


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


def _looser(gate: str, before: float, after: float) -> bool:
    """Whether ``after`` is a weaker limit than ``before`` for this gate: a higher maximum, a
    lower minimum (gates are named ``max_…`` / ``min_…``)."""
    return after > before if gate.startswith("max_") else after < before


@dataclass(frozen=True)
class GateTerms:
    """What a run's suite verdict was judged against, from its stored suite result: the
    suite, the pass rates asked for, every limit (``gate`` for the suite's, ``gate@target``
    for a target's ``gates:``), and each case as a digest of what it asks and expects."""

    suite: str  # the suite's name and digest
    target: str
    passed: bool
    min_pass_rate: float | None  # None: not stored (runs from before it was kept)
    subsets: Mapping[str, float]
    limits: Mapping[str, float]
    cases: Mapping[str, str]

    def to_json(self) -> str:
        return json.dumps(
            {
                "suite": self.suite,
                "target": self.target,
                "passed": self.passed,
                "min_pass_rate": self.min_pass_rate,
                "subsets": dict(self.subsets),
                "limits": dict(self.limits),
                "cases": dict(self.cases),
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> GateTerms:
        data = json.loads(text)
        return cls(
            str(data["suite"]),
            str(data["target"]),
            bool(data["passed"]),
            data.get("min_pass_rate"),
            dict(data.get("subsets") or {}),
            dict(data.get("limits") or {}),
            dict(data.get("cases") or {}),
        )

    def digest(self) -> str:
        """What an acceptance of a relaxed gate names: these terms, exactly (the verdict
        aside: a later pass under the same terms is covered)."""
        without_verdict = json.loads(self.to_json()) | {"passed": None, "target": None}
        return hashlib.sha256(json.dumps(without_verdict, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Relaxation:
    """One way ``now`` is weaker than the terms a run failed: ``before`` → ``after`` (None:
    absent)."""

    what: str
    before: float | str | None
    after: float | str | None

    def describe(self) -> str:
        def shown(value: float | str | None) -> str:
            return "none" if value is None else str(value)

        return f"{self.what} {shown(self.before)} → {shown(self.after)}"


def relaxations(failed: GateTerms, now: GateTerms) -> list[Relaxation]:
    """Every way the terms ``now`` are weaker than those a run ``failed``: a lower pass rate
    (overall or of a subset, or a subset gate removed), a looser or removed limit (a target's
    only when both runs were on that target), a removed or changed case (changed counts as
    loosened: what a case accepts cannot be ordered in general — a stricter edit is accepted
    by the releaser like any other)."""
    found: list[Relaxation] = []
    if failed.min_pass_rate is not None and (
        now.min_pass_rate is None or now.min_pass_rate < failed.min_pass_rate
    ):
        found.append(Relaxation("min_pass_rate", failed.min_pass_rate, now.min_pass_rate))
    for subset, rate in sorted(failed.subsets.items()):
        after = now.subsets.get(subset)
        if after is None or after < rate:
            found.append(Relaxation(f"subset {subset} min_pass_rate", rate, after))
    for gate, limit in sorted(failed.limits.items()):
        name, _, target = gate.partition("@")
        if target and (target != failed.target or now.target != failed.target):
            continue
        after = now.limits.get(gate)
        if after is None or _looser(name, limit, after):
            found.append(Relaxation(gate, limit, after))
    for case_id, digest in sorted(failed.cases.items()):
        if case_id not in now.cases:
            found.append(Relaxation(f"case {case_id}", "present", "removed"))
        elif now.cases[case_id] != digest:
            found.append(Relaxation(f"case {case_id}", "as failed", "changed"))
    return found


# The event that records a releaser's acceptance of a relaxed gate (its detail names the
# terms accepted: ``Reason.detail`` of the ``gate_relaxed_after_failure`` it answers).
RELAXATION_ACCEPTED = "gate-relaxation-accepted"


@dataclass(frozen=True)
class GateHistory:
    """A record's failed runs' gate terms (every target, one-off runs excepted), and the
    relaxations releasers accepted: (target, terms digest) pairs."""

    failures: tuple[tuple[str, GateTerms], ...] = ()  # (run id, terms)
    accepted: frozenset[tuple[str, str]] = frozenset()


def relaxed_gate(record_id: str, target: str, run: StoredRun) -> Reason | None:
    """Why ``run``'s pass does not count yet: it passed terms weaker than ones a run of this
    record failed before, and no releaser accepted these terms on this target
    (``promote --accept-relaxed-gate --why``). A gate lowered after the result is seen is a
    rationalisation unless someone signs it. A pass that judged no suite (no terms) after
    failures under one removed every gate they had."""
    history = run.history
    if history is None or not history.failures:
        return None
    # A pass that judged no suite at all, after failures under one: every gate was removed.
    now = run.terms or GateTerms("no suite", target, True, None, {}, {}, {})
    digest = now.digest()
    if (target, digest) in history.accepted:
        return None
    changes: list[tuple[str, Relaxation]] = []
    for run_id, failed in history.failures:
        if failed.digest() == digest:
            continue  # the same terms failed once and passed now: nothing was relaxed
        changes += [(run_id, r) for r in relaxations(failed, now) if (run_id, r) not in changes]
    if not changes:
        return None
    shown = "; ".join(f"{r.describe()} (run {run_id} failed before)" for run_id, r in changes[:4])
    more = f"; and {len(changes) - 4} more" if len(changes) > 4 else ""
    return Reason(
        ReasonCode.GATE_RELAXED_AFTER_FAILURE,
        f"gate relaxed after this record failed it: {shown}{more}",
        Step("promote", ref=record_id, target=target, accept_relaxed_gate=True, why=None),
        {
            "terms": digest,
            "suite": now.suite,
            "changes": [
                {"what": r.what, "before": r.before, "after": r.after, "failed_run": run_id}
                for run_id, r in changes
            ],
            "failed_runs": sorted({run_id for run_id, _ in changes}),
        },
    )


@dataclass(frozen=True)
class StoredRun:
    """One stored verify run, as the rules need it: its checks, where it came from, and its
    signed statement when it has one."""

    run_id: str
    checks: tuple[CheckVerdict, ...]
    origin: str = "local"  # local, imported, uploaded
    envelope: dict[str, object] | None = None
    # A one-off run (``verify --suite S`` with S not the suite in force): recorded and shown,
    # never the run that decides a verdict.
    exploratory: bool = False
    # A signed run's signed time, as stored (checked against its statement when judged).
    signed_at: datetime | None = None
    # What its suite verdict was judged against (None: no suite result, or stored before they
    # were kept), and its record's failed runs' terms and acceptances (``GateHistory``).
    terms: GateTerms | None = None
    history: GateHistory | None = None

    @property
    def fingerprint(self) -> Fingerprint:
        return self.checks[0].fingerprint if self.checks else {}

    @property
    def finished_at(self) -> datetime | None:
        return max((c.finished_at for c in self.checks), default=None)


@dataclass(frozen=True)
class TrustPolicy:
    """Which runs a target counts. ``verifier_keys`` None: runs this registry's verify
    produced (local); a mapping (key id -> public key): only runs signed by one of them.
    ``problem``: the target names keys that could not be read — nothing counts."""

    verifier_keys: dict[str, object] | None = None
    problem: str | None = None


TRUST_LOCAL = TrustPolicy()


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


_LONG_AGO = datetime.min.replace(tzinfo=UTC)


def counting_run(
    record_id: str,
    target: str,
    candidates: Sequence[StoredRun],
    trust: TrustPolicy,
    file_digests: dict[str, str] | None,
) -> tuple[StoredRun | None, list[Reason]]:
    """The run that decides deployability, or the reasons none can.

    One-off runs (``exploratory``) never decide: they ran a suite that is not the one in
    force, so they change no verdict. Without verifier keys, the newest local run counts;
    runs imported from a file or uploaded never count (they are kept as history). With
    verifier keys, only the newest signed run counts, and only when its signature verifies
    with a trusted key and its statement covers exactly this record's files, this target,
    and the checks and fingerprint stored for it.
    """
    if trust.problem is not None:
        return None, [
            Reason(
                ReasonCode.UNTRUSTED_EVIDENCE,
                f"cannot check signed evidence: {trust.problem}",
            )
        ]
    ordered = [r for r in candidates if not r.exploratory]
    if len(ordered) > 1:  # newest first (status judges thousands: skip the sort of one)
        ordered.sort(key=lambda r: r.finished_at or _LONG_AGO, reverse=True)
    if trust.verifier_keys is None:
        local = [r for r in ordered if r.origin == "local"]
        if local:
            return local[0], []
        if ordered:
            return None, [
                Reason(
                    ReasonCode.UNTRUSTED_EVIDENCE,
                    f"not counted ({ordered[0].origin}, unsigned): only {ordered[0].origin} "
                    f"runs on {target}, which count only when signed by a key {target} trusts",
                    Step("verify", ref=record_id, target=target),
                )
            ]
        return None, []
    # The newest signed run is the one signed last (what the signature covers), never the one
    # whose checks claim the latest finish.
    signed = [r for r in ordered if r.envelope is not None]
    if any(r.signed_at is None for r in signed):
        # A signed run whose signed time cannot be read could be the newest: nothing counts.
        return None, [
            Reason(
                ReasonCode.UNTRUSTED_EVIDENCE,
                f"a signed run on {target} names no readable signed time, so which signed run "
                "is newest cannot be told",
                Step("verify", ref=record_id, target=target, sign_key=None),
            )
        ]
    signed.sort(key=lambda r: r.signed_at or _LONG_AGO, reverse=True)
    if not signed:
        return None, [
            Reason(
                ReasonCode.UNTRUSTED_EVIDENCE,
                f"no run on {target} is signed by a key {target} trusts",
                Step("verify", ref=record_id, target=target, sign_key=None),
            )
        ]
    problem = signed_run_problem(signed[0], record_id, target, trust, file_digests)
    if problem is not None:
        return None, [
            Reason(
                ReasonCode.UNTRUSTED_EVIDENCE,
                f"the latest signed run on {target} does not count: {problem}",
                Step("verify", ref=record_id, target=target, sign_key=None),
            )
        ]
    return signed[0], []


def signed_run_problem(
    run: StoredRun,
    record_id: str,
    target: str,
    trust: TrustPolicy,
    file_digests: dict[str, str] | None,
) -> str | None:
    """Why a signed run's statement cannot be trusted as this run's evidence (None: it can)."""
    from modelreg.signing import SignatureInvalid, run_statement_problem, verify_envelope

    assert trust.verifier_keys is not None and run.envelope is not None
    try:
        statement, _signer = verify_envelope(dict(run.envelope), dict(trust.verifier_keys))
    except SignatureInvalid as exc:
        return exc.message
    return run_statement_problem(statement, record_id, target, run, file_digests)


def _stale_code(change_keys: Iterable[str]) -> ReasonCode:
    keys = list(change_keys)
    if keys and all(k == "suite" for k in keys):
        return ReasonCode.STALE_SUITE
    if keys and all(k.startswith((TARGET_PREFIX, UNIT_PREFIX)) or k == "suite" for k in keys):
        return ReasonCode.STALE_TARGET
    return ReasonCode.STALE_RUNTIME


def effective_state(state: RecordState, hold_reasons: Sequence[str]) -> RecordStateKind:
    """What a record is, for every reader: retired when retired; held when it is held or any
    hold applies (a fact its manifest does not know, an identity or recipe that does not match,
    an unsafe file); else active. ``state`` is the stored one: what hold, release and retire
    set."""
    if state.state is RecordStateKind.ACTIVE and hold_reasons:
        return RecordStateKind.HELD
    return state.state


def state_reason(record_id: str, state: RecordState) -> Reason | None:
    """Why a held or retired record is not deployable anywhere (None: it is active)."""
    if state.state is RecordStateKind.HELD:
        return Reason(
            ReasonCode.HELD, f"on hold: {state.reason}", Step("release", ref=record_id, why=None)
        )
    if state.state is RecordStateKind.RETIRED:
        return Reason(ReasonCode.RETIRED, f"retired: {state.reason}")
    return None


# Holds for what a record's files would run if loaded: verify loads nothing from such a record.
UNSAFE_CONTENT = (ReasonCode.UNSAFE_TEMPLATE, ReasonCode.UNSAFE_PICKLE)


def verify_refusal(
    record_id: str,
    model_id: str,
    target: str,
    state: RecordState,
    hold_reasons: Sequence[str],
    *,
    never_counted: bool,
) -> Reason | None:
    """Why verify runs nothing for a record (None: it may run), decided before any check or
    runtime starts: retired; held, unless the run never counts (an investigation, a drill —
    releasing would make it promotable again); held for what its files would run, whatever
    the run is for (nothing of it is loaded or rendered: scanned before anything loads)."""
    lifecycle = state_reason(record_id, state)
    if state.state is RecordStateKind.RETIRED and lifecycle is not None:
        return Reason(
            lifecycle.code,
            f"{lifecycle.message} (verify runs nothing for a retired record)",
            Step("records", "a retired record stays retired; verify a newer one", model=model_id),
        )
    if lifecycle is not None and not never_counted:
        return Reason(
            lifecycle.code,
            f"{lifecycle.message} (verify runs nothing for a held record: release it to verify "
            "it for real, or investigate it, which never counts)",
            Step(
                "verify",
                "to reproduce it without releasing it (a run that never counts)",
                ref=record_id,
                target=target,
                investigate=True,
            ),
        )
    unsafe = [r for r in hold_reasons if hold_code(r) in UNSAFE_CONTENT]
    if unsafe:
        return Reason(
            hold_code(unsafe[0]),
            f"{unsafe[0]} (verify loads nothing from a record held for what its files would run)",
            Step("records", "add a build without it; the model's records", model=model_id),
        )
    return None


def judge(
    record_id: str,
    target: str,
    hold_reasons: Sequence[str],
    state: RecordState,
    runs: Sequence[StoredRun],
    fingerprint: Fingerprint | Callable[[StoredRun], Fingerprint] | None,
    trust: TrustPolicy = TRUST_LOCAL,
    file_digests: dict[str, str] | None = None,
    *,
    observed_by: Callable[[StoredRun], str | None] | None = None,
    license_denied: str | None = None,
) -> Deployability:
    """Deployable on ``target`` iff the record is active, its manifest knows every fact that
    matters, the target's license policy does not deny its license (``license_denied``: the
    policy's reason when it does), and the run that counts there (``counting_run``) passed
    every required check with evidence produced under the target's current fingerprint —
    runtime, libraries, target definition, suite (``fingerprint``; None skips that comparison
    — only for callers that have no target definition, never for a gate). ``observed_by``:
    who reported the runtime ``fingerprint`` names, when it is not the run itself (named in a
    stale reason)."""
    reasons = [
        Reason(hold_code(r), f"on hold: {r} (re-add the artifact with the fact given)")
        for r in hold_reasons
    ]
    lifecycle = state_reason(record_id, state)
    if lifecycle is not None:
        reasons.append(lifecycle)
    if license_denied is not None:
        reasons.append(Reason(ReasonCode.LICENSE_DENIED, f"license denied here: {license_denied}"))
    run, trust_reasons = counting_run(record_id, target, runs, trust, file_digests)
    reasons += trust_reasons
    if run is None or not run.checks:
        if not trust_reasons:
            reasons.append(
                Reason(
                    ReasonCode.NEVER_VERIFIED,
                    f"never verified on {target}",
                    Step("verify", ref=record_id, target=target),
                )
            )
        return Deployability(record_id, target, False, tuple(reasons))
    checks = run.checks
    verdict = run_verdict((v.check, v.required, v.outcome, v.classification) for v in checks)
    for check in verdict.blocking:
        code = (
            ReasonCode.CHECK_UNAVAILABLE
            if check.outcome == Outcome.UNAVAILABLE
            else ReasonCode.CHECK_FAILED
        )
        reasons.append(Reason(code, check.describe(), Step("show", ref=record_id)))
    current = fingerprint(run) if callable(fingerprint) else fingerprint
    # Only what can change an answer is compared: the inference runtime's own libraries, not
    # every extension module the process mapped (``fingerprint.inference_view``).
    stored = inference_view(run.fingerprint)
    if current is not None:
        current = inference_view(current)
    if verdict.passed:
        relaxed = relaxed_gate(record_id, target, run)
        if relaxed is not None:
            reasons.append(relaxed)
    if verdict.passed and current is not None and stored != current:
        changed = sorted(
            k for k in stored.keys() | current.keys() if stored.get(k) != current.get(k)
        )
        # Evidence from before fingerprints names nothing it ran under: its runtime is unknown.
        code = _stale_code(changed) if stored else ReasonCode.STALE_RUNTIME
        said = observed_by(run) if observed_by is not None else None
        source = f" — as {said} reported" if said and code is ReasonCode.STALE_RUNTIME else ""
        reasons.append(
            Reason(
                code,
                f"stale: {describe_change(stored, current, target)}{source}",
                Step("verify", ref=record_id, target=target),
            )
        )
    return Deployability(
        record_id,
        target,
        not reasons,
        tuple(reasons),
        run.run_id,
        run.finished_at,
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
                Step("targets", "define it again, or verify on a defined target"),
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


@dataclass(frozen=True, slots=True)
class Readiness:
    """Can a record take production on a target now: its verdict there, and where its bytes
    can be fetched from (None: no recorded location has them — ``unfetchable`` says why)."""

    verdict: Deployability
    fetch_from: str | None
    unfetchable: str | None = None

    @property
    def ready(self) -> bool:
        return self.verdict.deployable and self.fetch_from is not None

    def why_not(self) -> str:
        if not self.verdict.deployable:
            return self.verdict.summary
        return f"no fetchable copy ({self.unfetchable or 'no location recorded'})"


class RollbackAction(StrEnum):
    ROLLBACK = "rollback"  # make the candidate production, hold the current record
    NOTHING_TO_DO = "nothing_to_do"  # production already is a rollback's outcome, and ready
    NO_CANDIDATE = "no_candidate"


@dataclass(frozen=True)
class RollbackDecision:
    """What a rollback does from one state of a (model, target) — the plan prints it and the
    apply does exactly it (both call ``decide_rollback`` on the same kind of read)."""

    action: RollbackAction
    current: str | None
    candidate: str | None = None
    # Earlier production records passed over: (record id, why, the command that fixes it).
    rejected: tuple[tuple[str, str, Step | None], ...] = ()
    # NOTHING_TO_DO, or a NO_CANDIDATE of ``to`` / of nothing ever production: in words
    # (empty when no earlier production record can take over: ``rejected`` says why).
    why: str = ""
    # A break-glass rollback (``force``): why the candidate is not deployable, kept with it.
    forced: tuple[str, ...] = ()


def force_refusal(ready: Readiness) -> str | None:
    """Why a break-glass rollback cannot take this record to production (None: it can). It
    goes past staleness only — the runtime, the target or the suite changed since the record's
    counting run passed — never past a hold, a retirement, a failed or missing run, a fact or
    a license, and never without verified bytes."""
    blocking = [r for r in ready.verdict.reasons if r.code not in STALE_CODES]
    if blocking:
        return (
            f"not deployable for a reason a break-glass rollback never goes past: "
            f"{blocking[0].message}"
        )
    if ready.fetch_from is None:
        return f"no fetchable copy ({ready.unfetchable or 'no location recorded'})"
    return None


def forced_marked(forced: Sequence[str], promoted_at: datetime, verdict: Deployability) -> bool:
    """A production entry forced there by a break-glass rollback stays marked until a counting
    run of it on the target finishes after it was forced (whatever that run's outcome)."""
    if not forced:
        return False
    return verdict.verified_at is None or verdict.verified_at <= promoted_at


def gate_passes_forced(
    deployable: bool, reason_codes: Iterable[str], marked: bool, accepted: bool
) -> bool:
    """The deploy gate lets a marked (forced) production through only when the caller or the
    target's policy accepts forced entries, and only while all that is wrong is staleness."""
    codes = list(reason_codes)
    return (
        marked
        and accepted
        and not deployable
        and bool(codes)
        and all(code in STALE_CODES for code in codes)
    )


def decide_rollback(
    history: Sequence[PromotionStep],
    readiness: Callable[[str], Readiness],
    state: Callable[[str], RecordState],
    *,
    to: str | None = None,
    force: bool = False,
) -> RollbackDecision:
    """The one rollback rule, decided from the state alone (never from "what was done last"):

    - nothing was ever production: no candidate;
    - ``to`` given: that record, if it was production here before, is not the current one,
      and is ready (deployable, bytes fetchable); a record production was rolled back from
      only once it was released; with ``force`` (break glass), also when all that keeps it
      from being ready is staleness (``force_refusal``): the decision carries those reasons;
    - production was put there by a rollback and is ready: nothing to do (applying twice is
      safe);
    - otherwise (production promoted, or held / retired / failing / unfetchable after a
      rollback): the newest earlier production record that is ready and was never rolled back
      from.
    """
    if not history:
        return RollbackDecision(
            RollbackAction.NO_CANDIDATE, None, why="nothing was ever production there"
        )
    current = history[-1].record_id
    if to is not None:
        if to == current and history[-1].action == "rollback" and readiness(current).ready:
            return RollbackDecision(  # the same --to applied again: safe, changes nothing
                RollbackAction.NOTHING_TO_DO,
                current,
                why=f"production is {current}, put there by a rollback, and it is deployable",
            )
        if to == current:
            return RollbackDecision(
                RollbackAction.NO_CANDIDATE, current, why=f"{to} is production already"
            )
        if to not in {p.record_id for p in history}:
            return RollbackDecision(
                RollbackAction.NO_CANDIDATE,
                current,
                why=f"{to} was never production there (make it production with promote)",
            )
        if to in rolled_back_from(history) and state(to).state is not RecordStateKind.ACTIVE:
            return RollbackDecision(
                RollbackAction.NO_CANDIDATE,
                current,
                why=f"production was rolled back from {to}; release it first if it is good",
            )
        ready = readiness(to)
        if not ready.ready and force and force_refusal(ready) is None:
            forced = tuple(r.message for r in ready.verdict.reasons) or ("not deployable",)
            return RollbackDecision(RollbackAction.ROLLBACK, current, to, forced=forced)
        if not ready.ready:
            return RollbackDecision(
                RollbackAction.NO_CANDIDATE,
                current,
                rejected=((to, ready.why_not(), readiness_hint(ready)),),
                why=f"{to} cannot take production: {ready.why_not()}",
            )
        return RollbackDecision(RollbackAction.ROLLBACK, current, to)
    if history[-1].action == "rollback" and readiness(current).ready:
        return RollbackDecision(
            RollbackAction.NOTHING_TO_DO,
            current,
            why=f"production is {current}, put there by a rollback, and it is deployable",
        )
    rejected: list[tuple[str, str, Step | None]] = []
    for record_id in rollback_candidates(history):
        ready = readiness(record_id)
        if ready.ready:
            return RollbackDecision(RollbackAction.ROLLBACK, current, record_id, tuple(rejected))
        rejected.append((record_id, ready.why_not(), readiness_hint(ready)))
    for record_id in sorted(rolled_back_from(history) - {current}):
        rejected.append((record_id, "production was rolled back from it", None))
    return RollbackDecision(RollbackAction.NO_CANDIDATE, current, rejected=tuple(rejected))


def readiness_hint(ready: Readiness) -> Step | None:
    if not ready.verdict.deployable:
        return next((r.step for r in ready.verdict.reasons if r.step), None)
    return Step("locate", "check a copy, or add one", ref=ready.verdict.record_id, check=None)


def attribution_warning(current: Manifest, candidate: Manifest) -> str | None:
    """Say when more than one of weights / quantization / tokenizer / runtime changed between
    the production record and a candidate: a regression could not be attributed."""
    from modelreg.manifests.diff import diff_manifests

    return diff_manifests(current, candidate).attribution_warning
