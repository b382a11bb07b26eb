"""Outputs of the deploy path: verify, promote, rollback (plan, drill, apply), hold/release/
retire, status, the gate, history."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from pydantic import Field

from modelreg.schemas.output.base import (
    UNIT_DESCRIPTION,
    DeployabilityOut,
    Output,
    PromotionOut,
    ReasonOut,
    RecordOut,
    StepOut,
    _Out,
)
from modelreg.schemas.suite import GateResult
from modelreg.schemas.verification import CheckResult


class VerifyOutput(Output):
    record: RecordOut
    target: str
    run_id: str
    passed: bool
    deployability: DeployabilityOut
    checks: list[CheckResult]
    signed_by: str | None = Field(default=None, description="Key id that signed this run.")
    exploratory: bool = Field(
        default=False,
        description="A run that never counts: recorded and shown, it changes no verdict "
        "(deployability is what it was before).",
    )
    purpose: Literal["one_off", "missing_bytes", "investigate", "drill"] | None = Field(
        default=None,
        description="Why a run that never counts was made: one_off (a suite not in force), "
        "missing_bytes (its files were not on the host: nothing ran), investigate (a held "
        "record reproduced), drill (a rollback drill); None: an ordinary run.",
    )


class VerifyStaleOutput(Output):
    target: str
    runs: list[VerifyOutput]
    skipped: list[ReasonOut] = Field(
        default_factory=list,
        description="Stale records not verified again: held or retired (no evidence could make "
        "them deployable), with why.",
    )


class ApprovalOut(_Out):
    """The approval a production record was promoted with: who answers for it, what it is
    known not to do, and when it must be tested again."""

    owner: str | None = None
    limitations: list[str] = Field(default_factory=list)
    retest_by: date | None = Field(default=None, description="Re-test it by this day (UTC).")
    retest_overdue: bool = Field(
        default=False, description="retest_by is in the past: the re-test is overdue."
    )


class RelaxationOut(_Out):
    """One way a gate was weakened after the record failed it: ``before`` → ``after``."""

    what: str
    before: float | str | None
    after: float | str | None
    failed_run: str | None = Field(default=None, description="A run that failed the stricter gate.")


class AcceptedRelaxationOut(_Out):
    """A relaxed gate a releaser accepted with this promote (``--accept-relaxed-gate``)."""

    terms: str = Field(description="sha256 of the gate terms the record's pass was judged by.")
    suite: str | None = None
    changes: list[RelaxationOut]
    failed_runs: list[str] = Field(default_factory=list)


class PromoteOutput(Output):
    changed: bool
    message: str
    promotion: PromotionOut | None
    warning: str | None = None
    approval: ApprovalOut | None = Field(
        default=None, description="The approval kept with the promotion (None: none given)."
    )
    accepted: list[AcceptedRelaxationOut] = Field(
        default_factory=list,
        description="Relaxed gates accepted with this promote (recorded as "
        "gate-relaxation-accepted events).",
    )


class DeployedOut(_Out):
    """A record as deployed on a target: the record, whether it may run there now, and the
    evidence that says so (runtime fingerprint, host, what it answered)."""

    record: RecordOut
    deployability: DeployabilityOut
    verified_on_host: str | None
    runtime: dict[str, str] = Field(
        description="The runtime fingerprint of the run that decides its verdict."
    )
    runtime_summary: str = Field(
        default="",
        description="That runtime in one line: packages, llama.cpp build, how many libraries, "
        "whether it changed since the run.",
    )
    answered: list[str] = Field(description="Outputs of its latest generation check.")
    unit: dict[str, str] = Field(default_factory=dict, description=UNIT_DESCRIPTION)
    locations: list[str] = Field(
        default_factory=list, description="Where its bytes can be fetched (fetch)."
    )
    fetch_from: str | None = Field(
        default=None,
        description="The first location that holds every file at its recorded size (None: "
        "no fetchable copy — it cannot be a rollback candidate or pass the gate).",
    )
    unfetchable: str | None = Field(
        default=None, description="Why no location holds the files, when none does."
    )


class RejectedCandidate(_Out):
    """An earlier production record of the target, and whether it can take production now."""

    record_id: str
    handle: str | None = Field(default=None, description="`MODEL@vN`, usable as `--to`.")
    usable: bool = Field(
        default=False, description="Deployable there now with a fetchable copy: `--to` works."
    )
    why: str
    next: StepOut | None = Field(
        default=None,
        description="The rollback to it (usable), else what would make it a candidate.",
    )
    force: StepOut | None = Field(
        default=None,
        description="The break-glass rollback to it, when only staleness keeps it out "
        "(runtime, target or suite changed since its counting run) and its bytes are verified.",
    )


class DrillCaseOut(_Out):
    """A failing case of the record rolled away from, asked again of the candidate."""

    case_id: str = Field(description="Its id in the drill suite.")
    from_case: str = Field(description="Its id in the failing run it came from.")
    prompt: str
    expect: str
    output: str | None
    classification: str
    reason: str
    passed: bool
    source: Literal["failed_run", "incident"] = Field(
        default="failed_run",
        description="failed_run: a case the record rolled away from failed in its newest run "
        "that failed or had failing cases; incident: the incident's own input (a prompt and "
        "what its answer must contain, given to the drill).",
    )


class DrillOut(_Out):
    """A rollback drill: the failing cases of the record rolled away from, and the suite in
    force, run against the candidate on this host before the switch. Its run is stored as a
    one-off (exploratory): evidence of the rollback, never the run that decides a verdict."""

    record_id: str = Field(description="The candidate drilled.")
    target: str
    run_id: str | None = Field(
        description="The drill's stored run (exploratory, purpose drill); None: nothing ran "
        "(verdict could_not_run: no copy of the candidate's bytes could be fetched)."
    )
    passed: bool = Field(description="verdict is safe.")
    verdict: Literal["safe", "fails", "could_not_run"] = Field(
        description="safe: safe to apply (every case asked again passed, the suite in force "
        "and its gates held); fails: the candidate fails what failed (failing_cases names "
        "them) or the suite in force; could_not_run: nothing was judged (could_not_run says "
        "why: bytes missing, runtime crashed, ...).",
    )
    failing_cases: list[str] = Field(
        default_factory=list,
        description="The cases asked again that the candidate failed, by their id where they "
        "came from (the failed run's case id, or incident-N).",
    )
    could_not_run: str | None = Field(
        default=None, description="Why nothing was judged (verdict could_not_run)."
    )
    failed_inside_passing_run: list[str] = Field(
        default_factory=list,
        description="Cases of the suite in force the candidate failed in the drill while the "
        "suite's pass rate held: reported, not a failure of the drill by themselves.",
    )
    baseline_gates: list[GateResult] = Field(
        default_factory=list,
        description="The suite's gates relative to a baseline (max_pass_rate_drop_vs), judged "
        "against the candidate's own counting run on the target — never against the record "
        "being left.",
    )
    bytes_from: str | None = Field(
        default=None,
        description="Where the drill took the candidate's bytes: --path, the recorded location "
        "where they were added, or a copy fetched from its recorded locations (every sha256 "
        "checked).",
    )
    suite: str = Field(description="The drill suite: the suite in force and the failing cases.")
    suite_in_force: str | None = Field(
        description="The suite in force it contains (None: the golden prompts)."
    )
    from_record: str = Field(description="The record rolled away from (production now).")
    from_run: str | None = Field(
        description="Its newest failing counting run the cases came from (None: it has none, "
        "so the drill ran the suite in force alone)."
    )
    cases: list[DrillCaseOut] = Field(description="The failing cases asked again.")
    failed: list[str] = Field(description="What failed, one line each (empty: it passed).")
    message: str


class RollbackOutput(Output):
    model_id: str
    target: str
    named: bool = Field(
        default=False,
        description="The candidate was named (`to`), not chosen as the newest earlier "
        "production record that can take production.",
    )
    production: DeployedOut | None = Field(description="Production after this command.")
    candidate: DeployedOut | None = Field(description="What --apply would make production.")
    rolled_back_from: DeployedOut | None = Field(
        default=None, description="With --apply: the record production left (now held)."
    )
    decision: Literal["rollback", "nothing_to_do", "no_candidate"] = Field(
        default="rollback",
        description="rollback: the candidate takes production (with --apply: it did); "
        "nothing_to_do: production already is a rollback's outcome and deployable; "
        "no_candidate (a plan only): no record can take production — message says why, "
        "next_steps what would make one a candidate.",
    )
    applied: PromotionOut | None = None
    held: str | None = Field(default=None, description="The record rolled back from, now held.")
    already_rolled_back: PromotionOut | None = Field(
        default=None, description="Set when production was put there by a rollback already."
    )
    rejected: list[RejectedCandidate] = Field(default_factory=list)
    earlier: list[RejectedCandidate] = Field(
        default_factory=list,
        description="With nothing to do (already rolled back): every earlier production record "
        "still a candidate, newest first, whether it is usable now and the exact command.",
    )
    forced: list[str] = Field(
        default_factory=list,
        description="A break-glass rollback (force): the reasons the record is not deployable.",
    )
    drill: DrillOut | None = Field(
        default=None,
        description="With --drill: the drill run against the candidate; a failed drill "
        "switches nothing.",
    )
    message: str


class StateChangeOutput(Output):
    record: RecordOut
    action: Literal["hold", "release", "retire"]
    changed: bool
    production_on: list[str] = Field(
        description="Targets on which this record is production right now."
    )
    message: str


class StatusEntry(_Out):
    model_id: str
    target: str
    record: RecordOut
    deployability: DeployabilityOut
    promotion: PromotionOut
    forced: list[str] = Field(
        default_factory=list,
        description="Production forced there by a break-glass rollback, and no counting run of "
        "it there since: why it was not deployable (empty otherwise). The gate passes it only "
        "where forced entries are accepted.",
    )
    unit: dict[str, str] = Field(default_factory=dict, description=UNIT_DESCRIPTION)
    locations: list[str] = Field(
        default_factory=list, description="Where the production record's bytes can be fetched."
    )
    fetch_from: str | None = Field(
        default=None,
        description="The first location that holds every file at its recorded size (None: no "
        "fetchable copy; the gate fails).",
    )
    unfetchable: str | None = Field(
        default=None, description="Why no location holds the files, when none does."
    )
    approval: ApprovalOut | None = Field(
        default=None,
        description="The approval production was promoted with (None: none recorded); "
        "approval.retest_overdue says its re-test date has passed.",
    )


class GateOutput(_Out):
    model_id: str
    target: str
    sha256: str
    passed: bool
    record_id: str | None
    reasons: list[ReasonOut]
    forced: bool = Field(
        default=False,
        description="Passed only because forced entries are accepted (the caller's "
        "accept_forced, or the target's): production is a break-glass rollback's, not "
        "deployable — `reasons` say why.",
    )


class StatusOutput(Output):
    entries: list[StatusEntry]
    gate: GateOutput | None = None


class EventOut(_Out):
    id: int
    at: datetime
    actor: str
    kind: str
    record_id: str | None
    record_version: int | None = Field(
        default=None, description="The record's version number in its model (`MODEL@vN`)."
    )
    target: str | None
    why: str | None
    summary: str = Field(description="What happened, in words (from the rules, not stored text).")
    detail: dict[str, Any]


class HistoryOutput(Output):
    model_id: str
    events: list[EventOut]
