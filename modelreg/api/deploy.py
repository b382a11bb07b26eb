"""Deploy decisions: promote, rollback (plan and apply), hold, release, retire."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from modelreg import config, rules
from modelreg.api.core import Core, _check_why
from modelreg.api.judging import Judge
from modelreg.api.views import deployability_out, promotion_out, record_out
from modelreg.deployed_unit import deployed_unit
from modelreg.errors import (
    InvalidInput,
    NoRollbackCandidate,
    NotDeployable,
)
from modelreg.rules import (
    Deployability,
    RecordStateKind,
)
from modelreg.schemas.output import (
    DeployedOut,
    PromoteOutput,
    RejectedCandidate,
    RollbackOutput,
    StateChangeOutput,
)
from modelreg.schemas.verification import generations

if TYPE_CHECKING:
    # The store (SQLAlchemy) loads when a registry is opened, not when modelreg.api is
    # imported: `modelreg inspect` needs no database.
    from modelreg.record import Record
    from modelreg.registry.store import (
        Promotion,
        Reads,
    )
    from modelreg.targets import Target


@dataclass(frozen=True)
class _Plan:
    """A rollback decision (``rules.decide_rollback``), with the records and readiness it was
    decided from — worked out over one consistent view of the model."""

    history: list[Promotion]
    decision: rules.RollbackDecision
    current: Record | None
    current_ready: rules.Readiness | None
    candidate: Record | None
    candidate_ready: rules.Readiness | None


def _plan_message(model_id: str, target: str, plan: _Plan) -> str:
    """The plan in one sentence (what an apply of it does)."""
    if plan.decision.action is rules.RollbackAction.NOTHING_TO_DO:
        return _already_rolled_back(model_id, target, plan.history[-1])
    assert plan.candidate is not None and plan.current is not None
    return (
        f"rollback would make {plan.candidate.id} production for {model_id} on {target} "
        f"instead of {plan.current.id}, and hold {plan.current.id}"
    )


def _already_rolled_back(model_id: str, target: str, last: Promotion) -> str:
    return (
        f"already rolled back: {last.record_id} is production for {model_id} on {target} since "
        f"{last.at:%Y-%m-%d %H:%M} UTC (rolled back from {last.previous_record_id} by "
        f"{last.actor}: {last.why}) and deployable; nothing changed. To go further back: "
        f"modelreg rollback {model_id} --target {target} --to RECORD --apply --why '...'"
    )


class Deploy(Core):
    """Deploy decisions: promote, rollback (plan and apply), hold, release, retire."""

    def promote(
        self, ref: str, target: str, *, why: str | None = None, actor: str | None = None
    ) -> PromoteOutput:
        """Make the record production for its model on ``target``. Refused (``NotDeployable``)
        unless it is deployable there now — decided inside the transaction that moves the
        pointer, with the target's current runtime fingerprint."""
        _check_why(why)
        record = self.get(ref)
        self.target(target)
        with self.store.locked(record.model_id) as tx:
            judge = self.judge(tx)
            verdict = judge.verdict(
                record, target, tx.state(record.id), tx.latest_runs([record.id], target)[record.id]
            )
            if not verdict.deployable:
                raise NotDeployable(record.id, target, verdict.reasons)
            current = tx.production(record.model_id, target)
            if current is not None and current.record_id == record.id:
                return PromoteOutput(
                    changed=False,
                    message=f"{record.id} is already production for {record.model_id} on "
                    f"{target} (since {current.at:%Y-%m-%d %H:%M} UTC); nothing changed",
                    promotion=promotion_out(current),
                )
            warning = None
            if current is not None:
                previous = tx.records_by_id([current.record_id])[current.record_id]
                warning = rules.attribution_warning(previous.manifest, record.manifest)
            promotion = tx.set_production(record, target, "promote", actor or config.actor(), why)
        return PromoteOutput(
            changed=True,
            message=f"{record.id} is now production for {record.model_id} on {target} "
            f"(was {promotion.previous_record_id or 'none'})",
            promotion=promotion_out(promotion),
            warning=warning,
        )

    def _readiness(self, view: Reads, judge: Judge, record: Record, target: str) -> rules.Readiness:
        """Can ``record`` take production on ``target`` now: deployable there, and its bytes
        fetchable from a recorded location (checked by size; fetch checks every sha256)."""
        from modelreg.locations import fetchable_copy

        verdict = judge.verdict(
            record, target, view.state(record.id), view.latest_runs([record.id], target)[record.id]
        )
        files = view.files([record.id])[record.id]
        urls = [loc.url for loc in view.locations([record.id])[record.id]]
        fetch_from, why = fetchable_copy([(f.path, f.bytes) for f in files], urls)
        return rules.Readiness(verdict, fetch_from, why)

    def _plan(
        self,
        view: Reads,
        model_id: str,
        target: Target,
        judge: Judge,
        to: str | None = None,
    ) -> _Plan:
        """The rollback decision from one read (a snapshot for the plan, the locked
        transaction for the apply): the same function, so the apply does what the plan said."""
        history = view.promotions(model_id, target.name)
        steps = [p.step() for p in history]
        records = view.records_by_id({p.record_id for p in history} | ({to} if to else set()))
        ready: dict[str, rules.Readiness] = {}

        def readiness(record_id: str) -> rules.Readiness:
            if record_id not in ready:
                ready[record_id] = self._readiness(view, judge, records[record_id], target.name)
            return ready[record_id]

        decision = rules.decide_rollback(steps, readiness, view.state, to=to)
        current = records[history[-1].record_id] if history else None
        candidate = records[decision.candidate] if decision.candidate else None
        return _Plan(
            history,
            decision,
            current,
            readiness(current.id) if current else None,
            candidate,
            readiness(candidate.id) if candidate else None,
        )

    def _check_to(self, view: Reads, model_id: str, target: str, to: str) -> str:
        """``rollback --to`` (a record id, resolved before the read): a record of this model,
        not retired, not production already, and production here before (bad input
        otherwise: exit 2, nothing changed)."""
        record = view.records_by_id([to])[to]
        if record.model_id != model_id:
            raise InvalidInput(
                f"`to` {to}: a record of {record.model_id}, not of {model_id}",
                f"modelreg list --model {model_id}",
            )
        if view.state(to).state is RecordStateKind.RETIRED:
            raise InvalidInput(f"`to` {to}: retired; a retired record never takes production")
        history = view.promotions(model_id, target)
        if history and history[-1].record_id == to and history[-1].action != "rollback":
            # (Production put there by a rollback: the same --to again is a no-op, decided by
            # the rules like any repeat.)
            raise InvalidInput(f"`to` {to}: already production for {model_id} on {target}")
        if to not in {p.record_id for p in history}:
            raise InvalidInput(
                f"`to` {to}: never production for {model_id} on {target}",
                f"to make it production: modelreg promote {to} --target {target}",
            )
        return to

    def _deployed(
        self,
        reads: Reads,
        judge: Judge,
        record: Record,
        verdict: Deployability,
        fetch: tuple[str | None, str | None] = (None, None),
    ) -> DeployedOut:
        """A record as a rollback shows it, read through ``reads`` (one snapshot for a plan)."""
        from modelreg.fingerprint import summary

        the_target = judge.targets.get(verdict.target)
        # The run that decides the verdict (none: no run counts there), never merely the newest.
        run = reads.run_checks(verdict.run_id) if verdict.run_id else []
        answered = [str(g.get("output")) for v in run for g in generations(v.result.evidence)]
        runtime = dict(run[0].fingerprint) if run else {}
        unchanged = (
            None
            if not run
            else not any(r.code is rules.ReasonCode.STALE_RUNTIME for r in verdict.reasons)
        )
        return DeployedOut(
            record=record_out(record, reads.files([record.id])[record.id], reads.state(record.id)),
            deployability=deployability_out(verdict),
            verified_on_host=run[0].host if run else None,
            runtime=runtime,
            runtime_summary=summary(runtime, unchanged),
            answered=answered,
            unit=deployed_unit(the_target) if the_target is not None else {},
            locations=[loc.url for loc in reads.locations([record.id])[record.id]],
            fetch_from=fetch[0],
            unfetchable=fetch[1] if fetch[0] is None else None,
        )

    def _rollback_output(
        self, model_id: str, target: str, plan: _Plan, message: str, applied: Promotion | None
    ) -> RollbackOutput:
        """What a plan or an apply shows, read in one snapshot (after an apply: its outcome)."""
        decision = plan.decision
        production = candidate = rolled_back_from = None
        with self.store.read() as reads:
            judge = self.judge(reads)

            def shown(record: Record, ready: rules.Readiness | None) -> DeployedOut:
                if ready is None or applied is not None:
                    ready = self._readiness(reads, judge, record, target)  # after the move
                fetch = (ready.fetch_from, ready.unfetchable)
                return self._deployed(reads, judge, record, ready.verdict, fetch)

            if applied is not None and plan.candidate is not None and plan.current is not None:
                production = shown(plan.candidate, None)
                rolled_back_from = shown(plan.current, None)
            else:
                if plan.current is not None:
                    production = shown(plan.current, plan.current_ready)
                if plan.candidate is not None:
                    candidate = shown(plan.candidate, plan.candidate_ready)
        last = plan.history[-1] if plan.history else None
        return RollbackOutput(
            model_id=model_id,
            target=target,
            decision=decision.action.value,
            production=production,
            candidate=candidate,
            rolled_back_from=rolled_back_from,
            applied=promotion_out(applied) if applied else None,
            # Read in the same snapshot as what is shown (not a session of its own).
            held=rolled_back_from.record.record_id
            if rolled_back_from is not None and rolled_back_from.record.state.state == "held"
            else None,
            already_rolled_back=promotion_out(last)
            if last is not None and decision.action is rules.RollbackAction.NOTHING_TO_DO
            else None,
            rejected=[
                RejectedCandidate(record_id=r, why=w, hint=h) for r, w, h in decision.rejected
            ],
            message=message,
        )

    def _no_candidate(self, model_id: str, target: str, plan: _Plan) -> NoRollbackCandidate:
        decision = plan.decision
        if plan.current is None:
            return NoRollbackCandidate(
                model_id,
                target,
                "nothing was ever production there",
                f"promote a verified record: modelreg promote RECORD --target {target}",
            )
        current = f"production is {plan.current.id}"
        if decision.why:  # a refusal of its own (--to), not "no earlier record can"
            hint = next((h for _, _, h in decision.rejected if h), None)
            return NoRollbackCandidate(model_id, target, f"{current}; {decision.why}", hint)
        if not decision.rejected:
            return NoRollbackCandidate(
                model_id,
                target,
                f"{current}, and nothing was production there before it",
                "a candidate is a record that was production on this target earlier and is "
                "deployable now",
            )
        rejected = "; ".join(f"{r} ({why})" for r, why, _ in decision.rejected)
        hint = next((h for _, _, h in decision.rejected if h), None)
        return NoRollbackCandidate(
            model_id,
            target,
            f"{current}; earlier production records cannot take production now: {rejected}",
            f"to make one a candidate: {hint}" if hint else None,
        )

    def rollback_plan(self, model_id: str, target: str, *, to: str | None = None) -> RollbackOutput:
        """What ``rollback`` would do now (``rules.decide_rollback``): the candidate — the
        newest record that was production on ``target`` before the current one, is deployable
        now, has a fetchable copy and was never rolled back from — or ``to``; or nothing to do
        when production was put there by a rollback and is deployable. Raises
        ``NoRollbackCandidate`` when there is none."""
        self._require_model(model_id)
        the_target = self.target(target)
        with self.store.read() as reads:
            to = reads.record(to).id if to is not None else None
            judge = self.judge(reads)
            if to is not None:
                self._check_to(reads, model_id, target, to)
            plan = self._plan(reads, model_id, the_target, judge, to)
        if plan.decision.action is rules.RollbackAction.NO_CANDIDATE:
            raise self._no_candidate(model_id, target, plan)
        return self._rollback_output(
            model_id, target, plan, _plan_message(model_id, target, plan), None
        )

    def rollback(
        self,
        model_id: str,
        target: str,
        *,
        why: str,
        to: str | None = None,
        actor: str | None = None,
    ) -> RollbackOutput:
        """Apply the rollback decision in one locked transaction — the same decision
        ``rollback_plan`` shows, read and decided inside the lock: the candidate becomes
        production and the record rolled back from is put on hold (``release`` makes it
        usable again). When production already is a rollback's outcome and deployable,
        nothing changes (the output says so): the same command twice is safe."""
        _check_why(why, required="a rollback")
        self._require_model(model_id)
        the_target = self.target(target)
        actor = actor or config.actor()
        to = self.get(to).id if to is not None else None  # resolved before the lock
        applied = None
        with self.store.locked(model_id) as tx:
            judge = self.judge(tx)
            if to is not None:
                self._check_to(tx, model_id, target, to)
            plan = self._plan(tx, model_id, the_target, judge, to)
            action = plan.decision.action
            if action is rules.RollbackAction.NO_CANDIDATE:
                raise self._no_candidate(model_id, target, plan)
            if action is rules.RollbackAction.ROLLBACK:
                assert plan.candidate is not None and plan.current is not None
                applied = tx.set_production(plan.candidate, target, "rollback", actor, why)
                if tx.state(plan.current.id).state is RecordStateKind.ACTIVE:
                    tx.set_state(
                        plan.current,
                        RecordStateKind.HELD,
                        f"rolled back from on {target} (to {plan.candidate.id}): {why}",
                        actor,
                        {"rolled_back_to": plan.candidate.id, "target": target},
                    )
        if applied is None:
            message = _plan_message(model_id, target, plan)
        else:
            assert plan.candidate is not None and plan.current is not None
            message = (
                f"rolled back: {plan.candidate.id} is production for {model_id} on {target}; "
                f"{plan.current.id} is on hold (release it with: modelreg release "
                f"{plan.current.id})"
            )
        return self._rollback_output(model_id, target, plan, message, applied)

    def _change_state(
        self,
        ref: str,
        new: RecordStateKind,
        why: str | None,
        actor: str | None,
        detail: dict[str, Any] | None = None,
    ) -> StateChangeOutput:
        record = self.get(ref)
        action = {
            RecordStateKind.HELD: "hold",
            RecordStateKind.ACTIVE: "release",
            RecordStateKind.RETIRED: "retire",
        }[new]
        _check_why(why, required=action if new is not RecordStateKind.ACTIVE else None)
        with self.store.locked(record.model_id) as tx:
            current = tx.state(record.id)
            if current.state is RecordStateKind.RETIRED:
                raise InvalidInput(
                    f"record {record.id} is retired; retired records stay retired",
                    "add the artifact again under a new record if it must come back",
                )
            if new is RecordStateKind.ACTIVE and current.state is not RecordStateKind.HELD:
                raise InvalidInput(f"record {record.id} is not on hold (state: active)")
            tx.set_state(record, new, why, actor or config.actor(), detail)
            production_on = sorted(
                p.target for p in tx.productions(record.model_id) if p.record_id == record.id
            )
            out = record_out(record, tx.files([record.id])[record.id], tx.state(record.id))
        message = {
            "hold": f"{record.id} is on hold: {why}",
            "release": f"{record.id} released",
            "retire": f"{record.id} retired: {why}",
        }[action]
        if production_on and new is not RecordStateKind.ACTIVE:
            message += (
                f". WARNING: {record.id} is production for {record.model_id} on "
                f"{', '.join(production_on)} and is no longer deployable there — production is "
                f"still {record.id}; roll back with: modelreg rollback {record.model_id} "
                f"--target {production_on[0]} --apply --why '...'"
            )
        if new is RecordStateKind.ACTIVE and record.hold_reasons:
            message += ". Still on hold for facts it does not know: " + "; ".join(
                record.hold_reasons
            )
        return StateChangeOutput(
            record=out,
            action=action,
            changed=True,
            production_on=production_on,
            message=message,
        )

    def hold(self, ref: str, why: str, *, actor: str | None = None) -> StateChangeOutput:
        """Put a record on hold: not deployable, not promotable, until released."""
        return self._change_state(ref, RecordStateKind.HELD, why, actor)

    def release(
        self, ref: str, why: str | None = None, *, actor: str | None = None
    ) -> StateChangeOutput:
        """Release a held record (facts missing from its manifest keep it on hold regardless)."""
        return self._change_state(ref, RecordStateKind.ACTIVE, why, actor)

    def retire(self, ref: str, why: str, *, actor: str | None = None) -> StateChangeOutput:
        """Retire a record: kept with its evidence, never deployable or a rollback candidate."""
        return self._change_state(ref, RecordStateKind.RETIRED, why, actor)
