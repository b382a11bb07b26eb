"""SQLModel tables. Schema changes go through a migration in ``migrations/versions``.

Records are immutable once added. Everything that happens to them afterwards (verifications,
promotions, holds) is a new row; ``events`` is append-only and is what ``history`` reads.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import BigInteger, Boolean, Column, DateTime, Index, Text, false
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field, SQLModel

from modelreg.clock import utcnow


class UTCDateTime(TypeDecorator[datetime]):
    """A point in time, stored in UTC on every backend. PostgreSQL converts an offset itself;
    SQLite's DateTime drops it (``…+14:00`` was stored as the wall clock, read as UTC: 14 h
    off), so the offset is applied here before the value is bound. Naive values are refused:
    a time without an offset is not a point in time."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: object) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"a time without a UTC offset cannot be stored: {value}")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: object) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _when(index: bool = False) -> Column[datetime]:
    return Column(UTCDateTime(), nullable=False, index=index)


class ModelRow(SQLModel, table=True):
    __tablename__ = "models"

    id: int | None = Field(default=None, primary_key=True)
    model_id: str = Field(unique=True, max_length=200)
    created_at: datetime = Field(default_factory=utcnow, sa_column=_when())


class RecordRow(SQLModel, table=True):
    __tablename__ = "records"
    __table_args__ = (
        Index("uq_records_identity_sha256", "identity_sha256", unique=True),
        Index("uq_records_model_version", "model_id", "version", unique=True),
    )

    id: str = Field(primary_key=True, max_length=32)
    manifest_sha256: str = Field(unique=True, max_length=64)
    # sha256 of the artifact's facts only (``Manifest.identity_digest``): the same artifact
    # added again is this record, however the judgments about it are worded. Always written;
    # nullable in the schema only because migration 0004 added it to existing rows.
    identity_sha256: str | None = Field(default=None, max_length=64)
    model_id: str = Field(foreign_key="models.model_id", index=True, max_length=200)
    format: str = Field(max_length=16)
    source: str | None = Field(default=None, max_length=300)
    license: str | None = Field(default=None, max_length=100)
    manifest_json: str = Field(sa_column=Column(Text, nullable=False))
    # The manifest's hold reasons as a JSON list, so deployability over many records needs
    # no manifest parsing.
    hold_reasons_json: str = Field(
        default="[]", sa_column=Column(Text, nullable=False, server_default="[]")
    )
    root: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_column=_when(index=True))
    created_by: str = Field(max_length=200)
    # The model's own number for the record (``acme/chat@v3``), given at add in the order the
    # model's records were added. Nullable in the schema only because migration 0013 added it.
    version: int | None = Field(default=None)


class RecordFileRow(SQLModel, table=True):
    __tablename__ = "record_files"

    record_id: str = Field(foreign_key="records.id", primary_key=True, max_length=32)
    path: str = Field(primary_key=True, max_length=1000)
    bytes: int = Field(sa_column=Column(BigInteger, nullable=False))
    sha256: str = Field(index=True, max_length=64)


class VerificationRow(SQLModel, table=True):
    """One check's outcome in one ``verify`` run (``run_id`` groups a run's checks)."""

    __tablename__ = "verifications"
    # "latest run of this record on this target" is the deployability question.
    __table_args__ = (
        Index("ix_verifications_record_target", "record_id", "target", "id"),
        # "what is deployable on T": the latest run of every record verified there.
        Index("ix_verifications_target_record", "target", "record_id", "id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True, max_length=32)
    record_id: str = Field(foreign_key="records.id", max_length=32)
    target: str = Field(max_length=100)
    check: str = Field(max_length=64)
    required: bool
    outcome: str = Field(max_length=16)
    classification: str | None = Field(default=None, max_length=32)
    summary: str = Field(sa_column=Column(Text, nullable=False))
    evidence_json: str = Field(sa_column=Column(Text, nullable=False))
    host: str = Field(max_length=200)
    started_at: datetime = Field(sa_column=_when())
    finished_at: datetime = Field(sa_column=_when(index=True))
    # The runtime the evidence was produced with; evidence expires when it changes.
    fingerprint_json: str = Field(
        default="{}", sa_column=Column(Text, nullable=False, server_default="{}")
    )


class RecordStateRow(SQLModel, table=True):
    """Held or retired records (no row: active). Every change is also an event."""

    __tablename__ = "record_states"

    record_id: str = Field(foreign_key="records.id", primary_key=True, max_length=32)
    state: str = Field(max_length=16)  # "held" or "retired"
    reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    at: datetime = Field(default_factory=utcnow, sa_column=_when())
    actor: str = Field(max_length=200)


class PromotionRow(SQLModel, table=True):
    """A change of the production record for (model, target); the latest row is production."""

    __tablename__ = "promotions"
    # production = the newest promotion row for (model, target).
    __table_args__ = (
        Index("ix_promotions_model_target", "model_id", "target", "id"),
        Index("ix_promotions_model_label", "model_id", "label"),
    )

    id: int | None = Field(default=None, primary_key=True)
    model_id: str = Field(foreign_key="models.model_id", max_length=200)
    target: str = Field(max_length=100)
    record_id: str = Field(foreign_key="records.id", max_length=32)
    previous_record_id: str | None = Field(default=None, max_length=32)
    action: str = Field(max_length=16)  # "promote" or "rollback"
    at: datetime = Field(default_factory=utcnow, sa_column=_when())
    actor: str = Field(max_length=200)
    why: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # The approval record (migration 0009): who answers for it, what it is known not to do
    # (a JSON list), and when it must be tested again.
    owner: str | None = Field(default=None, max_length=200)
    limitations_json: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    retest_by: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    # A break-glass rollback (migration 0013): the reasons the record was not deployable when it
    # was forced to production (a JSON list); None for every other promotion.
    forced_json: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # A name the releaser gave the promotion (migration 0014): ``acme/chat@release-14`` names
    # the record the newest promotion so labelled promoted.
    label: str | None = Field(default=None, max_length=64)


class EventRow(SQLModel, table=True):
    """Append-only log: who did what, when and why."""

    __tablename__ = "events"

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(default_factory=utcnow, sa_column=_when(index=True))
    actor: str = Field(max_length=200)
    kind: str = Field(max_length=32)
    model_id: str | None = Field(default=None, index=True, max_length=200)
    record_id: str | None = Field(default=None, index=True, max_length=32)
    target: str | None = Field(default=None, max_length=100)
    why: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    detail_json: str = Field(default="{}", sa_column=Column(Text, nullable=False))


class RunRow(SQLModel, table=True):
    """One verify run: where its evidence came from and, when signed, the DSSE envelope over
    its in-toto statement. Its checks are the ``verifications`` rows with this ``run_id``."""

    __tablename__ = "runs"

    run_id: str = Field(primary_key=True, max_length=32)
    record_id: str = Field(foreign_key="records.id", index=True, max_length=32)
    target: str = Field(max_length=100)
    # "local" (verify ran against this registry), "imported" (from an export file) or
    # "uploaded" (through the team service). Only local runs, and runs signed by a key the
    # target trusts, ever count.
    origin: str = Field(default="local", max_length=16)
    origin_detail: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    envelope_json: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    signer_key_id: str | None = Field(default=None, max_length=64)
    created_at: datetime = Field(default_factory=utcnow, sa_column=_when())
    # A one-off run (``verify --suite S``, S not the suite in force; migration 0007): kept and
    # shown, never the run that decides a verdict.
    exploratory: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    # Why a run that never decides a verdict was made (migration 0011; None: an ordinary run,
    # or a one-off from before): "one_off" (another suite), "missing_bytes" (its files were
    # not on the host), "investigate" (a held record, reproduced), "drill" (a rollback drill).
    purpose: str | None = Field(default=None, max_length=16)
    # A signed run's signed time, read from its statement (migration 0007): which signed run
    # is newest is decided by it — never by the times the checks claim. Checked against the
    # verified statement whenever the run is judged.
    signed_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    # What its suite verdict was judged against (``rules.GateTerms`` as JSON; migration 0009):
    # a pass under terms weaker than ones its record failed needs a releaser's acceptance.
    gate_terms_json: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class ArtifactSignatureRow(SQLModel, table=True):
    """A model-signing bundle over a record's files (checked against a target's trusted keys at
    verify; its digests were checked against the record's when it was added)."""

    __tablename__ = "artifact_signatures"
    __table_args__ = (
        Index("uq_artifact_signatures_record_bundle", "record_id", "bundle_sha256", unique=True),
    )

    id: int | None = Field(default=None, primary_key=True)
    record_id: str = Field(foreign_key="records.id", index=True, max_length=32)
    bundle_sha256: str = Field(max_length=64)
    key_hint: str | None = Field(default=None, max_length=64)
    bundle_json: str = Field(sa_column=Column(Text, nullable=False))
    added_at: datetime = Field(default_factory=utcnow, sa_column=_when())
    actor: str = Field(max_length=200)


class ModelSuiteRow(SQLModel, table=True):
    """The golden suite attached to a model: every verify of its records runs it, and a run
    under another suite does not count."""

    __tablename__ = "model_suites"

    model_id: str = Field(foreign_key="models.model_id", primary_key=True, max_length=200)
    suite_sha256: str = Field(max_length=64)
    suite_json: str = Field(sa_column=Column(Text, nullable=False))
    attached_at: datetime = Field(default_factory=utcnow, sa_column=_when())
    actor: str = Field(max_length=200)


# -- the team service (migration 0006) ------------------------------------------------------


class TargetRow(SQLModel, table=True):
    """A shared target definition (``modelreg targets add``): everyone using this registry
    sees the same one. ``spec_json`` is the validated YAML entry, as JSON."""

    __tablename__ = "targets"

    name: str = Field(primary_key=True, max_length=100)
    spec_json: str = Field(sa_column=Column(Text, nullable=False))
    spec_sha256: str = Field(max_length=64)
    defined_at: datetime = Field(default_factory=utcnow, sa_column=_when())
    defined_by: str = Field(max_length=200)


class RecordLocationRow(SQLModel, table=True):
    """A URL a record's bytes can be fetched from (file://host/path, hf://, s3://, oci://)."""

    __tablename__ = "record_locations"
    __table_args__ = (Index("uq_record_locations_url", "record_id", "url", unique=True),)

    id: int | None = Field(default=None, primary_key=True)
    record_id: str = Field(foreign_key="records.id", max_length=32)
    url: str = Field(max_length=2000)
    added_at: datetime = Field(default_factory=utcnow, sa_column=_when())
    added_by: str = Field(max_length=200)


class ApiTokenRow(SQLModel, table=True):
    """A bearer token of the HTTP API. Only the sha256 of the secret is kept; its name is the
    actor of every event it causes, so names are never reused (revoked tokens keep theirs)."""

    __tablename__ = "api_tokens"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, max_length=100)
    role: str = Field(max_length=16)  # reader, verifier, releaser
    secret_sha256: str = Field(unique=True, max_length=64)
    created_at: datetime = Field(default_factory=utcnow, sa_column=_when())
    created_by: str = Field(max_length=200)
    revoked_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    revoked_by: str | None = Field(default=None, max_length=200)


class WebhookRow(SQLModel, table=True):
    """A receiver of events (migration 0010): the kinds it is sent and the secret its
    deliveries are signed with, sealed with a key outside the database (``sealed_secret``,
    migration 0011, ``modelreg.sealing``; ``secret`` is empty then, and holds the secret as
    given only for a webhook added before 0011 until a sender seals it). Never shown after
    ``webhooks add``. Removed hooks keep their row, so their deliveries keep their history."""

    __tablename__ = "webhooks"

    id: int | None = Field(default=None, primary_key=True)
    url: str = Field(max_length=2000)
    events: str = Field(max_length=500)  # comma-separated event kinds
    secret: str = Field(max_length=200)
    sealed_secret: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: datetime = Field(default_factory=utcnow, sa_column=_when())
    created_by: str = Field(max_length=200)
    removed_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    removed_by: str | None = Field(default=None, max_length=200)


class WebhookDeliveryRow(SQLModel, table=True):
    """The outbox: one row per (event, subscribed webhook), written in the event's own
    transaction. A sender claims a due row by moving ``next_attempt_at`` past its lease, so
    senders in several processes never send one attempt twice; a sender that dies mid-send
    leaves the row due again when the lease ends (at least once; ``delivery_id`` is stable
    across attempts for receivers to drop repeats)."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),)

    id: int | None = Field(default=None, primary_key=True)
    webhook_id: int = Field(foreign_key="webhooks.id")
    event_id: int = Field(foreign_key="events.id")
    delivery_id: str = Field(unique=True, max_length=36)
    status: str = Field(max_length=16)  # pending, delivered, failed
    attempts: int = Field(default=0)
    next_attempt_at: datetime = Field(sa_column=_when())
    last_attempt_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    last_status: int | None = Field(default=None)
    last_error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


# -- the fleet's facts and the verdicts derived from them (migration 0011) -----------------


class RuntimeReportRow(SQLModel, table=True):
    """What a host of a target runs for one runtime (packages, build, CPU flags, libraries),
    as it said so: with every local verify that exercised the runtime (``source`` "verify"),
    or a ``modelreg host report`` (``source`` "report"). The newest for (target, runtime) is
    the runtime the target's hosts run: evidence produced under another is stale, for every
    reader."""

    __tablename__ = "runtime_reports"
    __table_args__ = (Index("ix_runtime_reports_target_runtime", "target", "runtime", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    target: str = Field(max_length=100)
    runtime: str = Field(max_length=32)
    host: str = Field(max_length=200)
    fingerprint_json: str = Field(sa_column=Column(Text, nullable=False))
    source: str = Field(max_length=16)
    run_id: str | None = Field(default=None, max_length=32)
    at: datetime = Field(default_factory=utcnow, sa_column=_when())
    actor: str = Field(max_length=200)


class LocationCheckRow(SQLModel, table=True):
    """One check of a recorded location's bytes: every file's sha256 read there (``ok``), or
    what was wrong (missing, another size, another digest, unreachable) — by which host, when,
    doing what (``source``: add, verify, fetch, check, push). A location is fetchable when its
    newest check verified it: a fact every reader shares, never a probe by the reader."""

    __tablename__ = "location_checks"
    __table_args__ = (Index("ix_location_checks_record", "record_id", "url", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    record_id: str = Field(foreign_key="records.id", max_length=32)
    url: str = Field(max_length=2000)
    ok: bool
    detail: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    host: str = Field(max_length=200)
    source: str = Field(max_length=16)
    at: datetime = Field(default_factory=utcnow, sa_column=_when())
    actor: str = Field(max_length=200)


class VerdictRow(SQLModel, table=True):
    """A record's verdict on a target, derived by the rules from the registry's rows alone
    and written in the transaction of every write that can change it (``registry.verdicts``):
    what every reader reads. ``rules_version``: the rules that derived it (a row of other
    rules is derived again when read)."""

    __tablename__ = "verdicts"
    __table_args__ = (
        Index("ix_verdicts_target", "target", "deployable"),
        Index("ix_verdicts_model", "model_id", "target"),
    )

    record_id: str = Field(foreign_key="records.id", primary_key=True, max_length=32)
    target: str = Field(primary_key=True, max_length=100)
    model_id: str = Field(max_length=200)
    deployable: bool
    stale: bool
    held: bool
    reasons_json: str = Field(sa_column=Column(Text, nullable=False))
    run_id: str | None = Field(default=None, max_length=32)
    verified_at: datetime | None = Field(
        default=None, sa_column=Column(UTCDateTime(), nullable=True)
    )
    rules_version: int


class SettingRow(SQLModel, table=True):
    """A registry-wide setting (migration 0011), by name: e.g. ``webhooks.allowed_hosts``, the
    hosts on loopback, link-local or private addresses webhooks may be sent to. Each change
    is also an event (``setting``)."""

    __tablename__ = "registry_settings"

    name: str = Field(primary_key=True, max_length=100)
    value: str = Field(sa_column=Column(Text, nullable=False))
    updated_at: datetime = Field(default_factory=utcnow, sa_column=_when())
    updated_by: str = Field(max_length=200)
