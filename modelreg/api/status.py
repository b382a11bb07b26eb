"""What runs where: deployability, status, the matrix and the deploy gate — read from the
verdicts the registry stores (``registry.verdicts``), the same for every reader."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date
from typing import TYPE_CHECKING

from modelreg import rules
from modelreg.api.core import _SHA256_RE, Core
from modelreg.api.views import (
    _gate_of,
    deployability_out,
    promotion_out,
    record_out,
    targets_output,
)
from modelreg.deployed_unit import deployed_unit
from modelreg.errors import InvalidInput, TargetNotFound
from modelreg.judging import fetchability
from modelreg.rules import Deployability
from modelreg.schemas.output import (
    ApprovalOut,
    GateOutput,
    MatrixCell,
    MatrixOutput,
    StatusEntry,
    StatusOutput,
)

if TYPE_CHECKING:
    from modelreg.registry.reads import Reads
    from modelreg.registry.rows import Promotion
    from modelreg.targets import Target


class Status(Core):
    """What runs where: deployability, status, the matrix and the deploy gate."""

    def deployability(self, ref: str, target: str) -> Deployability:
        """Is the record deployable on ``target`` right now (with structured reasons)?"""
        with self.store.read() as reads:
            record = reads.record(ref)
            return reads.verdict(record.id, target)

    def only_production_target(self, model_id: str) -> str:
        """The one target ``model_id`` is production on: what a command's target is when none
        is given (bad input when it is production on none or on several)."""
        with self.store.read() as reads:
            targets = sorted({p.target for p in reads.productions(model_id, None)})
        if len(targets) == 1:
            return targets[0]
        self._require_model(model_id)
        if not targets:
            raise InvalidInput(f"{model_id} is production on no target: give `target`")
        raise InvalidInput(
            f"{model_id} is production on {len(targets)} targets ({', '.join(targets)}): "
            "give `target`"
        )

    def _status(
        self, model_id: str | None, target: str | None
    ) -> tuple[list[StatusEntry], dict[str, Target]]:
        # One read transaction for all of it: one consistent view. Errors are raised after it
        # ends (the "did you mean" of an unknown model reads on its own).
        with self.store.read() as reads:
            targets = self.targets_with(reads.target_specs())
            productions = reads.productions(model_id, target)
            entries = production_entries(reads, productions, targets)
            known = model_id is None or bool(productions) or reads.has_model(model_id)
        if model_id is not None and not known:
            self._require_model(model_id)
        if target is not None and target not in targets:
            raise TargetNotFound(target, sorted(targets))
        return entries, targets

    def status(self, model_id: str | None = None, target: str | None = None) -> StatusOutput:
        """What runs where: for every (model, target) with a production record, that record,
        its files, and whether it is deployable there now (stale / held / failing)."""
        entries, _ = self._status(model_id, target)
        return StatusOutput.model_construct(entries=entries, gate=None)

    def status_json(self, model_id: str | None = None, target: str | None = None) -> str:
        """``status`` as the JSON the HTTP API serves (``textsafe.for_json`` of its compact
        dump)."""
        from modelreg.textsafe import for_json

        return for_json(self.status(model_id, target).model_dump_json())

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
            targets = self.targets_with(reads.target_specs())
            productions = reads.productions_of(models)
            verdicts = reads.verdicts([(p.record_id, p.target) for p in productions])
        cells = []
        for p in productions:
            verdict = deployability_out(verdicts[(p.record_id, p.target)])
            cells.append(
                MatrixCell(
                    model_id=p.model_id,
                    target=p.target,
                    record_id=p.record_id,
                    now=verdict.now,
                    reasons=verdict.reasons,
                    since=p.at,
                    actor=p.actor,
                    action="rollback" if p.action == "rollback" else "promote",
                    why=p.why,
                )
            )
        return MatrixOutput(
            targets=targets_output(targets).targets,
            models=models,
            total_models=total,
            offset=offset,
            limit=limit,
            cells=cells,
        )

    def gate(
        self, model_id: str, target: str, sha256: str, *, accept_forced: bool = False
    ) -> GateOutput:
        """The deploy gate: passes only when ``sha256`` is a file of the current production
        record of ``model_id`` on ``target``, that record is deployable there now, and a
        recorded location holds its verified bytes — or, where forced entries are accepted
        (``accept_forced``, or the target's ``accept_forced``), the record is production by
        a break-glass rollback and only stale (``forced`` says so)."""
        gated = self.gated_status(model_id, target, sha256, accept_forced=accept_forced)
        assert gated.gate is not None
        return gated.gate

    def gated_status(
        self, model_id: str, target: str, sha256: str, *, accept_forced: bool = False
    ) -> StatusOutput:
        """``status`` of the model on the target with the deploy gate's answer (``.gate``)
        decided from that same read: what is printed is what was judged."""
        status, (gate,) = self._gated(model_id, target, [sha256], accept_forced)
        status.gate = gate
        return status

    def gates(
        self, model_id: str, target: str, sha256s: Sequence[str], *, accept_forced: bool = False
    ) -> list[GateOutput]:
        """The deploy gate for each of ``sha256s`` (a record's files), from one read."""
        return self._gated(model_id, target, sha256s, accept_forced)[1]

    def _gated(
        self, model_id: str, target: str, sha256s: Sequence[str], accept_forced: bool
    ) -> tuple[StatusOutput, list[GateOutput]]:
        for sha256 in sha256s:
            if not _SHA256_RE.fullmatch(sha256.strip()):
                raise InvalidInput(
                    f"`sha256` {sha256[:80]!r} is not a sha256", "give 64 hex characters"
                )
        entries, targets = self._status(model_id, target)
        status = StatusOutput.model_construct(entries=entries, gate=None)
        accepted = accept_forced or (targets[target].accept_forced if target in targets else False)
        return status, [
            _gate_of(status, model_id, target, s.strip().lower(), accepted) for s in sha256s
        ]


def production_entries(
    reads: Reads, productions: Sequence[Promotion], targets: dict[str, Target]
) -> list[StatusEntry]:
    """Status entries of these production pointers, read in ``reads``: each record, its
    stored verdict, where its bytes are verified to be, and its approval."""
    from modelreg import clock

    ids = sorted({p.record_id for p in productions})
    records = reads.records_by_id(ids, with_manifests=False)
    files = reads.files(ids)
    states = reads.states(ids)
    verdicts = reads.verdicts([(p.record_id, p.target) for p in productions])
    locations = reads.location_states(ids)
    today = clock.utcnow().date()
    from modelreg.rules import ACTIVE

    entries = []
    for p in productions:
        record = records[p.record_id]
        fetch_from, unfetchable = fetchability(locations[record.id])
        verdict = verdicts[(p.record_id, p.target)]
        entries.append(
            StatusEntry(
                model_id=p.model_id,
                target=p.target,
                record=record_out(record, files[record.id], states.get(record.id, ACTIVE)),
                deployability=deployability_out(verdict),
                promotion=promotion_out(p),
                forced=list(p.forced) if rules.forced_marked(p.forced, p.at, verdict) else [],
                unit=deployed_unit(targets[p.target]) if p.target in targets else {},
                locations=[loc.url for loc in locations[record.id]],
                fetch_from=fetch_from,
                unfetchable=unfetchable,
                approval=approval_out(p, today),
            )
        )
    return entries


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
