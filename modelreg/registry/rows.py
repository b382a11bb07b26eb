"""The registry's rows as the rest of modelreg reads them — records, files, runs, promotions,
events, shared targets, tokens — and the few conversions between rows and the domain (a
manifest as the rows of its record, the event of a change). No query lives here: ``reads``
has them."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlmodel import SQLModel

from modelreg.clock import utcnow
from modelreg.record import Record
from modelreg.registry.tables import (
    ApiTokenRow,
    EventRow,
    PromotionRow,
    RecordFileRow,
    RecordRow,
    VerificationRow,
)
from modelreg.rules import (
    PromotionStep,
)
from modelreg.schemas.manifest import Manifest
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.storable import loads_readable

ADD_RETRIES = 5
CHUNK = 500  # ids per IN (...) list
# Verification ids per IN list of the run checks: one statement for 500 records on 6 targets,
# far below SQLite's 32,766 and PostgreSQL's 65,535 bound parameters with any number of targets.
HEADS_CHUNK = 10_000


def aware(when: datetime) -> datetime:
    """SQLite hands back naive datetimes; everything is written in UTC."""
    return when if when.tzinfo else when.replace(tzinfo=UTC)


@dataclass(frozen=True)
class StoredFile:
    path: str
    bytes: int
    sha256: str


def record_of(row: RecordRow) -> Record:
    """The domain record of a row of ``records``."""
    return Record(
        id=row.id,
        model_id=row.model_id,
        format=row.format,
        source=row.source,
        license=row.license,
        root=Path(row.root),
        created_at=aware(row.created_at),
        created_by=row.created_by,
        hold_reasons=tuple(json.loads(row.hold_reasons_json or "[]")),
        manifest_json=row.manifest_json,
        version=row.version,
    )


@dataclass(frozen=True)
class Verification:
    run_id: str
    target: str
    host: str
    result: CheckResult
    fingerprint: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: VerificationRow) -> Verification:
        return cls(
            run_id=row.run_id,
            target=row.target,
            host=row.host,
            result=CheckResult(
                check=row.check,
                required=row.required,
                outcome=Outcome(row.outcome),
                classification=row.classification,
                summary=row.summary,
                evidence=loads_readable(row.evidence_json),
                started_at=aware(row.started_at),
                finished_at=aware(row.finished_at),
            ),
            fingerprint=json.loads(row.fingerprint_json or "{}"),
        )


@dataclass(frozen=True)
class ForeignRun:
    """A run this registry's verify did not produce: kept as history, counted only when
    signed by a key the target trusts."""

    run_id: str
    target: str
    origin: str  # "imported" or "uploaded"
    origin_detail: str | None
    signed: bool
    signer_key_id: str | None
    created_at: datetime
    checks: list[Verification]


@dataclass(frozen=True)
class Promotion:
    id: int
    model_id: str
    target: str
    record_id: str
    previous_record_id: str | None
    action: str  # "promote" or "rollback"
    at: datetime
    actor: str
    why: str | None
    # The approval record: who answers for it, its known limitations, its re-test date.
    owner: str | None = None
    limitations: tuple[str, ...] = ()
    retest_by: datetime | None = None
    # A break-glass rollback: why the record was not deployable when it was forced there.
    forced: tuple[str, ...] = ()
    # The name the releaser gave the promotion (``promote --label``), if any.
    label: str | None = None

    @classmethod
    def from_row(cls, row: PromotionRow) -> Promotion:
        assert row.id is not None
        return cls.from_columns(
            (
                row.id,
                row.model_id,
                row.target,
                row.record_id,
                row.previous_record_id,
                row.action,
                row.at,
                row.actor,
                row.why,
                row.owner,
                row.limitations_json,
                row.retest_by,
                row.forced_json,
                row.label,
            )
        )

    @classmethod
    def from_columns(cls, row: Any) -> Promotion:
        """From a row of ``promotion_columns()`` (plain columns: status reads thousands)."""
        id_, model_id, target, record_id, previous, action, at, actor, why = row[:9]
        owner, limitations, retest_by, forced, label = row[9:14]
        return cls(
            id_,
            model_id,
            target,
            record_id,
            previous,
            action,
            aware(at),
            actor,
            why,
            owner,
            tuple(json.loads(limitations)) if limitations else (),
            aware(retest_by) if retest_by is not None else None,
            tuple(json.loads(forced)) if forced else (),
            label,
        )

    def step(self) -> PromotionStep:
        return PromotionStep(self.record_id, self.previous_record_id, self.action)


@dataclass(frozen=True)
class Event:
    id: int
    at: datetime
    actor: str
    kind: str
    model_id: str | None
    record_id: str | None
    target: str | None
    why: str | None
    detail: dict[str, Any]

    @classmethod
    def from_row(cls, row: EventRow) -> Event:
        assert row.id is not None
        return cls(
            row.id,
            aware(row.at),
            row.actor,
            row.kind,
            row.model_id,
            row.record_id,
            row.target,
            row.why,
            loads_readable(row.detail_json),
        )


@dataclass(frozen=True)
class BadValue:
    """A stored value that cannot be read back: where it is and why."""

    table: str
    key: str
    column: str
    why: str


def row_key(row: Any) -> str:
    from sqlalchemy import inspect

    return "/".join(str(v) for v in inspect(row).identity or ())


def new_run_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class StoredTarget:
    """A target definition shared through the registry (the YAML entry, as a dict)."""

    name: str
    spec: dict[str, Any]
    spec_sha256: str
    defined_at: datetime
    defined_by: str


@dataclass(frozen=True)
class StoredLocation:
    url: str
    added_at: datetime
    added_by: str


@dataclass(frozen=True)
class StoredToken:
    name: str
    role: str
    created_at: datetime
    created_by: str
    revoked_at: datetime | None
    revoked_by: str | None
    # What the token is looked up by (the secret's sha256; never shown).
    secret_sha256: str = field(default="", repr=False)

    @classmethod
    def from_row(cls, row: ApiTokenRow) -> StoredToken:
        return cls(
            row.name,
            row.role,
            aware(row.created_at),
            row.created_by,
            aware(row.revoked_at) if row.revoked_at else None,
            row.revoked_by,
            row.secret_sha256,
        )


def event_row(
    kind: str,
    actor: str,
    *,
    model_id: str | None = None,
    record_id: str | None = None,
    target: str | None = None,
    why: str | None = None,
    detail: dict[str, Any] | None = None,
) -> EventRow:
    return EventRow(
        at=utcnow(),
        actor=actor,
        kind=kind,
        model_id=model_id,
        record_id=record_id,
        target=target,
        why=why,
        detail_json=json.dumps(detail or {}, sort_keys=True, default=str),
    )


def target_define_event(
    name: str, spec: Any, digest: str, replaced: str | None, actor: str, origin: str
) -> EventRow:
    """The event of a shared target definition: who, from where, its digest and the one it
    replaced (``targets add`` and ``import --with-targets`` write the same event)."""
    detail = {"from": origin, "spec_sha256": digest, "replaced_sha256": replaced, "spec": spec}
    return event_row("target-define", actor, target=name, detail=detail)


def stored_spec(spec: dict[str, Any]) -> tuple[str, str]:
    """A shared target's definition as stored: canonical JSON and its sha256 (the digest
    ``targets add`` and ``import --with-targets`` compare)."""
    spec_json = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    return spec_json, hashlib.sha256(spec_json.encode()).hexdigest()


def chunks(ids: Sequence[str]) -> Iterator[Sequence[str]]:
    for k in range(0, len(ids), CHUNK):
        yield ids[k : k + CHUNK]


# -- queries shared by plain reads, snapshots and locked transactions ----------------------
# The hot reads' statements, built once (``status`` under load: constructing a select and
# its cache key costs about as much CPU as running it). ``ids`` / ``targets`` expand into IN.


def effective_holds(stated: Sequence[str], manifest: Manifest) -> list[str]:
    """The holds a record is judged by: those its facts imply now (``holds.finalize``) and
    those its manifest states beyond them (a fact the rules word otherwise — "license
    unknown: …" — is one hold, not two) — a manifest edited to drop a hold, or stored before
    a rule existed, is held all the same."""
    from modelreg.manifests.holds import finalize
    from modelreg.reasons import CODED_HOLDS

    def fact(reason: str) -> str:
        label = reason.partition(": ")[0]
        return reason if label in CODED_HOLDS else label

    derived = finalize(manifest).hold_reasons
    known = {fact(r) for r in derived}
    kept = [r for r in stated if r in derived or fact(r) not in known]
    return list(dict.fromkeys([*kept, *derived]))


def record_rows(
    manifest: Manifest,
    record_id: str,
    identity: str,
    root: str,
    created_at: datetime,
    created_by: str,
) -> list[SQLModel]:
    """A manifest as the rows of its record: the record and one row per file — what ``add``
    writes and what ``import`` replays (one conversion, so the two can never disagree)."""
    assert manifest.model_id is not None  # checked by add and import
    rows: list[SQLModel] = [
        RecordRow(
            id=record_id,
            manifest_sha256=manifest.digest(),
            identity_sha256=identity,
            model_id=manifest.model_id,
            format=manifest.format,
            source=manifest.source,
            license=manifest.license.id,
            manifest_json=manifest.canonical_json(),
            hold_reasons_json=json.dumps(effective_holds(manifest.hold_reasons, manifest)),
            root=root,
            created_at=created_at,
            created_by=created_by,
        )
    ]
    for f in manifest.files:
        assert f.bytes is not None and f.sha256 is not None  # checked by add and import
        rows.append(RecordFileRow(record_id=record_id, path=f.path, bytes=f.bytes, sha256=f.sha256))
    return rows


def record_prefix(ref: str) -> str:
    """A record id or id prefix as given (``r_3f2a`` or ``3f2a``) -> ``r_3f2a``."""
    return ref if ref.startswith("r_") else f"r_{ref}"


def like_prefix(text: str) -> str:
    """``text`` as a LIKE pattern matching itself literally (escape ``\\``)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
