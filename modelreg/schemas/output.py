"""The JSON contract: one pydantic model per command's ``--json`` output (and per HTTP API
response). Every top-level output carries ``schema_version``; a record is always a
``RecordOut`` object and its id is always spelled ``record_id``.

The schemas are exported to ``schemas/cli/`` (``make schema``; a test fails when stale).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from modelreg.schemas.manifest import Finding
from modelreg.schemas.verification import CheckResult
from modelreg.steps import Step


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Output(_Out):
    """Base of every top-level output."""

    schema_version: Literal[1] = 1
    next_steps: list[StepOut] = Field(
        default_factory=list,
        description="What to do next, as data: the CLI shows each as a command, Python as a "
        "call (modelreg.steps).",
    )


UNIT_DESCRIPTION = (
    "The target's deployed unit beside the record: image, launch command, forbidden and "
    "required build flags, endpoint (modelreg.deployed_unit; empty when it declares none)."
)


class StepOut(_Out):
    """What to do next, as data (``modelreg.steps.Step``): the ``Registry`` method that does it
    and its arguments by name (null: one the caller fills in, e.g. a reason). The CLI shows it
    as the command, Python as the call."""

    action: str = Field(description="The Registry method that does it: verify, release, ...")
    args: dict[str, Any] = Field(default_factory=dict)
    purpose: str | None = Field(default=None, description="What the step is for, in words.")

    @classmethod
    def of(cls, step: Step | None) -> StepOut | None:
        return None if step is None else cls(**step.json())

    def step(self) -> Step:
        return Step(self.action, self.purpose, **self.args)


def steps_out(steps: Sequence[Step]) -> list[StepOut]:
    return [StepOut(**s.json()) for s in steps]


class ReasonOut(_Out):
    """Why something is not deployable: a stable code, a message, the step that fixes it."""

    code: str
    message: str
    next: StepOut | None = Field(default=None, description="What would fix it.")
    detail: dict[str, Any] | None = Field(
        default=None,
        description="Structured facts behind the reason (gate_relaxed_after_failure: the terms "
        "passed under, each change with its before/after values and the failed runs).",
    )


class FileOut(_Out):
    path: str
    bytes: int | None
    sha256: str | None


class StateOut(_Out):
    state: Literal["active", "held", "retired"]
    reason: str | None = None
    at: datetime | None = None
    actor: str | None = None


class RecordOut(_Out):
    """One recorded artifact, as every command shows it."""

    record_id: str
    model_id: str
    format: str
    source: str | None
    license: str | None
    location: str = Field(description="Where the files were when the record was added.")
    files: list[FileOut]
    state: StateOut
    hold_reasons: list[str] = Field(description="Facts the manifest does not know.")
    created_at: datetime
    created_by: str


class DeployabilityOut(_Out):
    record_id: str
    target: str
    deployable: bool
    stale: bool
    held: bool
    reasons: list[ReasonOut]
    run_id: str | None = None
    verified_at: datetime | None = None

    @property
    def now(self) -> Literal["deployable", "stale", "held", "failing", "uncounted", "unverified"]:
        """In one word, for tables and the dashboard: deployable; stale (only the evidence is
        out of date); held (held, retired or facts unknown); uncounted (runs exist, none of
        them counts here: imported or uploaded without a trusted signature); unverified (no
        run); failing (a check that counts failed or could not run)."""
        if self.deployable:
            return "deployable"
        if self.held:
            return "held"
        if self.stale:
            return "stale"
        codes = {r.code for r in self.reasons}
        if codes and codes <= {"untrusted_evidence"}:
            return "uncounted"
        if codes and codes <= {"never_verified", "untrusted_evidence"}:
            return "unverified"
        return "failing"


class PromotionOut(_Out):
    model_id: str
    target: str
    record_id: str
    previous_record_id: str | None
    action: Literal["promote", "rollback"]
    at: datetime
    actor: str
    why: str | None
    # The approval record it was made with (promote --owner/--limitation/--retest-by).
    owner: str | None = None
    limitations: list[str] = Field(default_factory=list)
    retest_by: date | None = None


class RunOut(_Out):
    """One verify run of a record on a target: every check, with evidence."""

    run_id: str
    target: str
    host: str
    fingerprint: dict[str, str]
    checks: list[CheckResult]
    origin: Literal["local", "imported", "uploaded"] = Field(
        default="local",
        description="local: this registry's verify ran it; imported / uploaded: produced "
        "elsewhere (counts only when signed by a key the target trusts).",
    )
    origin_detail: str | None = None
    exploratory: bool = Field(
        default=False,
        description="A run that never counts (a one-off suite, missing bytes, an "
        "investigation, a drill: see purpose): shown, never counted.",
    )
    purpose: Literal["one_off", "missing_bytes", "investigate", "drill"] | None = Field(
        default=None,
        description="Why a run that never counts was made: one_off (a suite not in force), "
        "missing_bytes (its files were not on the host: nothing ran), investigate (a held "
        "record reproduced), drill (a rollback drill); None: an ordinary run.",
    )


class ErrorBody(_Out):
    code: str
    message: str
    hint: str | None = Field(default=None, description="What to know, in words.")
    next: StepOut | None = Field(default=None, description="What to do next.")


class ErrorOutput(_Out):
    """What ``--json`` prints on stdout when a command fails (the exit code says how)."""

    error: ErrorBody


# -- records ----------------------------------------------------------------------------


class InspectOutput(Output):
    record_id: str = Field(description="The id `add` would give this artifact.")
    manifest: dict[str, Any]


class AddOutput(Output):
    created: bool
    record: RecordOut
    manifest: dict[str, Any]
    locations: list[str] = Field(
        default_factory=list, description="Where the record's bytes can be fetched."
    )
    notes: list[str] = Field(
        default_factory=list,
        description="What an adder should know that holds nothing, e.g. the license changed "
        "since the model's previous record (modelreg.license_policy.license_change).",
    )


class ShowOutput(Output):
    record: RecordOut
    manifest: dict[str, Any]
    production: list[PromotionOut] = Field(description="Where this record is production now.")
    deployability: list[DeployabilityOut]
    runs: list[RunOut]
    units: dict[str, dict[str, str]] = Field(
        default_factory=dict,
        description="Per target it is production on or was verified on: the target's deployed "
        "unit (image, launch command, flags, endpoint), when it declares one.",
    )


class ListItem(_Out):
    record: RecordOut
    total_parameters: int | None
    bits_per_weight: float | None
    deployability: DeployabilityOut | None = None


class ListOutput(Output):
    target: str | None = None
    records: list[ListItem]


class SearchMatch(_Out):
    record: RecordOut
    matched: Literal["record_id", "sha256"] = Field(
        description="record_id: the query is a prefix of the record's id; sha256: of one of "
        "its files' sha256 (that file is named)."
    )
    file: str | None = None


class SearchOutput(Output):
    query: str
    matches: list[SearchMatch] = Field(description="Newest records first.")
    truncated: bool = Field(description="More records matched than the limit.")


class BrowseItem(_Out):
    record: RecordOut
    total_parameters: int | None
    bits_per_weight: float | None
    production_on: list[str] = Field(description="Targets this record is production on now.")
    deployability: list[DeployabilityOut] = Field(
        description="Its verdict now on every target it has runs on (and on the filtered "
        "target, verified or not)."
    )


class BrowseOutput(Output):
    records: list[BrowseItem] = Field(description="Newest first.")
    total: int = Field(description="Records matching the filters (this page holds some).")
    offset: int
    limit: int


class TrendPoint(_Out):
    record_id: str
    run_id: str
    target: str
    at: datetime = Field(description="When the run's last check finished.")
    passed: bool
    decode_tokens_per_s: float | None = None
    ttft_ms: float | None = Field(default=None, description="Median time to first token.")
    peak_rss_bytes: int | None = None


class TrendOutput(Output):
    model_id: str | None
    record_id: str | None
    points: list[TrendPoint] = Field(description="Local runs, oldest first.")


# -- deploy -----------------------------------------------------------------------------


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
    record_id: str
    why: str
    next: StepOut | None = Field(default=None, description="What would make it a candidate.")


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


class DrillOut(_Out):
    """A rollback drill: the failing cases of the record rolled away from, and the suite in
    force, run against the candidate on this host before the switch. Its run is stored as a
    one-off (exploratory): evidence of the rollback, never the run that decides a verdict."""

    record_id: str = Field(description="The candidate drilled.")
    target: str
    run_id: str = Field(description="The drill's stored run (exploratory).")
    passed: bool
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


class StatusOutput(Output):
    entries: list[StatusEntry]
    gate: GateOutput | None = None


class EventOut(_Out):
    id: int
    at: datetime
    actor: str
    kind: str
    record_id: str | None
    target: str | None
    why: str | None
    summary: str = Field(description="What happened, in words (from the rules, not stored text).")
    detail: dict[str, Any]


class HistoryOutput(Output):
    model_id: str
    events: list[EventOut]


# -- other commands ---------------------------------------------------------------------


class TargetOut(_Out):
    name: str
    kind: str
    description: str
    memory_bytes: int | None
    neuron_cores: int
    hbm_bytes: int
    is_local: bool | None = Field(
        default=None,
        description="Whether the host that answered is one of the target's hosts (where its "
        "hardware checks can run): in `targets` only (None elsewhere). Shown only: no verdict "
        "depends on the host that asks.",
    )
    origin: str
    cpu_flags: list[str] | None
    runtime: dict[str, str]
    unit: dict[str, str] = Field(default_factory=dict, description=UNIT_DESCRIPTION)
    spec_sha256: str | None = Field(
        default=None,
        description="The stored definition's digest (None: built in): evidence records the "
        "definition it was produced under.",
    )


class TargetsOutput(Output):
    targets: list[TargetOut]


class DiffSection(_Out):
    changed: bool
    a: Any
    b: Any


class DiffOutput(Output):
    a: str
    b: str
    same_model: bool
    metadata_only: bool | None
    changed: list[str]
    changed_dimensions: list[str]
    attribution_warning: str | None
    notes: list[str]
    sections: dict[str, DiffSection]
    metadata_keys: list[str] | None = Field(
        default=None,
        description="GGUF: the metadata keys added, removed or with another value from A to B "
        "(e.g. general.name, tokenizer.chat_template); null when a side is not GGUF or was "
        "recorded without per-key digests.",
    )


class Sizes(_Out):
    bytes: int | None
    GB: float | None
    GiB: float | None


class FitLine(_Out):
    key: str = Field(description="Stable name: weights, kv_cache, overhead, total, budget, …")
    name: str
    sizes: Sizes
    note: str = ""


class FitWhatIf(_Out):
    """``fit --bits`` / ``--quant``: the weights line is this, not the artifact's tensors."""

    bits: float = Field(description="Bits per weight asked (for --quant: its type's width).")
    quant: str | None = Field(description="The llama.cpp type asked with --quant.")
    parameters: int = Field(description="The ledger's total parameters weighed.")
    parameters_provenance: str
    weights: Sizes = Field(description="parameters × bits ÷ 8.")
    recorded_weights: Sizes = Field(description="The artifact's own tensor bytes (if known).")


class FitOutput(Output):
    record: str
    target: str
    kind: Literal["cpu", "neuron", "compile-host"]
    verdict: str = Field(description="fits, does not fit, incomplete or unknown.")
    fits: bool | None
    reasons: list[str]
    lines: list[FitLine]
    detail: dict[str, Any]
    what_if: FitWhatIf | None = Field(
        default=None,
        description="Weights at another width from the parameter ledger (--bits / --quant): "
        "a what-if, not the artifact.",
    )


class ExportOutput(Output):
    path: str | None
    rows: int
    sha256: str


class ImportOutput(Output):
    path: str
    sha256: str
    counts: dict[str, int] = Field(description="Rows imported, per kind.")
    skipped: dict[str, int] = Field(
        default_factory=dict,
        description="Rows of the file not imported, per kind: shared target definitions "
        "without --with-targets (they decide which keys a target trusts).",
    )


class CardFinding(_Out):
    severity: str
    field: str
    message: str
    expected: Any = None
    found: Any = None
    line: int | None = Field(default=None, description="The card line of the claim.")
    quote: str | None = Field(default=None, description="That line, as the card has it.")


class CardClaimOut(_Out):
    kind: str = Field(description="quantization, bits_per_weight, bits, context_length, …")
    value: str | int | float
    line: int = Field(description="The card line (0: the front matter).")
    quote: str
    where: Literal["front matter", "title", "label", "table", "sentence"]


class CardValidateOutput(Output):
    card: str
    record_id: str | None
    clean: bool
    checked: bool = Field(
        description="The claims were checked against a record (false: nothing to check "
        "them against; only the card's own consistency was)."
    )
    missing: list[str]
    held: str | None = Field(default=None, description="The hold applied (only with --hold).")
    findings: list[CardFinding]
    claims: list[CardClaimOut] = Field(description="The claims read from the card's body.")


class CardRenderOutput(Output):
    record_id: str
    path: str | None
    text: str


class AttestOutput(Output):
    """The signed statement of a record's latest signed run on a target, for an auditor."""

    record_id: str
    target: str
    run_id: str
    signed_by: str | None
    verified: bool = Field(description="The signature verifies with a key the target trusts.")
    problem: str | None = Field(default=None, description="Why it does not vouch for the run.")
    evidence_matches: bool = Field(
        description="The stored evidence hashes to the digests the statement signs."
    )
    statement: dict[str, Any]
    envelope: dict[str, Any]


class SuiteOutput(Output):
    model_id: str | None
    action: Literal["attach", "detach", "check"]
    name: str | None
    sha256: str | None
    cases: int
    subsets: list[str]
    message: str
    changes: list[str] = Field(
        default_factory=list, description="What changed from the version attached before."
    )
    weakens: list[str] = Field(
        default_factory=list,
        description="The changes that weaken the gate: a record that failed the earlier "
        "version needs a releaser's acceptance of its later pass.",
    )


class SuiteCaseOutput(Output):
    suite: str
    run_id: str
    added: list[str]
    sha256: str
    message: str


class DbOutput(Output):
    url: str
    revision_before: str | None
    revision: str
    changed: bool


class BadValueOut(_Out):
    table: str
    key: str = Field(description="The row's primary key ('/'-joined).")
    column: str
    why: str


class DbCheckOutput(Output):
    """Stored values that cannot be read back (from before the storage boundary)."""

    bad: list[BadValueOut]
    quarantined: bool = Field(description="Each was made readable (db check --quarantine).")
    verdicts_drifted: list[str] = Field(
        default_factory=list,
        description="Stored verdicts a fresh derivation from the rows disagrees with (rows "
        "written around modelreg); --quarantine derives them again.",
    )
    message: str


# -- the team service: shared targets, locations, tokens, uploaded runs -------------------


class TargetsChangeOutput(Output):
    """``targets add`` / ``targets remove``: what changed in the registry's definitions."""

    changes: dict[str, Literal["added", "replaced", "unchanged", "removed"]]
    message: str
    targets: list[TargetOut] = Field(description="Every target after the change.")


class LocationCheckOut(_Out):
    """The newest check of a location's bytes: a recorded fact, the same for every reader."""

    ok: bool = Field(description="True: every sha256 was read there and matched.")
    detail: str | None = None
    host: str = Field(description="The host that read the bytes.")
    source: str = Field(description="What read them: add, verify, fetch, check or push.")
    at: datetime


class LocationOut(_Out):
    url: str
    scheme: str = Field(description="file, hf, s3 or oci.")
    fetchable: bool = Field(
        description="Whether its newest check verified every sha256 (a recorded fact: a "
        "location never checked, or whose newest check found missing or other bytes, is not)."
    )
    added_at: datetime
    added_by: str
    checked: LocationCheckOut | None = Field(
        default=None, description="Its newest check (None: never checked)."
    )


class CheckedLocationOut(_Out):
    """What this command read at one location (``ok`` None: this host could not read it — a
    note, not recorded)."""

    url: str
    ok: bool | None
    detail: str
    recorded: bool = Field(description="Whether it was recorded as the location's newest check.")


class LocationsOutput(Output):
    record_id: str
    model_id: str
    added_from: str = Field(description="The path the record was added from, on its add host.")
    locations: list[LocationOut]
    added: list[str] = Field(default_factory=list, description="Locations this command added.")
    checked: list[CheckedLocationOut] = Field(
        default_factory=list, description="Locations this command read, every sha256."
    )
    fetch_from: str | None = Field(
        default=None,
        description="The first location verified to hold every file (None: none is; the "
        "deploy gate fails).",
    )
    unfetchable: str | None = Field(default=None, description="Why no location is, when none is.")


class FetchedFileOut(_Out):
    path: str
    bytes: int
    sha256: str
    source: str = Field(description="The location it was copied from.")


class PushedFileOut(_Out):
    path: str
    bytes: int
    sha256: str = Field(description="The file's sha256: its layer's digest.")
    uploaded: bool = Field(description="False: the registry had the blob already.")


class PushOutput(Output):
    record_id: str
    location: str = Field(description="oci://host/repo[:tag]@sha256:… — recorded.")
    manifest_digest: str
    files: list[PushedFileOut]


class FetchProblem(_Out):
    url: str
    reason: str


class FetchOutput(Output):
    record_id: str
    to: str
    files: list[FetchedFileOut]
    skipped: list[FetchProblem] = Field(
        description="Locations not used, and why (another host, not supported yet, mismatch)."
    )


class TokenOut(_Out):
    name: str
    role: str = Field(description="reader, verifier or releaser.")
    created_at: datetime
    created_by: str
    revoked_at: datetime | None
    revoked_by: str | None


class TokenCreateOutput(Output):
    token: TokenOut
    secret: str = Field(description="Shown once; the registry keeps only its sha256.")


class TokensOutput(Output):
    tokens: list[TokenOut]


class TokenRevokeOutput(Output):
    token: TokenOut
    changed: bool


class WebhookDeliveryOut(_Out):
    event: str = Field(description="The event kind this delivery carries.")
    status: Literal["pending", "delivered", "failed", "cancelled"]
    attempts: int
    at: datetime | None = Field(description="When its last attempt was made.")
    http_status: int | None = Field(description="The receiver's answer (none: no answer).")
    error: str | None = Field(description="Why the last attempt failed, one line.")


class WebhookOut(_Out):
    id: int
    url: str = Field(description="Where deliveries are POSTed (secrets in it hidden).")
    events: list[str]
    created_at: datetime
    created_by: str
    removed_at: datetime | None
    removed_by: str | None
    deliveries: dict[str, int] = Field(
        description="How many deliveries are pending, delivered, failed or cancelled."
    )
    last_delivery: WebhookDeliveryOut | None = Field(
        description="The most recently attempted delivery."
    )


class WebhookCreateOutput(Output):
    webhook: WebhookOut
    secret: str = Field(
        description="Signs every delivery (X-Modelreg-Signature). Shown once; keep it in the "
        "receiver's secret store."
    )


class WebhooksOutput(Output):
    webhooks: list[WebhookOut]


class WebhookRemoveOutput(Output):
    webhook: WebhookOut
    changed: bool
    cancelled: int = Field(description="Pending deliveries cancelled by this removal.")


class WebhookAttemptOut(_Out):
    webhook_id: int
    delivery_id: str
    event: str
    event_id: int
    attempt: int
    status: Literal["delivered", "pending", "failed", "cancelled"] = Field(
        description="After this attempt: delivered, pending (retried later), failed (given "
        "up after the last attempt) or cancelled (the webhook was removed while it was in "
        "flight: its outcome is not recorded and it is never sent again)."
    )
    http_status: int | None
    error: str | None
    retry_in_s: float | None


class WebhookDeliverOutput(Output):
    attempts: list[WebhookAttemptOut]
    delivered: int
    retrying: int
    failed: int
    cancelled: int = Field(0, description="Attempts whose webhook was removed in flight.")
    unsigned: int = Field(
        0,
        description="Due deliveries this host left pending: it cannot open their webhook's "
        "secret (no webhook key, or another one; see unsigned_reason).",
    )
    unsigned_reason: str | None = Field(None, description="Why, when unsigned is not 0.")
    pending: int = Field(description="Deliveries still pending after this pass (due or not).")


class WebhookHostsOutput(Output):
    """The hosts webhooks may be sent to although they are (or resolve to) loopback,
    link-local or private addresses."""

    allowed_hosts: list[str]
    changed: bool


class ImportedRunOut(_Out):
    """A run this registry's verify did not produce: imported from an export file or uploaded
    over HTTP. It counts only when the target trusts verifier keys and its signed statement
    verifies with one of them; ``counted`` says whether it is the run deciding deployability
    on its target now."""

    run_id: str
    target: str
    origin: Literal["imported", "uploaded"]
    origin_detail: str | None = None
    host: str
    fingerprint: dict[str, str]
    checks: list[CheckResult]
    signed: bool = Field(description="It carries a DSSE envelope (checked when judged).")
    signed_by: str | None = Field(
        default=None,
        description="The trusted key its envelope verified with when it was uploaded.",
    )
    counted: bool
    at: datetime


class UploadRunOutput(Output):
    record_id: str
    run: ImportedRunOut
    deployability: DeployabilityOut = Field(
        description="The record on that target now: an unsigned upload never changes it."
    )
    message: str


class MatrixCell(_Out):
    """The production record of a model on a target, and whether it may run there now."""

    model_id: str
    target: str
    record_id: str
    now: Literal["deployable", "stale", "held", "failing", "uncounted", "unverified"]
    reasons: list[ReasonOut]
    since: datetime
    actor: str
    action: Literal["promote", "rollback"]
    why: str | None


class MatrixOutput(Output):
    """What runs where, a page of models at a time (the dashboard's matrix)."""

    targets: list[TargetOut]
    models: list[str] = Field(description="This page's models, sorted.")
    total_models: int = Field(description="Models matching the filter, on every page.")
    offset: int
    limit: int
    cells: list[MatrixCell] = Field(description="Only (model, target) pairs in production.")


class ImportedRunsOutput(Output):
    record_id: str
    runs: list[ImportedRunOut]


class RuntimeReportOut(_Out):
    """What this host reported it runs for one runtime, beside what the target's hosts were
    seen running before."""

    runtime: str = Field(description="llama.cpp, transformers or neuron.")
    fingerprint: dict[str, str] = Field(
        description="Packages, the build's digest, CPU flags, and the libraries the target's "
        "evidence names, as found on this host."
    )
    previous: str | None = Field(
        default=None, description="Who reported before (a verify or a host report), and when."
    )
    changes: str | None = Field(
        default=None,
        description="What differs from the previous report (None: the same runtime).",
    )


class HostReportOutput(Output):
    """``modelreg host report``: what a host of the target runs, recorded for every reader."""

    target: str
    host: str
    reports: list[RuntimeReportOut]
    stale: list[str] = Field(
        default_factory=list,
        description="Production entries on the target (model: record) whose evidence the report "
        "made stale.",
    )
    message: str


class RuntimeCheckOut(_Out):
    """This host's runtime beside the one production's evidence was produced under."""

    matches: bool
    changes: str | None = Field(default=None, description="What differs, when something does.")


class DeployOutput(Output):
    """``modelreg deploy``: production's bytes fetched (every sha256 checked) and gated."""

    model_id: str
    target: str
    record_id: str
    to: str
    files: list[FetchedFileOut]
    already_there: bool = Field(
        default=False, description="The files were in the directory already (every sha256 read)."
    )
    gate: GateOutput
    runtime_check: RuntimeCheckOut | None = Field(
        default=None, description="With --check-runtime: this host's runtime against production's."
    )
    deployed: bool = Field(description="Everything passed: start the model server.")
    message: str


class ScanOutput(Output):
    """``modelreg scan``: what the safety scans found in the given files (no database)."""

    scanned: list[str] = Field(description="The paths scanned, as given.")
    findings: list[Finding] = Field(
        description="Each finding: its code (unsafe_template, unsafe_pickle, identity_mismatch, "
        "hidden_text), the file, where in it (metadata key, template name, archive member), "
        "the template line and its text, and whether ``add`` would hold the record on it."
    )
    clean: bool = Field(description="No finding at all (exit code 0; 1 otherwise).")


# Exported as schemas/cli/<name>.schema.json.
COMMAND_OUTPUTS: dict[str, type[BaseModel]] = {
    "scan": ScanOutput,
    "error": ErrorOutput,
    "inspect": InspectOutput,
    "add": AddOutput,
    "show": ShowOutput,
    "list": ListOutput,
    "search": SearchOutput,
    "verify": VerifyOutput,
    "verify-stale": VerifyStaleOutput,
    "promote": PromoteOutput,
    "rollback": RollbackOutput,
    "hold": StateChangeOutput,
    "release": StateChangeOutput,
    "retire": StateChangeOutput,
    "status": StatusOutput,
    "history": HistoryOutput,
    "targets": TargetsOutput,
    "diff": DiffOutput,
    "fit": FitOutput,
    "export": ExportOutput,
    "import": ImportOutput,
    "card-validate": CardValidateOutput,
    "card-render": CardRenderOutput,
    "db-upgrade": DbOutput,
    "db-check": DbCheckOutput,
    "attest": AttestOutput,
    "suite": SuiteOutput,
    "suite-add-case": SuiteCaseOutput,
    "targets-apply": TargetsChangeOutput,
    "targets-remove": TargetsChangeOutput,
    "locate": LocationsOutput,
    "fetch": FetchOutput,
    "token-create": TokenCreateOutput,
    "token-list": TokensOutput,
    "token-revoke": TokenRevokeOutput,
    "upload-run": UploadRunOutput,
    "imported-runs": ImportedRunsOutput,
    "matrix": MatrixOutput,
    "push": PushOutput,
    "webhooks-add": WebhookCreateOutput,
    "webhooks-list": WebhooksOutput,
    "webhooks-remove": WebhookRemoveOutput,
    "webhooks-deliver": WebhookDeliverOutput,
    "webhooks-permit": WebhookHostsOutput,
    "host-report": HostReportOutput,
    "deploy": DeployOutput,
}
