"""The store: records, verifications, promotions, record states and the event log.

The store only stores. It decides nothing — deployability, staleness and the rollback candidate
are the rules module's (``modelreg.rules``), applied by the API (``modelreg.api``). Every query
is a method of ``Reads``, written once, over one session: ``Store.read()`` is one read-only
transaction with one consistent view of the registry; every decision that reads then writes
runs inside ``Store.locked(model_id)`` — a ``Writes`` (``Reads`` and the writes) in one
transaction holding the model's lock, so promotions, rollbacks, holds, releases, retirements
and verifications of one model are serialized and their events are numbered in commit order.
"""

from __future__ import annotations

import functools
import hashlib
import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from sqlalchemy import bindparam, case
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlmodel import Session, SQLModel, col, func, select

from modelreg.clock import utcnow
from modelreg.errors import AmbiguousRecord, InvalidInput, ModelNotFound, RecordNotFound
from modelreg.limits import ACTOR_MAX, RECORD_REF_MAX, check_length, check_manifest
from modelreg.record import Record
from modelreg.registry.boundary import loads_readable
from modelreg.registry.tables import (
    ApiTokenRow,
    ArtifactSignatureRow,
    EventRow,
    LocationCheckRow,
    ModelRow,
    ModelSuiteRow,
    PromotionRow,
    RecordFileRow,
    RecordLocationRow,
    RecordRow,
    RecordStateRow,
    RunRow,
    RuntimeReportRow,
    TargetRow,
    VerificationRow,
)
from modelreg.registry.verdicts import Dirty, LocationState, settle
from modelreg.rules import (
    ACTIVE,
    RELAXATION_ACCEPTED,
    CheckVerdict,
    Deployability,
    GateHistory,
    GateTerms,
    PromotionStep,
    RecordState,
    RecordStateKind,
    StoredRun,
)
from modelreg.schemas.manifest import MODEL_ID_RE, Manifest
from modelreg.schemas.verification import CheckResult, Outcome

ADD_RETRIES = 5
_CHUNK = 500  # ids per IN (...) list
# Verification ids per IN list of the run checks: one statement for 500 records on 6 targets,
# far below SQLite's 32,766 and PostgreSQL's 65,535 bound parameters with any number of targets.
_HEADS_CHUNK = 10_000


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
            )
        )

    @classmethod
    def from_columns(cls, row: Any) -> Promotion:
        """From a row of ``_promotion_columns()`` (plain columns: status reads thousands)."""
        id_, model_id, target, record_id, previous, action, at, actor, why = row[:9]
        owner, limitations, retest_by = row[9:12]
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


def _row_key(row: Any) -> str:
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


def _chunks(ids: Sequence[str]) -> Iterator[Sequence[str]]:
    for k in range(0, len(ids), _CHUNK):
        yield ids[k : k + _CHUNK]


# -- queries shared by plain reads, snapshots and locked transactions ----------------------
# The hot reads' statements, built once (``status`` under load: constructing a select and
# its cache key costs about as much CPU as running it). ``ids`` / ``targets`` expand into IN.


@cache
def _states_statement() -> Any:
    s = RecordStateRow
    return sa_select(col(s.record_id), col(s.state), col(s.reason), col(s.at), col(s.actor)).where(
        col(s.record_id).in_(bindparam("ids", expanding=True))
    )


@cache
def _records_statement() -> Any:
    return select(RecordRow).where(col(RecordRow.id).in_(bindparam("ids", expanding=True)))


def _promotion_columns() -> Any:
    """A promotion's columns in ``Promotion``'s field order (``Promotion.from_columns``)."""
    p = PromotionRow
    return sa_select(
        col(p.id),
        col(p.model_id),
        col(p.target),
        col(p.record_id),
        col(p.previous_record_id),
        col(p.action),
        col(p.at),
        col(p.actor),
        col(p.why),
        col(p.owner),
        col(p.limitations_json),
        col(p.retest_by),
    )


@cache
def _productions_statement(by_model: bool, by_target: bool) -> Any:
    p = PromotionRow
    newest = select(func.max(p.id)).group_by(col(p.model_id), col(p.target))
    if by_model:
        newest = newest.where(p.model_id == bindparam("model_id"))
    if by_target:
        newest = newest.where(p.target == bindparam("target"))
    return (
        _promotion_columns().where(col(p.id).in_(newest)).order_by(col(p.model_id), col(p.target))
    )


@cache
def _files_statement() -> Any:
    f = RecordFileRow
    return (
        sa_select(col(f.record_id), col(f.path), col(f.bytes), col(f.sha256))
        .where(col(f.record_id).in_(bindparam("ids", expanding=True)))
        .order_by(col(f.record_id), col(f.path))
    )


@cache
def _locations_statement() -> Any:
    loc = RecordLocationRow
    return (
        sa_select(col(loc.record_id), col(loc.url), col(loc.added_at), col(loc.added_by))
        .where(col(loc.record_id).in_(bindparam("ids", expanding=True)))
        .order_by(col(loc.id))
    )


@cache
def _target_specs_statement() -> Any:
    return select(TargetRow).order_by(col(TargetRow.name))


@cache
def _run_heads_statement() -> Any:
    """Per (record, target) of ``ids`` × ``targets``: the verification ids of its newest local
    run, newest signed run and newest run of any origin, none of them a one-off (exploratory)
    run (so that "only imported runs" can be
    said rather than "never verified") — the runs that may decide its deployability, found
    in one grouped pass over the pairs' rows (three maxima, not a UNION of three passes)."""
    v, r = VerificationRow, RunRow
    return (
        sa_select(
            func.max(case(((col(r.origin) == "local") & ~col(r.exploratory), col(v.id)))),
            func.max(case((col(r.envelope_json).is_not(None) & ~col(r.exploratory), col(v.id)))),
            func.max(case((~col(r.exploratory), col(v.id)))),
        )
        .join(r, col(r.run_id) == col(v.run_id))
        .where(
            col(v.target).in_(bindparam("targets", expanding=True)),
            col(v.record_id).in_(bindparam("ids", expanding=True)),
        )
        .group_by(col(v.record_id), col(v.target))
    )


@cache
def _signed_heads_statement() -> Any:
    """Per (record, target) of ``ids`` × ``targets``: a verification id of its signed run
    (not one-off) with the newest signed time — the signed run that may count. Insertion order
    and the checks' claimed times say nothing about when a statement was signed: an older
    signed pass uploaded after a newer signed failure must not become "the newest"."""
    v, r = VerificationRow, RunRow
    newest = (
        sa_select(
            col(r.record_id).label("record_id"),
            col(r.target).label("target"),
            func.max(col(r.signed_at)).label("signed_at"),
        )
        .where(
            col(r.envelope_json).is_not(None),
            ~col(r.exploratory),
            col(r.target).in_(bindparam("targets", expanding=True)),
            col(r.record_id).in_(bindparam("ids", expanding=True)),
        )
        .group_by(col(r.record_id), col(r.target))
        .subquery()
    )
    return (
        sa_select(func.max(col(v.id)))
        .join(r, col(r.run_id) == col(v.run_id))
        .join(
            newest,
            (newest.c.record_id == col(r.record_id))
            & (newest.c.target == col(r.target))
            & (newest.c.signed_at == col(r.signed_at)),
        )
        .group_by(col(r.record_id), col(r.target), col(r.run_id))
    )


@cache
def _run_checks_statement() -> Any:
    """Every check of the runs the verifications ``heads`` belong to, as plain columns (not
    ORM rows with their evidence: the hot path of status, list and the server)."""
    v, r = VerificationRow, RunRow
    runs = sa_select(col(v.run_id)).where(col(v.id).in_(bindparam("heads", expanding=True)))
    return (
        sa_select(
            col(v.record_id),
            col(v.target),
            col(v.check),
            col(v.required),
            col(v.outcome),
            col(v.classification),
            col(v.finished_at),
            col(v.run_id),
            col(v.fingerprint_json),
            col(r.origin),
            col(r.envelope_json),
            col(r.exploratory),
            col(r.signed_at),
            col(r.gate_terms_json),
        )
        .join(r, col(r.run_id) == col(v.run_id))
        .where(col(v.run_id).in_(runs))
        .order_by(col(v.id))
    )


def effective_holds(stated: Sequence[str], manifest: Manifest) -> list[str]:
    """The holds a record is judged by: those its facts imply now (``holds.finalize``) and
    those its manifest states beyond them (a fact the rules word otherwise — "license
    unknown: …" — is one hold, not two) — a manifest edited to drop a hold, or stored before
    a rule existed, is held all the same."""
    from modelreg.manifests.holds import finalize
    from modelreg.rules import CODED_HOLDS

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


def _record_prefix(ref: str) -> str:
    """A record id or id prefix as given (``r_3f2a`` or ``3f2a``) -> ``r_3f2a``."""
    return ref if ref.startswith("r_") else f"r_{ref}"


def _like_prefix(text: str) -> str:
    """``text`` as a LIKE pattern matching itself literally (escape ``\\``)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class Reads:
    """Every query of the registry, each written once, over one session: one transaction, one
    consistent view (``Store.read``), or the locked transaction a decision writes in
    (``Writes``). Open no other session inside one on SQLite: it may hold the database's lock."""

    def __init__(self, session: Session, load_manifest_json: Callable[[str], str]) -> None:
        self.session = session
        self._load_manifest_json = load_manifest_json

    def _core(self, statement: Any, params: dict[str, Any] | None = None) -> Any:
        """A Core statement on the session's connection (the hot reads: no ORM round)."""
        return self.session.connection().execute(statement, params or {})

    # -- records -----------------------------------------------------------------------------

    def record(self, ref: str) -> Record:
        """A record by id or unique id prefix (``r_3f2a`` or ``3f2a``)."""
        if "/" in ref and MODEL_ID_RE.match(ref.strip()):
            shown = ref.strip()[:200]
            raise InvalidInput(
                f"{shown!r} is a model id; a record id is r_ and 12 hex digits (or a prefix)",
                f"list the model's records: modelreg list --model {shown}",
            )
        ref = check_length("record reference", ref.strip(), RECORD_REF_MAX)
        prefix = _record_prefix(ref)
        if len(prefix) < 6:
            raise InvalidInput(
                f"record reference {ref!r} is too short", "give at least 4 characters of its id"
            )
        row = self.session.get(RecordRow, prefix)
        if row is not None:
            return record_of(row)
        rows = self.session.exec(
            select(RecordRow)
            .where(col(RecordRow.id).like(f"{_like_prefix(prefix)}%", escape="\\"))
            .limit(6)
        ).all()
        if not rows:
            raise RecordNotFound(ref)
        if len(rows) > 1:
            raise AmbiguousRecord(ref, [r.id for r in rows])
        return record_of(rows[0])

    def search(self, text: str, limit: int) -> list[tuple[str, str, str | None]]:
        """(record id, how it matched — ``record_id`` or ``sha256`` — and the file that did)
        for a record id prefix, or a file's sha256 or a prefix of it; newest records first."""
        text = text.strip().lower()
        found: dict[str, tuple[str, str, str | None]] = {}
        prefix = _record_prefix(text)
        if len(prefix) >= 6:
            ids = self.session.exec(
                select(RecordRow.id)
                .where(col(RecordRow.id).like(f"{_like_prefix(prefix)}%", escape="\\"))
                .order_by(col(RecordRow.created_at).desc(), col(RecordRow.id))
                .limit(limit)
            ).all()
            found |= {i: (i, "record_id", None) for i in ids}
        if len(text) >= 8 and all(c in "0123456789abcdef" for c in text):
            f, r = RecordFileRow, RecordRow
            rows = self.session.execute(
                sa_select(col(f.record_id), col(f.path))
                .join(r, col(r.id) == col(f.record_id))
                .where(col(f.sha256).like(f"{text}%"))
                .order_by(col(r.created_at).desc(), col(f.record_id), col(f.path))
                .limit(limit)
            ).all()
            for record_id, path in rows:
                found.setdefault(record_id, (record_id, "sha256", path))
        return list(found.values())[:limit]

    def record_by_identity(self, identity: str) -> Record | None:
        row = self.session.exec(
            select(RecordRow).where(RecordRow.identity_sha256 == identity)
        ).first()
        return record_of(row) if row else None

    def records(
        self, model_id: str | None = None, *, verified_on: str | None = None
    ) -> list[Record]:
        """All records (of one model; with at least one verification on ``verified_on``),
        oldest first."""
        query = select(RecordRow).order_by(col(RecordRow.created_at), col(RecordRow.id))
        if model_id:
            query = query.where(RecordRow.model_id == model_id)
        if verified_on is not None:
            verified = select(VerificationRow.record_id).where(
                VerificationRow.target == verified_on
            )
            query = query.where(col(RecordRow.id).in_(verified))
        return [record_of(r) for r in self.session.exec(query).all()]

    def records_by_id(
        self, record_ids: Iterable[str], *, with_manifests: bool = True
    ) -> dict[str, Record]:
        """Records by id; ``with_manifests=False`` reads each manifest on first use in a
        session of its own — so touch ``record.manifest`` only after this transaction has
        ended (SQLite: inside it, that session would wait on its lock)."""
        ids = sorted(set(record_ids))
        if with_manifests:
            found: dict[str, Record] = {}
            for chunk in _chunks(ids):
                for row in self.session.exec(_records_statement(), params={"ids": list(chunk)}):
                    found[row.id] = record_of(row)
            return found
        return self._record_heads(ids)

    def _record_heads(self, ids: Sequence[str]) -> dict[str, Record]:
        r = RecordRow
        found: dict[str, Record] = {}
        for chunk in _chunks(ids):
            rows = self.session.execute(
                sa_select(
                    col(r.id),
                    col(r.model_id),
                    col(r.format),
                    col(r.source),
                    col(r.license),
                    col(r.root),
                    col(r.created_at),
                    col(r.created_by),
                    col(r.hold_reasons_json),
                ).where(col(r.id).in_(chunk))
            ).all()
            for rid, model, fmt, source, license_, root, at, by, holds in rows:
                found[rid] = Record(
                    id=rid,
                    model_id=model,
                    format=fmt,
                    source=source,
                    license=license_,
                    root=Path(root),
                    created_at=aware(at),
                    created_by=by,
                    hold_reasons=tuple(json.loads(holds or "[]")),
                    manifest_json=None,
                    load_manifest_json=functools.partial(self._load_manifest_json, rid),
                )
        return found

    def files(self, record_ids: Sequence[str]) -> dict[str, list[StoredFile]]:
        """record id -> its files (path, bytes, sha256), from the file table."""
        found: dict[str, list[StoredFile]] = {i: [] for i in record_ids}
        for chunk in _chunks(list(record_ids)):
            rows = self.session.execute(_files_statement(), {"ids": list(chunk)}).all()
            for record_id, path, size, sha256 in rows:
                found[record_id].append(StoredFile(path, size, sha256))
        return found

    def locations(self, record_ids: Sequence[str]) -> dict[str, list[StoredLocation]]:
        """record id -> where its bytes can be fetched, in the order they were added."""
        found: dict[str, list[StoredLocation]] = {i: [] for i in record_ids}
        for chunk in _chunks(list(record_ids)):
            rows = self.session.execute(_locations_statement(), {"ids": list(chunk)}).all()
            for record_id, url, added_at, added_by in rows:
                found[record_id].append(StoredLocation(url, aware(added_at), added_by))
        return found

    def artifact_signatures(self, record_id: str) -> list[dict[str, Any]]:
        rows = self.session.exec(
            select(ArtifactSignatureRow)
            .where(ArtifactSignatureRow.record_id == record_id)
            .order_by(col(ArtifactSignatureRow.id))
        )
        return [json.loads(row.bundle_json) for row in rows]

    # -- models --------------------------------------------------------------------------

    def model_ids(self) -> list[str]:
        return list(self.session.exec(select(ModelRow.model_id).order_by(col(ModelRow.model_id))))

    def record_counts(self) -> dict[str, int]:
        """Records by stored state: active, held, retired (every state, zero included)."""
        total = self.session.exec(select(func.count()).select_from(RecordRow)).one()
        rows = self.session.exec(
            select(RecordStateRow.state, func.count()).group_by(col(RecordStateRow.state))
        ).all()
        counts = {"held": 0, "retired": 0} | {str(state): int(n) for state, n in rows}
        return {"active": int(total) - sum(counts.values()), **counts}

    def has_model(self, model_id: str) -> bool:
        found = self.session.exec(select(ModelRow.id).where(ModelRow.model_id == model_id))
        return found.first() is not None

    def model_page(self, contains: str | None, offset: int, limit: int) -> tuple[list[str], int]:
        """A page of model ids (sorted; ``contains``: a case-insensitive substring) and how
        many match in all."""
        query = select(ModelRow.model_id)
        if contains:
            query = query.where(
                col(ModelRow.model_id).ilike(f"%{_like_prefix(contains)}%", escape="\\")
            )
        total = self.session.exec(select(func.count()).select_from(query.subquery())).one()
        page = self.session.exec(
            query.order_by(col(ModelRow.model_id)).offset(offset).limit(limit)
        ).all()
        return list(page), int(total)

    def model_suites(self, model_ids: Sequence[str] | None = None) -> dict[str, ModelSuiteRow]:
        """model id -> its attached suite (None: of every model)."""
        query = select(ModelSuiteRow)
        if model_ids is None:
            return {row.model_id: row for row in self.session.exec(query)}
        found: dict[str, ModelSuiteRow] = {}
        for chunk in _chunks(list(model_ids)):
            chunk_query = query.where(col(ModelSuiteRow.model_id).in_(chunk))
            found |= {row.model_id: row for row in self.session.exec(chunk_query)}
        return found

    # -- verifications ---------------------------------------------------------------------

    def verifications(self, record_id: str, target: str | None = None) -> list[Verification]:
        """Every stored check result of a record, oldest first."""
        query = select(VerificationRow).where(VerificationRow.record_id == record_id)
        if target:
            query = query.where(VerificationRow.target == target)
        rows = self.session.exec(query.order_by(col(VerificationRow.id))).all()
        return [Verification.from_row(r) for r in rows]

    def verifications_of(self, record_ids: Sequence[str]) -> list[tuple[str, Verification]]:
        """(record id, check result) of every stored check of these records, oldest first."""
        found: list[tuple[int, str, Verification]] = []
        for chunk in _chunks(list(record_ids)):
            rows = self.session.exec(
                select(VerificationRow).where(col(VerificationRow.record_id).in_(chunk))
            ).all()
            found += [(r.id or 0, r.record_id, Verification.from_row(r)) for r in rows]
        return [(record_id, v) for _, record_id, v in sorted(found, key=lambda t: t[0])]

    def verified_targets(self, record_id: str) -> list[str]:
        rows = self.session.exec(
            select(VerificationRow.target).where(VerificationRow.record_id == record_id).distinct()
        )
        return sorted(rows)

    def run_checks(self, run_id: str) -> list[Verification]:
        """Every check of one run, with evidence, in the order they ran."""
        rows = self.session.exec(
            select(VerificationRow)
            .where(VerificationRow.run_id == run_id)
            .order_by(col(VerificationRow.id))
        ).all()
        return [Verification.from_row(r) for r in rows]

    def latest_local_run(self, record_id: str, target: str) -> list[Verification]:
        """Every check of the latest run this registry's verify produced for the record on
        ``target`` (imported and uploaded runs are not facts measured here), with evidence."""
        last = self.session.exec(
            select(VerificationRow.run_id)
            .join(RunRow, col(RunRow.run_id) == col(VerificationRow.run_id))
            .where(
                VerificationRow.record_id == record_id,
                VerificationRow.target == target,
                RunRow.origin == "local",
            )
            .order_by(col(VerificationRow.id).desc())
            .limit(1)
        ).first()
        return [] if last is None else self.run_checks(last)

    def exploratory_runs(self, record_id: str) -> dict[str, str]:
        """run id -> why it never counts (``runs.purpose``; one_off for runs from before it
        was kept), for the record's runs that never decide a verdict."""
        rows = self.session.exec(
            select(RunRow.run_id, RunRow.purpose).where(
                RunRow.record_id == record_id, col(RunRow.exploratory)
            )
        ).all()
        return {run_id: purpose or "one_off" for run_id, purpose in rows}

    def foreign_runs(self, record_id: str) -> list[ForeignRun]:
        """The record's runs not produced by this registry's verify (imported from a file or
        uploaded to the team service), newest first, with their checks."""
        rows = self.session.exec(
            select(RunRow)
            .where(RunRow.record_id == record_id, RunRow.origin != "local")
            .order_by(col(RunRow.created_at).desc(), col(RunRow.run_id))
        ).all()
        return [
            ForeignRun(
                run_id=row.run_id,
                target=row.target,
                origin=row.origin,
                origin_detail=row.origin_detail,
                signed=row.envelope_json is not None,
                signer_key_id=row.signer_key_id,
                created_at=aware(row.created_at),
                checks=self.run_checks(row.run_id),
            )
            for row in rows
        ]

    def run(self, run_id: str) -> RunRow | None:
        return self.session.get(RunRow, run_id)

    def latest_runs(self, record_ids: Sequence[str], target: str) -> dict[str, list[StoredRun]]:
        """record id -> the runs on ``target`` that may decide its deployability."""
        found = self.latest_runs_on(record_ids, [target])
        return {i: found.get((i, target), []) for i in record_ids}

    def latest_runs_on(
        self, record_ids: Sequence[str], targets: Sequence[str]
    ) -> dict[tuple[str, str], list[StoredRun]]:
        """(record id, target) -> the runs that may decide the record's deployability there
        (the rules pick the one that counts); pairs without runs are absent. Two queries per
        chunk of records: the heads, then their runs' checks."""
        found: dict[tuple[str, str], list[StoredRun]] = {}
        if not targets:
            return found
        for chunk in _chunks(list(record_ids)):
            params = {"ids": list(chunk), "targets": list(targets)}
            heads = {
                head
                for statement in (_run_heads_statement(), _signed_heads_statement())
                for row in self.session.execute(statement, params)
                for head in row
                if head is not None
            }
            runs = list(_stored_runs(self._run_check_rows(sorted(heads))))
            histories = self.gate_history([i for i, _, _ in runs])
            for record_id, target, run in runs:
                if record_id in histories:
                    run = replace(run, history=histories[record_id])
                found.setdefault((record_id, target), []).append(run)
        return found

    def runs_on(self, record_id: str, target: str) -> list[StoredRun]:
        """Every run of the record on ``target`` as the rules read runs (no evidence): two
        queries, the runs' newest verification ids, then their checks."""
        v = VerificationRow
        heads = self.session.execute(
            sa_select(func.max(col(v.id)))
            .where(col(v.record_id) == record_id, col(v.target) == target)
            .group_by(col(v.run_id))
        )
        return [
            run for _, _, run in _stored_runs(self._run_check_rows(sorted(h for (h,) in heads)))
        ]

    def gate_history(self, record_ids: Sequence[str]) -> dict[str, GateHistory]:
        """record id -> its failed runs' gate terms (one-off runs excepted; every target and
        origin: a failure is evidence against the record wherever it was recorded) and the
        relaxed gates releasers accepted for it (``gate-relaxation-accepted`` events)."""
        failures: dict[str, list[tuple[str, GateTerms]]] = {}
        accepted: dict[str, set[tuple[str, str]]] = {}
        r, e = RunRow, EventRow
        for chunk in _chunks(sorted(set(record_ids))):
            rows = self.session.execute(
                sa_select(col(r.record_id), col(r.run_id), col(r.gate_terms_json))
                .where(
                    col(r.record_id).in_(chunk),
                    col(r.gate_terms_json).is_not(None),
                    ~col(r.exploratory),
                )
                .order_by(col(r.created_at), col(r.run_id))
            )
            for record_id, run_id, text in rows:
                terms = GateTerms.from_json(text)
                if not terms.passed:
                    failures.setdefault(record_id, []).append((run_id, terms))
            events = self.session.execute(
                sa_select(col(e.record_id), col(e.target), col(e.detail_json)).where(
                    col(e.record_id).in_(chunk), col(e.kind) == RELAXATION_ACCEPTED
                )
            )
            for record_id, target, detail in events:
                digest = json.loads(detail or "{}").get("terms")
                if isinstance(digest, str) and target:
                    accepted.setdefault(record_id, set()).add((target, digest))
        return {
            i: GateHistory(tuple(failures.get(i, ())), frozenset(accepted.get(i, ())))
            for i in set(record_ids)
        }

    def _run_check_rows(self, heads: Sequence[int]) -> list[Any]:
        """The rows of ``_run_checks_statement`` for the runs of these verification ids, each
        run once: in slices of ``_HEADS_CHUNK``, a run already read whole from an earlier
        slice (two heads of one run can fall into different slices) is skipped."""
        rows: list[Any] = []
        for k in range(0, len(heads), _HEADS_CHUNK):
            done = {row.run_id for row in rows}
            rows += [
                row
                for row in self.session.execute(
                    _run_checks_statement(), {"heads": list(heads[k : k + _HEADS_CHUNK])}
                )
                if row.run_id not in done
            ]
        return rows

    # -- states, promotions, events ----------------------------------------------------------

    def state(self, record_id: str) -> RecordState:
        return self.states([record_id]).get(record_id, ACTIVE)

    def states(self, record_ids: Sequence[str]) -> dict[str, RecordState]:
        """record id -> state, for the records that are not active."""
        states: dict[str, RecordState] = {}
        for chunk in _chunks(list(record_ids)):
            rows = self.session.execute(_states_statement(), {"ids": list(chunk)}).all()
            for record_id, state, reason, at, actor in rows:
                states[record_id] = RecordState(RecordStateKind(state), reason, aware(at), actor)
        return states

    def promotions(self, model_id: str, target: str | None = None) -> list[Promotion]:
        query = select(PromotionRow).where(PromotionRow.model_id == model_id)
        if target:
            query = query.where(PromotionRow.target == target)
        rows = self.session.exec(query.order_by(col(PromotionRow.id)))
        return [Promotion.from_row(r) for r in rows]

    def production(self, model_id: str, target: str) -> Promotion | None:
        row = self.session.exec(
            select(PromotionRow)
            .where(PromotionRow.model_id == model_id, PromotionRow.target == target)
            .order_by(col(PromotionRow.id).desc())
            .limit(1)
        ).first()
        return Promotion.from_row(row) if row else None

    def productions(
        self, model_id: str | None = None, target: str | None = None
    ) -> list[Promotion]:
        """The current production row of every (model, target), by model then target."""
        statement = _productions_statement(bool(model_id), bool(target))
        params = {"model_id": model_id} if model_id else {}
        if target:
            params["target"] = target
        return [Promotion.from_columns(r) for r in self.session.execute(statement, params)]

    def productions_of(self, model_ids: Sequence[str]) -> list[Promotion]:
        """The current production row of every (model, target) of these models."""
        p = PromotionRow
        found: list[Promotion] = []
        for chunk in _chunks(list(model_ids)):
            newest = (
                select(func.max(p.id))
                .where(col(p.model_id).in_(chunk))
                .group_by(col(p.model_id), col(p.target))
            )
            rows = self.session.execute(_promotion_columns().where(col(p.id).in_(newest)))
            found += [Promotion.from_columns(r) for r in rows]
        return sorted(found, key=lambda x: (x.model_id, x.target))

    def events(self, model_id: str) -> list[Event]:
        rows = self.session.exec(
            select(EventRow).where(EventRow.model_id == model_id).order_by(col(EventRow.id))
        ).all()
        return [Event.from_row(r) for r in rows]

    def file_digests(self, record_id: str) -> dict[str, str]:
        """path -> sha256 of a record's files."""
        return {f.path: f.sha256 for f in self.files([record_id])[record_id]}

    def model_of_records(self, record_ids: Sequence[str]) -> dict[str, str]:
        """record id -> its model id."""
        found: dict[str, str] = {}
        for chunk in _chunks(list(record_ids)):
            rows = self.session.execute(
                sa_select(col(RecordRow.id), col(RecordRow.model_id)).where(
                    col(RecordRow.id).in_(chunk)
                )
            ).all()
            found |= {r: m for r, m in rows}
        return found

    def verdicts(self, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Deployability]:
        """The verdict of each (record id, target) pair, as every reader reads it
        (``registry.verdicts.stored``)."""
        from modelreg.registry import verdicts

        return verdicts.stored(self, pairs)

    def verdict(self, record_id: str, target: str) -> Deployability:
        return self.verdicts([(record_id, target)])[(record_id, target)]

    def location_states(self, record_ids: Sequence[str]) -> dict[str, list[LocationState]]:
        """record id -> its locations with their newest recorded checks."""
        from modelreg.registry import verdicts

        return verdicts.location_states(self, record_ids)

    def runtime_reports(self, target: str, limit: int = 20) -> list[RuntimeReportRow]:
        """The newest reports of what ``target``'s hosts run, newest first."""
        r = RuntimeReportRow
        return list(
            self.session.exec(
                select(r).where(r.target == target).order_by(col(r.id).desc()).limit(limit)
            ).all()
        )

    # -- shared targets and tokens ------------------------------------------------------------

    def target_specs(self) -> list[StoredTarget]:
        """Every target defined in the registry, by name."""
        rows = self.session.exec(_target_specs_statement()).all()
        return [
            StoredTarget(
                r.name, json.loads(r.spec_json), r.spec_sha256, aware(r.defined_at), r.defined_by
            )
            for r in rows
        ]

    def token_of(self, secret_sha256: str) -> StoredToken | None:
        """The token whose secret has this digest (revoked or not), if any."""
        row = self.session.exec(
            select(ApiTokenRow).where(ApiTokenRow.secret_sha256 == secret_sha256)
        ).first()
        return StoredToken.from_row(row) if row is not None else None

    def tokens(self) -> list[StoredToken]:
        rows = self.session.exec(select(ApiTokenRow).order_by(col(ApiTokenRow.name))).all()
        return [StoredToken.from_row(r) for r in rows]


def _stored_runs(rows: Iterable[Any]) -> Iterator[tuple[str, str, StoredRun]]:
    """(record id, target, run) of the rows of ``_run_checks_statement``, a run per run id."""
    checks: dict[str, list[CheckVerdict]] = {}
    meta: dict[str, tuple[str, str, str, str | None, bool, datetime | None, str | None]] = {}
    fingerprints: dict[str, dict[str, str]] = {}
    for (
        record_id,
        target,
        check,
        required,
        outcome,
        cls,
        at,
        run_id,
        fp,
        origin,
        envelope,
        exploratory,
        signed_at,
        terms,
    ) in rows:
        if run_id not in fingerprints:
            fingerprints[run_id] = json.loads(fp or "{}")
            signed = aware(signed_at) if signed_at is not None else None
            meta[run_id] = (record_id, target, origin, envelope, bool(exploratory), signed, terms)
        checks.setdefault(run_id, []).append(
            CheckVerdict(check, required, outcome, cls, aware(at), run_id, fingerprints[run_id])
        )
    for run_id, (record_id, target, origin, envelope, exploratory, signed, terms) in meta.items():
        run = StoredRun(
            run_id,
            tuple(checks[run_id]),
            origin,
            json.loads(envelope) if envelope else None,
            exploratory,
            signed,
            GateTerms.from_json(terms) if terms else None,
        )
        yield record_id, target, run


class Writes(Reads):
    """Reads and writes in one transaction (``Store.write``), holding ``model_id``'s lock when
    it was opened by ``Store.locked``. Committed when the block ends without an exception."""

    def __init__(
        self,
        session: Session,
        load_manifest_json: Callable[[str], str],
        model_id: str | None = None,
    ) -> None:
        super().__init__(session, load_manifest_json)
        self.model_id = model_id
        # What this transaction wrote that a verdict can depend on: derived again before it
        # commits (``settle``).
        self.dirty = Dirty()

    def settle(self) -> None:
        """Derive again every verdict this transaction's writes may have changed."""
        settle(self, self.dirty)
        self.dirty = Dirty()

    def lock_settling(self) -> None:
        """Take the lock settling verdicts takes (PostgreSQL; SQLite: held already)."""
        from modelreg.registry.verdicts import lock_settling

        lock_settling(self.session)

    def verdicts(self, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Deployability]:
        """As ``Reads.verdicts``, with this transaction's own writes settled first: a decision
        reads the verdict its writes so far make."""
        self.settle()
        return super().verdicts(pairs)

    def _model(self) -> str:
        assert self.model_id is not None, "a model's write needs Store.locked(model_id)"
        return self.model_id

    def insert_record(
        self,
        manifest: Manifest,
        identity: str,
        root: Path,
        actor: str,
        detail: dict[str, Any] | None,
    ) -> Record:
        """The record's rows, its model's row when it is the model's first, and the event."""
        assert manifest.model_id is not None
        now = utcnow()
        model = select(ModelRow.id).where(ModelRow.model_id == manifest.model_id)
        if self.session.exec(model).first() is None:
            self.session.add(ModelRow(model_id=manifest.model_id, created_at=now))
            self.session.flush()
        rows = record_rows(manifest, manifest.record_id, identity, str(root), now, actor)
        self.session.add(rows[0])
        self.session.flush()  # the record first: its files refer to it
        self.session.add_all(rows[1:])
        self.session.flush()
        added = event_row(
            "add",
            actor,
            model_id=manifest.model_id,
            record_id=manifest.record_id,
            detail={"root": str(root), "hold_reasons": manifest.hold_reasons} | (detail or {}),
        )
        self.session.add(added)
        self.session.flush()
        from modelreg.registry.hooks import enqueue

        enqueue(self.session, added)
        record_row = rows[0]
        assert isinstance(record_row, RecordRow)
        return record_of(record_row)

    def set_production(
        self,
        record: Record,
        target: str,
        action: str,
        actor: str,
        why: str | None,
        *,
        owner: str | None = None,
        limitations: Sequence[str] = (),
        retest_by: datetime | None = None,
    ) -> Promotion:
        """Make ``record`` production on ``target``, with its approval record (owner, known
        limitations, re-test date) and its event."""
        current = self.production(self._model(), target)
        previous = current.record_id if current else None
        row = PromotionRow(
            model_id=record.model_id,
            target=target,
            record_id=record.id,
            previous_record_id=previous,
            action=action,
            at=utcnow(),
            actor=actor,
            why=why,
            owner=owner,
            limitations_json=json.dumps(list(limitations)) if limitations else None,
            retest_by=retest_by,
        )
        self.session.add(row)
        self.session.flush()
        self.dirty.pairs.add((record.id, target))  # production's verdict is kept as a row
        approval: dict[str, Any] = {}
        if owner is not None:
            approval["owner"] = owner
        if limitations:
            approval["limitations"] = list(limitations)
        if retest_by is not None:
            approval["retest_by"] = retest_by.isoformat()
        self.event(
            action, actor, record.id, target, why, {"previous_record_id": previous} | approval
        )
        return Promotion.from_row(row)

    def set_state(
        self,
        record: Record,
        state: RecordStateKind,
        why: str | None,
        actor: str,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """Write the state (no row: active) and its event (hold, release or retire)."""
        row = self.session.get(RecordStateRow, record.id)
        if state is RecordStateKind.ACTIVE:
            if row is not None:
                self.session.delete(row)
        elif row is None:
            self.session.add(
                RecordStateRow(
                    record_id=record.id, state=state.value, reason=why, at=utcnow(), actor=actor
                )
            )
        else:
            row.state, row.reason, row.at, row.actor = state.value, why, utcnow(), actor
            self.session.add(row)
        self.dirty.records.add(record.id)
        kind = {
            RecordStateKind.HELD: "hold",
            RecordStateKind.ACTIVE: "release",
            RecordStateKind.RETIRED: "retire",
        }[state]
        self.event(kind, actor, record.id, None, why, detail)

    def save_run(
        self,
        record: Record,
        target: str,
        results: Sequence[CheckResult],
        host: str,
        fingerprint: dict[str, str],
        *,
        run_id: str | None = None,
        origin: str = "local",
        origin_detail: str | None = None,
        envelope: dict[str, Any] | None = None,
        signer_key_id: str | None = None,
        exploratory: bool = False,
        purpose: str | None = None,
    ) -> str:
        """Store a run: its checks (with evidence and fingerprint), where it came from, and
        whether it never decides a verdict (``exploratory``; ``purpose`` says why: one_off,
        missing_bytes, investigate, drill)."""
        # Its record's verdicts: here, and on every target a gate it failed is judged.
        self.dirty.records.add(record.id)
        run_id = run_id or new_run_id()
        fingerprint_json = json.dumps(fingerprint, sort_keys=True)
        from modelreg.suites import run_gate_terms

        terms = run_gate_terms(((r.required, r.evidence) for r in results), target)
        signed_at = None
        if envelope is not None:
            from modelreg.signing import SignatureInvalid, run_envelope_statement, signed_time

            try:
                signed_at = signed_time(run_envelope_statement(envelope))
            except SignatureInvalid:
                signed_at = None  # judged as not counting whenever it is read
        self.session.add(
            RunRow(
                run_id=run_id,
                record_id=record.id,
                target=target,
                origin=origin,
                origin_detail=origin_detail,
                envelope_json=json.dumps(envelope, sort_keys=True) if envelope else None,
                signer_key_id=signer_key_id,
                created_at=utcnow(),
                exploratory=exploratory or purpose is not None,
                purpose=purpose,
                signed_at=signed_at,
                gate_terms_json=terms.to_json() if terms is not None else None,
            )
        )
        for r in results:
            self.session.add(
                VerificationRow(
                    run_id=run_id,
                    record_id=record.id,
                    target=target,
                    check=r.check,
                    required=r.required,
                    outcome=r.outcome.value,
                    classification=r.classification,
                    summary=r.summary,
                    evidence_json=json.dumps(r.evidence, sort_keys=True, default=str),
                    host=host,
                    started_at=r.started_at,
                    finished_at=r.finished_at,
                    fingerprint_json=fingerprint_json,
                )
            )
        return run_id

    def attach_suite(
        self,
        suite_json: str,
        suite_sha256: str,
        actor: str,
        *,
        why: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """Attach a golden suite to the model (replacing any), with its event — which keeps
        the suite itself, so every version attached can be read back from history."""
        model_id = self._model()
        self.dirty.models.add(model_id)
        row = self.session.get(ModelSuiteRow, model_id)
        if row is None:
            row = ModelSuiteRow(
                model_id=model_id,
                suite_sha256=suite_sha256,
                suite_json=suite_json,
                attached_at=utcnow(),
                actor=actor,
            )
        else:
            row.suite_sha256, row.suite_json = suite_sha256, suite_json
            row.attached_at, row.actor = utcnow(), actor
        self.session.add(row)
        self.event(
            "suite-attach",
            actor,
            None,
            None,
            why,
            {"suite_sha256": suite_sha256, "suite": json.loads(suite_json)} | (detail or {}),
        )

    def detach_suite(
        self, actor: str, *, why: str | None = None, detail: dict[str, Any] | None = None
    ) -> bool:
        row = self.session.get(ModelSuiteRow, self._model())
        if row is None:
            return False
        self.dirty.models.add(self._model())
        self.session.delete(row)
        self.event(
            "suite-detach",
            actor,
            None,
            None,
            why,
            {"suite_sha256": row.suite_sha256} | (detail or {}),
        )
        return True

    def add_locations(self, record: Record, urls: Sequence[str], actor: str) -> list[str]:
        """Add locations (already validated) to a record; returns those that were new, with
        one ``locate`` event when any was."""
        loc = RecordLocationRow
        known = set(self.session.exec(select(loc.url).where(loc.record_id == record.id)).all())
        added = [u for u in dict.fromkeys(urls) if u not in known]
        now = utcnow()
        for url in added:
            self.session.add(loc(record_id=record.id, url=url, added_at=now, added_by=actor))
        if added:
            self.event("locate", actor, record.id, None, None, {"added": added})
        return added

    def event(
        self,
        kind: str,
        actor: str,
        record_id: str | None,
        target: str | None,
        why: str | None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """An event of this transaction's model (none outside ``Store.locked``), with its
        webhooks' deliveries in the outbox: committed with it or not at all."""
        from modelreg.registry.hooks import enqueue

        if kind == RELAXATION_ACCEPTED and record_id is not None:
            self.dirty.records.add(record_id)
        row = event_row(
            kind,
            actor,
            model_id=self.model_id,
            record_id=record_id,
            target=target,
            why=why,
            detail=detail,
        )
        self.session.add(row)
        self.session.flush()
        enqueue(self.session, row)

    def define_targets(
        self, specs: dict[str, dict[str, Any]], actor: str, origin: str
    ) -> dict[str, str]:
        """Store target definitions; returns name -> "added", "replaced" or "unchanged". Each
        change is a ``target-define`` event (who, from which file, the definition's digest and
        the one it replaced)."""
        changes: dict[str, str] = {}
        for name, spec in sorted(specs.items()):
            spec_json, digest = stored_spec(spec)
            row = self.session.get(TargetRow, name)
            if row is not None and row.spec_sha256 == digest:
                changes[name] = "unchanged"
                continue
            previous = row.spec_sha256 if row is not None else None
            if row is None:
                row = TargetRow(
                    name=name,
                    spec_json=spec_json,
                    spec_sha256=digest,
                    defined_at=utcnow(),
                    defined_by=actor,
                )
            else:
                row.spec_json, row.spec_sha256 = spec_json, digest
                row.defined_at, row.defined_by = utcnow(), actor
            self.session.add(row)
            self.dirty.targets.add(name)
            self.session.add(target_define_event(name, spec, digest, previous, actor, origin))
            changes[name] = "replaced" if previous else "added"
        return changes

    def remove_target(self, name: str, actor: str, why: str | None) -> bool:
        """Delete a shared target definition (and say so in the event log); False when there
        was none. Evidence gathered on it stays and reads "target no longer defined"."""
        row = self.session.get(TargetRow, name)
        if row is None:
            return False
        self.session.delete(row)
        self.dirty.targets.add(name)
        self.session.add(
            event_row(
                "target-remove",
                actor,
                target=name,
                why=why,
                detail={"spec_sha256": row.spec_sha256, "spec": json.loads(row.spec_json)},
            )
        )
        return True

    def record_runtime_report(
        self,
        target: str,
        runtime: str,
        host: str,
        fingerprint: dict[str, str],
        source: str,
        actor: str,
        run_id: str | None = None,
    ) -> None:
        """What a host of ``target`` runs for ``runtime`` (from a verify, or a host report):
        evidence produced under another runtime there is stale from now on, for everyone."""
        self.session.add(
            RuntimeReportRow(
                target=target,
                runtime=runtime,
                host=host,
                fingerprint_json=json.dumps(fingerprint, sort_keys=True),
                source=source,
                run_id=run_id,
                at=utcnow(),
                actor=actor,
            )
        )
        self.dirty.targets.add(target)

    def record_location_check(
        self,
        record_id: str,
        url: str,
        ok: bool,
        detail: str | None,
        host: str,
        source: str,
        actor: str,
    ) -> None:
        """One check of a recorded location's bytes (``ok``: every sha256 was read there)."""
        self.session.add(
            LocationCheckRow(
                record_id=record_id,
                url=url,
                ok=ok,
                detail=detail,
                host=host,
                source=source,
                at=utcnow(),
                actor=actor,
            )
        )

    def revoke_token(self, name: str, actor: str) -> StoredToken | None:
        """Revoke a token by name (a no-op for one already revoked); None when unknown."""
        row = self.session.exec(select(ApiTokenRow).where(ApiTokenRow.name == name)).first()
        if row is None:
            return None
        if row.revoked_at is None:
            row.revoked_at, row.revoked_by = utcnow(), actor
            self.session.add(row)
            self.session.add(event_row("token-revoke", actor, detail={"name": name}))
            self.session.flush()
        return StoredToken.from_row(row)


class Store:
    """The registry's database: transactions over one engine (``read``, ``write``,
    ``locked``) and the few writes that must retry or recover from a concurrent writer."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextmanager
    def _session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session:
            yield session

    @contextmanager
    def read(self) -> Iterator[Reads]:
        """Reads in one transaction (rolled back at the end: it writes nothing). PostgreSQL:
        REPEATABLE READ, so every query of it sees the same committed state; SQLite: a deferred
        transaction (WAL: a snapshot at its first read), which takes no write lock."""
        options: dict[str, Any] = {"modelreg_read_only": True}
        if self.engine.dialect.name == "postgresql":
            options["isolation_level"] = "REPEATABLE READ"
        with self._session() as session:
            session.connection(execution_options=options)
            yield Reads(session, self._manifest_json)

    @contextmanager
    def write(self) -> Iterator[Writes]:
        """One transaction that may write (no model's lock); committed when the block ends
        without an exception, rolled back otherwise."""
        with self._session() as session:
            writes = Writes(session, self._manifest_json)
            yield writes
            writes.settle()
            session.commit()

    @contextmanager
    def locked(self, model_id: str) -> Iterator[Writes]:
        """One transaction holding ``model_id``'s lock; committed when the block ends without
        an exception, rolled back otherwise.

        PostgreSQL: ``SELECT … FOR UPDATE`` on the model's row. SQLite: every writing
        transaction is ``BEGIN IMMEDIATE`` (see db.py), which holds the database's write lock.
        """
        with self._session() as session:
            found = session.exec(
                select(ModelRow.id).where(ModelRow.model_id == model_id).with_for_update()
            ).first()
            if found is not None:
                writes = Writes(session, self._manifest_json, model_id)
                yield writes
                writes.settle()
                session.commit()
        if found is None:  # the suggestions read after our transaction (SQLite: its lock)
            with self.read() as reads:
                raise ModelNotFound(model_id, reads.model_ids())

    def ensure_verdicts(self) -> None:
        """Derive every stored verdict again when they were derived under other rules (or
        never: a registry just upgraded). Once: the first writer re-checks under the lock; a
        reader that may not write reads them derived on the fly until someone does."""
        from modelreg.registry.verdicts import (
            RULES_VERSION,
            rules_version_stored,
            settle_everything,
        )

        with self.read() as reads:
            if rules_version_stored(reads) == RULES_VERSION:
                return
        try:
            with self.write() as tx:
                tx.lock_settling()
                if rules_version_stored(tx) != RULES_VERSION:
                    settle_everything(tx)
        except DBAPIError as exc:
            if "permission denied" not in str(exc).lower() and "readonly" not in str(exc).lower():
                raise

    def _manifest_json(self, record_id: str) -> str:
        with self.read() as reads:
            row = reads.session.get(RecordRow, record_id)
            if row is None:
                raise RecordNotFound(record_id)
            return row.manifest_json

    # -- writes that retry or recover ----------------------------------------------------

    def add(
        self, manifest: Manifest, root: Path, actor: str, detail: dict[str, Any] | None = None
    ) -> tuple[Record, bool]:
        """Record ``manifest``; returns the record and whether it was new. The same facts
        always give the same record, so adding twice (or from eight hosts at once) is one
        record and one add event."""
        if manifest.model_id is None:
            raise InvalidInput("a record needs a model id", "give --model-id org/name")
        unhashed = [f.path for f in manifest.files if f.sha256 is None or f.bytes is None]
        if unhashed:
            raise InvalidInput(
                f"a record's files must be hashed; {', '.join(unhashed)} has no sha256/size",
                "record the artifact itself with: modelreg add FILE…",
            )
        check_manifest(manifest)
        check_length("actor", actor, ACTOR_MAX)
        identity = manifest.identity_digest()
        # Concurrent writers: the unique identity makes the same artifact one record; a writer
        # that loses the race for the model row (or the record) retries and finds it.
        for _attempt in range(ADD_RETRIES + 1):
            with self.read() as reads:
                existing = reads.record_by_identity(identity)
            if existing is not None:
                return existing, False
            if _attempt == ADD_RETRIES:
                break
            try:
                with self.write() as tx:
                    record = tx.insert_record(manifest, identity, root, actor, detail)
                return record, True
            except IntegrityError:
                continue
        raise RuntimeError(f"could not add record {manifest.record_id} after retries")

    def add_artifact_signature(
        self, record: Record, bundle: dict[str, Any], key_hint: str | None, actor: str
    ) -> bool:
        """Keep a model-signing bundle with the record; False when it was already kept."""
        text = json.dumps(bundle, sort_keys=True)
        digest = hashlib.sha256(text.encode()).hexdigest()
        try:
            with self.write() as tx:
                found = tx.session.exec(
                    select(ArtifactSignatureRow.id).where(
                        ArtifactSignatureRow.record_id == record.id,
                        ArtifactSignatureRow.bundle_sha256 == digest,
                    )
                ).first()
                if found is not None:
                    return False
                tx.session.add(
                    ArtifactSignatureRow(
                        record_id=record.id,
                        bundle_sha256=digest,
                        key_hint=key_hint,
                        bundle_json=text,
                        added_at=utcnow(),
                        actor=actor,
                    )
                )
                tx.session.add(
                    event_row(
                        "sign",
                        actor,
                        model_id=record.model_id,
                        record_id=record.id,
                        detail={"bundle_sha256": digest, "key_hint": key_hint},
                    )
                )
        except IntegrityError:  # kept by a concurrent add a moment ago (PostgreSQL)
            return False
        return True

    def define_targets(
        self, specs: dict[str, dict[str, Any]], actor: str, origin: str
    ) -> dict[str, str]:
        """``Writes.define_targets`` in a transaction of its own. A definition added
        concurrently under the same name (PostgreSQL) makes the transaction start over and
        see it."""
        try:
            with self.write() as tx:
                return tx.define_targets(specs, actor, origin)
        except IntegrityError:
            with self.write() as tx:
                return tx.define_targets(specs, actor, origin)

    def create_token(self, name: str, role: str, secret_sha256: str, actor: str) -> StoredToken:
        """Store a new token (its secret's digest only). Names are never reused."""
        taken = InvalidInput(
            f"a token named {name!r} exists (or existed: names are never reused, so "
            "history stays unambiguous)",
            "choose another name; see: modelreg token list",
        )
        try:
            with self.write() as tx:
                if tx.session.exec(select(ApiTokenRow).where(ApiTokenRow.name == name)).first():
                    raise taken
                row = ApiTokenRow(
                    name=name,
                    role=role,
                    secret_sha256=secret_sha256,
                    created_at=utcnow(),
                    created_by=actor,
                )
                tx.session.add(row)
                tx.session.add(
                    event_row("token-create", actor, detail={"name": name, "role": role})
                )
        except IntegrityError:  # the same name created concurrently (PostgreSQL)
            raise taken from None
        return StoredToken.from_row(row)

    # -- the storage boundary ------------------------------------------------------------

    def check(self, *, quarantine: bool = False, actor: str = "db-check") -> list[BadValue]:
        """Stored values that cannot be read back (rows from before the storage boundary, or
        written around it). ``quarantine``: make each readable (lone surrogates → U+FFFD,
        what nests too deep → a note), with a ``db-quarantine`` event per row."""
        from modelreg.registry import boundary

        with self.write() as tx:
            session = tx.session
            found = boundary.audit(session)
            bad = [
                BadValue(
                    getattr(row, "__tablename__", type(row).__name__),
                    _row_key(row),
                    name,
                    why,
                )
                for row, name, why in found
            ]
            if not (quarantine and found):
                session.rollback()
                return bad
            for row, name, _why in found:
                setattr(row, name, boundary.quarantine_value(name, getattr(row, name)))
                session.add(row)
            for value in bad:
                session.add(
                    event_row(
                        "db-quarantine",
                        actor,
                        why=f"{value.table}.{value.column} {value.why}",
                        detail={"table": value.table, "key": value.key, "column": value.column},
                    )
                )
        return bad
