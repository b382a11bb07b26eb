"""The rollback drill's answers where no model runs (issue 40, item 4): what it asks again
(the cases production failed, inside a failing or a passing run, and the incident's own
input), its relative gates judged against the candidate's own counting run, and the answer
"could not run" when the candidate's bytes are nowhere to be had — never a pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from modelreg.errors import InvalidInput, NoRollbackCandidate
from modelreg.schemas.suite import GateOutcome, Suite
from tests.helpers import add_synthetic, record_run, stored, suite_evidence

TWO_CASES = {
    "name": "capitals",
    "thresholds": {"min_pass_rate": 0.5},
    "cases": [
        {"id": "paris", "prompt": "Capital of France?", "expect": {"value": "Paris"}},
        {"id": "seoul", "prompt": "Capital of Korea?", "expect": {"value": "Seoul"}},
    ],
}


def test_a_case_failed_inside_a_passing_run_is_what_failed(registry: Any) -> None:
    """Production passed its suite at 50 % while failing the Korean case: that case is what
    the drill asks again (before: only a run that failed overall was looked at, so a drill
    passed a candidate that failed the very case production failed)."""
    from modelreg.api.drill import _newest_failure

    record = add_synthetic(registry, 1)
    suite = Suite.model_validate(TWO_CASES)
    evidence = {"gguf-cpu-smoke": suite_evidence(suite, {"paris": "Paris", "seoul": "Tokyo"})}
    passing = record_run(registry, record, evidence=evidence)
    with registry.store.read() as reads:
        found = _newest_failure(reads, registry.get(record), registry.target("cpu"))
    assert found.run_id == passing and found.passed and found.blocking == ()
    assert [c.case_id for c in found.cases] == ["seoul"]

    # A newer run that passed every case is not "what failed"; the older one still is.
    record_run(registry, record)
    with registry.store.read() as reads:
        again = _newest_failure(reads, registry.get(record), registry.target("cpu"))
    assert again.run_id == passing


def test_the_incidents_own_input_goes_in_pairs() -> None:
    from modelreg.api.drill import incident_cases

    cases = incident_cases(["Capital of Korea?", "2 + 2?"], ["Seoul", "4"])
    assert [(c.id, c.prompt, c.expect.value, c.expect.mode.value) for c in cases] == [
        ("incident-1", "Capital of Korea?", "Seoul", "contains"),
        ("incident-2", "2 + 2?", "4", "contains"),
    ]
    assert cases[0].expect.value == "Seoul" and cases[0].expect.mode.value == "contains"
    with pytest.raises(InvalidInput, match=r"`prompts` and `expect` go in pairs.*2 prompt"):
        incident_cases(["a", "b"], ["x"])
    with pytest.raises(InvalidInput, match="incident prompt 2: `prompts` and `expect` must not"):
        incident_cases(["a", "b"], ["x", "  "])
    with pytest.raises(InvalidInput, match="lists of texts"):
        incident_cases("abc", ["x", "y", "z"])
    with pytest.raises(InvalidInput, match="incident prompt 1: prompt"):
        incident_cases(["x" * 100_000], ["y"])


def test_unpaired_or_undrilled_incident_input_is_bad_input(registry: Any, cli: Any) -> None:
    first, second = add_synthetic(registry, 1), add_synthetic(registry, 2)
    for record in (first, second):
        record_run(registry, record)
        registry.promote(record, "cpu", why="release")
    db = ("--db", str(registry.url))
    code, _, err = cli(
        *db, "rollback", "rules/alpha", "--target", "cpu", "--drill", "--prompt", "Capital?"
    )
    assert code == 2 and "--prompt and --expect go in pairs: got 1 --prompt and 0 --expect" in err
    code, _, err = cli(*db, "rollback", "rules/alpha", "--target", "cpu", "--expect", "x")
    assert code == 2 and "are for a drill: add --drill" in err
    with pytest.raises(InvalidInput, match="go in pairs"):
        registry.drill_rollback("rules/alpha", "cpu", prompts=["Capital?"])
    with pytest.raises(InvalidInput, match="are for a drill"):
        registry.rollback("rules/alpha", "cpu", why="x", prompts=["a"], expect=["b"])
    events = [e.kind for e in stored(registry).events("rules/alpha")]
    assert "rollback-drill" not in events and events[-1] == "promote"


def test_the_drill_suite_asks_the_incident_and_leaves_relative_gates_to_the_drill() -> None:
    from modelreg.api.drill import _drill_suite, _Failure, incident_cases

    base = Suite.model_validate(
        {
            **TWO_CASES,
            "thresholds": {
                "min_pass_rate": 0.5,
                "max_pass_rate_drop_vs": "production",
                "max_pass_rate_drop": 0.01,
                "max_subset_pass_rate_drop": {"general": 0.0},
            },
            "cases": [
                *TWO_CASES["cases"],
                {"id": "incident-1", "prompt": "Taken?", "expect": {"value": "yes"}},
            ],
        }
    )
    incident = incident_cases(["Capital of Korea?"], ["Seoul"])
    suite, subset, origins = _drill_suite(base, _Failure(None), "run none", "drill", incident)
    # The record being left is never the drill's baseline: verify judges no relative gate.
    thresholds = suite.thresholds
    assert thresholds.max_pass_rate_drop_vs is None and thresholds.max_pass_rate_drop is None
    assert thresholds.max_subset_pass_rate_drop == {} and thresholds.subsets[subset] == 1.0
    assert origins == {"incident-1-x": "incident-1"}
    (asked,) = [c for c in suite.cases if c.subset == subset]
    assert asked.id == "incident-1-x" and asked.prompt == "Capital of Korea?"


def _judged(answers: dict[str, str], suite: dict[str, Any] | None = None) -> Any:
    from modelreg.schemas.suite import SuiteResult

    found = suite_evidence(Suite.model_validate(suite or TWO_CASES), answers)
    return SuiteResult.model_validate(found["suite_result"])


def test_relative_gates_are_judged_against_the_candidates_own_counting_run() -> None:
    from modelreg.api.drill import _Previous, _relative_gates

    base = Suite.model_validate(
        {
            **TWO_CASES,
            "thresholds": {
                "min_pass_rate": 0.5,
                "max_pass_rate_drop_vs": "production",
                "max_pass_rate_drop": 0.01,
            },
        }
    )
    both = {"paris": "Paris", "seoul": "Seoul"}
    own = _Previous("r_candidate", _judged(both), None)
    (gate,) = _relative_gates(base, _judged(both), own)
    assert gate.outcome is GateOutcome.PASS
    assert "100.0% vs 100.0% for the candidate's own counting run of r_candidate" in gate.message
    (dropped,) = _relative_gates(base, _judged({"paris": "Paris"}), own)
    assert dropped.outcome is GateOutcome.FAIL and "a drop of 50.0 pp > 1.0 pp" in dropped.message

    # A suite grown since the candidate's run: compared on the cases both asked.
    grown = {
        **TWO_CASES,
        "cases": [
            *TWO_CASES["cases"],
            {"id": "lima", "prompt": "Capital of Peru?", "expect": {"value": "Lima"}},
        ],
    }
    (common,) = _relative_gates(base, _judged(both, grown), own)
    assert common.outcome is GateOutcome.PASS and common.measured == 0.0

    # No counting run to compare with: unmeasured, never a pass.
    none = _Previous("r_candidate", None, "r_candidate has no counting run on cpu")
    (unmeasured,) = _relative_gates(base, _judged(both), none)
    assert unmeasured.outcome is GateOutcome.UNMEASURED
    assert "no baseline (r_candidate has no counting run on cpu)" in unmeasured.message
    other = _Previous("r_candidate", _judged({}, {**TWO_CASES, "cases": grown["cases"][2:]}), None)
    (disjoint,) = _relative_gates(base, _judged(both), other)
    assert disjoint.outcome is GateOutcome.UNMEASURED and "asked none of its cases" in (
        disjoint.message
    )


def _two_productions(registry: Any) -> tuple[str, str]:
    first, second = add_synthetic(registry, 1), add_synthetic(registry, 2)
    for record in (first, second):
        record_run(registry, record)
        registry.promote(record, "cpu", why="release")
    return first, second


def test_a_drill_without_the_candidates_bytes_could_not_run(registry: Any, cli: Any) -> None:
    """The candidate is not where it was added, and its recorded copy does not hold its bytes
    (a sha256 mismatch): nothing runs, the answer is "could not run", and nothing switches —
    never a drill run from a missing local path. The fetch that failed is recorded: the plan
    then passes the candidate over."""
    first, second = _two_productions(registry)
    code, out, err = cli(
        "--db", str(registry.url), "rollback", "rules/alpha", "--target", "cpu", "--drill",
        "--apply", "--why", "incident 9",
    )  # fmt: skip
    assert code == 1, (out, err)
    assert out.startswith(f"drill       COULD NOT RUN  {first}  nothing ran")
    assert f"  answer    could not run: no copy of {first}'s bytes could be fetched" in out
    assert "to apply:   none — the drill could not run" in out
    assert f"production stays {second}" in err
    (entry,) = registry.status("rules/alpha", "cpu").entries
    assert entry.record.record_id == second
    (drill,) = [e for e in stored(registry).events("rules/alpha") if e.kind == "rollback-drill"]
    assert drill.detail["verdict"] == "could_not_run" and drill.detail["run_id"] is None
    assert not drill.detail["passed"] and drill.why == "incident 9"
    with pytest.raises(NoRollbackCandidate, match=f"{first} .*no fetchable copy"):
        registry.drill_rollback("rules/alpha", "cpu")


def test_a_drill_from_a_path_without_the_files_could_not_run(registry: Any, tmp_path: Path) -> None:
    first, _ = _two_productions(registry)
    empty = tmp_path / "empty"
    empty.mkdir()
    drill = registry.drill_rollback("rules/alpha", "cpu", path=empty).drill
    assert drill.verdict == "could_not_run" and drill.run_id is not None
    assert drill.bytes_from == f"{empty} (given)"
    assert drill.could_not_run.startswith("digest: unavailable (not on this host")
    run = stored(registry).run(drill.run_id)
    assert run.exploratory and run.purpose == "missing_bytes" and run.record_id == first
    with pytest.raises(InvalidInput, match="no such file or directory"):
        registry.drill_rollback("rules/alpha", "cpu", path=tmp_path / "nowhere")


def test_a_drill_that_judged_nothing_could_not_run(registry: Any, tmp_path: Path) -> None:
    """The candidate's bytes are fetched from its recorded copy (every sha256 checked) into
    the cache — they are not where it was added — and the real checks cannot read them as a
    model (they are no GGUF): no suite was judged, so the drill could not run, never a pass."""
    from modelreg.locations import file_url
    from tests.helpers import located_as_added, record_of_files

    records = []
    for i in (1, 2):
        name, data = f"m{i}.gguf", f"not a model {i}".encode() * 64
        copy = tmp_path / f"copy-{i}"
        copy.mkdir()
        (copy / name).write_bytes(data)
        record = record_of_files(registry, {name: data}, i)
        located_as_added(registry, registry.get(record), file_url(copy))
        record_run(registry, record)
        registry.promote(record, "cpu", why="release")
        records.append(record)
    drill = registry.drill_rollback("rules/alpha", "cpu").drill
    assert drill.record_id == records[0] and drill.verdict == "could_not_run", drill
    assert drill.bytes_from is not None and drill.bytes_from.startswith("a copy fetched from")
    assert drill.could_not_run is not None and drill.could_not_run.endswith("nothing was tried")
    assert drill.could_not_run.startswith(("host-compat: unavailable", "gguf-cpu-smoke: "))
    run = stored(registry).run(drill.run_id)
    assert run is not None and run.exploratory and run.purpose == "drill"
    digest = [c for c in stored(registry).run_checks(drill.run_id) if c.result.check == "digest"]
    assert [c.result.outcome.value for c in digest] == ["pass"]
