"""A rollback's drill: the failing cases of the record rolled away from and the suite in force,
asked of the candidate through verify on this host — its run kept as a one-off."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from modelreg import rules
from modelreg.api.core import Core
from modelreg.judging import suite_in_force, suite_label, trust_policy
from modelreg.schemas.output import (
    DrillCaseOut,
    DrillOut,
    VerifyOutput,
)

if TYPE_CHECKING:
    # The store (SQLAlchemy) loads when a registry is opened, not when modelreg.api is
    # imported: `modelreg inspect` needs no database.
    from modelreg.progress import ProgressCallback
    from modelreg.record import Record
    from modelreg.registry.reads import Reads
    from modelreg.registry.store import Store
    from modelreg.registry.writes import Writes
    from modelreg.schemas.suite import CaseResult, Suite
    from modelreg.targets import Target


from modelreg.api.rollback_plan import _Plan
from modelreg.api.verify import Verify

# (unused)'s known limitations: a short list, each a paragraph at most.
MAX_LIMITATIONS = 20
# The drill suite's subset of the cases asked again: every one of them must pass.
DRILL_SUBSET = "rollback-drill"
# How much of an answer a drill's one-line finding quotes (the stored run keeps it whole).
DRILL_OUTPUT_CHARS = 200


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


class Drill(Core):
    """Drills of rollback plans. Collaborator: ``verify`` (the drill's run is a verify)."""

    def __init__(self, store: Store, url: str, *, verify: Verify) -> None:
        super().__init__(store, url)
        self._verify = verify

    def run(
        self,
        model_id: str,
        target: Target,
        plan: _Plan,
        actor: str,
        progress: ProgressCallback | None,
    ) -> DrillOut:
        """Run the drill of ``plan`` (a rollback to its candidate) through verify: its run is
        stored as a one-off — the drill suite is never the suite in force."""
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
        report = self._verify.verify(
            candidate.id,
            target.name,
            options=VerifyOptions(suite=suite),
            actor=actor,
            progress=progress,
        )
        assert report.exploratory  # a drill run never decides a verdict
        return _drill_out(report, suite, subset, origins, base, label, current, failure)
