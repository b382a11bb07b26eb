"""What runs where: deployability, status, the matrix and the deploy gate."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from datetime import UTC, date
from typing import TYPE_CHECKING

from modelreg.api.core import _SHA256_RE, Core
from modelreg.api.derived import MAX_MODELS, Derivation, Judged, targets_key
from modelreg.api.views import (
    _gate_of,
    deployability_out,
    promotion_out,
    record_out,
    targets_output,
)
from modelreg.deployed_unit import deployed_unit
from modelreg.errors import (
    InvalidInput,
    ModelregError,
    TargetNotFound,
)
from modelreg.rules import (
    Deployability,
)
from modelreg.schemas.output import (
    ApprovalOut,
    GateOutput,
    MatrixCell,
    MatrixOutput,
    StatusEntry,
    StatusOutput,
)

if TYPE_CHECKING:
    # The store (SQLAlchemy) loads when a registry is opened, not when modelreg.api is
    # imported: `modelreg inspect` needs no database.
    from modelreg.registry.store import Promotion, Reads
    from modelreg.targets import Target


class Status(Core):
    """What runs where: deployability, status, the matrix and the deploy gate — answered
    from this process's derivations (``derived``), re-derived only where something they
    depend on has changed."""

    def deployability(self, ref: str, target: str) -> Deployability:
        """Is the record deployable on ``target`` right now (with structured reasons)?"""
        with self.store.read() as reads:
            record = reads.record(ref)
            runs = reads.latest_runs([record.id], target)[record.id]
            state = reads.state(record.id)
            judge = self.judge(reads)
        return judge.verdict(record, target, state, runs)

    def _derive(
        self, reads: Reads, model_ids: Sequence[str] | None, target: str | None
    ) -> tuple[Derivation, dict[str, int]]:
        """The production entries of these models (None: every model) on ``target`` (None:
        every target), and the models' generations, from one read."""
        generations = reads.generations()
        assessment = self.derived.assessment(
            self._targets_key(generations),
            lambda: self.targets_with(reads.target_specs()),
        )
        models = reads.model_generations(model_ids)
        return self.derived.derive(reads, assessment, models, target), models

    def _targets_key(self, generations: dict[str, int]) -> Hashable | None:
        from modelreg import config

        return targets_key(generations, str(self.targets_file or config.targets_file()))

    def _status(
        self,
        model_id: str | None,
        target: str | None,
        peeked: tuple[dict[str, int], dict[str, int]] | None = None,
    ) -> list[_Shown]:
        # One read transaction for all of it: one consistent view. Errors are raised after it
        # ends (the "did you mean" of an unknown model reads on its own). ``peeked``: the
        # generations just read (``Store.peek``) — answer from what is derived, or raise
        # ``NotDerived``, reading nothing more.
        derivation = None
        if model_id is not None:
            # One model (what a deploy pipeline asks): one statement says whether what this
            # process derived still holds.
            named, models = peeked or self.store.peek([model_id])
            derivation = self.derived.cached(self._targets_key(named), models, target)
        if derivation is None and peeked is not None:
            raise NotDerived(model_id or "")
        if derivation is None:
            # A process that keeps derivations of many models (a server) refreshes every model
            # whose generation moved in one batch: after a write to many (an import, a bulk
            # locate) the next request pays once, not every model's first request.
            batch = model_id is not None and 1 < self.derived.models_kept() < MAX_MODELS
            with self.store.read() as reads:
                asked = None if batch or model_id is None else [model_id]
                derivation, models = self._derive(reads, asked, target)
            if batch:
                derivation = derivation.of(model_id)
        if model_id is not None and model_id not in models:
            if peeked is not None:
                raise NotDerived(model_id)
            self._require_model(model_id)
        targets = derivation.assessment.targets
        if target is not None and target not in targets:
            raise TargetNotFound(target, sorted(targets))
        from modelreg import clock
        from modelreg.locations import fetchable_copy
        from modelreg.s3 import NotCached

        # Whether a re-test is overdue changes with the day, not with a write: a kept entry is
        # reused only while it says the same.
        today = clock.utcnow().date()
        shown = []
        fetchable: dict[str, tuple[str | None, str | None]] = {}
        for entry, owner, index in zip(
            derivation.judged, derivation.verdicts, derivation.indexes, strict=True
        ):
            record = entry.record
            if record.id not in fetchable:
                try:
                    fetchable[record.id] = fetchable_copy(
                        [(f.path, f.bytes) for f in entry.files],
                        entry.locations,
                        cached_only=peeked is not None,  # the event loop: never the network
                    )
                except NotCached:
                    raise NotDerived(model_id or "") from None
            fetch = fetchable[record.id]
            kept = owner.shown.get(index)
            found = kept[1] if kept is not None and kept[0] == fetch else None
            if isinstance(found, _Shown) and found.overdue != retest_overdue(
                entry.promotion, today
            ):
                found = None
            if not isinstance(found, _Shown):
                found = _Shown(_status_entry(entry, targets, fetch, today))
                owner.shown[index] = (fetch, found)
            shown.append(found)
        return shown

    def status(self, model_id: str | None = None, target: str | None = None) -> StatusOutput:
        """What runs where: for every (model, target) with a production record, that record,
        its files, and whether it is deployable there now (stale / held / failing). The
        entries are shared with later calls: read them, do not change them."""
        entries = [s.entry for s in self._status(model_id, target)]
        return StatusOutput.model_construct(entries=entries, gate=None)

    def status_json(self, model_id: str | None = None, target: str | None = None) -> str:
        """``status`` as the JSON the HTTP API serves (``textsafe.for_json`` of its compact
        dump), made from each entry's JSON kept with it."""
        entries = ",".join(s.json for s in self._status(model_id, target))
        return '{"schema_version":1,"entries":[' + entries + '],"gate":null}'

    def matrix(
        self, *, contains: str | None = None, offset: int = 0, limit: int = 100
    ) -> MatrixOutput:
        """What runs where as a models × targets matrix, a page of models at a time
        (``contains``: a case-insensitive substring of the model id): each production record
        and whether it may run there now, by the same rules as ``status``."""
        if offset < 0 or not 1 <= limit <= 1000:
            raise InvalidInput(f"offset {offset} / limit {limit}: give offset ≥ 0, limit 1-1000")
        with self.store.read() as reads:
            models, total = reads.model_page(contains, offset, limit)
            derivation, _ = self._derive(reads, models, None)
        cells = []
        for entry in derivation.judged:
            p, verdict = entry.promotion, deployability_out(entry.verdict)
            cells.append(
                MatrixCell(
                    model_id=p.model_id,
                    target=p.target,
                    record_id=entry.record.id,
                    now=verdict.now,
                    reasons=verdict.reasons,
                    since=p.at,
                    actor=p.actor,
                    action="rollback" if p.action == "rollback" else "promote",
                    why=p.why,
                )
            )
        return MatrixOutput(
            targets=targets_output(derivation.assessment.targets).targets,
            models=models,
            total_models=total,
            offset=offset,
            limit=limit,
            cells=cells,
        )

    def gate(self, model_id: str, target: str, sha256: str) -> GateOutput:
        """The deploy gate: passes only when ``sha256`` is a file of the current production
        record of ``model_id`` on ``target`` and that record is deployable there now."""
        gated = self.gated_status(model_id, target, sha256)
        assert gated.gate is not None
        return gated.gate

    def derived_read(
        self,
        model_id: str,
        target: str | None,
        sha256: str | None,
        peeked: tuple[dict[str, int], dict[str, int]],
    ) -> tuple[int, str] | None:
        """The status of one model (``sha256`` None) or the deploy gate's answer, as (HTTP
        status, JSON), from what this process has derived — when ``peeked`` (``Store.peek``
        of the model, just now) says it still holds. None: it must be derived (or it is an
        error): ask ``status_json`` / ``gate``."""
        from modelreg.textsafe import for_json

        try:
            shown = self._status(model_id, target, peeked)
        except (NotDerived, ModelregError):
            return None
        if sha256 is None:
            entries = ",".join(s.json for s in shown)
            return 200, '{"schema_version":1,"entries":[' + entries + '],"gate":null}'
        if target is None or not _SHA256_RE.fullmatch(sha256.strip()):
            return None
        status = StatusOutput.model_construct(entries=[s.entry for s in shown], gate=None)
        gate = _gate_of(status, model_id, target, sha256.strip().lower())
        return (200 if gate.passed else 409), for_json(gate.model_dump_json())

    def gated_status(self, model_id: str, target: str, sha256: str) -> StatusOutput:
        """``status`` of the model on the target with the deploy gate's answer (``.gate``)
        decided from that same read: what is printed is what was judged."""
        if not _SHA256_RE.fullmatch(sha256.strip()):
            raise InvalidInput(
                f"`sha256` {sha256[:80]!r} is not a sha256", "give 64 hex characters"
            )
        status = self.status(model_id, target)
        status.gate = _gate_of(status, model_id, target, sha256.strip().lower())
        return status


class _Shown:
    """A status entry as the API returns it and as JSON, made once per verdict."""

    __slots__ = ("_json", "entry")

    def __init__(self, entry: StatusEntry) -> None:
        self.entry = entry
        self._json: str | None = None

    @property
    def overdue(self) -> bool:
        return self.entry.approval is not None and self.entry.approval.retest_overdue

    @property
    def json(self) -> str:
        if self._json is None:
            from modelreg.textsafe import for_json

            self._json = for_json(self.entry.model_dump_json())
        return self._json


def retest_overdue(promotion: Promotion, today: date) -> bool:
    """Whether the day the production record must be tested again by has passed."""
    due = promotion.retest_by
    return due is not None and due.astimezone(UTC).date() < today


def approval_out(promotion: Promotion, today: date) -> ApprovalOut | None:
    """The approval kept with a promotion (None: it was given none), judged on ``today``."""
    p = promotion
    if p.owner is None and not p.limitations and p.retest_by is None:
        return None
    return ApprovalOut(
        owner=p.owner,
        limitations=list(p.limitations),
        retest_by=p.retest_by.astimezone(UTC).date() if p.retest_by is not None else None,
        retest_overdue=retest_overdue(p, today),
    )


def _status_entry(
    entry: Judged,
    targets: dict[str, Target],
    fetch: tuple[str | None, str | None],
    today: date,
) -> StatusEntry:
    p = entry.promotion
    return StatusEntry(
        model_id=p.model_id,
        target=p.target,
        record=record_out(entry.record, entry.files, entry.state),
        deployability=deployability_out(entry.verdict),
        promotion=promotion_out(p),
        unit=deployed_unit(targets[p.target]) if p.target in targets else {},
        locations=entry.locations,
        fetch_from=fetch[0],
        unfetchable=fetch[1],
        approval=approval_out(p, today),
    )


class NotDerived(Exception):
    """An answer ``derived_read`` cannot give from what is derived (read it in full)."""
