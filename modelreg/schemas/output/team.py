"""Outputs of the team service and the fleet: shared targets, locations, fetch and push,
tokens, webhooks, uploaded runs, the matrix, host reports, deploy, scan."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from modelreg.schemas.manifest import Finding
from modelreg.schemas.output.base import (
    DeployabilityOut,
    Output,
    ProductionChangeOut,
    ReasonOut,
    _Out,
)
from modelreg.schemas.output.commands import TargetOut
from modelreg.schemas.output.deploy import GateOutput
from modelreg.schemas.verification import CheckResult


class TargetsChangeOutput(Output):
    """``targets add`` / ``targets remove``: what changed in the registry's definitions."""

    changes: dict[str, Literal["added", "replaced", "unchanged", "removed"]]
    message: str
    targets: list[TargetOut] = Field(description="Every target after the change.")
    production_affected: list[ProductionChangeOut] = Field(
        default_factory=list,
        description="The production entries on the changed targets whose verdict the change "
        "changes (a definition, its trusted keys or its suite: made stale or failing, or "
        "deployable again), each with the step that re-verifies it.",
    )
    dry_run: bool = Field(
        default=False,
        description="True: nothing was written (--dry-run); this is what it would do.",
    )


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
