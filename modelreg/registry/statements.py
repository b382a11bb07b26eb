"""The hot reads' SQL, each built once (``functools.cache``): statements with bound parameters
that ``Reads`` executes on its session's connection, and the conversion of their rows into
runs the rules read (``stored_runs``)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import bindparam, case
from sqlalchemy import select as sa_select
from sqlmodel import col, func, select

from modelreg.registry.rows import (
    aware,
)
from modelreg.registry.tables import (
    PromotionRow,
    RecordFileRow,
    RecordLocationRow,
    RecordRow,
    RecordStateRow,
    RunRow,
    TargetRow,
    VerificationRow,
)
from modelreg.rules import (
    CheckVerdict,
    GateTerms,
    StoredRun,
)


@cache
def states_statement() -> Any:
    s = RecordStateRow
    return sa_select(col(s.record_id), col(s.state), col(s.reason), col(s.at), col(s.actor)).where(
        col(s.record_id).in_(bindparam("ids", expanding=True))
    )


@cache
def records_statement() -> Any:
    return select(RecordRow).where(col(RecordRow.id).in_(bindparam("ids", expanding=True)))


def promotion_columns() -> Any:
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
        col(p.forced_json),
        col(p.label),
    )


@cache
def productions_statement(by_model: bool, by_target: bool) -> Any:
    p = PromotionRow
    newest = select(func.max(p.id)).group_by(col(p.model_id), col(p.target))
    if by_model:
        newest = newest.where(p.model_id == bindparam("model_id"))
    if by_target:
        newest = newest.where(p.target == bindparam("target"))
    return promotion_columns().where(col(p.id).in_(newest)).order_by(col(p.model_id), col(p.target))


@cache
def files_statement() -> Any:
    f = RecordFileRow
    return (
        sa_select(col(f.record_id), col(f.path), col(f.bytes), col(f.sha256))
        .where(col(f.record_id).in_(bindparam("ids", expanding=True)))
        .order_by(col(f.record_id), col(f.path))
    )


@cache
def locations_statement() -> Any:
    loc = RecordLocationRow
    return (
        sa_select(col(loc.record_id), col(loc.url), col(loc.added_at), col(loc.added_by))
        .where(col(loc.record_id).in_(bindparam("ids", expanding=True)))
        .order_by(col(loc.id))
    )


@cache
def target_specs_statement() -> Any:
    return select(TargetRow).order_by(col(TargetRow.name))


@cache
def run_heads_statement() -> Any:
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
def signed_heads_statement() -> Any:
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
def run_checks_statement() -> Any:
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


def stored_runs(rows: Iterable[Any]) -> Iterator[tuple[str, str, StoredRun]]:
    """(record id, target, run) of the rows of ``run_checks_statement``, a run per run id."""
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
