"""The registry: records, verifications, promotions and the event log.

Every public method runs in one transaction, so a failure leaves nothing half-written.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session, col, func, select

from modelreg.errors import (
    AmbiguousRecord,
    InvalidInput,
    ModelNotFound,
    NoRollbackCandidate,
    NotDeployable,
    RecordNotFound,
)
from modelreg.fingerprint import describe_change
from modelreg.registry.tables import (
    EventRow,
    ModelRow,
    PromotionRow,
    RecordFileRow,
    RecordRow,
    RecordStateRow,
    VerificationRow,
    utcnow,
)
from modelreg.schemas.manifest import Manifest
from modelreg.schemas.verification import CheckResult, Outcome

ADD_RETRIES = 5


def _aware(when: datetime) -> datetime:
    # SQLite hands back naive datetimes; everything is written in UTC.
    return when if when.tzinfo else when.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Record:
    id: str
    model_id: str
    format: str
    source: str | None
    license: str | None
    root: Path
    created_at: datetime
    created_by: str
    manifest: Manifest

    @classmethod
    def from_row(cls, row: RecordRow) -> Record:
        return cls(
            id=row.id,
            model_id=row.model_id,
            format=row.format,
            source=row.source,
            license=row.license,
            root=Path(row.root),
            created_at=_aware(row.created_at),
            created_by=row.created_by,
            manifest=Manifest.model_validate_json(row.manifest_json),
        )

    @property
    def hold_reasons(self) -> list[str]:
        return list(self.manifest.hold_reasons)

    def summary(self) -> dict[str, Any]:
        ledger = self.manifest.parameters
        quant = self.manifest.quantization
        return {
            "id": self.id,
            "model_id": self.model_id,
            "format": self.format,
            "source": self.source,
            "license": self.license,
            "total_parameters": ledger.total.value,
            "bits_per_weight": quant.bits_per_weight if quant else None,
            "files": len(self.manifest.files),
            "on_hold": bool(self.hold_reasons),
            "created_at": self.created_at.isoformat(),
        }


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
                evidence=json.loads(row.evidence_json),
                started_at=_aware(row.started_at),
                finished_at=_aware(row.finished_at),
            ),
            fingerprint=json.loads(row.fingerprint_json or "{}"),
        )


class CheckVerdict(NamedTuple):
    """The part of a stored check result that decides deployability."""

    check: str
    required: bool
    outcome: str
    classification: str | None
    finished_at: datetime
    run_id: str
    fingerprint: dict[str, str]


@dataclass(frozen=True)
class Deployability:
    record_id: str
    target: str
    deployable: bool
    reasons: list[str] = field(default_factory=list)
    run_id: str | None = None
    verified_at: datetime | None = None


@dataclass(frozen=True)
class Promotion:
    model_id: str
    target: str
    record_id: str
    previous_record_id: str | None
    action: str
    at: datetime
    actor: str
    why: str | None

    @classmethod
    def from_row(cls, row: PromotionRow) -> Promotion:
        return cls(
            row.model_id,
            row.target,
            row.record_id,
            row.previous_record_id,
            row.action,
            _aware(row.at),
            row.actor,
            row.why,
        )


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
            _aware(row.at),
            row.actor,
            row.kind,
            row.model_id,
            row.record_id,
            row.target,
            row.why,
            json.loads(row.detail_json),
        )


@dataclass(frozen=True)
class RollbackPlan:
    model_id: str
    target: str
    current: Record | None
    candidate: Record
    candidate_deployability: Deployability


class Registry:
    """Library entry point over one database engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextmanager
    def _session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session:
            yield session

    # -- records -------------------------------------------------------------------------

    def add(
        self,
        manifest: Manifest,
        root: Path,
        actor: str,
        detail: dict[str, Any] | None = None,
    ) -> tuple[Record, bool]:
        """Record ``manifest``; returns the record and whether it was new.

        The same manifest always yields the same record id, so adding twice is harmless.
        """
        if manifest.model_id is None:
            raise InvalidInput("a record needs a model id: give --model-id org/name")
        unhashed = [f.path for f in manifest.files if f.sha256 is None or f.bytes is None]
        if unhashed:
            raise InvalidInput(
                f"a record's files must be hashed; {', '.join(unhashed)} has no sha256/size "
                "(record the artifact itself with: modelreg add FILE…)"
            )
        digest = manifest.digest()
        # Concurrent writers: the unique manifest digest makes the same artifact one record;
        # a writer that loses the race for the model row retries with the row now present.
        for _attempt in range(ADD_RETRIES):
            existing = self._find_by_digest(digest)
            if existing is not None:
                return existing, False
            try:
                return self._insert_record(manifest, digest, root, actor, detail), True
            except IntegrityError:
                continue
        existing = self._find_by_digest(digest)
        if existing is None:
            raise RuntimeError(f"could not add record {manifest.record_id} after retries")
        return existing, False

    def _insert_record(
        self,
        manifest: Manifest,
        digest: str,
        root: Path,
        actor: str,
        detail: dict[str, Any] | None,
    ) -> Record:
        assert manifest.model_id is not None
        now = utcnow()
        row = RecordRow(
            id=manifest.record_id,
            manifest_sha256=digest,
            model_id=manifest.model_id,
            format=manifest.format,
            source=manifest.source,
            license=manifest.license.id,
            manifest_json=manifest.canonical_json(),
            root=str(root),
            created_at=now,
            created_by=actor,
        )
        with self._session() as session:
            model = select(ModelRow).where(ModelRow.model_id == manifest.model_id)
            if session.exec(model).first() is None:
                session.add(ModelRow(model_id=manifest.model_id, created_at=now))
                session.flush()
            session.add(row)
            session.flush()
            for f in manifest.files:
                assert f.bytes is not None and f.sha256 is not None  # checked by add
                session.add(
                    RecordFileRow(record_id=row.id, path=f.path, bytes=f.bytes, sha256=f.sha256)
                )
            session.add(
                _event(
                    "add",
                    actor,
                    model_id=manifest.model_id,
                    record_id=row.id,
                    detail={"root": str(root), "hold_reasons": manifest.hold_reasons}
                    | (detail or {}),
                )
            )
            session.commit()
        return Record.from_row(row)

    def _find_by_digest(self, digest: str) -> Record | None:
        with self._session() as session:
            row = session.exec(select(RecordRow).where(RecordRow.manifest_sha256 == digest)).first()
            return Record.from_row(row) if row else None

    def get(self, ref: str) -> Record:
        """A record by id or unique id prefix (``r_3f2a`` or ``3f2a``)."""
        ref = ref.strip()
        prefix = ref if ref.startswith("r_") else f"r_{ref}"
        if len(prefix) < 6:
            raise InvalidInput(f"record reference {ref!r} is too short: give at least 4 characters")
        with self._session() as session:
            row = session.get(RecordRow, prefix)
            if row is not None:
                return Record.from_row(row)
            escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            rows = session.exec(
                select(RecordRow).where(col(RecordRow.id).like(f"{escaped}%", escape="\\")).limit(6)
            ).all()
        if not rows:
            raise RecordNotFound(ref)
        if len(rows) > 1:
            raise AmbiguousRecord(ref, [r.id for r in rows])
        return Record.from_row(rows[0])

    def records(self, model_id: str | None = None) -> list[Record]:
        with self._session() as session:
            query = select(RecordRow).order_by(col(RecordRow.created_at), col(RecordRow.id))
            if model_id:
                query = query.where(RecordRow.model_id == model_id)
            return [Record.from_row(r) for r in session.exec(query).all()]

    def records_verified_on(self, target: str, model_id: str | None = None) -> list[Record]:
        """Records with at least one verification on ``target``, oldest first."""
        with self._session() as session:
            verified = select(VerificationRow.record_id).where(VerificationRow.target == target)
            query = (
                select(RecordRow)
                .where(col(RecordRow.id).in_(verified))
                .order_by(col(RecordRow.created_at), col(RecordRow.id))
            )
            if model_id:
                query = query.where(RecordRow.model_id == model_id)
            return [Record.from_row(r) for r in session.exec(query).all()]

    def require_model(self, model_id: str) -> None:
        with self._session() as session:
            if session.exec(select(ModelRow).where(ModelRow.model_id == model_id)).first() is None:
                raise ModelNotFound(model_id)

    # -- verifications -------------------------------------------------------------------

    def save_verification(
        self,
        record: Record,
        target: str,
        results: Sequence[CheckResult],
        actor: str,
        host: str,
        fingerprint: dict[str, str] | None = None,
    ) -> str:
        """Store one verify run (every check's result, with evidence); returns its run id."""
        run_id = uuid.uuid4().hex
        with self._session() as session:
            for r in results:
                session.add(
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
                        fingerprint_json=json.dumps(fingerprint or {}, sort_keys=True),
                    )
                )
            passed = all(r.outcome is Outcome.PASS for r in results if r.required)
            session.add(
                _event(
                    "verify",
                    actor,
                    model_id=record.model_id,
                    record_id=record.id,
                    target=target,
                    detail={
                        "run_id": run_id,
                        "passed": passed,
                        "checks": {r.check: r.outcome.value for r in results},
                    },
                )
            )
            session.commit()
        return run_id

    def verifications(self, record_id: str, target: str | None = None) -> list[Verification]:
        """Every stored check result of a record, oldest first."""
        with self._session() as session:
            query = select(VerificationRow).where(VerificationRow.record_id == record_id)
            if target:
                query = query.where(VerificationRow.target == target)
            rows = session.exec(query.order_by(col(VerificationRow.id))).all()
            return [Verification.from_row(r) for r in rows]

    def passing_runs(self, record: Record) -> dict[str, list[Verification]]:
        """target -> the latest run there, for the targets where it passed every required
        check (whatever has happened to the record or the runtime since)."""
        targets = sorted({v.target for v in self.verifications(record.id)})
        runs = {t: self.latest_run(record.id, t) for t in targets}
        return {
            t: run
            for t, run in runs.items()
            if run and not any(_blocks(v.result.required, v.result.outcome) for v in run)
        }

    def latest_run(self, record_id: str, target: str) -> list[Verification]:
        with self._session() as session:
            last = session.exec(
                select(VerificationRow)
                .where(VerificationRow.record_id == record_id, VerificationRow.target == target)
                .order_by(col(VerificationRow.id).desc())
                .limit(1)
            ).first()
            if last is None:
                return []
            rows = session.exec(
                select(VerificationRow)
                .where(VerificationRow.run_id == last.run_id)
                .order_by(col(VerificationRow.id))
            ).all()
            return [Verification.from_row(r) for r in rows]

    def deployability(
        self, record: Record, target: str, fingerprint: dict[str, str] | None = None
    ) -> Deployability:
        """Deployable on ``target`` iff active (not held or retired, nothing unknown) and the
        latest run there passed every required check — with evidence produced by the current
        runtime when ``fingerprint`` (the target's current one) is given."""
        run = [
            CheckVerdict(
                v.result.check,
                v.result.required,
                v.result.outcome.value,
                v.result.classification,
                v.result.finished_at,
                v.run_id,
                v.fingerprint,
            )
            for v in self.latest_run(record.id, target)
        ]
        return _judge(record, target, self.state(record.id), run, fingerprint)

    def deployability_many(
        self,
        records: Sequence[Record],
        target: str,
        fingerprint_for: Callable[[Record], dict[str, str]] | None = None,
    ) -> list[Deployability]:
        """``deployability`` for many records in three queries, not three per record."""
        ids = [r.id for r in records]
        runs: dict[str, list[CheckVerdict]] = {i: [] for i in ids}
        states: dict[str, tuple[str, str | None]] = {}
        v = VerificationRow
        with self._session() as session:
            for chunk in (ids[k : k + 500] for k in range(0, len(ids), 500)):
                last = (
                    select(func.max(v.id))
                    .where(v.target == target, col(v.record_id).in_(chunk))
                    .group_by(col(v.record_id))
                )
                last_runs = select(v.run_id).where(col(v.id).in_(last))
                # Plain columns, not ORM rows with their evidence: the hot path of
                # `list --deployable-on`.
                rows = session.execute(
                    sa_select(
                        col(v.record_id),
                        col(v.check),
                        col(v.required),
                        col(v.outcome),
                        col(v.classification),
                        col(v.finished_at),
                        col(v.run_id),
                        col(v.fingerprint_json),
                    )
                    .where(col(v.run_id).in_(last_runs))
                    .order_by(col(v.id))
                ).all()
                for record_id, check, required, outcome, cls, at, run_id, fp in rows:
                    runs[record_id].append(
                        CheckVerdict(
                            check,
                            required,
                            outcome,
                            cls,
                            _aware(at),
                            run_id,
                            json.loads(fp or "{}"),
                        )
                    )
                for state in session.exec(
                    select(RecordStateRow).where(col(RecordStateRow.record_id).in_(chunk))
                ):
                    states[state.record_id] = (state.state, state.reason)
        return [
            _judge(
                r,
                target,
                states.get(r.id, ("active", None)),
                runs[r.id],
                fingerprint_for(r) if fingerprint_for else None,
            )
            for r in records
        ]

    # -- record states -------------------------------------------------------------------

    def state(self, record_id: str) -> tuple[str, str | None]:
        """("active", None), ("held", why) or ("retired", why)."""
        with self._session() as session:
            row = session.get(RecordStateRow, record_id)
            return (row.state, row.reason) if row else ("active", None)

    def set_state(self, record: Record, state: str, why: str | None, actor: str) -> None:
        """Hold, release ("active") or retire a record; retired is final."""
        current, _ = self.state(record.id)
        if current == "retired":
            raise InvalidInput(f"record {record.id} is retired; retired records stay retired")
        if state == "active" and current != "held":
            raise InvalidInput(f"record {record.id} is not on hold (state: {current})")
        kind = {"held": "hold", "active": "release", "retired": "retire"}[state]
        with self._session() as session:
            row = session.get(RecordStateRow, record.id)
            if state == "active":
                if row is not None:
                    session.delete(row)
            elif row is None:
                session.add(
                    RecordStateRow(
                        record_id=record.id, state=state, reason=why, at=utcnow(), actor=actor
                    )
                )
            else:
                row.state, row.reason, row.at, row.actor = state, why, utcnow(), actor
                session.add(row)
            session.add(_event(kind, actor, model_id=record.model_id, record_id=record.id, why=why))
            session.commit()

    # -- promotions ----------------------------------------------------------------------

    def production(self, model_id: str, target: str) -> Promotion | None:
        with self._session() as session:
            row = session.exec(
                select(PromotionRow)
                .where(PromotionRow.model_id == model_id, PromotionRow.target == target)
                .order_by(col(PromotionRow.id).desc())
                .limit(1)
            ).first()
            return Promotion.from_row(row) if row else None

    def promotions(self, model_id: str, target: str | None = None) -> list[Promotion]:
        with self._session() as session:
            query = select(PromotionRow).where(PromotionRow.model_id == model_id)
            if target:
                query = query.where(PromotionRow.target == target)
            rows = session.exec(query.order_by(col(PromotionRow.id))).all()
            return [Promotion.from_row(r) for r in rows]

    def promote(
        self,
        record: Record,
        target: str,
        actor: str,
        why: str | None = None,
        fingerprint: dict[str, str] | None = None,
    ) -> Promotion:
        """Make ``record`` production for (model, target); refuses unless deployable."""
        verdict = self.deployability(record, target, fingerprint)
        if not verdict.deployable:
            raise NotDeployable(record.id, target, verdict.reasons)
        return self._set_production(record, target, "promote", actor, why)

    def _set_production(
        self, record: Record, target: str, action: str, actor: str, why: str | None
    ) -> Promotion:
        """Move the production pointer in one transaction that holds the (model) lock, so
        concurrent promotions and rollbacks queue up and every row names the true previous
        record: the pointer never forks."""
        with self._session() as session:
            # PostgreSQL: row lock on the model; SQLite: every write transaction is
            # BEGIN IMMEDIATE (see db.py), which serializes writers already.
            session.exec(
                select(ModelRow).where(ModelRow.model_id == record.model_id).with_for_update()
            ).one()
            current = session.exec(
                select(PromotionRow)
                .where(PromotionRow.model_id == record.model_id, PromotionRow.target == target)
                .order_by(col(PromotionRow.id).desc())
                .limit(1)
            ).first()
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
            )
            session.add(row)
            session.add(
                _event(
                    action,
                    actor,
                    model_id=record.model_id,
                    record_id=record.id,
                    target=target,
                    why=why,
                    detail={"previous_record_id": previous},
                )
            )
            session.commit()
            return Promotion.from_row(row)

    def rollback_plan(
        self,
        model_id: str,
        target: str,
        fingerprint_for: Callable[[Record], dict[str, str]] | None = None,
    ) -> RollbackPlan:
        """The production record and the newest earlier-promoted record still deployable
        (retired records never are)."""
        self.require_model(model_id)
        history = self.promotions(model_id, target)
        if not history:
            raise NoRollbackCandidate(model_id, target, "nothing was ever promoted there")
        current_id = history[-1].record_id
        current = self.get(current_id)
        rejected: list[str] = []
        seen = {current_id}
        for promotion in reversed(history):
            if promotion.record_id in seen:
                continue
            seen.add(promotion.record_id)
            candidate = self.get(promotion.record_id)
            fingerprint = fingerprint_for(candidate) if fingerprint_for else None
            verdict = self.deployability(candidate, target, fingerprint)
            if verdict.deployable:
                return RollbackPlan(model_id, target, current, candidate, verdict)
            rejected.append(f"{candidate.id} ({'; '.join(verdict.reasons)})")
        reason = "no earlier promoted record is still deployable"
        if rejected:
            reason += ": " + ", ".join(rejected)
        else:
            reason = f"only {current_id} was ever promoted"
        raise NoRollbackCandidate(model_id, target, reason)

    def apply_rollback(self, plan: RollbackPlan, actor: str, why: str | None) -> Promotion:
        return self._set_production(plan.candidate, plan.target, "rollback", actor, why)

    # -- events --------------------------------------------------------------------------

    def history(self, model_id: str) -> list[Event]:
        self.require_model(model_id)
        with self._session() as session:
            rows = session.exec(
                select(EventRow).where(EventRow.model_id == model_id).order_by(col(EventRow.id))
            ).all()
            return [Event.from_row(r) for r in rows]


def _event(
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
        detail_json=json.dumps(detail or {}, sort_keys=True),
    )


def open_registry(url: str | None = None) -> Registry:
    """Open (and migrate) the registry at ``url`` or the configured default."""
    from modelreg import config
    from modelreg.registry.db import create_registry_engine, migrate, redact

    resolved = config.database_url(url)
    engine = create_registry_engine(resolved)
    try:
        migrate(engine)
    except OperationalError as exc:
        reason = str(exc.orig or exc).strip().splitlines()[0]
        raise InvalidInput(
            f"cannot open the registry at {redact(resolved)}: {reason} — check --db or "
            "MODELREG_DATABASE_URL"
        ) from None
    return Registry(engine)


def _blocks(required: bool, outcome: str) -> bool:
    """A required check blocks deployment unless it passed or does not apply (skipped)."""
    return required and outcome not in (Outcome.PASS, Outcome.SKIPPED)


def _judge(
    record: Record,
    target: str,
    state: tuple[str, str | None],
    run: list[CheckVerdict],
    fingerprint: dict[str, str] | None,
) -> Deployability:
    kind, why = state
    reasons = [f"on hold: {r}" for r in record.hold_reasons]
    if kind == "held":
        reasons.append(f"on hold: {why}")
    elif kind == "retired":
        reasons.append(f"retired: {why}")
    if not run:
        reasons.append(f"never verified on {target}")
        return Deployability(record.id, target, False, reasons)
    failed = False
    for verdict in run:
        if _blocks(verdict.required, verdict.outcome):
            failed = True
            reason = f"{verdict.check}: {verdict.outcome}"
            if verdict.classification:
                reason += f" ({verdict.classification})"
            reasons.append(reason)
    if not failed and fingerprint is not None and run[0].fingerprint != fingerprint:
        change = describe_change(run[0].fingerprint, fingerprint)
        reasons.append(f"stale: runtime changed ({change})")
    return Deployability(
        record.id, target, not reasons, reasons, run[0].run_id, max(v.finished_at for v in run)
    )
