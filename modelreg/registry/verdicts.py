"""Verdicts from the registry alone, kept where every reader finds them.

A record's verdict on a target is a function of rows of the registry and nothing else: the
record, its state and holds, its runs and their evidence, the target's definition (with its
trusted keys and suite), the model's attached suite, the runtime the target's hosts were last
seen running (``runtime_reports``) and the gate history. No file, host fact or network answer of
the process that asks enters it: the team service, a deploy host without any runtime and the
verify host get the same answer from the same database.

Because it is a function of rows, it is derived once — in the transaction of every write that
can change it (``settle``, called by the store before it commits) — and stored in ``verdicts``.
Every reader reads those rows (``stored``): one read path, one derivation (``Derivation``),
and a row derived by other rules (``RULES_VERSION``) is derived again when read. The rules'
state-machine test compares every stored row with a fresh derivation after every step.

Writes are serialized while they settle (PostgreSQL: a transaction-scoped advisory lock taken
before the affected pairs are found; SQLite: every writer holds the database's lock), so two
writes that each change an input of the same verdict cannot both derive it from a view without
the other's change.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, delete, text
from sqlalchemy import select as sa_select
from sqlmodel import col

from modelreg import rules
from modelreg.clock import utcnow
from modelreg.errors import ModelregError
from modelreg.fingerprint import (
    LIB_PREFIX,
    Fingerprint,
    as_reported,
    definition_fingerprint,
    runtime_part,
)
from modelreg.judging import LocationState, runtime_of, suite_in_force, suite_label, trust_policy

__all__ = ["Derivation", "Dirty", "LocationState", "settle", "stored"]
from modelreg.reasons import Reason, ReasonCode
from modelreg.registry.tables import (
    LocationCheckRow,
    PromotionRow,
    RecordLocationRow,
    RecordRow,
    RunRow,
    RuntimeReportRow,
    SettingRow,
    TargetRow,
    VerdictRow,
)
from modelreg.rules import Deployability, StoredRun
from modelreg.steps import Step

if TYPE_CHECKING:
    from modelreg.record import Record
    from modelreg.registry.reads import Reads
    from modelreg.registry.tables import ModelSuiteRow
    from modelreg.registry.writes import Writes
    from modelreg.targets import Target

# The rules' version: bump it with any change to what a verdict is derived from or how.
# 2: a reason keeps its next step as data (modelreg.steps); 3: a target's license policy.
RULES_VERSION = 3
RULES_SETTING = "verdicts_rules_version"
# pg_advisory_xact_lock key of settling verdicts: "mrverdct" in ASCII, as a bigint.
_SETTLE_LOCK_KEY = int.from_bytes(b"mrverdct", "big") & ((1 << 63) - 1)
_CHUNK = 500

Pair = tuple[str, str]  # (record id, target)

# -- the inputs a derivation reads --------------------------------------------------------


@dataclass(frozen=True)
class RuntimeReport:
    """What a host of a target said it runs for one runtime."""

    id: int
    target: str
    runtime: str
    host: str
    fingerprint: Fingerprint
    source: str
    run_id: str | None
    at: datetime

    def describe(self) -> str:
        how = "verify" if self.source == "verify" else f"host {self.source}"
        return f"{how} on {self.host}, {self.at:%Y-%m-%d %H:%M} UTC"


def latest_reports(reads: Reads, target: str) -> dict[str, RuntimeReport]:
    """runtime -> the newest report of what ``target``'s hosts run for it."""
    r = RuntimeReportRow
    newest = (
        sa_select(text("max(id)"))
        .select_from(r)
        .where(col(r.target) == target)
        .group_by(col(r.runtime))
    )
    rows = reads.session.execute(sa_select(r).where(col(r.id).in_(newest))).scalars().all()
    from modelreg.registry.rows import aware

    return {
        row.runtime: RuntimeReport(
            row.id or 0,
            row.target,
            row.runtime,
            row.host,
            json.loads(row.fingerprint_json),
            row.source,
            row.run_id,
            aware(row.at),
        )
        for row in rows
    }


def reported_libraries(reads: Reads, target: str, runtime: str) -> list[str]:
    """The libraries (``lib <path>`` keys) named by the newest report of each host of
    ``target`` for ``runtime``: what a host report must look at so that a report from a host
    that does not have a library (or one written without it) never hides it from the next."""

    r = RuntimeReportRow
    newest = (
        sa_select(text("max(id)"))
        .select_from(r)
        .where(col(r.target) == target, col(r.runtime) == runtime)
        .group_by(col(r.host))
    )
    rows = reads.session.execute(
        sa_select(col(r.fingerprint_json)).where(col(r.id).in_(newest))
    ).scalars()
    named = {
        key.removeprefix(LIB_PREFIX)
        for row in rows
        for key in json.loads(row)
        if key.startswith(LIB_PREFIX)
    }
    return sorted(named)


@dataclass
class Derivation:
    """Deployability derived from one view of the registry (a read or the writing
    transaction): every input read from it, each once per call."""

    reads: Reads
    targets: dict[str, Target] = field(init=False)
    _reports: dict[str, dict[str, RuntimeReport]] = field(default_factory=dict)
    _trust: dict[str, rules.TrustPolicy] = field(default_factory=dict)
    _labels: dict[tuple[str, str], str | None] = field(default_factory=dict)
    _suites: dict[str, ModelSuiteRow | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from modelreg.targets import all_targets

        self.targets = all_targets({t.name: t.spec for t in self.reads.target_specs()})

    def reports(self, target: str) -> dict[str, RuntimeReport]:
        if target not in self._reports:
            self._reports[target] = latest_reports(self.reads, target)
        return self._reports[target]

    def trust(self, target: Target) -> rules.TrustPolicy:
        if target.name not in self._trust:
            self._trust[target.name] = trust_policy(target)
        return self._trust[target.name]

    def attached(self, model_id: str) -> ModelSuiteRow | None:
        if model_id not in self._suites:
            self._suites[model_id] = self.reads.model_suites([model_id]).get(model_id)
        return self._suites[model_id]

    def suite_label(self, model_id: str, target: Target) -> str | None:
        key = (model_id, target.name)
        if key not in self._labels:
            try:
                self._labels[key] = suite_label(suite_in_force(self.attached(model_id), target))
            except ModelregError as exc:
                # An unreadable suite matches no run's: every run is stale, never a pass.
                self._labels[key] = f"unreadable: {exc.message}"
        return self._labels[key]

    def current(self, target: Target, record: Record, run: StoredRun) -> Fingerprint:
        """The fingerprint ``run``'s evidence is judged against: the registry's definitions
        now, and the runtime the target's hosts were last seen running (the run's own when no
        host has said otherwise)."""
        evidence = runtime_part(run.fingerprint)
        report = self.reports(target.name).get(runtime_of(record))
        runtime = evidence if report is None else as_reported(evidence, report.fingerprint)
        return runtime | definition_fingerprint(
            target, suite=self.suite_label(record.model_id, target)
        )

    def observed_by(self, target: Target, record: Record, run: StoredRun) -> str | None:
        """Who said the target runs what ``current`` compares with (None: the run itself)."""
        report = self.reports(target.name).get(runtime_of(record))
        if report is None or report.run_id == run.run_id:
            return None
        return report.describe()

    def verdict(
        self,
        record: Record,
        target_name: str,
        state: rules.RecordState,
        runs: Sequence[StoredRun],
        file_digests: dict[str, str] | None = None,
    ) -> Deployability:
        target = self.targets.get(target_name)
        if target is None:
            return rules.target_undefined(record.id, target_name)
        trust = self.trust(target)
        if trust.verifier_keys is not None and file_digests is None:
            file_digests = self.reads.file_digests(record.id)
        return rules.judge(
            record.id,
            target.name,
            record.hold_reasons,
            state,
            runs,
            lambda run: self.current(target, record, run),
            trust,
            file_digests,
            observed_by=lambda run: self.observed_by(target, record, run),
            license_denied=license_denied(record.license, target),
        )

    def verdicts(self, pairs: Iterable[Pair]) -> dict[Pair, Deployability]:
        """The verdict of every (record, target) pair, derived now."""
        by_target: dict[str, set[str]] = {}
        for record_id, target in pairs:
            by_target.setdefault(target, set()).add(record_id)
        ids = sorted({r for records in by_target.values() for r in records})
        records = self.reads.records_by_id(ids)
        states = self.reads.states(ids)
        found: dict[Pair, Deployability] = {}
        for target, record_ids in sorted(by_target.items()):
            ordered = sorted(record_ids)
            runs = self.reads.latest_runs_on(ordered, [target])
            for record_id in ordered:
                found[(record_id, target)] = self.verdict(
                    records[record_id],
                    target,
                    states.get(record_id, rules.ACTIVE),
                    runs.get((record_id, target), []),
                )
        return found


# -- stored verdicts: written by settle, read by everyone ----------------------------------


def _reasons_json(verdict: Deployability) -> str:
    return json.dumps(
        [
            {
                "code": r.code.value,
                "message": r.message,
                "step": r.step.json() if r.step is not None else None,
                "detail": dict(r.detail) if r.detail is not None else None,
            }
            for r in verdict.reasons
        ],
        sort_keys=True,
        default=str,
    )


def _from_row(row: Any) -> Deployability:
    from modelreg.registry.rows import aware

    reasons = tuple(
        Reason(
            ReasonCode(r["code"]),
            r["message"],
            Step.from_json(r["step"]) if r.get("step") else None,
            r.get("detail"),
        )
        for r in json.loads(row.reasons_json)
    )
    return Deployability(
        row.record_id,
        row.target,
        bool(row.deployable),
        reasons,
        row.run_id,
        aware(row.verified_at) if row.verified_at is not None else None,
    )


def stored(reads: Reads, pairs: Iterable[Pair]) -> dict[Pair, Deployability]:
    """The verdict of each (record, target) pair, as stored; a pair with no row (never
    verified or promoted there) or a row of other rules is derived now (``Derivation``) —
    written by nobody: a read writes nothing.

    A "deployable" row on a target that counts only signed runs is derived again as it is
    read: there the signature, not the database, is what vouches for the evidence, and a
    stored row is only the database's word (anyone who can write the database could write
    it). Rows that say "not deployable" fail closed as they are."""
    wanted = sorted(set(pairs))
    found: dict[Pair, Deployability] = {}
    by_target: dict[str, list[str]] = {}
    for record_id, target in wanted:
        by_target.setdefault(target, []).append(record_id)
    for target, record_ids in by_target.items():
        for k in range(0, len(record_ids), _CHUNK):
            chunk = record_ids[k : k + _CHUNK]
            rows = reads.session.execute(
                _stored_statement(), {"target": target, "ids": chunk}
            ).all()
            for row in rows:
                if row.rules_version == RULES_VERSION:
                    found[(row.record_id, row.target)] = _from_row(row)
    vouched = [p for p, v in found.items() if v.deployable]
    if vouched:
        signed = _signed_targets(reads, {t for _, t in vouched})
        for pair in vouched:
            if pair[1] in signed:
                del found[pair]
    missing = [p for p in wanted if p not in found]
    if missing:
        found |= Derivation(reads).verdicts(missing)
    return found


@functools.cache
def _stored_statement() -> Any:
    v = VerdictRow
    return sa_select(
        col(v.record_id),
        col(v.target),
        col(v.deployable),
        col(v.reasons_json),
        col(v.run_id),
        col(v.verified_at),
        col(v.rules_version),
    ).where(
        col(v.target) == bindparam("target"),
        col(v.record_id).in_(bindparam("ids", expanding=True)),
    )


@functools.cache
def _trust_statement() -> Any:
    t = TargetRow
    return sa_select(col(t.name), col(t.spec_json)).where(
        col(t.name).in_(bindparam("names", expanding=True))
    )


def _signed_targets(reads: Reads, names: set[str]) -> set[str]:
    """Those of ``names`` whose definitions count only runs signed by a key they trust."""
    found = set()
    for name, spec_json in reads.session.execute(_trust_statement(), {"names": sorted(names)}):
        trust = json.loads(spec_json).get("trust") or {}
        if trust.get("verifier_keys") or trust.get("verifier_key_pems"):
            found.add(name)
    return found


def stored_of_records(reads: Reads, record_ids: Sequence[str]) -> dict[str, list[Deployability]]:
    """record id -> its stored verdicts on every target it has one on (runs or promotions
    there), by target name."""
    v = VerdictRow
    pairs: list[Pair] = []
    for k in range(0, len(record_ids), _CHUNK):
        chunk = list(record_ids[k : k + _CHUNK])
        pairs += [
            (r, t)
            for r, t in reads.session.execute(
                sa_select(col(v.record_id), col(v.target)).where(col(v.record_id).in_(chunk))
            ).all()
        ]
    verdicts = stored(reads, pairs)
    found: dict[str, list[Deployability]] = {i: [] for i in record_ids}
    for (record_id, _target), verdict in sorted(verdicts.items()):
        found[record_id].append(verdict)
    return found


# -- settling: what a write changed, derived again before it commits ------------------------


@dataclass
class Dirty:
    """What a transaction wrote that a verdict can depend on."""

    records: set[str] = field(default_factory=set)
    targets: set[str] = field(default_factory=set)
    models: set[str] = field(default_factory=set)
    pairs: set[Pair] = field(default_factory=set)
    everything: bool = False

    def __bool__(self) -> bool:
        return bool(self.everything or self.records or self.targets or self.models or self.pairs)


def _pairs_where(reads: Reads, column: str, values: Sequence[str]) -> set[Pair]:
    """Every (record, target) pair with a run, a promotion or a stored verdict whose
    ``column`` (record_id or target) is one of ``values``."""
    found: set[Pair] = set()
    for table in (RunRow, PromotionRow, VerdictRow):
        for k in range(0, len(values), _CHUNK):
            chunk = list(values[k : k + _CHUNK])
            rows = reads.session.execute(
                sa_select(col(table.record_id), col(table.target))
                .where(col(getattr(table, column)).in_(chunk))
                .distinct()
            ).all()
            found |= {(r, t) for r, t in rows}
    return found


def runtime_stale_pairs(reads: Reads, target: str) -> set[Pair]:
    """The pairs on ``target`` whose stored verdict is stale for its runtime (a superset:
    the reasons' JSON names the code)."""
    v = VerdictRow
    rows = reads.session.execute(
        sa_select(col(v.record_id), col(v.target)).where(
            col(v.target) == target,
            col(v.reasons_json).contains(f'"{ReasonCode.STALE_RUNTIME.value}"'),
        )
    ).all()
    return {(r, t) for r, t in rows}


def _all_pairs(reads: Reads) -> set[Pair]:
    found: set[Pair] = set()
    for table in (RunRow, PromotionRow, VerdictRow):
        rows = reads.session.execute(
            sa_select(col(table.record_id), col(table.target)).distinct()
        ).all()
        found |= {(r, t) for r, t in rows}
    return found


def affected(reads: Reads, dirty: Dirty) -> set[Pair]:
    """The pairs whose verdict a transaction's writes may have changed."""
    if dirty.everything:
        return _all_pairs(reads)
    records = set(dirty.records)
    if dirty.models:
        models = sorted(dirty.models)
        for k in range(0, len(models), _CHUNK):
            rows = reads.session.execute(
                sa_select(col(RecordRow.id)).where(
                    col(RecordRow.model_id).in_(models[k : k + _CHUNK])
                )
            ).all()
            records |= {r for (r,) in rows}
    found = set(dirty.pairs)
    if records:
        found |= _pairs_where(reads, "record_id", sorted(records))
    if dirty.targets:
        found |= _pairs_where(reads, "target", sorted(dirty.targets))
    return found


def lock_settling(session: Any) -> None:
    """Serialize the writers that settle verdicts (PostgreSQL: a transaction-scoped advisory
    lock, held until commit; SQLite: every writer holds the database's lock already)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SETTLE_LOCK_KEY})


def settle(writes: Writes, dirty: Dirty) -> int:
    """Derive again, in ``writes``' transaction, every verdict its writes may have changed,
    and store them; returns how many were derived."""
    if not dirty:
        return 0
    session = writes.session
    lock_settling(session)
    session.flush()
    pairs = affected(writes, dirty)
    if not pairs:
        return 0
    verdicts = Derivation(writes).verdicts(pairs)
    models = writes.model_of_records(sorted({r for r, _ in pairs}))
    v = VerdictRow
    by_target: dict[str, list[str]] = {}
    for record_id, target in pairs:
        by_target.setdefault(target, []).append(record_id)
    for target, record_ids in by_target.items():
        for k in range(0, len(record_ids), _CHUNK):
            chunk = record_ids[k : k + _CHUNK]
            session.execute(delete(v).where(col(v.target) == target, col(v.record_id).in_(chunk)))
    rows = []
    for (record_id, target), verdict in verdicts.items():
        rows.append(
            {
                "record_id": record_id,
                "target": target,
                "model_id": models[record_id],
                "deployable": verdict.deployable,
                "stale": verdict.stale,
                "held": verdict.held,
                "reasons_json": _reasons_json(verdict),
                "run_id": verdict.run_id,
                "verified_at": verdict.verified_at,
                "rules_version": RULES_VERSION,
            }
        )
    for k in range(0, len(rows), _CHUNK):
        session.execute(v.__table__.insert(), rows[k : k + _CHUNK])  # type: ignore[attr-defined]
    return len(rows)


def settle_everything(writes: Writes) -> int:
    """Derive every stored verdict again (after an upgrade, or under other rules) and record
    the rules version they were derived under."""
    derived = settle(writes, Dirty(everything=True))
    row = writes.session.get(SettingRow, RULES_SETTING)
    if row is None:
        row = SettingRow(name=RULES_SETTING, value=str(RULES_VERSION), updated_by="modelreg")
    row.value, row.updated_at = str(RULES_VERSION), utcnow()
    writes.session.add(row)
    return derived


def drift(reads: Reads) -> list[str]:
    """Stored verdicts that a fresh derivation from the rows disagrees with (rows written
    around modelreg, e.g. by hand in the database): "record on target: stored …, derived …"."""
    v = VerdictRow
    rows = {
        (r.record_id, r.target): _from_row(r)
        for r in reads.session.execute(
            sa_select(
                col(v.record_id),
                col(v.target),
                col(v.deployable),
                col(v.reasons_json),
                col(v.run_id),
                col(v.verified_at),
            )
        ).all()
    }
    fresh = Derivation(reads).verdicts(sorted(rows) + sorted(_all_pairs(reads) - set(rows)))
    found = []
    for pair, derived in sorted(fresh.items()):
        kept = rows.get(pair)
        if kept is None or (kept.deployable, kept.reasons, kept.run_id) != (
            derived.deployable,
            derived.reasons,
            derived.run_id,
        ):
            stored_text = "none" if kept is None else kept.summary
            found.append(
                f"{pair[0]} on {pair[1]}: stored {stored_text!r}, derived {derived.summary!r}"
            )
    return found


def rules_version_stored(reads: Reads) -> int | None:
    """The rules version the stored verdicts were derived under (None: never derived)."""
    row = reads.session.get(SettingRow, RULES_SETTING)
    return int(row.value) if row is not None else None


# -- where the bytes are: recorded checks, never a probe by the reader ----------------------


def location_states(reads: Reads, record_ids: Sequence[str]) -> dict[str, list[LocationState]]:
    """record id -> its locations in the order they were added, each with its newest check."""
    from modelreg.registry.rows import aware

    found: dict[str, list[LocationState]] = {i: [] for i in record_ids}
    loc, chk = RecordLocationRow, LocationCheckRow
    for k in range(0, len(record_ids), _CHUNK):
        chunk = list(record_ids[k : k + _CHUNK])
        newest = (
            sa_select(text("max(id)"))
            .select_from(chk)
            .where(col(chk.record_id).in_(chunk))
            .group_by(col(chk.record_id), col(chk.url))
        )
        checks = {
            (row.record_id, row.url): row
            for row in reads.session.execute(sa_select(chk).where(col(chk.id).in_(newest)))
            .scalars()
            .all()
        }
        rows = reads.session.execute(
            sa_select(col(loc.record_id), col(loc.url), col(loc.added_at), col(loc.added_by))
            .where(col(loc.record_id).in_(chunk))
            .order_by(col(loc.id))
        ).all()
        for record_id, url, added_at, added_by in rows:
            check = checks.get((record_id, url))
            found[record_id].append(
                LocationState(
                    url,
                    aware(added_at),
                    added_by,
                    None if check is None else bool(check.ok),
                    None if check is None else check.detail,
                    None if check is None else check.host,
                    None if check is None else aware(check.at),
                    None if check is None else check.source,
                )
            )
    return found


def license_denied(license_id: str | None, target: Target) -> str | None:
    """The reason ``target``'s license policy denies a license (None: it does not, or the
    target has no policy)."""
    if not target.license_policy:
        return None
    from modelreg.license_policy import policy

    decided = policy(license_id, target.license_policy)
    return decided.reason if decided.decision == "deny" else None
