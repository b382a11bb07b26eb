"""Deploy decisions: promote, rollback (plan and apply), hold, release, retire."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from modelreg import clock, config, rules
from modelreg.api.core import Core, _check_why
from modelreg.api.status import approval_out
from modelreg.api.views import deployability_out, promotion_out, record_out
from modelreg.deployed_unit import deployed_unit
from modelreg.errors import (
    InvalidInput,
    NoRollbackCandidate,
    NotDeployable,
)
from modelreg.judging import fetchability, suite_in_force, suite_label, trust_policy
from modelreg.rules import (
    Deployability,
    ReasonCode,
    RecordStateKind,
)
from modelreg.schemas.output import (
    AcceptedRelaxationOut,
    DeployedOut,
    DrillCaseOut,
    DrillOut,
    PromoteOutput,
    RejectedCandidate,
    RelaxationOut,
    RollbackOutput,
    StateChangeOutput,
    VerifyOutput,
)
from modelreg.schemas.verification import generations

if TYPE_CHECKING:
    # The store (SQLAlchemy) loads when a registry is opened, not when modelreg.api is
    # imported: `modelreg inspect` needs no database.
    from modelreg.progress import ProgressCallback
    from modelreg.record import Record
    from modelreg.registry.store import (
        Promotion,
        Reads,
        Writes,
    )
    from modelreg.schemas.suite import CaseResult, Suite
    from modelreg.targets import Target


# An approval's known limitations: a short list, each a paragraph at most.
MAX_LIMITATIONS = 20
# The drill suite's subset of the cases asked again: every one of them must pass.
DRILL_SUBSET = "rollback-drill"
# How much of an answer a drill's one-line finding quotes (the stored run keeps it whole).
DRILL_OUTPUT_CHARS = 200


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


def _approval(
    owner: str | None, limitations: Sequence[str], retest_by: date | None
) -> tuple[str | None, tuple[str, ...], datetime | None]:
    """The approval kept with a promotion, checked: a named owner, non-empty limitations (each
    bounded like a reason), a re-test day that has not passed (kept as its start, UTC)."""
    from modelreg.limits import ACTOR_MAX, WHY_MAX, check_length

    if owner is not None:
        owner = owner.strip()
        if not owner:
            raise InvalidInput("the owner must not be empty", "name who answers for the release")
        check_length("owner", owner, ACTOR_MAX)
    kept: list[str] = []
    for limitation in limitations:
        text = limitation.strip()
        if not text:
            raise InvalidInput("a limitation must not be empty", "say what it is known not to do")
        check_length("limitation", text, WHY_MAX)
        if text not in kept:
            kept.append(text)
    if len(kept) > MAX_LIMITATIONS:
        raise InvalidInput(
            f"{len(kept)} limitations: at most {MAX_LIMITATIONS}", "say the rest in the card"
        )
    due = None
    if retest_by is not None:
        day = retest_by.astimezone(UTC).date() if isinstance(retest_by, datetime) else retest_by
        today = clock.utcnow().date()
        if day < today:
            raise InvalidInput(
                f"re-test date {day.isoformat()} is in the past (today is {today.isoformat()} UTC)",
                "give the day it must be tested again by",
            )
        due = datetime(day.year, day.month, day.day, tzinfo=UTC)
    return owner, tuple(kept), due


def _differs(
    approval: tuple[str | None, tuple[str, ...], datetime | None], kept: Promotion
) -> bool:
    """Whether an approval given says something else than the one ``kept`` was promoted with
    (what is not given says nothing)."""
    owner, limitations, retest_by = approval
    return (
        (owner is not None and owner != kept.owner)
        or (bool(limitations) and limitations != kept.limitations)
        or (retest_by is not None and retest_by != kept.retest_by)
    )


def _accepted_out(reason: rules.Reason) -> AcceptedRelaxationOut:
    """What a releaser accepted: the terms and each change, from the reason's detail."""
    detail = dict(reason.detail or {})
    changes = detail.get("changes")
    return AcceptedRelaxationOut.model_validate(
        {
            "terms": str(detail.get("terms", "")),
            "suite": detail.get("suite"),
            "changes": [
                RelaxationOut.model_validate(
                    {k: c.get(k) for k in ("what", "before", "after", "failed_run")}
                )
                for c in (changes if isinstance(changes, list) else [])
                if isinstance(c, dict)
            ],
            "failed_runs": detail.get("failed_runs") or [],
        }
    )


def _accepted_text(accepted: Sequence[AcceptedRelaxationOut]) -> str:
    changes = [c for a in accepted for c in a.changes]
    return "; ".join(rules.Relaxation(c.what, c.before, c.after).describe() for c in changes)


@dataclass(frozen=True)
class _Failure:
    """The newest failing counting run of the record rolled away from, and its failing cases
    (the drill asks them again); no run: it never failed one that counts."""

    run_id: str | None
    cases: tuple[CaseResult, ...] = ()
    blocking: tuple[str, ...] = ()  # what failed in that run, when no case did


def _newest_failure(reads: Reads, record: Record, target: Target) -> _Failure:
    """The record's newest run on ``target`` that would count there (``rules.counting_run``
    of that run alone: not a one-off, local or signed by a key the target trusts) and failed,
    with the failing cases of its suite results."""
    from modelreg.schemas.suite import SuiteResult

    trust = trust_policy(target)
    digests = (
        {f.path: f.sha256 or "" for f in record.manifest.files}
        if trust.verifier_keys is not None
        else None
    )
    failed: list[tuple[datetime, str]] = []
    for run in reads.runs_on(record.id, target.name):
        counted, _ = rules.counting_run(record.id, target.name, [run], trust, digests)
        verdict = rules.run_verdict(
            (c.check, c.required, c.outcome, c.classification) for c in run.checks
        )
        if counted is not None and not verdict.passed and run.finished_at is not None:
            failed.append((run.finished_at, run.run_id))
    if not failed:
        return _Failure(None)
    _, run_id = max(failed)
    cases: list[CaseResult] = []
    blocking: list[str] = []
    for v in reads.run_checks(run_id):
        result = v.result
        if rules.blocks(result.required, result.outcome):
            blocking.append(f"{result.check}: {result.outcome.value} ({result.summary})")
        suite_result = result.evidence.get("suite_result")
        if result.required and isinstance(suite_result, dict):
            cases += SuiteResult.model_validate(suite_result).failing_cases
    return _Failure(run_id, tuple(cases), tuple(blocking))


def _golden_base(record: Record, target: Target) -> Suite:
    """The suite a verify of ``record`` runs when none is in force: its golden prompts."""
    from modelreg.validators.base import CheckContext, VerifyOptions
    from modelreg.validators.smoke import golden_prompts, golden_suite

    options = VerifyOptions()
    context = CheckContext(record=record, target=target, files={}, options=options)
    return golden_suite(golden_prompts(context), options.max_new_tokens)


def _drill_suite(
    base: Suite, failure: _Failure, origin: str, description: str
) -> tuple[Suite, str, dict[str, str]]:
    """The suite a drill runs: ``base`` (the suite in force) and each failing case asked again
    in a subset of its own that must pass whole; the overall pass rate asked for is the one
    that keeps ``base``'s (the base cases passing at least as many as ``base`` requires, with
    every drill case passing). Returns the suite, the drill subset and drill case id -> the
    failed case's id."""
    from modelreg.schemas.suite import Suite
    from modelreg.suites import regression_case

    subsets = {c.subset for c in base.cases} | set(base.thresholds.subsets)
    subset = DRILL_SUBSET
    while subset in subsets:
        subset += "-x"
    taken = {c.id for c in base.cases}
    added = []
    seen: set[str] = set()
    origins: dict[str, str] = {}
    for failing in failure.cases:
        case = regression_case(failing, origin=origin, subset=subset)
        if case.id in seen:
            continue  # the same prompt and expectation failed twice in that run
        seen.add(case.id)
        case_id = "drill-" + case.id.removeprefix("regression-")
        while case_id in taken:
            case_id += "-x"
        taken.add(case_id)
        origins[case_id] = failing.case_id
        added.append(case.model_copy(update={"id": case_id}))
    thresholds = base.thresholds
    if added:
        n, k = len(base.cases), len(added)
        # The fewest base cases that pass base's rate (computed as the judge does: p / n).
        needed = next(p for p in range(n + 1) if p / n >= thresholds.min_pass_rate)
        thresholds = thresholds.model_copy(
            update={
                "min_pass_rate": (needed + k) / (n + k),
                "subsets": {**thresholds.subsets, subset: 1.0},
            }
        )
    suite = Suite.model_validate(
        {
            "name": f"{base.name[:49]}.rollback-drill",
            "description": description[:8000],
            "thresholds": thresholds.model_dump(),
            "cases": [c.model_dump() for c in (*base.cases, *added)],
        }
    )
    return suite, subset, origins


def _clip(text: str | None) -> str:
    if text is None:
        return "(no output)"
    return repr(text if len(text) <= DRILL_OUTPUT_CHARS else text[:DRILL_OUTPUT_CHARS] + "…")


def _drill_out(
    report: VerifyOutput,
    suite: Suite,
    subset: str,
    origins: dict[str, str],
    base: Suite,
    in_force: str | None,
    current: Record,
    failure: _Failure,
) -> DrillOut:
    """The drill's answer from its run: each failing case asked again, and what failed."""
    from modelreg.schemas.suite import GateOutcome, SuiteResult

    results = [c for c in report.checks if isinstance(c.evidence.get("suite_result"), dict)]
    judged = SuiteResult.model_validate(results[0].evidence["suite_result"]) if results else None
    by_id = {c.case_id: c for c in judged.cases} if judged is not None else {}
    asked = {c.id: c for c in suite.cases}
    cases = []
    for case_id, from_case in origins.items():
        found = by_id.get(case_id)
        case = asked[case_id]
        cases.append(
            DrillCaseOut(
                case_id=case_id,
                from_case=from_case,
                prompt=case.prompt,
                expect=case.expect.describe(),
                output=found.output if found is not None else None,
                classification=found.classification.value if found is not None else "not_run",
                reason=found.reason if found is not None else "the run judged no suite",
                passed=found is not None and found.passed,
            )
        )
    failed = [
        f"case {c.case_id} (failed as {c.from_case} in run {failure.run_id}) "
        f"[{c.classification}]: {c.prompt!r} -> {_clip(c.output)} (expected {c.expect})"
        for c in cases
        if not c.passed
    ]
    if judged is not None:
        own = [c for c in judged.cases if c.subset != subset]
        passing = sum(c.passed for c in own)
        rate_ok = bool(own) and passing / len(own) >= base.thresholds.min_pass_rate
        subsets_ok = all(s.ok for s in judged.subsets if s.subset != subset)
        if not (rate_ok and subsets_ok):
            failed.append(
                f"the suite in force ({in_force or 'the golden prompts'}): {passing}/{len(own)} "
                f"cases passed (min_pass_rate {base.thresholds.min_pass_rate})"
            )
            failed += [
                f"case {c.case_id} [{c.classification.value}]: {c.prompt!r} -> {_clip(c.output)}"
                for c in own
                if not c.passed
            ]
        failed += [
            g.message
            for g in judged.gates
            if g.outcome in (GateOutcome.FAIL, GateOutcome.UNMEASURED)
        ]
    for check in report.checks:
        judged_suite = isinstance(check.evidence.get("suite_result"), dict)
        if rules.blocks(check.required, check.outcome) and not judged_suite:
            failed.append(f"{check.check}: {check.outcome.value} ({check.summary})")
    # A drill passes only when a suite was judged and every case it asked again passed: a
    # verify that judged none (a required check skipped) tried nothing, so it is no pass.
    passed = report.passed and judged is not None and all(c.passed for c in cases)
    if judged is None and report.passed:
        failed.append("the drill judged no suite (no check ran one): nothing was tried")
    if not passed and not failed:
        failed = [f"{c.check}: {c.outcome.value} ({c.summary})" for c in results]
    where = f"on {report.target} (run {report.run_id}, kept as a one-off)"
    if passed:
        if failure.run_id is None:
            message = (
                f"drill passed: {current.id} has no failing run on {report.target}, so the "
                f"drill ran the suite in force alone on {report.record.record_id} {where}"
            )
        elif not cases:
            message = (
                f"drill passed: run {failure.run_id} of {current.id} failed no suite case ("
                + "; ".join(failure.blocking)
                + f"), so the drill ran the suite in force alone on {report.record.record_id} "
                + where
            )
        else:
            message = (
                f"drill passed: {report.record.record_id} answered the {len(cases)} failing "
                f"case(s) of run {failure.run_id} of {current.id} and the suite in force {where}"
            )
    else:
        more = f"; and {len(failed) - 1} more" if len(failed) > 1 else ""
        message = f"drill FAILED on {report.record.record_id} {where}: {failed[0]}{more}"
    return DrillOut(
        record_id=report.record.record_id,
        target=report.target,
        run_id=report.run_id,
        passed=passed,
        suite=suite_label(suite) or suite.name,
        suite_in_force=in_force,
        from_record=current.id,
        from_run=failure.run_id,
        cases=cases,
        failed=failed if not passed else [],
        message=message,
    )


def _drill_event(tx: Writes, actor: str, drill: DrillOut, why: str | None) -> None:
    """The drill in the model's history, beside its run: evidence of the rollback."""
    tx.event(
        "rollback-drill",
        actor,
        drill.record_id,
        drill.target,
        why,
        {
            "run_id": drill.run_id,
            "passed": drill.passed,
            "from_record": drill.from_record,
            "from_run": drill.from_run,
            "suite": drill.suite,
            "suite_in_force": drill.suite_in_force,
            "cases": {c.from_case: c.classification for c in drill.cases},
            "failed": drill.failed[:10],
        },
    )


class Deploy(Core):
    """Deploy decisions: promote, rollback (plan and apply), hold, release, retire."""

    def promote(
        self,
        ref: str,
        target: str,
        *,
        why: str | None = None,
        actor: str | None = None,
        owner: str | None = None,
        limitations: Sequence[str] = (),
        retest_by: date | None = None,
        accept_relaxed_gate: bool = False,
    ) -> PromoteOutput:
        """Make the record production for its model on ``target``. Refused (``NotDeployable``)
        unless it is deployable there now — decided inside the transaction that moves the
        pointer, with the target's current runtime fingerprint.

        ``owner``, ``limitations``, ``retest_by``: the approval kept with the promotion — who
        answers for it, what it is known not to do, the day it must be tested again by
        (``status`` says when that day has passed).

        ``accept_relaxed_gate`` (needs ``why``): when the only reasons it is not deployable are
        passes under gates weakened after it failed them (``gate_relaxed_after_failure``),
        record a releaser's acceptance of each (a ``gate-relaxation-accepted`` event), judge
        again and promote if that made it deployable — all in the one locked transaction.
        Any other reason refuses it as ever, with nothing written; nothing relaxed to accept
        is bad input."""
        _check_why(why, required="accepting a relaxed gate" if accept_relaxed_gate else None)
        approval = _approval(owner, limitations, retest_by)
        record = self.get(ref)
        self.target(target)
        actor = actor or config.actor()
        accepted: list[AcceptedRelaxationOut] = []
        with self.store.locked(record.model_id) as tx:
            verdict = self._verdict(tx, record, target)
            current = tx.production(record.model_id, target)
            same = current is not None and current.record_id == record.id
            if same and current is not None and _differs(approval, current):
                raise InvalidInput(
                    f"{record.id} is already production for {record.model_id} on {target} "
                    f"(since {current.at:%Y-%m-%d %H:%M} UTC); its approval is the one it "
                    "was promoted with, and promoting it again changes nothing",
                    "promote it again without owner, limitations or re-test date",
                )
            if accept_relaxed_gate:
                accepted = self._accept_relaxed(tx, record, target, verdict, why, actor)
                verdict = self._verdict(tx, record, target)  # judged again, with them
            if not verdict.deployable:
                raise NotDeployable(record.id, target, verdict.reasons)
            said = (
                f"accepted a gate relaxed after failure on {target}: {_accepted_text(accepted)}; "
                if accepted
                else ""
            )
            today = clock.utcnow().date()
            if same and current is not None:
                return PromoteOutput(
                    changed=False,
                    message=f"{said}{record.id} is already production for {record.model_id} on "
                    f"{target} (since {current.at:%Y-%m-%d %H:%M} UTC); nothing changed",
                    promotion=promotion_out(current),
                    approval=approval_out(current, today),
                    accepted=accepted,
                )
            warning = None
            if current is not None:
                previous = tx.records_by_id([current.record_id])[current.record_id]
                warning = rules.attribution_warning(previous.manifest, record.manifest)
            promotion = tx.set_production(
                record,
                target,
                "promote",
                actor,
                why,
                owner=approval[0],
                limitations=approval[1],
                retest_by=approval[2],
            )
        return PromoteOutput(
            changed=True,
            message=f"{said}{record.id} is now production for {record.model_id} on {target} "
            f"(was {promotion.previous_record_id or 'none'})",
            promotion=promotion_out(promotion),
            warning=warning,
            approval=approval_out(promotion, today),
            accepted=accepted,
        )

    def _verdict(self, view: Reads, record: Record, target: str) -> Deployability:
        """The record's verdict on ``target`` as ``view`` stores it (a writing transaction's
        own writes settled first)."""
        return view.verdict(record.id, target)

    def _accept_relaxed(
        self,
        tx: Writes,
        record: Record,
        target: str,
        verdict: Deployability,
        why: str | None,
        actor: str,
    ) -> list[AcceptedRelaxationOut]:
        """Record the acceptance of every relaxed gate in ``verdict`` — only when those are
        all that keep the record from being deployable."""
        relaxed = [r for r in verdict.reasons if r.code is ReasonCode.GATE_RELAXED_AFTER_FAILURE]
        if len(relaxed) != len(verdict.reasons):
            raise NotDeployable(record.id, target, verdict.reasons)
        if not relaxed:
            raise InvalidInput(
                f"nothing to accept: {record.id} on {target} passed no gate that was relaxed "
                "after it failed it",
                f"promote it without accepting a relaxed gate: modelreg promote {record.id} "
                f"--target {target}",
            )
        for reason in relaxed:
            tx.event(
                rules.RELAXATION_ACCEPTED,
                actor,
                record.id,
                target,
                why,
                dict(reason.detail or {}),
            )
        return [_accepted_out(r) for r in relaxed]

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
        self,
        model_id: str,
        target: str,
        plan: _Plan,
        message: str,
        applied: Promotion | None,
        drill: DrillOut | None = None,
        hint: str | None = None,
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
            drill=drill,
            message=message,
            hint=hint,
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
        when production was put there by a rollback and is deployable; or, when no record can
        take production, ``decision`` "no_candidate" with the reason as ``message`` and what
        would make one a candidate as ``hint`` (``rollback`` raises ``NoRollbackCandidate``
        then: there is nothing to apply)."""
        _, plan = self._read_plan(model_id, target, to, refuse=False)
        if plan.decision.action is rules.RollbackAction.NO_CANDIDATE:
            refusal = self._no_candidate(model_id, target, plan)
            return self._rollback_output(
                model_id, target, plan, refusal.message, None, hint=refusal.cli_hint
            )
        return self._rollback_output(
            model_id, target, plan, _plan_message(model_id, target, plan), None
        )

    def _read_plan(
        self, model_id: str, target: str, to: str | None, *, refuse: bool = True
    ) -> tuple[Target, _Plan]:
        """The rollback decision from one snapshot (``--to`` resolved and checked in it);
        ``NoRollbackCandidate`` when there is none (``refuse``; else the plan says so)."""
        self._require_model(model_id)
        the_target = self.target(target)
        with self.store.read() as reads:
            resolved = reads.record(to).id if to is not None else None
            if resolved is not None:
                self._check_to(reads, model_id, target, resolved)
            plan = self._plan(reads, model_id, the_target, resolved)
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
    ) -> RollbackOutput:
        """The rollback plan, drilled: the failing cases of the record rolled away from (its
        newest failing counting run on ``target``) and the suite in force are run against the
        candidate on this host, through verify and the real runtime. The drill's run is kept
        as a one-off of the candidate (it decides no verdict) and a ``rollback-drill`` event
        names it; production does not change. ``drill.passed`` says whether the candidate
        answers what failed. Raises ``NoRollbackCandidate`` when there is none."""
        actor = actor or config.actor()
        the_target, plan = self._read_plan(model_id, target, to)
        message = _plan_message(model_id, target, plan)
        if plan.decision.action is rules.RollbackAction.NOTHING_TO_DO:
            return self._rollback_output(
                model_id, target, plan, f"{message} (no drill: nothing to roll back)", None
            )
        drill = self._drill(model_id, the_target, plan, actor, progress)
        with self.store.locked(model_id) as tx:
            _drill_event(tx, actor, drill, None)
        if not drill.passed:
            message += "; the drill says the candidate fails what failed"
        return self._rollback_output(
            model_id, target, plan, f"{drill.message}. {message}", None, drill
        )

    def _drill(
        self,
        model_id: str,
        target: Target,
        plan: _Plan,
        actor: str,
        progress: ProgressCallback | None,
    ) -> DrillOut:
        """Run the drill of ``plan`` (a rollback to its candidate) through verify: its run is
        stored as a one-off — the drill suite is never the suite in force."""
        from modelreg.api.verify import Verify
        from modelreg.validators.base import VerifyOptions

        candidate, current = plan.candidate, plan.current
        assert candidate is not None and current is not None
        with self.store.read() as reads:
            failure = _newest_failure(reads, current, target)
            in_force = suite_in_force(reads.model_suites([model_id]).get(model_id), target)
        base = in_force if in_force is not None else _golden_base(candidate, target)
        label = suite_label(in_force)
        origin = f"run {failure.run_id} of {current.id} on {target.name}"
        suite, subset, origins = _drill_suite(
            base,
            failure,
            origin,
            f"rollback drill of {candidate.id} for {model_id} on {target.name}: the suite in "
            f"force ({label or 'the golden prompts'})"
            + (f" and the failing cases of {origin}" if failure.cases else ""),
        )
        # Registry puts Verify and Deploy together; a Deploy of its own verifies through one.
        verifier = self if isinstance(self, Verify) else Verify(self.store, self.url)
        report = verifier.verify(
            candidate.id,
            target.name,
            options=VerifyOptions(suite=suite),
            actor=actor,
            progress=progress,
        )
        assert report.exploratory  # a drill run never decides a verdict
        return _drill_out(report, suite, subset, origins, base, label, current, failure)

    def rollback(
        self,
        model_id: str,
        target: str,
        *,
        why: str,
        to: str | None = None,
        actor: str | None = None,
        drill: bool = False,
        progress: ProgressCallback | None = None,
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
        (``NoRollbackCandidate``) if the plan decided inside the lock is not the one drilled."""
        _check_why(why, required="a rollback")
        self._require_model(model_id)
        the_target = self.target(target)
        actor = actor or config.actor()
        to = self.get(to).id if to is not None else None  # resolved before the lock
        drilled = None
        if drill:
            _, planned = self._read_plan(model_id, target, to)
            if planned.decision.action is rules.RollbackAction.ROLLBACK:
                drilled = self._drill(model_id, the_target, planned, actor, progress)
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
            plan = self._plan(tx, model_id, the_target, to)
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
                        f"drill again: modelreg rollback {model_id} --target {target} --drill",
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
                )
                if tx.state(plan.current.id).state is RecordStateKind.ACTIVE:
                    detail = {"rolled_back_to": plan.candidate.id, "target": target}
                    if drilled is not None:
                        detail["drill_run"] = drilled.run_id
                    tx.set_state(
                        plan.current,
                        RecordStateKind.HELD,
                        f"rolled back from on {target} (to {plan.candidate.id}): {why}",
                        actor,
                        detail,
                    )
        if applied is None:
            message = _plan_message(model_id, target, plan)
        else:
            assert plan.candidate is not None and plan.current is not None
            message = (
                f"rolled back: {plan.candidate.id} is production for {model_id} on {target}; "
                f"{plan.current.id} is on hold (release it with: modelreg release "
                f"{plan.current.id} --why '...')"
            )
        if drilled is not None:
            message = f"{drilled.message}. {message}"
        elif drill and applied is None:
            message += " (no drill: nothing to roll back)"
        return self._rollback_output(model_id, target, plan, message, applied, drilled)

    def _change_state(
        self,
        ref: str,
        new: RecordStateKind,
        why: str,
        actor: str | None,
        detail: dict[str, Any] | None = None,
    ) -> StateChangeOutput:
        record = self.get(ref)
        action = {
            RecordStateKind.HELD: "hold",
            RecordStateKind.ACTIVE: "release",
            RecordStateKind.RETIRED: "retire",
        }[new]
        _check_why(why, required=action)
        with self.store.locked(record.model_id) as tx:
            current = tx.state(record.id)
            if current.state is RecordStateKind.RETIRED:
                raise InvalidInput(
                    f"record {record.id} is retired; retired records stay retired",
                    "retirement is final: the same bytes and facts added again are this record, "
                    "still retired — only a changed artifact or changed facts (a new build, "
                    "another source pin) make a new record",
                )
            if new is RecordStateKind.ACTIVE and current.state is not RecordStateKind.HELD:
                if record.hold_reasons:
                    # Held by its facts, not by a person: nothing a release writes changes them.
                    raise InvalidInput(
                        f"record {record.id} is held because its manifest does not know or "
                        f"contradicts facts: {'; '.join(record.hold_reasons)}",
                        "release cannot lift that (it lifts a hold someone put): add the artifact "
                        "again with the missing facts, as each reason says — the facts are the "
                        "record's identity, so that is a new record",
                    )
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

    def release(self, ref: str, why: str, *, actor: str | None = None) -> StateChangeOutput:
        """Release a held record, saying why (facts missing from its manifest keep it on hold
        regardless)."""
        return self._change_state(ref, RecordStateKind.ACTIVE, why, actor)

    def retire(self, ref: str, why: str, *, actor: str | None = None) -> StateChangeOutput:
        """Retire a record: kept with its evidence, never deployable or a rollback candidate."""
        return self._change_state(ref, RecordStateKind.RETIRED, why, actor)
