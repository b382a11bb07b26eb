"""A rollback's drill: the failing cases of the record rolled away from, the incident's own
input and the suite in force, asked of the candidate through verify on this host — its run
kept as an exploratory run (purpose drill). Its answer: safe to apply, the candidate fails
what failed, or it could not run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

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
    from modelreg.schemas.suite import Case, CaseResult, GateResult, Suite, SuiteResult
    from modelreg.targets import Target


from modelreg.api.rollback_plan import _Plan
from modelreg.api.verify import Verify, counting_suite_result
from modelreg.errors import InvalidInput, NotFetchable

# The drill suite's subset of the cases asked again: every one of them must pass.
DRILL_SUBSET = "rollback-drill"
# How much of an answer a drill's one-line finding quotes (the stored run keeps it whole).
DRILL_OUTPUT_CHARS = 200
# The incident's own input asked in a drill: case ids incident-1, incident-2, ...
INCIDENT_PREFIX = "incident-"
MAX_INCIDENT_CASES = 20
# The failing cases a rollback-drill event names (the drill's answer has them all).
EVENT_CASES_MAX = 20
# Tokens an incident prompt's answer may take (a chat turn must end within them).
INCIDENT_MAX_TOKENS = 64
# A drill's answer: safe to apply, the candidate fails what failed, or it could not run.
Verdict = Literal["safe", "fails", "could_not_run"]


@dataclass(frozen=True)
class _Failure:
    """The newest counting run of the record rolled away from that failed or had failing
    cases, and those cases (the drill asks them again); no run: it never failed one that
    counts."""

    run_id: str | None
    cases: tuple[CaseResult, ...] = ()
    blocking: tuple[str, ...] = ()  # what failed in that run, when no case did
    # The run passed: its cases failed inside it, within the suite's pass rate.
    passed: bool = False


def _failures_of(reads: Reads, run_id: str) -> tuple[list[CaseResult], list[str]]:
    """A run's failing cases (of its required checks' suite results) and its blocking
    checks, one line each."""
    from modelreg.schemas.suite import SuiteResult

    cases: list[CaseResult] = []
    blocking: list[str] = []
    for v in reads.run_checks(run_id):
        result = v.result
        if rules.blocks(result.required, result.outcome):
            blocking.append(f"{result.check}: {result.outcome.value} ({result.summary})")
        suite_result = result.evidence.get("suite_result")
        if result.required and isinstance(suite_result, dict):
            cases += SuiteResult.model_validate(suite_result).failing_cases
    return cases, blocking


def _newest_failure(reads: Reads, record: Record, target: Target) -> _Failure:
    """The record's newest run on ``target`` that would count there (``rules.counting_run``
    of that run alone: not a one-off, local or signed by a key the target trusts) and failed
    — or passed with failing cases: a case production failed inside a passing run is still
    what failed — with the failing cases of its suite results."""
    trust = trust_policy(target)
    digests = (
        {f.path: f.sha256 or "" for f in record.manifest.files}
        if trust.verifier_keys is not None
        else None
    )
    counted_runs: list[tuple[datetime, str, bool]] = []
    for run in reads.runs_on(record.id, target.name):
        counted, _ = rules.counting_run(record.id, target.name, [run], trust, digests)
        verdict = rules.run_verdict(
            (c.check, c.required, c.outcome, c.classification) for c in run.checks
        )
        if counted is not None and run.finished_at is not None:
            counted_runs.append((run.finished_at, run.run_id, verdict.passed))
    for _, run_id, passed in sorted(counted_runs, reverse=True):
        cases, blocking = _failures_of(reads, run_id)
        if not passed or cases:
            return _Failure(run_id, tuple(cases), tuple(blocking), passed)
    return _Failure(None)


def incident_cases(prompts: Sequence[str], expect: Sequence[str]) -> tuple[Case, ...]:
    """The incident's own input as drill cases: each prompt with what its answer must contain
    (``expect``, paired in order) asked again and required to pass. Bad input (unpaired,
    empty, too many or too long): ``InvalidInput`` before anything runs."""
    from pydantic import ValidationError

    from modelreg.schemas.suite import Case

    if isinstance(prompts, str) or isinstance(expect, str):
        raise InvalidInput("`prompts` and `expect` are lists of texts, not one text")
    if len(prompts) != len(expect):
        raise InvalidInput(
            f"`prompts` and `expect` go in pairs, in order: got {len(prompts)} prompt(s) and "
            f"{len(expect)} expectation(s)",
            "each prompt of the incident needs the text its answer must contain",
        )
    if len(prompts) > MAX_INCIDENT_CASES:
        raise InvalidInput(
            f"{len(prompts)} incident prompts: a drill asks at most {MAX_INCIDENT_CASES}",
            "add the rest to the model's suite as cases instead",
        )
    cases = []
    for n, (prompt, expected) in enumerate(zip(prompts, expect, strict=True), 1):
        if not prompt.strip() or not expected.strip():
            raise InvalidInput(
                f"incident prompt {n}: `prompts` and `expect` must not be empty (got "
                f"{prompt[:40]!r} expecting {expected[:40]!r})"
            )
        try:
            cases.append(
                Case.model_validate(
                    {
                        "id": f"{INCIDENT_PREFIX}{n}",
                        "prompt": prompt,
                        "expect": {"mode": "contains", "value": expected},
                        "max_tokens": INCIDENT_MAX_TOKENS,
                        "note": "the incident's own input, given to the rollback drill",
                    }
                )
            )
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(p) for p in problem["loc"])
            raise InvalidInput(f"incident prompt {n}: {where}: {problem['msg']}") from None
    return tuple(cases)


def _golden_base(record: Record, target: Target) -> Suite:
    """The suite a verify of ``record`` runs when none is in force: its golden prompts."""
    from modelreg.validators.base import CheckContext, VerifyOptions
    from modelreg.validators.smoke import golden_prompts, golden_suite

    options = VerifyOptions()
    context = CheckContext(record=record, target=target, files={}, options=options)
    return golden_suite(golden_prompts(context), options.max_new_tokens)


def _drill_suite(
    base: Suite,
    failure: _Failure,
    origin: str,
    description: str,
    incident: Sequence[Case] = (),
) -> tuple[Suite, str, dict[str, str]]:
    """The suite a drill runs: ``base`` (the suite in force) and each failing case — and each
    case of the incident's own input — asked again in a subset of its own that must pass
    whole; the overall pass rate asked for is the one that keeps ``base``'s (the base cases
    passing at least as many as ``base`` requires, with every drill case passing). The
    gates relative to a baseline record are left out: the drill judges them against the
    candidate's own counting run (``_relative_gates``), never against the record being left.
    Returns the suite, the drill subset and drill case id -> the case's id where it came from
    (the failed run's, or incident-N)."""
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

    def take(case_id: str) -> str:
        while case_id in taken:
            case_id += "-x"
        taken.add(case_id)
        return case_id

    for failing in failure.cases:
        case = regression_case(failing, origin=origin, subset=subset)
        if case.id in seen:
            continue  # the same prompt and expectation failed twice in that run
        seen.add(case.id)
        case_id = take("drill-" + case.id.removeprefix("regression-"))
        origins[case_id] = failing.case_id
        added.append(case.model_copy(update={"id": case_id}))
    for given in incident:
        case_id = take(given.id)
        origins[case_id] = given.id
        added.append(given.model_copy(update={"id": case_id, "subset": subset}))
    thresholds = base.thresholds.model_copy(
        update={
            "max_pass_rate_drop_vs": None,
            "max_pass_rate_drop": None,
            "max_subset_pass_rate_drop": {},
        }
    )
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


def _on_cases(result: SuiteResult, ids: set[str]) -> SuiteResult:
    """``result``'s pass rates, overall and per subset, over the cases ``ids`` names only."""
    from modelreg.schemas.suite import SubsetResult

    cases = [c for c in result.cases if c.case_id in ids]
    subsets = []
    for name in sorted({c.subset for c in cases}):
        members = [c for c in cases if c.subset == name]
        passing = sum(c.passed for c in members)
        subsets.append(
            SubsetResult(
                subset=name,
                passed=passing,
                total=len(members),
                pass_rate=passing / len(members),
                min_pass_rate=None,
                ok=True,
            )
        )
    rate = sum(c.passed for c in cases) / len(cases) if cases else 0.0
    return result.model_copy(update={"cases": cases, "pass_rate": rate, "subsets": subsets})


@dataclass(frozen=True)
class _Previous:
    """The candidate's own counting run on the target, the baseline of the drill's relative
    gates: its suite result (None: ``problem`` says why there is none)."""

    record_id: str
    result: SuiteResult | None
    problem: str | None


def _relative_gates(base: Suite, own: SuiteResult, previous: _Previous) -> list[GateResult]:
    """The suite in force's gates relative to a baseline, judged for the drill: the drill's
    run of the suite's cases against the candidate's own counting run, on the cases both
    asked (a suite grown since the candidate was verified compares like with like). No run,
    or no case in common: unmeasured, never a pass."""
    from modelreg.validators.judge import baseline_gates

    if base.thresholds.max_pass_rate_drop_vs is None:
        return []
    baseline, problem = previous.result, previous.problem
    mine = own
    if baseline is not None:
        common = {c.case_id for c in own.cases} & {c.case_id for c in baseline.cases}
        if common:
            mine, baseline = _on_cases(own, common), _on_cases(baseline, common)
        else:
            baseline, problem = None, f"{previous.record_id}'s counting run asked none of its cases"
    if baseline is None and problem is None:
        problem = f"{previous.record_id} has no counting run"
    return baseline_gates(
        base,
        mine,
        baseline,
        previous.record_id,
        problem,
        baseline_of="the candidate's own counting run of",
    )


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
    previous: _Previous | None = None,
    bytes_from: str | None = None,
) -> DrillOut:
    """The drill's answer from its run: each case asked again (the failed run's, the
    incident's), the suite in force, its relative gates against the candidate's own counting
    run (``previous``), and what failed. Nothing judged (bytes missing, the runtime crashed or
    could not load): could_not_run, never a pass."""
    from modelreg.schemas.suite import GateOutcome, SuiteResult

    results = [c for c in report.checks if isinstance(c.evidence.get("suite_result"), dict)]
    judged = SuiteResult.model_validate(results[0].evidence["suite_result"]) if results else None
    by_id = {c.case_id: c for c in judged.cases} if judged is not None else {}
    asked = {c.id: c for c in suite.cases}
    cases = []
    for case_id, from_case in origins.items():
        found = by_id.get(case_id)
        case = asked[case_id]
        incident = case.subset == subset and case_id.startswith(INCIDENT_PREFIX)
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
                source="incident" if incident else "failed_run",
            )
        )

    def came_from(c: DrillCaseOut) -> str:
        if c.source == "incident":
            return "the incident's own input"
        return f"failed as {c.from_case} in run {failure.run_id}"

    failed = [
        f"case {c.case_id} ({came_from(c)}) [{c.classification}]: {c.prompt!r} -> "
        f"{_clip(c.output)} (expected {c.expect})"
        for c in cases
        if not c.passed
    ]
    inside_passing: list[str] = []
    relative: list[GateResult] = []
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
        else:
            # Within the suite's pass rate: said, not a failure of the drill by itself.
            inside_passing = [c.case_id for c in own if not c.passed]
        failed += [
            g.message
            for g in judged.gates
            if g.outcome in (GateOutcome.FAIL, GateOutcome.UNMEASURED)
        ]
        if previous is not None:
            relative = _relative_gates(base, _on_cases(judged, {c.case_id for c in own}), previous)
            failed += [
                g.message
                for g in relative
                if g.outcome in (GateOutcome.FAIL, GateOutcome.UNMEASURED)
            ]
    for check in report.checks:
        judged_suite = isinstance(check.evidence.get("suite_result"), dict)
        if rules.blocks(check.required, check.outcome) and not judged_suite:
            failed.append(f"{check.check}: {check.outcome.value} ({check.summary})")
    # A drill passes only when a suite was judged and every case it asked again passed: a
    # verify that judged none (bytes missing, a runtime that crashed, a required check
    # skipped) tried nothing, so it could not run — never a pass.
    could_not_run = None
    if judged is None:
        blocking = [f for f in failed if not f.startswith("case ")]
        could_not_run = (
            blocking[0] if blocking else "the drill judged no suite (no check ran one)"
        ) + ": nothing was tried"
    verdict: Verdict = "safe"
    if could_not_run is not None:
        verdict = "could_not_run"
    elif failed or not report.passed:
        verdict = "fails"
    passed = verdict == "safe"
    if verdict == "fails" and not failed:
        failed = [f"{c.check}: {c.outcome.value} ({c.summary})" for c in results]
    failing_cases = [c.from_case for c in cases if not c.passed] if judged is not None else []
    where = f"on {report.target} (run {report.run_id}, exploratory: never counted)"
    if passed:
        incidents = sum(c.source == "incident" for c in cases)
        also = f" and the incident's {incidents} prompt(s)" if incidents else ""
        if failure.run_id is None:
            message = (
                f"drill passed: {current.id} has no failing run on {report.target}, so the "
                f"drill ran the suite in force{also or ' alone'} on {report.record.record_id} "
                f"{where}"
            )
        elif not cases or len(cases) == incidents:
            message = (
                f"drill passed: run {failure.run_id} of {current.id} failed no suite case ("
                + "; ".join(failure.blocking)
                + f"), so the drill ran the suite in force{also or ' alone'} on "
                + f"{report.record.record_id} {where}"
            )
        else:
            message = (
                f"drill passed: {report.record.record_id} answered the "
                f"{len(cases) - incidents} failing case(s) of run {failure.run_id} of "
                f"{current.id}{also} and the suite in force {where}"
            )
        message = "safe to apply — " + message
    elif verdict == "could_not_run":
        message = f"drill could not run on {report.record.record_id} {where}: {could_not_run}"
    else:
        more = f"; and {len(failed) - 1} more" if len(failed) > 1 else ""
        named = f" ({', '.join(failing_cases)})" if failing_cases else ""
        message = (
            f"drill FAILED — the candidate fails what failed{named} — on "
            f"{report.record.record_id} {where}: {failed[0]}{more}"
        )
    return DrillOut(
        record_id=report.record.record_id,
        target=report.target,
        run_id=report.run_id,
        passed=passed,
        verdict=verdict,
        failing_cases=failing_cases,
        could_not_run=could_not_run,
        failed_inside_passing_run=inside_passing,
        baseline_gates=relative,
        bytes_from=bytes_from,
        suite=suite_label(suite) or suite.name,
        suite_in_force=in_force,
        from_record=current.id,
        from_run=failure.run_id,
        cases=cases,
        failed=failed if not passed else [],
        message=message,
    )


def _not_fetched(
    candidate: Record, target: Target, current: Record, failure: _Failure, exc: NotFetchable
) -> DrillOut:
    """The drill's answer when no recorded location gave the candidate's bytes: nothing ran."""
    why = f"no copy of {candidate.id}'s bytes could be fetched from its recorded locations " + (
        f"({exc.message})"
    )
    return DrillOut(
        record_id=candidate.id,
        target=target.name,
        run_id=None,
        passed=False,
        verdict="could_not_run",
        could_not_run=why,
        suite="(not run)",
        suite_in_force=None,
        from_record=current.id,
        from_run=failure.run_id,
        cases=[],
        failed=[why],
        message=f"drill could not run on {candidate.id} on {target.name}: {why} — give the "
        "files with path, or record a location that holds them",
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
            "verdict": drill.verdict,
            "failing_cases": drill.failing_cases[:EVENT_CASES_MAX],
            "could_not_run": drill.could_not_run,
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
        *,
        incident: Sequence[Case] = (),
        path: Path | None = None,
    ) -> DrillOut:
        """Run the drill of ``plan`` (a rollback to its candidate) through verify: its run is
        stored as an exploratory run (purpose drill) — the drill suite is never the suite in
        force. ``incident``: the incident's own input (``incident_cases``), asked too.

        The candidate's bytes: ``path``; else where it was added, when they are there and that
        is a recorded location; else a copy fetched from its recorded locations into this
        host's cache (every sha256 checked) — none fetched: could_not_run, nothing ran."""
        from modelreg.locations import file_url
        from modelreg.validators.base import VerifyOptions

        candidate, current = plan.candidate, plan.current
        assert candidate is not None and current is not None
        with self.store.read() as reads:
            failure = _newest_failure(reads, current, target)
            in_force = suite_in_force(reads.model_suites([model_id]).get(model_id), target)
            recorded = {loc.url for loc in reads.locations([candidate.id])[candidate.id]}
            previous = None
            if in_force is not None and in_force.thresholds.max_pass_rate_drop_vs is not None:
                # Any suite version: the drill compares the cases both runs asked.
                found, problem = counting_suite_result(reads, candidate.id, target.name, None)
                previous = _Previous(candidate.id, found, problem)
        base = in_force if in_force is not None else _golden_base(candidate, target)
        label = suite_label(in_force)
        origin = f"run {failure.run_id} of {current.id} on {target.name}"
        suite, subset, origins = _drill_suite(
            base,
            failure,
            origin,
            f"rollback drill of {candidate.id} for {model_id} on {target.name}: the suite in "
            f"force ({label or 'the golden prompts'})"
            + (f" and the failing cases of {origin}" if failure.cases else "")
            + (" and the incident's own input" if incident else ""),
            incident,
        )
        root = file_url(candidate.root)
        at_root = root in recorded and all(
            (candidate.root / f.path).is_file() for f in candidate.manifest.files
        )
        if path is not None:
            bytes_from = f"{path} (given)"
        elif at_root:
            bytes_from = f"{root} (where it was added; every sha256 checked by the drill's run)"
        else:
            bytes_from = (
                "a copy fetched from its recorded locations into this host's cache (every "
                "sha256 checked)"
            )
        try:
            report = self._verify.verify(
                candidate.id,
                target.name,
                path=path,
                fetch=path is None and not at_root,
                options=VerifyOptions(suite=suite),
                actor=actor,
                progress=progress,
                purpose="drill",
            )
        except NotFetchable as exc:
            return _not_fetched(candidate, target, current, failure, exc)
        assert report.exploratory  # a drill run never decides a verdict
        return _drill_out(
            report, suite, subset, origins, base, label, current, failure, previous, bytes_from
        )
