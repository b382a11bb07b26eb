"""Suite files: strict loading with one-line errors, a stable digest, regression cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelreg.errors import InvalidInput
from modelreg.schemas.suite import Classification, FinishReason, Generation, SuiteResult
from modelreg.suites import (
    DEFAULT_SUITE_PATH,
    MAX_SUITE_BYTES,
    append_case,
    default_suite,
    load_suite,
    regression_case,
)
from modelreg.validators.judge import evaluate_suite

SUITE = """\
# a comment that add-case must keep
schema_version: 1
name: small
thresholds:
  min_pass_rate: 0.5
  subsets: {facts: 1.0}
cases:
  - id: capital-france
    subset: facts
    prompt: What is the capital of France?
    max_tokens: 16
    expect: {mode: contains, value: Paris, reject: [Lyon]}
  # the second case
  - id: sum
    subset: arithmetic
    prompt: What is 2 + 2?
    expect: {mode: contains, value: "4"}
"""


def _write(tmp_path: Path, text: str, name: str = "suite.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_suite_loads_and_its_digest_ignores_layout(tmp_path: Path) -> None:
    suite = load_suite(_write(tmp_path, SUITE))
    assert [c.id for c in suite.cases] == ["capital-france", "sum"]
    relaid = SUITE.replace("# a comment that add-case must keep\n", "").replace(
        "  subsets: {facts: 1.0}", "  subsets:\n    facts: 1.0"
    )
    assert load_suite(_write(tmp_path, relaid, "b.yaml")).digest() == suite.digest()
    changed = SUITE.replace("min_pass_rate: 0.5", "min_pass_rate: 0.6")
    assert load_suite(_write(tmp_path, changed, "c.yaml")).digest() != suite.digest()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: [unclosed", "not valid YAML"),
        ("- just\n- a list\n", "a suite is a YAML mapping"),
        (SUITE.split("cases:")[0] + "cases: []\n", "the suite has no cases"),
        (
            SUITE.replace("min_pass_rate: 0.5", "min_pass_rate: 1.5"),
            "field thresholds.min_pass_rate: Input should be less than or equal to 1",
        ),
        (
            SUITE.replace("subsets: {facts: 1.0}", "subsets: {facts: -0.1}"),
            "min pass rate of subset 'facts' must be in [0, 1]",
        ),
        (
            SUITE.replace("subsets: {facts: 1.0}", "subsets: {code: 0.5}"),
            "thresholds.subsets names 'code', but no case has that subset",
        ),
        (
            SUITE.replace("value: Paris, reject: [Lyon]", "reject: [Lyon]"),
            "case 'capital-france' (#1) field expect: mode contains needs 'value'",
        ),
        (
            SUITE.replace("max_tokens: 16", "max_tokens: 0"),
            "case 'capital-france' (#1) field max_tokens: Input should be greater than or equal",
        ),
        (
            SUITE.replace("id: sum", "id: capital-france"),
            "case id 'capital-france' is used twice",
        ),
        (
            SUITE.replace("    prompt: What is 2 + 2?\n", ""),
            "case 'sum' (#2) field prompt: Field required",
        ),
        (
            SUITE.replace("mode: contains, value: Paris", "mode: regex, value: '(Paris'"),
            "case 'capital-france' (#1) field expect: value is not a valid regular expression",
        ),
        (SUITE.replace("name: small", "name: small\nsurprise: 1"), "field surprise: Extra"),
        (
            SUITE.replace("  - id: sum", "  - &second\n    id: sum"),
            "YAML anchor &second is not accepted",
        ),
        (SUITE + "---\nname: other\n", "not valid YAML"),
    ],
)
def test_bad_suite_is_one_line_naming_case_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(InvalidInput) as caught:
        load_suite(path)
    assert message in str(caught.value)
    assert str(caught.value).startswith(str(path))
    assert "\n" not in str(caught.value)


def test_alias_is_refused_even_where_it_would_be_harmless(tmp_path: Path) -> None:
    text = SUITE.replace("value: Paris, reject: [Lyon]", "value: &city Paris, reject: [*city]")
    with pytest.raises(InvalidInput, match="YAML anchor &city is not accepted .* at line 12"):
        load_suite(_write(tmp_path, text))


def test_invalid_json_schema_is_refused(tmp_path: Path) -> None:
    text = SUITE.replace(
        'expect: {mode: contains, value: "4"}', "expect: {mode: json, json_schema: {type: 12}}"
    )
    with pytest.raises(InvalidInput) as caught:
        load_suite(_write(tmp_path, text))
    assert "case 'sum' (#2) field expect.json_schema: not a valid JSON Schema at type" in str(
        caught.value
    )


def test_oversized_and_missing_files_are_refused(tmp_path: Path) -> None:
    big = _write(tmp_path, SUITE + "#" * MAX_SUITE_BYTES)
    with pytest.raises(InvalidInput, match="larger than"):
        load_suite(big)
    with pytest.raises(InvalidInput, match="suite file not found"):
        load_suite(tmp_path / "absent.yaml")


def test_default_suite_covers_the_subsets_the_issue_names() -> None:
    suite = default_suite()
    assert len(suite.cases) >= 12
    assert {c.subset for c in suite.cases} >= {
        "facts",
        "arithmetic",
        "code",
        "json",
        "non-english",
        "rare-name",
        "stop",
    }
    assert all(c.chat for c in suite.cases)  # a chat suite: every case is a turn that must end
    assert DEFAULT_SUITE_PATH.is_file()


def _result(path: Path, outputs: dict[str, str]) -> SuiteResult:
    generations = {
        case_id: Generation(prompt="", output=output, chat=True, finish_reason=FinishReason.STOP)
        for case_id, output in outputs.items()
    }
    return evaluate_suite(load_suite(path), generations)


OTHER = SUITE.replace("name: small", "name: other").replace("France", "Italy")


def test_a_failing_output_becomes_a_regression_case_keeping_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, SUITE)
    suite = load_suite(path)
    other = _result(_write(tmp_path, OTHER, "other.yaml"), {"capital-france": "Milan"})
    failure = next(c for c in other.failing_cases if c.case_id == "capital-france")
    case = regression_case(failure, origin="run 7 of r_0123abcd on cpu")
    assert case.id.startswith("regression-") and case.subset == "regression"
    assert case.prompt == "What is the capital of Italy?" and case.expect.value == "Paris"
    assert "run 7 of r_0123abcd" in (case.note or "") and "'Milan'" in (case.note or "")

    grown = append_case(path, case)
    text = path.read_text()
    assert text.startswith(SUITE)  # every line and comment kept; the case appended
    assert load_suite(path) == grown
    assert [c.id for c in grown.cases] == ["capital-france", "sum", case.id]
    assert grown.digest() != suite.digest()

    with pytest.raises(InvalidInput, match="already in the suite"):
        append_case(path, case)
    own = _result(path, {"capital-france": "Lyon"}).failing_cases[0]
    with pytest.raises(InvalidInput, match="the same prompt and expectation are already case"):
        append_case(path, regression_case(own, origin="run 8"))


def test_add_case_rewrites_a_flow_style_file(tmp_path: Path) -> None:
    result = _result(_write(tmp_path, SUITE), {"capital-france": "Lyon"})
    flow = _write(
        tmp_path,
        "{name: f, thresholds: {min_pass_rate: 1}, cases: [{id: a, prompt: p, "
        "expect: {value: x}}]}\n",
        "flow.yaml",
    )
    grown = append_case(flow, regression_case(result.failing_cases[0], origin="run 1"))
    assert load_suite(flow) == grown and len(grown.cases) == 2


def test_a_passing_case_is_not_a_regression(tmp_path: Path) -> None:
    result = _result(_write(tmp_path, SUITE), {"capital-france": "Paris", "sum": "4"})
    passing = next(c for c in result.cases if c.classification is Classification.PASS)
    with pytest.raises(InvalidInput, match="passed in run 3: nothing to add"):
        regression_case(passing, origin="run 3")
