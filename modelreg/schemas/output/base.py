"""The pieces every output is made of: a record, its files and state, a verdict with its
reasons and next steps, a promotion, a run, an error."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from modelreg.schemas.verification import CheckResult
from modelreg.steps import Step


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


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
    version: int | None = Field(
        default=None,
        description="The model's own number for the record, given at add in the order its "
        "records were added (None only for a record not stored).",
    )
    handle: str | None = Field(
        default=None,
        description="`MODEL@vN`: usable wherever a record id is (`acme/chat@v3`).",
    )
    format: str
    source: str | None
    license: str | None
    location: str = Field(description="Where the files were when the record was added.")
    files: list[FileOut]
    state: StateOut = Field(
        description="The stored lifecycle state: what hold, release and retire set. Whether "
        "the record is held is `effective_state`."
    )
    effective_state: Literal["active", "held", "retired"] = Field(
        description="What the record is: retired when retired; held when it is held or any of "
        "`hold_reasons` applies; else active."
    )
    hold_reasons: list[str] = Field(
        description="Holds from the record's own facts: a fact the manifest does not know, an "
        "identity or recipe that does not match, an unsafe file."
    )
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


VerdictWord = Literal["deployable", "stale", "held", "failing", "uncounted", "unverified"]


class ProductionChangeOut(_Out):
    """A production entry (model × target) whose verdict a change of the gate changes (a
    suite attached or detached, a target redefined or removed, a trusted key changed): its
    verdict before and after in one word (``DeployabilityOut.now``), the reasons now, and the
    step that clears them."""

    model_id: str
    target: str
    record_id: str = Field(description="The production record on the target.")
    before: VerdictWord
    after: VerdictWord
    reasons: list[ReasonOut] = Field(description="Why it is not deployable after the change.")
    next: StepOut | None = Field(
        default=None,
        description="What makes it deployable again (the verdict's own step: a verify of the "
        "record on the target under the new gate); null when it is deployable.",
    )


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
    forced: list[str] = Field(
        default_factory=list,
        description="A break-glass rollback (`rollback --to R --force`): why the record was not "
        "deployable when it was forced to production. Empty for every other promotion.",
    )
    label: str | None = Field(
        default=None,
        description="The name the releaser gave the promotion when promoting (its `label`): "
        "MODEL@LABEL names this record until a newer promotion takes the label.",
    )


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
