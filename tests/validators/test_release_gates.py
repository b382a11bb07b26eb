"""The operating guide's gates: percentiles, prompt speed, pass-rate drops against the
production record, and long-context cases sized to the model's context."""

from __future__ import annotations

from typing import Any

import pytest

from modelreg.errors import InvalidInput
from modelreg.schemas.suite import GateOutcome, Resources, Suite, SuiteResult
from modelreg.suites import parse_suite
from modelreg.validators.judge import baseline_gates, evaluate_suite, with_gates
from modelreg.validators.resources import percentile, resources_from_response


def _suite(**thresholds: Any) -> Suite:
    return parse_suite(
        {
            "name": "guide",
            "thresholds": {"min_pass_rate": 0.5} | thresholds,
            "cases": [
                {"id": "a", "subset": "ko", "prompt": "q1", "expect": {"value": "x"}},
                {"id": "b", "subset": "ko", "prompt": "q2", "expect": {"value": "y"}},
                {"id": "c", "subset": "en", "prompt": "q3", "expect": {"value": "z"}},
            ],
        },
        "guide.yaml",
    )


def _result(suite: Suite, passed: set[str]) -> SuiteResult:
    from modelreg.schemas.suite import Generation

    generations = {
        c.id: Generation(
            prompt=c.prompt,
            output=(c.expect.value or "") if c.id in passed else "nothing here",
            chat=False,
            finish_reason="stop",
        )
        for c in suite.cases
    }
    return evaluate_suite(suite, generations)


def test_percentiles_are_measured_values_by_nearest_rank() -> None:
    assert percentile([], 95) is None
    assert percentile([10.0], 95) == 10.0
    values = [float(v) for v in range(1, 21)]  # 1..20
    assert percentile(values, 50) == 10.0 and percentile(values, 95) == 19.0
    assert percentile(values, 100) == 20.0
    response = {"generations": [{"ttft_ms": t} for t in (100, 120, 110, 900)]}
    resources = resources_from_response(response)
    assert (resources.ttft_ms_median, resources.ttft_ms_p95, resources.ttft_ms_max) == (
        115.0,
        900.0,
        900,
    )


def test_p95_ttft_and_prompt_speed_gates() -> None:
    suite = _suite(max_ttft_ms_p95=500, max_ttft_ms_p50=200, min_prompt_tokens_per_s=100)
    figures = Resources(ttft_ms_median=150, ttft_ms_p95=900, prompt_tokens_per_s=80)
    result = evaluate_suite(suite, {}, figures)
    outcomes = {g.gate: g.outcome for g in result.gates}
    assert outcomes == {
        "min_prompt_tokens_per_s": GateOutcome.FAIL,
        "max_ttft_ms_p50": GateOutcome.PASS,
        "max_ttft_ms_p95": GateOutcome.FAIL,
    }
    unmeasured = evaluate_suite(suite, {}, Resources())
    assert {g.outcome for g in unmeasured.gates} == {GateOutcome.UNMEASURED}


def test_a_drop_against_production_is_measured_overall_and_per_subset() -> None:
    suite = _suite(
        max_pass_rate_drop_vs="production",
        max_pass_rate_drop=0.01,
        max_subset_pass_rate_drop={"ko": 0.0},
    )
    production = _result(suite, {"a", "b", "c"})
    candidate = _result(suite, {"a", "c"})  # 2/3: overall passes the 50 % floor
    assert candidate.passed
    gates = baseline_gates(suite, candidate, production, "r_prod", None)
    assert [(g.gate, g.outcome) for g in gates] == [
        ("max_pass_rate_drop", GateOutcome.FAIL),
        ("max_pass_rate_drop[ko]", GateOutcome.FAIL),
    ]
    assert "drop of 33.3 pp > 1.0 pp" in gates[0].message and "r_prod" in gates[0].message
    judged = with_gates(candidate, gates)
    assert not judged.passed and len(judged.reasons) == 2
    same = baseline_gates(suite, production, production, "r_prod", None)
    assert {g.outcome for g in same} == {GateOutcome.PASS}
    better = baseline_gates(suite, production, candidate, "r_prod", None)
    assert {g.outcome for g in better} == {GateOutcome.PASS}  # a gain is no drop


def test_no_baseline_run_on_the_suite_version_is_unmeasured_never_a_pass() -> None:
    suite = _suite(max_pass_rate_drop_vs="production", max_pass_rate_drop=0.01)
    candidate = _result(suite, {"a", "b", "c"})
    why = "production r_prod's counting run on cpu is not on suite guide sha256:…"
    (gate,) = baseline_gates(suite, candidate, None, "r_prod", why)
    assert gate.outcome is GateOutcome.UNMEASURED and why in gate.message
    assert not with_gates(candidate, [gate]).passed


@pytest.mark.parametrize(
    ("thresholds", "message"),
    [
        ({"max_pass_rate_drop": 0.01}, "needs its baseline: max_pass_rate_drop_vs"),
        ({"max_pass_rate_drop_vs": "production"}, "needs max_pass_rate_drop"),
        ({"max_pass_rate_drop_vs": "r_1234", "max_pass_rate_drop": 0.1}, "production"),
        (
            {"max_pass_rate_drop_vs": "production", "max_subset_pass_rate_drop": {"fr": 0.1}},
            "'fr', but no case has that subset",
        ),
        (
            {"max_pass_rate_drop_vs": "production", "max_subset_pass_rate_drop": {"ko": 2}},
            "pass-rate drop of subset 'ko' must be in [0, 1]",
        ),
    ],
)
def test_a_baseline_gate_that_is_not_the_schema_is_one_line(
    thresholds: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInput, match=None) as caught:
        _suite(**thresholds)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_long_context_case_is_sized_to_the_model_and_bounded() -> None:
    from modelreg.suites import default_suite
    from modelreg.validators.smoke import request_prompts, suite_context

    suite = default_suite()
    (case,) = [c for c in suite.cases if c.long_context is not None]
    small, large, unknown = (case.prompt_for(n) for n in (2048, 131072, None))
    assert small.startswith(case.long_context.needle) and small.endswith(case.prompt)
    assert len(small) < len(large) == len(unknown)  # a quarter of 2,048 tokens < the cap
    assert len(large) <= 1024 * 3 + 400  # the cap: bounded time on any model
    assert suite_context(suite, 2048) <= 2048  # never past the model's context
    assert suite_context(suite, 8192) >= len(large) // 2
    prompts = {p["id"]: p["prompt"] for p in request_prompts(suite, 8192)}
    assert prompts[case.id] == case.prompt_for(8192)
    assert any(c.subset == "korean" for c in suite.cases)


def test_a_suites_terms_are_the_terms_its_runs_are_judged_by() -> None:
    """What `suite attach` calls weakening is what the verdict rule will hold a record for:
    the terms of a suite before any run equal those of its runs' results."""
    from modelreg.suites import default_suite, gate_terms, suite_terms

    suite = _suite(
        max_ttft_ms_p95=500,
        min_prompt_tokens_per_s=10,
        max_pass_rate_drop_vs="production",
        max_pass_rate_drop=0.01,
        max_subset_pass_rate_drop={"ko": 0.0},
        subsets={"en": 0.5},
    )
    result = with_gates(
        evaluate_suite(suite, {}, Resources()),
        baseline_gates(suite, _result(suite, set()), None, "r_prod", "none"),
    )
    for made in (suite, default_suite()):
        judged = result if made is suite else evaluate_suite(made, {}, Resources())
        before, after = suite_terms(made), gate_terms(judged, "cpu")
        assert (before.suite, before.min_pass_rate, before.subsets, before.cases) == (
            after.suite,
            after.min_pass_rate,
            after.subsets,
            after.cases,
        )
        assert before.limits == after.limits
