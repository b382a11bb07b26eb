"""Every write of the registry (``Writes``: reads and writes in one transaction), and what it
marks for the verdicts it may change (``Writes.dirty``, settled before it commits)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlmodel import Session, col, func, select

from modelreg.clock import utcnow
from modelreg.record import Record
from modelreg.registry.reads import Reads
from modelreg.registry.rows import (
    Promotion,
    StoredToken,
    event_row,
    new_run_id,
    record_of,
    record_rows,
    stored_spec,
    target_define_event,
)
from modelreg.registry.tables import (
    ApiTokenRow,
    LocationCheckRow,
    ModelRow,
    ModelSuiteRow,
    PromotionRow,
    RecordLocationRow,
    RecordRow,
    RecordStateRow,
    RunRow,
    RuntimeReportRow,
    TargetRow,
    VerificationRow,
)
from modelreg.registry.verdicts import Dirty, latest_reports, runtime_stale_pairs, settle
from modelreg.rules import (
    RELAXATION_ACCEPTED,
    Deployability,
    RecordStateKind,
)
from modelreg.schemas.manifest import Manifest
from modelreg.schemas.verification import CheckResult


def next_version(session: Session, model_id: str) -> int:
    """The number the model's next record gets (``v1`` for its first): one more than its
    highest, read under the model's lock (and a unique index behind it)."""
    highest = session.exec(
        select(func.max(RecordRow.version)).where(RecordRow.model_id == model_id)
    ).one()
    return int(highest or 0) + 1


def number_records(session: Session) -> None:
    """Give every record without a number (an import's) the next numbers of its model, in the
    order the records were added."""
    unnumbered = session.exec(
        select(RecordRow)
        .where(col(RecordRow.version).is_(None))
        .order_by(col(RecordRow.created_at), col(RecordRow.id))
    ).all()
    highest: dict[str, int] = {}  # each model's highest number, read once
    for row in unnumbered:
        if row.model_id not in highest:
            highest[row.model_id] = next_version(session, row.model_id) - 1
        highest[row.model_id] += 1
        row.version = highest[row.model_id]
        session.add(row)
    session.flush()


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
        assert isinstance(rows[0], RecordRow)
        rows[0].version = next_version(self.session, manifest.model_id)
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
        forced: Sequence[str] = (),
        label: str | None = None,
    ) -> Promotion:
        """Make ``record`` production on ``target``, with its approval record (owner, known
        limitations, re-test date) and its event. ``forced``: a break-glass rollback, with the
        reasons the record is not deployable (kept on the row and in the event). ``label``: the
        name the releaser gave it (``MODEL@LABEL`` names the record)."""
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
            forced_json=json.dumps(list(forced)) if forced else None,
            label=label,
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
        if forced:
            approval["forced"] = list(forced)
        if label is not None:
            approval["label"] = label
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
        evidence produced under another runtime there is stale from now on, for everyone.

        The same runtime as the newest report for it there (every verify on an unchanged
        host) changes no verdict: the runtime evidence is compared with is the same. Only the
        wording of verdicts already stale for their runtime names who reported, so only those
        pairs are judged again — not the target's every pair (seconds on a large registry)."""
        previous = latest_reports(self, target).get(runtime)
        if previous is not None and previous.fingerprint == fingerprint:
            self.dirty.pairs |= runtime_stale_pairs(self, target)
        else:
            self.dirty.targets.add(target)
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
