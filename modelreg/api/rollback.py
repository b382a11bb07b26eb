"""Rollback: the one rollback decision (``rules.decide_rollback``), read for a plan and inside
the model's lock for the apply, the same function on the same kind of read; and its drill."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from modelreg import config, reasons, rules
from modelreg.api.core import Core, _check_why
from modelreg.api.views import deployability_out, promotion_out, record_out
from modelreg.deployed_unit import deployed_unit
from modelreg.errors import (
    InvalidInput,
    NoRollbackCandidate,
)
from modelreg.judging import fetchability
from modelreg.rules import (
    Deployability,
    RecordStateKind,
)
from modelreg.schemas.output import (
    DeployedOut,
    DrillOut,
    RejectedCandidate,
    RollbackOutput,
    StepOut,
    steps_out,
)
from modelreg.schemas.verification import generations
from modelreg.steps import Step

if TYPE_CHECKING:
    from pathlib import Path

    # The store (SQLAlchemy) loads when a registry is opened, not when modelreg.api is
    # imported: `modelreg inspect` needs no database.
    from modelreg.progress import ProgressCallback
    from modelreg.record import Record
    from modelreg.registry.reads import Reads
    from modelreg.registry.rows import Promotion
    from modelreg.registry.store import Store
    from modelreg.targets import Target


from modelreg.api.drill import Drill, _drill_event, incident_cases
from modelreg.api.rollback_plan import _named, _Plan, _plan_message


def _check_force(force: bool, to: str | None) -> None:
    if force and to is None:
        raise InvalidInput(
            "a break-glass rollback (force) names its record: give `to`",
            "a record that was production there before, e.g. its handle MODEL@v2",
        )


class Rollback(Core):
    """The rollback plan, its drill and its apply. Collaborator: ``drill`` (runs a drill of a
    plan through verify)."""

    def __init__(self, store: Store, url: str, *, drill: Drill) -> None:
        super().__init__(store, url)
        self._drill = drill

    def _readiness(self, view: Reads, record: Record, target: str) -> rules.Readiness:
        """Can ``record`` take production on ``target`` now: deployable there, and its bytes
        at a recorded location whose newest check verified every sha256 (a recorded fact:
        nothing is probed, least of all inside a lock)."""
        verdict = view.verdict(record.id, target)
        fetch_from, why = fetchability(view.location_states([record.id])[record.id])
        return rules.Readiness(verdict, fetch_from, why)

    def _plan(
        self,
        view: Reads,
        model_id: str,
        target: Target,
        to: str | None = None,
        force: bool = False,
    ) -> _Plan:
        """The rollback decision from one read (a snapshot for the plan, the locked
        transaction for the apply): the same function, so the apply does what the plan said."""
        history = view.promotions(model_id, target.name)
        steps = [p.step() for p in history]
        records = view.records_by_id({p.record_id for p in history} | ({to} if to else set()))
        ready: dict[str, rules.Readiness] = {}

        def readiness(record_id: str) -> rules.Readiness:
            if record_id not in ready:
                ready[record_id] = self._readiness(view, records[record_id], target.name)
            return ready[record_id]

        decision = rules.decide_rollback(steps, readiness, view.state, to=to, force=force)
        current = records[history[-1].record_id] if history else None
        candidate = records[decision.candidate] if decision.candidate else None
        return _Plan(
            history,
            decision,
            current,
            readiness(current.id) if current else None,
            candidate,
            readiness(candidate.id) if candidate else None,
            named=to is not None,
        )

    def _check_to(self, view: Reads, model_id: str, target: str, to: str) -> str:
        """``rollback --to`` (a record id, resolved before the read): a record of this model,
        not retired, not production already, and production here before (bad input
        otherwise: exit 2, nothing changed)."""
        record = view.records_by_id([to])[to]
        if record.model_id != model_id:
            raise InvalidInput(
                f"`to` {to}: a record of {record.model_id}, not of {model_id}",
                step=Step("records", model=model_id),
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
                step=Step("promote", "to make it production", ref=to, target=target),
            )
        return to

    def _deployed(
        self,
        reads: Reads,
        targets: dict[str, Target],
        record: Record,
        verdict: Deployability,
        fetch: tuple[str | None, str | None] = (None, None),
    ) -> DeployedOut:
        """A record as a rollback shows it, read through ``reads`` (one snapshot for a plan)."""
        from modelreg.fingerprint import summary

        the_target = targets.get(verdict.target)
        # The run that decides the verdict (none: no run counts there), never merely the newest.
        run = reads.run_checks(verdict.run_id) if verdict.run_id else []
        answered = [str(g.get("output")) for v in run for g in generations(v.result.evidence)]
        runtime = dict(run[0].fingerprint) if run else {}
        unchanged = (
            None
            if not run
            else not any(r.code is reasons.ReasonCode.STALE_RUNTIME for r in verdict.reasons)
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
        self,
        model_id: str,
        target: str,
        plan: _Plan,
        message: str,
        applied: Promotion | None,
        drill: DrillOut | None = None,
        steps: Sequence[Step] = (),
    ) -> RollbackOutput:
        """What a plan or an apply shows, read in one snapshot (after an apply: its outcome)."""
        decision = plan.decision
        production = candidate = rolled_back_from = None
        with self.store.read() as reads:
            targets = self.targets_with(reads.target_specs())

            def shown(record: Record, ready: rules.Readiness | None) -> DeployedOut:
                if ready is None or applied is not None:
                    ready = self._readiness(reads, record, target)  # after the move
                fetch = (ready.fetch_from, ready.unfetchable)
                return self._deployed(reads, targets, record, ready.verdict, fetch)

            earlier = self._earlier(
                reads,
                model_id,
                target,
                [(r, w, h) for r, w, h in decision.rejected]
                if decision.action is not rules.RollbackAction.NOTHING_TO_DO
                else [
                    (r, None, None)
                    for r in rules.rollback_candidates([p.step() for p in plan.history])
                ],
            )
            if applied is not None and plan.candidate is not None and plan.current is not None:
                production = shown(plan.candidate, None)
                rolled_back_from = shown(plan.current, None)
            else:
                if plan.current is not None:
                    production = shown(plan.current, plan.current_ready)
                if plan.candidate is not None:
                    candidate = shown(plan.candidate, plan.candidate_ready)
        last = plan.history[-1] if plan.history else None
        nothing_to_do = decision.action is rules.RollbackAction.NOTHING_TO_DO
        if nothing_to_do and not steps:
            usable = next((e.next for e in earlier if e.usable and e.next), None)
            steps = [usable.step()] if usable else []
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
            rejected=[] if nothing_to_do else earlier,
            earlier=earlier if nothing_to_do else [],
            forced=list(decision.forced),
            named=plan.named,
            drill=drill,
            message=message,
            next_steps=steps_out(steps),
        )

    def _earlier(
        self,
        reads: Reads,
        model_id: str,
        target: str,
        rows: Sequence[tuple[str, str | None, Step | None]],
    ) -> list[RejectedCandidate]:
        """Earlier production records as a rollback shows them: each one's handle, whether
        ``to`` can take it now (or why not, and what would fix it) and, when only staleness
        keeps it out, the break-glass command."""
        records = reads.records_by_id([r for r, _, _ in rows])
        shown = []
        for record_id, why, hint in rows:
            record = records[record_id]
            ready = self._readiness(reads, record, target)
            to = record.handle or record.id
            rollback = Step("rollback", model_id=model_id, target=target, to=to, why=None)
            usable = ready.ready and why is None
            forceable = not ready.ready and rules.force_refusal(ready) is None
            shown.append(
                RejectedCandidate(
                    record_id=record_id,
                    handle=record.handle,
                    usable=usable,
                    why=why or ("deployable, with a verified copy" if usable else ready.why_not()),
                    next=StepOut.of(
                        Step(rollback.action, "to roll back to it", **rollback.args)
                        if usable
                        else hint or (rules.readiness_hint(ready) if not ready.ready else None)
                    ),
                    force=StepOut.of(
                        Step(rollback.action, "break glass", **rollback.args, force=True)
                        if forceable
                        else None
                    ),
                )
            )
        return shown

    def _no_candidate(self, model_id: str, target: str, plan: _Plan) -> NoRollbackCandidate:
        decision = plan.decision
        if plan.current is None:
            return NoRollbackCandidate(
                model_id,
                target,
                "nothing was ever production there",
                step=Step("promote", "promote a verified record", ref=None, target=target),
            )
        current = f"production is {plan.current.id}"
        if decision.why:  # a refusal of its own (--to), not "no earlier record can"
            step = next((h for _, _, h in decision.rejected if h), None)
            return NoRollbackCandidate(model_id, target, f"{current}; {decision.why}", step=step)
        if not decision.rejected:
            return NoRollbackCandidate(
                model_id,
                target,
                f"{current}, and nothing was production there before it",
                "a candidate is a record that was production on this target earlier and is "
                "deployable now",
            )
        rejected = "; ".join(f"{r} ({why})" for r, why, _ in decision.rejected)
        step = next((h for _, _, h in decision.rejected if h), None)
        return NoRollbackCandidate(
            model_id,
            target,
            f"{current}; earlier production records cannot take production now: {rejected}",
            step=Step(step.action, "to make one a candidate", **step.args) if step else None,
        )

    def rollback_plan(
        self, model_id: str, target: str, *, to: str | None = None, force: bool = False
    ) -> RollbackOutput:
        """What ``rollback`` would do now (``rules.decide_rollback``): the candidate — the
        newest record that was production on ``target`` before the current one, is deployable
        now, has a fetchable copy and was never rolled back from — or ``to``; or nothing to do
        when production was put there by a rollback and is deployable; or, when no record can
        take production, ``decision`` "no_candidate" with the reason as ``message`` and what
        would make one a candidate as ``next_steps`` (``rollback`` raises ``NoRollbackCandidate``
        then: there is nothing to apply). ``force``: the plan of a break-glass rollback to
        ``to`` (``rollback``'s ``force``)."""
        _check_force(force, to)
        _, plan = self._read_plan(model_id, target, to, refuse=False, force=force)
        if plan.decision.action is rules.RollbackAction.NO_CANDIDATE:
            refusal = self._no_candidate(model_id, target, plan)
            return self._rollback_output(
                model_id,
                target,
                plan,
                refusal.message,
                None,
                steps=[refusal.step] if refusal.step else [],
            )
        return self._rollback_output(
            model_id, target, plan, _plan_message(model_id, target, plan), None
        )

    def _read_plan(
        self,
        model_id: str,
        target: str,
        to: str | None,
        *,
        refuse: bool = True,
        force: bool = False,
    ) -> tuple[Target, _Plan]:
        """The rollback decision from one snapshot (``--to`` resolved and checked in it);
        ``NoRollbackCandidate`` when there is none (``refuse``; else the plan says so)."""
        self._require_model(model_id)
        the_target = self.target(target)
        with self.store.read() as reads:
            resolved = reads.record(to).id if to is not None else None
            if resolved is not None:
                self._check_to(reads, model_id, target, resolved)
            plan = self._plan(reads, model_id, the_target, resolved, force)
        if refuse and plan.decision.action is rules.RollbackAction.NO_CANDIDATE:
            raise self._no_candidate(model_id, target, plan)
        return the_target, plan

    def drill_rollback(
        self,
        model_id: str,
        target: str,
        *,
        to: str | None = None,
        actor: str | None = None,
        progress: ProgressCallback | None = None,
        prompts: Sequence[str] = (),
        expect: Sequence[str] = (),
        path: Path | None = None,
    ) -> RollbackOutput:
        """The rollback plan, drilled: the failing cases of the record rolled away from (its
        newest counting run on ``target`` that failed or had failing cases), the incident's
        own input (``prompts``, each with the text its answer must contain in ``expect``) and
        the suite in force are run against the candidate on this host, through verify and the
        real runtime; relative gates are judged against the candidate's own counting run. The
        candidate's bytes: ``path``, else its recorded locations (fetched, every sha256
        checked). The drill's run is kept as an exploratory run of the candidate (it decides
        no verdict) and a ``rollback-drill`` event names it; production does not change.
        ``drill.verdict``: safe, fails (``drill.failing_cases``) or could_not_run. Raises
        ``NoRollbackCandidate`` when there is none."""
        incident = incident_cases(prompts, expect)
        actor = actor or config.actor()
        the_target, plan = self._read_plan(model_id, target, to)
        message = _plan_message(model_id, target, plan)
        if plan.decision.action is rules.RollbackAction.NOTHING_TO_DO:
            return self._rollback_output(
                model_id, target, plan, f"{message} (no drill: nothing to roll back)", None
            )
        drill = self._drill.run(
            model_id, the_target, plan, actor, progress, incident=incident, path=path
        )
        with self.store.locked(model_id) as tx:
            _drill_event(tx, actor, drill, None)
        if not drill.passed:
            message += "; the drill says the candidate fails what failed"
        return self._rollback_output(
            model_id, target, plan, f"{drill.message}. {message}", None, drill
        )

    def rollback(
        self,
        model_id: str,
        target: str,
        *,
        why: str,
        to: str | None = None,
        actor: str | None = None,
        drill: bool = False,
        force: bool = False,
        progress: ProgressCallback | None = None,
        prompts: Sequence[str] = (),
        expect: Sequence[str] = (),
        path: Path | None = None,
    ) -> RollbackOutput:
        """Apply the rollback decision in one locked transaction — the same decision
        ``rollback_plan`` shows, read and decided inside the lock: the candidate becomes
        production (with the approval it was last production with) and the record rolled back
        from is put on hold (``release`` makes it usable again). When production already is a
        rollback's outcome and deployable, nothing changes (the output says so): the same
        command twice is safe.

        ``drill``: first drill the rollback (``drill_rollback``; ``progress`` sees its verify);
        a drill that fails switches nothing (``drill.passed`` False, ``applied`` None), one
        that passes is named in the history beside the rollback. The apply then refuses
        (``NoRollbackCandidate``) if the plan decided inside the lock is not the one drilled.

        ``force`` (break glass, with ``to``): ``to`` becomes production even though it is not
        deployable now, when all that keeps it from it is staleness (``rules.force_refusal``:
        never past a hold, a retirement, a failed run or missing bytes). The promotion keeps
        the unmet reasons, its event says so (and goes to the webhooks), status marks the entry
        forced until a counting run of it there, and the deploy gate passes it only where forced
        entries are accepted.

        ``prompts``, ``expect``, ``path``: the drill's (``drill_rollback``); only with it."""
        _check_why(why, required="a rollback")
        _check_force(force, to)
        if not drill and (prompts or expect or path is not None):
            raise InvalidInput("`prompts`, `expect` and a path are for a drill: add drill")
        incident = incident_cases(prompts, expect)
        self._require_model(model_id)
        the_target = self.target(target)
        actor = actor or config.actor()
        to = self.get(to).id if to is not None else None  # resolved before the lock
        drilled = None
        if drill:
            _, planned = self._read_plan(model_id, target, to, force=force)
            if planned.decision.action is rules.RollbackAction.ROLLBACK:
                drilled = self._drill.run(
                    model_id, the_target, planned, actor, progress, incident=incident, path=path
                )
            if drilled is not None and not drilled.passed:
                with self.store.locked(model_id) as tx:
                    _drill_event(tx, actor, drilled, why)
                assert planned.current is not None
                return self._rollback_output(
                    model_id,
                    target,
                    planned,
                    f"rollback refused: {drilled.message}; production stays {planned.current.id}",
                    None,
                    drilled,
                )
        applied = None
        with self.store.locked(model_id) as tx:
            if to is not None:
                self._check_to(tx, model_id, target, to)
            plan = self._plan(tx, model_id, the_target, to, force)
            action = plan.decision.action
            if action is rules.RollbackAction.NO_CANDIDATE:
                raise self._no_candidate(model_id, target, plan)
            if drilled is not None:
                moved = (plan.current.id if plan.current else None) != drilled.from_record
                if action is rules.RollbackAction.ROLLBACK and (
                    moved or plan.decision.candidate != drilled.record_id
                ):
                    raise NoRollbackCandidate(
                        model_id,
                        target,
                        f"the plan changed while the drill of {drilled.record_id} ran (now: "
                        f"{plan.decision.candidate} instead of "
                        f"{plan.current.id if plan.current else 'nothing'}); nothing changed",
                        step=Step(
                            "drill_rollback", "drill again", model_id=model_id, target=target
                        ),
                    )
                _drill_event(tx, actor, drilled, why)
            if action is rules.RollbackAction.ROLLBACK:
                assert plan.candidate is not None and plan.current is not None
                approved = next(
                    (p for p in reversed(plan.history) if p.record_id == plan.candidate.id), None
                )
                applied = tx.set_production(
                    plan.candidate,
                    target,
                    "rollback",
                    actor,
                    why,
                    owner=approved.owner if approved else None,
                    limitations=approved.limitations if approved else (),
                    retest_by=approved.retest_by if approved else None,
                    forced=plan.decision.forced,
                )
                if tx.state(plan.current.id).state is RecordStateKind.ACTIVE:
                    detail = {"rolled_back_to": plan.candidate.id, "target": target}
                    if drilled is not None and drilled.run_id is not None:
                        detail["drill_run"] = drilled.run_id
                    tx.set_state(
                        plan.current,
                        RecordStateKind.HELD,
                        f"rolled back from on {target} (to {plan.candidate.id}): {why}",
                        actor,
                        detail,
                    )
        steps: list[Step] = []
        if applied is None:
            message = _plan_message(model_id, target, plan)
        else:
            assert plan.candidate is not None and plan.current is not None
            message = (
                f"rolled back: {_named(plan.candidate)} is production for {model_id} on "
                f"{target}; {_named(plan.current)} is on hold (release it if it is good)"
            )
            if plan.decision.forced:
                message = (
                    f"FORCED {message}. It is not deployable ({'; '.join(plan.decision.forced)}):"
                    " status marks it forced until a counting run of it there, and the deploy "
                    "gate passes it only where forced entries are accepted (the gate's "
                    "`accept_forced`, or the target's)"
                )
                steps.append(
                    Step("verify", "to clear the mark", ref=plan.candidate.id, target=target)
                )
            steps.append(Step("release", ref=plan.current.id, why=None))
        if drilled is not None:
            message = f"{drilled.message}. {message}"
        elif drill and applied is None:
            message += " (no drill: nothing to roll back)"
        return self._rollback_output(model_id, target, plan, message, applied, drilled, steps)
