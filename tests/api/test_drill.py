"""The rollback drill (issue 24, item 5): before production switches, the failing cases of the
record rolled away from and the suite in force are run against the candidate on this host —
through verify and the real llama.cpp runtime — and the run is kept as evidence: a one-off
that decides no verdict. A drill that fails switches nothing.

The incident, on real SmolLM2 builds whose token embedding is scaled (the Gemma √d bug): 1.3×
still names capitals but rambles on chemistry; 0.6× forgets even the capitals. All three pass
the suite at a floor of 0.4 and are promoted in turn; the floor is raised to 0.6 after the
incident, which fails the 0.6× build in production (paris, berlin, water). The 1.3× build is
deployable under the new floor — yet fails "water", one of the cases production failed: the
drill says so and keeps production where it is. The original build answers them all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import modelreg
from modelreg.bundled import SMOLLM2_BASE, SMOLLM2_MODEL_ID, SMOLLM2_PACKAGE
from modelreg.errors import NoRollbackCandidate
from modelreg.schemas.suite import CaseResult, Expectation, Suite, Thresholds
from tests.helpers import add_synthetic, record_run, scale_token_embedding, stored

CASES = """
cases:
  - id: paris
    prompt: What is the capital of France? Answer in one word.
    max_tokens: 16
    expect: {mode: contains, value: Paris}
  - id: berlin
    prompt: What is the capital of Germany? Answer in one word.
    max_tokens: 16
    expect: {mode: contains, value: Berlin}
  - id: rome
    prompt: What is the capital of Italy? Answer in one word.
    max_tokens: 16
    expect: {mode: contains, value: Rome}
  - id: water
    prompt: What is the chemical formula of water? Answer briefly.
    max_tokens: 24
    expect: {mode: contains, value: H2O}
  - id: color
    prompt: What color is the sky on a clear day? Answer in one word.
    max_tokens: 16
    expect: {mode: contains, value: blue}
"""


def _suite(tmp_path: Path, rate: float) -> Path:
    path = tmp_path / f"capitals-{rate}.yaml"
    path.write_text(f"schema_version: 1\nname: capitals\nthresholds: {{min_pass_rate: {rate}}}\n")
    path.write_text(path.read_text() + CASES)
    return path


@pytest.fixture(scope="module")
def scaled(smollm2: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[float, Path]:
    out = tmp_path_factory.mktemp("drill")
    return {f: scale_token_embedding(smollm2, out / f"smol-{f}.gguf", f) for f in (1.3, 0.6)}


def _add(registry: Any, path: Path, **options: Any) -> str:
    added = registry.add(
        [path],
        model_id=SMOLLM2_MODEL_ID,
        source=f"pypi://{SMOLLM2_PACKAGE}",
        base_model=SMOLLM2_BASE,
        **options,
    )
    return str(added.record.record_id)


def _production(registry: Any) -> str:
    (entry,) = registry.status(SMOLLM2_MODEL_ID, "cpu").entries
    return str(entry.record.record_id)


def test_the_drill_reruns_what_failed_and_a_failed_drill_switches_nothing(
    smollm2: Path, scaled: dict[float, Path], tmp_path: Path, cli: Any
) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry = modelreg.open(db)
    original, rambling, forgetful = (_add(registry, p) for p in (smollm2, scaled[1.3], scaled[0.6]))
    registry.attach_suite(SMOLLM2_MODEL_ID, _suite(tmp_path, 0.4))
    for version, record in enumerate((original, rambling, forgetful), 1):
        assert registry.verify(record, "cpu").deployability.deployable
        registry.promote(record, "cpu", why=f"v{version}", owner=f"owner-{version}")
    registry.attach_suite(SMOLLM2_MODEL_ID, _suite(tmp_path, 0.6), why="incident 7")
    failing = registry.verify(forgetful, "cpu")
    assert not failing.deployability.deployable
    for record in (rambling, original):
        assert registry.verify(record, "cpu").deployability.deployable
    counted = registry.deployability(rambling, "cpu").run_id

    # The drill of the plan's candidate (the 1.3× build): it fails "water", as production did.
    plan = registry.drill_rollback(SMOLLM2_MODEL_ID, "cpu")
    drill = plan.drill
    assert plan.candidate.record.record_id == rambling and drill is not None
    assert drill.record_id == rambling and drill.from_record == forgetful
    assert drill.from_run == failing.run_id and not drill.passed
    assert drill.suite_in_force is not None and drill.suite_in_force.startswith("capitals ")
    asked = {c.from_case: c for c in drill.cases}
    assert set(asked) == {"paris", "berlin", "water"}
    assert asked["paris"].passed and asked["berlin"].passed and not asked["water"].passed
    assert asked["water"].output and "H2O" in asked["water"].output  # it rambled past the stop
    assert "water" in drill.failed[0] and asked["water"].output[:30] in drill.failed[0]
    assert "drill FAILED" in plan.message and plan.applied is None
    # Kept as a one-off of the candidate: its verdict is still decided by its own run.
    run = stored(registry).run(drill.run_id)
    assert run is not None and run.exploratory and run.record_id == rambling
    assert registry.deployability(rambling, "cpu").run_id == counted
    assert _production(registry) == forgetful

    # With --apply: refused (exit 1), production stays; the drill is in the history.
    apply = ("--drill", "--apply", "--why", "incident 7")
    code, out, err = cli("--db", db, "rollback", SMOLLM2_MODEL_ID, "--target", "cpu", *apply)
    assert code == 1, err
    assert out.startswith(f"drill       FAILED  {rambling}") and "water" in out
    assert f"production stays {forgetful}" in err
    assert _production(registry) == forgetful
    drills = [e for e in stored(registry).events(SMOLLM2_MODEL_ID) if e.kind == "rollback-drill"]
    assert [d.detail["passed"] for d in drills] == [False, False]
    assert drills[-1].why == "incident 7" and drills[-1].detail["cases"]["water"] == "no_stop"

    # Drilled further back, to the original build: it answers them all, and the switch is
    # made in the same transaction as the drill's event.
    done = registry.rollback(
        SMOLLM2_MODEL_ID, "cpu", why="incident 7: back to v1", to=original, drill=True
    )
    assert done.drill is not None and done.drill.passed and done.drill.failed == []
    assert all(c.passed for c in done.drill.cases)
    assert done.applied is not None and done.applied.record_id == original
    assert _production(registry) == original
    events = stored(registry).events(SMOLLM2_MODEL_ID)
    assert [e.kind for e in events[-3:]] == ["rollback-drill", "rollback", "hold"]
    assert events[-1].detail["drill_run"] == done.drill.run_id
    assert stored(registry).run(done.drill.run_id).exploratory
    # Production came back with the approval it had.
    (entry,) = registry.status(SMOLLM2_MODEL_ID, "cpu").entries
    assert entry.approval is not None and entry.approval.owner == "owner-1"


def test_without_a_failing_run_the_drill_runs_the_suite_in_force_alone(
    smollm2: Path, tmp_path: Path, cli: Any
) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry = modelreg.open(db)
    first = _add(registry, smollm2)
    second = _add(registry, smollm2, prompts=["Name the capital city of France."])
    for record in (first, second):
        assert registry.verify(record, "cpu").deployability.deployable
        registry.promote(record, "cpu", why="release")
    code, out, err = cli("--db", db, "rollback", SMOLLM2_MODEL_ID, "--target", "cpu", "--drill")
    assert code == 0, err
    assert out.startswith(f"drill       PASSED  {first}")
    assert f"{second} has no failing run on cpu, so the drill ran the suite in force alone" in err
    assert "to apply:   modelreg rollback" in out and "--drill --apply" in out
    # Without a suite in force, that is the candidate's golden prompts.
    (drill,) = [e for e in stored(registry).events(SMOLLM2_MODEL_ID) if e.kind == "rollback-drill"]
    assert drill.detail["from_run"] is None and drill.detail["suite_in_force"] is None
    assert drill.detail["suite"].startswith("golden-prompts.rollback-drill ")
    assert _production(registry) == second


# -- without a model ------------------------------------------------------------------------


def _failure(case_id: str, prompt: str = "What is 2 + 2?") -> CaseResult:
    return CaseResult(
        case_id=case_id,
        subset="general",
        prompt=prompt,
        chat=None,
        max_tokens=16,
        expect=Expectation(value="4"),
        output="5",
        classification="wrong_answer",
        reason="wrong",
    )


def test_the_drill_suite_keeps_the_floor_of_the_suite_in_force() -> None:
    """With every drill case passing, the drill suite passes exactly when the suite in force
    does: the overall floor is moved so that the added passes buy nothing."""
    from modelreg.api.drill import _drill_suite, _Failure

    for n in (1, 2, 3, 5, 7, 10, 33):
        for rate in (0.0, 0.3, 1 / 3, 0.5, 0.6, 2 / 3, 0.75, 0.9, 0.99, 1.0):
            for k in (1, 2, 3, 7):
                base = Suite.model_validate(
                    {
                        "name": "base",
                        "thresholds": {"min_pass_rate": rate},
                        "cases": [
                            {"id": f"c{i}", "prompt": f"q{i}", "expect": {"value": "a"}}
                            for i in range(n)
                        ],
                    }
                )
                failure = _Failure("run-1", tuple(_failure(f"f{j}", f"q {j}") for j in range(k)))
                suite, subset, origins = _drill_suite(base, failure, "run run-1", "drill")
                assert len(origins) == k and suite.thresholds.subsets[subset] == 1.0
                floor = suite.thresholds.min_pass_rate
                for p in range(n + 1):
                    assert ((p + k) / (n + k) >= floor) == (p / n >= rate), (n, rate, k, p)


def test_drill_cases_never_collide_with_the_suite_in_force() -> None:
    from modelreg.api.drill import _drill_suite, _Failure
    from modelreg.suites import regression_case

    failing = _failure("water")
    already = regression_case(failing, origin="earlier")  # added with `suite add-case`
    drilled = already.model_copy(update={"id": "drill-" + already.id.removeprefix("regression-")})
    base = Suite(
        name="base",
        thresholds=Thresholds(min_pass_rate=1.0),
        cases=[already, drilled.model_copy(update={"subset": "rollback-drill"})],
    )
    twice = _Failure("run-1", (failing, failing))
    suite, subset, origins = _drill_suite(base, twice, "run run-1", "drill")
    assert subset != "rollback-drill" and len(origins) == 1
    assert len({c.id for c in suite.cases}) == len(suite.cases) == 3


def test_the_newest_failing_counting_run_is_found_and_one_offs_are_not(registry: Any) -> None:
    from modelreg.api.drill import _newest_failure

    record = add_synthetic(registry, 1)
    failed = record_run(registry, record, outcomes={"digest": "pass", "gguf-cpu-smoke": "fail"})
    # A one-off failure after it, and a pass after that: neither is "the newest failing run".
    the_record = registry.get(record)
    with registry.store.locked(the_record.model_id) as tx:
        from datetime import UTC, datetime

        from modelreg.schemas.verification import CheckResult, Outcome

        now = datetime.now(UTC)
        tx.save_run(
            the_record,
            "cpu",
            [
                CheckResult(
                    check="gguf-cpu-smoke",
                    required=True,
                    outcome=Outcome.FAIL,
                    summary="one-off",
                    started_at=now,
                    finished_at=now,
                )
            ],
            "synthetic-host",
            {},
            exploratory=True,
        )
    record_run(registry, record)
    with registry.store.read() as reads:
        found = _newest_failure(reads, the_record, registry.target("cpu"))
    assert found.run_id == failed and found.cases == ()
    assert found.blocking == ("gguf-cpu-smoke: fail (synthetic fail)",)


def test_a_drill_needs_a_candidate(registry: Any) -> None:
    record = add_synthetic(registry, 1)
    record_run(registry, record)
    registry.promote(record, "cpu")
    with pytest.raises(NoRollbackCandidate):
        registry.drill_rollback("rules/alpha", "cpu")
    with pytest.raises(NoRollbackCandidate):
        registry.rollback("rules/alpha", "cpu", why="x", drill=True)
    assert [e.kind for e in stored(registry).events("rules/alpha")][-1] == "promote"


# -- issue 40: the guide's relative gate, cases failed inside a passing run, the incident ----

# The original build answers these four (the sky's color it does not: it rambles past the
# stop, a case every build here fails, and so no fair test of a good candidate).
RELATIVE = (
    "schema_version: 1\nname: capitals\nthresholds: {min_pass_rate: 0.25, max_pass_rate_drop:"
    " 0.5, max_pass_rate_drop_vs: production}\n" + CASES[: CASES.index("  - id: color")]
)


def test_a_drill_under_the_guides_relative_gate_passes_a_good_candidate_and_fails_a_bad_one(
    smollm2: Path, scaled: dict[float, Path], tmp_path: Path, cli: Any
) -> None:
    """The suite carries ``max_pass_rate_drop_vs: production``. The 0.6× build is the first
    release (no production yet: judged by the absolute gates); the original and then the
    1.3× build follow, each within the drop allowed from the one before. The 1.3× build
    passes its run while failing "water" — inside a passing run. Its drill asks "water"
    again, judges the relative gate against the candidate's own counting run (never the
    record being left), and takes the incident's own input: the original answers everything
    (safe to apply); the 0.6× build fails "water" and the incident's prompt."""
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry = modelreg.open(db)
    forgetful, original, rambling = (_add(registry, p) for p in (scaled[0.6], smollm2, scaled[1.3]))
    suite = tmp_path / "relative.yaml"
    suite.write_text(RELATIVE)
    registry.attach_suite(SMOLLM2_MODEL_ID, suite)

    first = registry.verify(forgetful, "cpu")
    assert first.deployability.deployable, first.checks
    (judged,) = [c for c in first.checks if "suite_result" in c.evidence]
    gates = judged.evidence["suite_result"]["gates"]
    (gate,) = [g for g in gates if g["source"] == "baseline"]
    assert gate["outcome"] == "skipped"
    assert "no production yet: the first release is judged by the absolute gates" in gate["message"]
    registry.promote(forgetful, "cpu", why="v1")
    for version, record in enumerate((original, rambling), 2):
        assert registry.verify(record, "cpu").deployability.deployable
        registry.promote(record, "cpu", why=f"v{version}")
    passing = registry.deployability(rambling, "cpu").run_id

    # The incident: back to the original, asked "water" again and the incident's own input.
    berlin = "What is the capital of Germany? Answer in one word."
    plan = registry.drill_rollback(SMOLLM2_MODEL_ID, "cpu", prompts=[berlin], expect=["Berlin"])
    drill = plan.drill
    assert drill is not None and drill.record_id == original
    assert drill.verdict == "safe" and drill.passed and drill.failed == [], drill.failed
    assert drill.from_run == passing
    assert [(c.from_case, c.source, c.passed) for c in drill.cases] == [
        ("water", "failed_run", True),
        ("incident-1", "incident", True),
    ]
    (relative,) = drill.baseline_gates
    assert relative.outcome.value == "pass"
    assert f"for the candidate's own counting run of {original}" in relative.message
    assert rambling not in relative.message
    assert drill.bytes_from is not None and drill.bytes_from.startswith("file://")
    run = stored(registry).run(drill.run_id)
    assert run is not None and run.exploratory and run.purpose == "drill"
    assert plan.message.startswith("safe to apply — drill passed")

    # Further back, to the first release: it fails what failed, and the drill says which.
    paris = "What is the capital of France? Answer in one word."
    code, out, err = cli(
        "--db", db, "rollback", SMOLLM2_MODEL_ID, "--target", "cpu", "--to", forgetful,
        "--drill", "--prompt", paris, "--expect", "Paris",
    )  # fmt: skip
    assert code == 1, err
    assert out.startswith(f"drill       FAILED  {forgetful}")
    assert "  answer    the candidate fails what failed: water, incident-1" in out
    assert "to apply:   none — the candidate fails what failed" in out
    events = stored(registry).events(SMOLLM2_MODEL_ID)
    drills = [e.detail for e in events if e.kind == "rollback-drill"]
    assert [(d["verdict"], d["failing_cases"]) for d in drills] == [
        ("safe", []),
        ("fails", ["water", "incident-1"]),
    ]
    assert _production(registry) == rambling
