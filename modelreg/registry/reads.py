"""Every query of the registry, each written once, over one session (``Reads``): one
transaction with one consistent view (``Store.read``), or the locked transaction a decision
writes in (``Writes``). The store only stores: it decides nothing."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlalchemy import select as sa_select
from sqlmodel import Session, col, func, select

from modelreg.errors import AmbiguousRecord, InvalidInput, RecordNotFound
from modelreg.limits import HANDLE_MAX, RECORD_REF_MAX, check_length
from modelreg.record import Record
from modelreg.registry.rows import (
    HEADS_CHUNK,
    Event,
    ForeignRun,
    Promotion,
    StoredFile,
    StoredLocation,
    StoredTarget,
    StoredToken,
    Verification,
    aware,
    chunks,
    like_prefix,
    record_of,
    record_prefix,
)
from modelreg.registry.statements import (
    files_statement,
    locations_statement,
    productions_statement,
    promotion_columns,
    records_statement,
    run_checks_statement,
    run_heads_statement,
    signed_heads_statement,
    states_statement,
    stored_runs,
    target_specs_statement,
)
from modelreg.registry.tables import (
    ApiTokenRow,
    ArtifactSignatureRow,
    EventRow,
    ModelRow,
    ModelSuiteRow,
    PromotionRow,
    RecordFileRow,
    RecordRow,
    RecordStateRow,
    RunRow,
    VerificationRow,
)
from modelreg.registry.verdicts import LocationState
from modelreg.rules import (
    ACTIVE,
    RELAXATION_ACCEPTED,
    Deployability,
    GateHistory,
    GateTerms,
    RecordState,
    RecordStateKind,
    StoredRun,
)
from modelreg.schemas.manifest import HANDLE_RE, MODEL_ID_RE, VERSION_LIKE_RE
from modelreg.steps import Step


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
        """A record by id or unique id prefix (``r_3f2a`` or ``3f2a``), by its model's
        version number (``acme/chat@v3``), or by a promotion's label (``acme/chat@release-14``:
        the record the newest promotion so labelled made production, on any target)."""
        handle = HANDLE_RE.fullmatch(ref.strip())
        if handle is not None and handle["version"] is not None:
            return self._record_by_version(handle["model"], int(handle["version"]), ref.strip())
        if handle is not None:
            return self._record_by_label(handle["model"], handle["label"], ref.strip())
        if "/" in ref and MODEL_ID_RE.match(ref.strip()):
            shown = ref.strip()[:200]
            raise InvalidInput(
                f"{shown!r} is a model id; a record id is r_ and 12 hex digits (or a prefix)",
                step=Step("records", "list the model's records", model=shown),
            )
        ref = check_length("record reference", ref.strip(), RECORD_REF_MAX)
        prefix = record_prefix(ref)
        if len(prefix) < 6:
            raise InvalidInput(
                f"record reference {ref!r} is too short", "give at least 4 characters of its id"
            )
        row = self.session.get(RecordRow, prefix)
        if row is not None:
            return record_of(row)
        rows = self.session.exec(
            select(RecordRow)
            .where(col(RecordRow.id).like(f"{like_prefix(prefix)}%", escape="\\"))
            .limit(6)
        ).all()
        if not rows:
            raise RecordNotFound(ref)
        if len(rows) > 1:
            raise AmbiguousRecord(ref, [r.id for r in rows])
        return record_of(rows[0])

    def _record_by_label(self, model_id: str, label: str, ref: str) -> Record:
        if VERSION_LIKE_RE.fullmatch(label):  # V3, or v and ten digits: no label is one
            raise RecordNotFound(
                ref[:HANDLE_MAX],
                f"{label!r} is no version of {model_id} (versions are v1, v2, … in lower case, "
                "at most 9 digits) and no label looks like a version",
                step=Step("records", "list the model's records", model=model_id),
            )
        p = PromotionRow
        record_id = self.session.exec(
            select(p.record_id)
            .where(p.model_id == model_id, p.label == label)
            .order_by(col(p.at).desc(), col(p.id).desc())
            .limit(1)
        ).first()
        if record_id is None:
            raise RecordNotFound(
                ref[:HANDLE_MAX],
                f"no promotion of {model_id} is labelled {label!r} (labels are given when a "
                "record is promoted; versions are vN)",
                step=Step(
                    "history", "see the model's promotions and their labels", model_id=model_id
                ),
            )
        return self.record(record_id)

    def _record_by_version(self, model_id: str, version: int, ref: str) -> Record:
        row = self.session.exec(
            select(RecordRow).where(RecordRow.model_id == model_id, RecordRow.version == version)
        ).first()
        if row is None:
            raise RecordNotFound(ref[:RECORD_REF_MAX])
        return record_of(row)

    def search(self, text: str, limit: int) -> list[tuple[str, str, str | None]]:
        """(record id, how it matched — ``record_id``, ``sha256`` or ``model_id`` — and the
        file that did) for a record id prefix, a file's sha256 or a prefix of it, or a part of
        a model id; newest records first, in that order of kinds."""
        text = text.strip().lower()
        found: dict[str, tuple[str, str, str | None]] = {}
        prefix = record_prefix(text)
        if len(prefix) >= 6:
            pattern = col(RecordRow.id).like(f"{like_prefix(prefix)}%", escape="\\")
            found |= {i: (i, "record_id", None) for i in self._newest_ids(pattern, limit)}
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
        if len(found) < limit:
            # A part of a model's name (``smollm2``, ``acme/chat``), case-insensitive.
            pattern = col(RecordRow.model_id).ilike(f"%{like_prefix(text)}%", escape="\\")
            for record_id in self._newest_ids(pattern, limit):
                found.setdefault(record_id, (record_id, "model_id", None))
        return list(found.values())[:limit]

    def _newest_ids(self, where: Any, limit: int) -> Sequence[str]:
        """The ids of the newest ``limit`` records matching ``where``."""
        return self.session.exec(
            select(RecordRow.id)
            .where(where)
            .order_by(col(RecordRow.created_at).desc(), col(RecordRow.id))
            .limit(limit)
        ).all()

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
            for chunk in chunks(ids):
                for row in self.session.exec(records_statement(), params={"ids": list(chunk)}):
                    found[row.id] = record_of(row)
            return found
        return self._record_heads(ids)

    def _record_heads(self, ids: Sequence[str]) -> dict[str, Record]:
        r = RecordRow
        found: dict[str, Record] = {}
        for chunk in chunks(ids):
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
                    col(r.version),
                ).where(col(r.id).in_(chunk))
            ).all()
            for rid, model, fmt, source, license_, root, at, by, holds, version in rows:
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
                    version=version,
                )
        return found

    def files(self, record_ids: Sequence[str]) -> dict[str, list[StoredFile]]:
        """record id -> its files (path, bytes, sha256), from the file table."""
        found: dict[str, list[StoredFile]] = {i: [] for i in record_ids}
        for chunk in chunks(list(record_ids)):
            rows = self.session.execute(files_statement(), {"ids": list(chunk)}).all()
            for record_id, path, size, sha256 in rows:
                found[record_id].append(StoredFile(path, size, sha256))
        return found

    def locations(self, record_ids: Sequence[str]) -> dict[str, list[StoredLocation]]:
        """record id -> where its bytes can be fetched, in the order they were added."""
        found: dict[str, list[StoredLocation]] = {i: [] for i in record_ids}
        for chunk in chunks(list(record_ids)):
            rows = self.session.execute(locations_statement(), {"ids": list(chunk)}).all()
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
                col(ModelRow.model_id).ilike(f"%{like_prefix(contains)}%", escape="\\")
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
        for chunk in chunks(list(model_ids)):
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
        for chunk in chunks(list(record_ids)):
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
        for chunk in chunks(list(record_ids)):
            params = {"ids": list(chunk), "targets": list(targets)}
            heads = {
                head
                for statement in (run_heads_statement(), signed_heads_statement())
                for row in self.session.execute(statement, params)
                for head in row
                if head is not None
            }
            runs = list(stored_runs(self._run_check_rows(sorted(heads))))
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
        return [run for _, _, run in stored_runs(self._run_check_rows(sorted(h for (h,) in heads)))]

    def gate_history(self, record_ids: Sequence[str]) -> dict[str, GateHistory]:
        """record id -> its failed runs' gate terms (every target and origin: a failure is
        evidence against the record wherever it was recorded) and the relaxed gates releasers
        accepted for it (``gate-relaxation-accepted`` events). One-off runs count only as
        ``one_off_failures_before_attach`` says: a suite attached after a stricter one-off run
        of the same model failed was chosen after that result."""
        failures: dict[str, list[tuple[str, GateTerms]]] = self.one_off_failures_before_attach(
            record_ids
        )
        accepted: dict[str, set[tuple[str, str]]] = {}
        r, e = RunRow, EventRow
        for chunk in chunks(sorted(set(record_ids))):
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

    def one_off_failures_before_attach(
        self, record_ids: Sequence[str]
    ) -> dict[str, list[tuple[str, GateTerms]]]:
        """record id -> the failed one-off runs of any record of its model that finished
        before the model's suite in force was attached (issue 42: gates fixed before results,
        one-off runs included). A one-off run recorded while a suite is in force changes
        nothing; one that failed before the suite was chosen is a result the choice saw."""
        models = self.model_of_records(record_ids)
        suites = self.model_suites(sorted(set(models.values())))
        if not suites:
            return {}
        r, rec = RunRow, RecordRow
        found: dict[str, list[tuple[str, GateTerms]]] = {}
        for model_id, attached in suites.items():
            rows = self.session.execute(
                sa_select(col(r.run_id), col(r.gate_terms_json))
                .join(rec, col(rec.id) == col(r.record_id))
                .where(
                    col(rec.model_id) == model_id,
                    col(r.exploratory),
                    col(r.gate_terms_json).is_not(None),
                    col(r.created_at) < attached.attached_at,
                )
                .order_by(col(r.created_at), col(r.run_id))
            ).all()
            failed = [
                (run_id, t) for run_id, text in rows if not (t := GateTerms.from_json(text)).passed
            ]
            if failed:
                for record_id, model in models.items():
                    if model == model_id:
                        found[record_id] = list(failed)
        return found

    def _run_check_rows(self, heads: Sequence[int]) -> list[Any]:
        """The rows of ``run_checks_statement`` for the runs of these verification ids, each
        run once: in slices of ``HEADS_CHUNK``, a run already read whole from an earlier
        slice (two heads of one run can fall into different slices) is skipped."""
        rows: list[Any] = []
        for k in range(0, len(heads), HEADS_CHUNK):
            done = {row.run_id for row in rows}
            rows += [
                row
                for row in self.session.execute(
                    run_checks_statement(), {"heads": list(heads[k : k + HEADS_CHUNK])}
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
        for chunk in chunks(list(record_ids)):
            rows = self.session.execute(states_statement(), {"ids": list(chunk)}).all()
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
        statement = productions_statement(bool(model_id), bool(target))
        params = {"model_id": model_id} if model_id else {}
        if target:
            params["target"] = target
        return [Promotion.from_columns(r) for r in self.session.execute(statement, params)]

    def approvals(self, record_id: str) -> list[Promotion]:
        """The newest promotion of the record on each target it was ever promoted to, by
        target: the approval it was made with (owner, known limitations, re-test date),
        which stays with the record once something else is production there."""
        p = PromotionRow
        newest = (
            select(func.max(p.id))
            .where(p.record_id == record_id, p.action == "promote")
            .group_by(col(p.target))
        )
        rows = self.session.execute(
            promotion_columns().where(col(p.id).in_(newest)).order_by(col(p.target))
        )
        return [Promotion.from_columns(r) for r in rows]

    def productions_of(self, model_ids: Sequence[str]) -> list[Promotion]:
        """The current production row of every (model, target) of these models."""
        p = PromotionRow
        found: list[Promotion] = []
        for chunk in chunks(list(model_ids)):
            newest = (
                select(func.max(p.id))
                .where(col(p.model_id).in_(chunk))
                .group_by(col(p.model_id), col(p.target))
            )
            rows = self.session.execute(promotion_columns().where(col(p.id).in_(newest)))
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
        for chunk in chunks(list(record_ids)):
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

    # -- shared targets and tokens ------------------------------------------------------------

    def target_specs(self) -> list[StoredTarget]:
        """Every target defined in the registry, by name."""
        rows = self.session.exec(target_specs_statement()).all()
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
