"""The judge, table by table: degenerate → stop → answer, every expectation mode, negations."""

from __future__ import annotations

from typing import Any

import pytest

from modelreg.schemas.suite import (
    Case,
    Classification,
    Expectation,
    FinishReason,
    GateOutcome,
    Generation,
    Resources,
    Suite,
    Thresholds,
)
from modelreg.validators.judge import evaluate_suite, judge

PASS = Classification.PASS
WRONG = Classification.WRONG_ANSWER
DEGENERATE = Classification.DEGENERATE
NO_STOP = Classification.NO_STOP


def _completion(output: str) -> Generation:
    return Generation(prompt="p", output=output, chat=False, finish_reason=FinishReason.LENGTH)


def _chat(output: str, finish: FinishReason | None = FinishReason.STOP) -> Generation:
    return Generation(prompt="p", output=output, chat=True, finish_reason=finish, max_tokens=32)


PARIS = Expectation(value="Paris", reject=["Berlin", "Lyon", "London"])


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        # Real outputs (reference.md): SmolLM2 passes, Gemma 3 270M base is wrong, SmolLM2 with
        # 53× too-small embeddings is garbage.
        (" Paris.\n\nThe United States has", PASS),
        ("The capital of France is Paris.", PASS),
        ("**Paris**", PASS),
        ("PARIS", PASS),
        (" the capital of the country of France.", WRONG),
        ("L'Étoile, la Cité, la Nation, la Gé", WRONG),
        ("\n\nterterterDDDCterter(", DEGENERATE),
        # Negations and alternatives.
        ("Berlin, not Paris", WRONG),
        ("It is not Paris.", WRONG),
        ("The answer isn't Paris", WRONG),
        ("Paris is not the capital of France.", WRONG),
        ("Paris or Lyon", WRONG),
        ("Paris. London is the capital of France too.", WRONG),
        ("Paris, not Berlin.", PASS),
        ("Not Berlin; it is Paris.", PASS),
        ("There is no doubt that the capital is Paris.", PASS),
        # Word-bounded.
        ("Parisian", WRONG),
        ("Comparison", WRONG),
        # Degenerate before the answer is read: a right word does not save garbage.
        ("Paris Paris Paris Paris Paris Paris", DEGENERATE),
        ("Paris is the capital. Paris is the capital. Paris is the capital.", DEGENERATE),
        ("", DEGENERATE),
        ("                                                   ", DEGENERATE),
        ("\n\n11.\n''1.\n'11''", DEGENERATE),
        ("the the the the the", DEGENERATE),
        ("abababababababab", DEGENERATE),
        ("?!?!... --- ...", DEGENERATE),
        ("Paris\x00\x01", DEGENERATE),
        ("<|im_start|>assistant\nParis", DEGENERATE),
    ],
)
def test_contains_paris(output: str, expected: Classification) -> None:
    verdict = judge(_completion(output), PARIS)
    assert verdict.classification is expected, verdict.reason


@pytest.mark.parametrize(
    ("generation", "expected", "needle"),
    [
        (_chat("Paris"), PASS, "Paris"),
        (_chat("Paris", FinishReason.LENGTH), NO_STOP, "no end of turn within 32 tokens"),
        (_chat("Paris", None), NO_STOP, "did not report"),
        # A runaway end-of-turn marker: the template or EOS id is broken, the turn never ends.
        (_chat("Paris<|im_end|>\n<|im_start|>user\nAnd Germany?<|im_end|>"), NO_STOP, "im_end"),
        (_chat("Paris<end_of_turn>\n<start_of_turn>user"), NO_STOP, "end_of_turn"),
        (_completion("Paris</s>The next"), NO_STOP, "</s>"),
        # A completion may run to its budget.
        (_completion(" Paris.\n\nThe United States has"), PASS, "Paris"),
        # Degenerate wins over no_stop: the output is judged before its ending.
        (_chat("Paris Paris Paris Paris Paris Paris", FinishReason.LENGTH), DEGENERATE, "6 of 6"),
        (_chat("", FinishReason.LENGTH), DEGENERATE, "empty"),
        # The stop is checked before the answer.
        (_chat("Berlin", FinishReason.LENGTH), NO_STOP, "end of turn"),
    ],
)
def test_stop_is_judged_after_degeneracy_and_before_the_answer(
    generation: Generation, expected: Classification, needle: str
) -> None:
    verdict = judge(generation, PARIS)
    assert verdict.classification is expected, verdict.reason
    assert needle in verdict.reason


def _expect(**fields: Any) -> Expectation:
    return Expectation.model_validate(fields)


@pytest.mark.parametrize(
    ("expect", "output", "expected"),
    [
        # exact: whole answer, normalised.
        (_expect(mode="exact", value="done"), "done", PASS),
        (_expect(mode="exact", value="done"), " Done.", PASS),
        (_expect(mode="exact", value="done"), '"done"', PASS),
        (_expect(mode="exact", value="done"), "done, and more", WRONG),
        (_expect(mode="exact", value="Done", case_sensitive=True), "done", WRONG),
        (_expect(mode="exact", value="AAA"), "AAA", PASS),  # short repeats can be answers
        # regex
        (_expect(mode="regex", value=r"def \w+\(\w+\)"), "def square(x):\n    return x*x", PASS),
        (_expect(mode="regex", value=r"^\s*\d{3}\s*$"), "42", WRONG),
        (_expect(mode="regex", value=r"return", reject=["import os"]), "import os\nreturn", WRONG),
        # one_of
        (_expect(mode="one_of", values=["yes", "no"]), "Yes.", PASS),
        (_expect(mode="one_of", values=["yes", "no"]), "Yes, no.", WRONG),
        (_expect(mode="one_of", values=["yes", "no"]), "maybe", WRONG),
        # not_contains
        (_expect(mode="not_contains", value="Paris"), "Berlin", PASS),
        (_expect(mode="not_contains", value="Paris"), "not Paris", WRONG),
        (_expect(mode="not_contains", value="Paris"), "Parisian", PASS),
        # contains, numbers: separators do not matter, digits are word-bounded
        (_expect(value="1111111110"), "The sum is 1,111,111,110.", PASS),
        (_expect(value="1111111110"), "1111111110", PASS),
        (_expect(value="1111111110"), "11111111100", WRONG),
        (_expect(value="1111111110"), "1111111110.5", WRONG),
        (_expect(value="1111111110"), "It is not 1111111110.", WRONG),
        (_expect(value="56088"), "123 × 456 = 56088", PASS),
        # contains, case-sensitive and non-English
        (_expect(value="Berlin"), "Die Hauptstadt ist Berlin.", PASS),
        (_expect(value="Berlin"), "Ce n'est pas Berlin.", WRONG),
        (_expect(value="東京"), "日本の首都は東京です。", PASS),
        # json
        (_expect(mode="json"), '{"name": "Ada", "age": 36}', PASS),
        (_expect(mode="json"), '```json\n{"name": "Ada"}\n```', PASS),
        (_expect(mode="json"), 'Here it is: {"name": "Ada"}', WRONG),
        (_expect(mode="json"), '{"name": "Ada",}', WRONG),
    ],
)
def test_expectation_modes(expect: Expectation, output: str, expected: Classification) -> None:
    verdict = judge(_completion(output), expect)
    assert verdict.classification is expected, verdict.reason


def test_json_against_a_schema() -> None:
    expect = _expect(
        mode="json",
        json_schema={
            "type": "object",
            "required": ["name", "age"],
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        },
    )
    assert judge(_completion('{"name": "Ada", "age": 36}'), expect).classification is PASS
    wrong = judge(_completion('{"name": "Ada", "age": "36"}'), expect)
    assert wrong.classification is WRONG and "at age" in wrong.reason
    missing = judge(_completion('{"name": "Ada"}'), expect)
    assert missing.classification is WRONG and "'age' is a required property" in missing.reason


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"mode": "contains"}, "needs 'value'"),
        ({"mode": "json", "value": "x"}, "takes no 'value'"),
        ({"mode": "one_of", "values": []}, "non-empty 'values'"),
        ({"mode": "exact", "value": "x", "reject": ["y"]}, "takes no 'reject'"),
        ({"mode": "regex", "value": "("}, "not a valid regular expression"),
        ({"mode": "contains", "value": "x", "json_schema": {}}, "only json does"),
        ({"mode": "contains", "value": "x", "reject": [" "]}, "empty string"),
    ],
)
def test_expectation_must_fit_its_mode(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Expectation.model_validate(fields)


def _suite(**thresholds: Any) -> Suite:
    cases = [
        Case(id="paris", subset="facts", prompt="Capital of France?", expect=PARIS),
        Case(id="rome", subset="facts", prompt="Capital of Italy?", expect=_expect(value="Rome")),
        Case(id="sum", subset="arithmetic", prompt="2+2?", expect=_expect(value="4")),
    ]
    return Suite(name="t", thresholds=Thresholds.model_validate(thresholds), cases=cases)


def test_suite_pass_rates_overall_and_per_subset() -> None:
    suite = _suite(min_pass_rate=0.6, subsets={"arithmetic": 1.0})
    generations = {
        "paris": _chat("Paris"),
        "rome": _chat("Milan"),
        "sum": _chat("4"),
    }
    result = evaluate_suite(suite, generations)
    assert result.passed, result.reasons
    assert [(s.subset, s.passed, s.total) for s in result.subsets] == [
        ("arithmetic", 1, 1),
        ("facts", 1, 2),
    ]
    assert result.failing_cases[0].case_id == "rome"
    assert result.failing_cases[0].output == "Milan"

    result = evaluate_suite(suite, generations | {"sum": _chat("5")})
    assert not result.passed
    assert result.reasons == [
        "pass rate 1/3 = 33% < min_pass_rate 60%",
        "subset arithmetic: 0/1 = 0% < 100%",
    ]


def test_missing_generation_is_not_run_and_counts_as_failed() -> None:
    result = evaluate_suite(_suite(min_pass_rate=1.0), {"paris": _chat("Paris")})
    assert not result.passed
    assert {c.case_id: c.classification for c in result.cases} == {
        "paris": PASS,
        "rome": Classification.NOT_RUN,
        "sum": Classification.NOT_RUN,
    }


def test_the_same_output_for_every_prompt_is_degenerate() -> None:
    same = {name: _chat("Paris") for name in ("paris", "rome", "sum")}
    result = evaluate_suite(_suite(min_pass_rate=0.0), same)
    assert all(c.classification is DEGENERATE for c in result.cases)
    assert "the same output for every prompt" in result.cases[0].reason


def test_resource_gates_pass_fail_and_unmeasured() -> None:
    suite = _suite(
        min_pass_rate=0.0, max_peak_rss_gib=1.0, min_decode_tokens_per_s=50, max_ttft_ms=500
    )
    generations = {"paris": _chat("Paris"), "rome": _chat("Rome"), "sum": _chat("4")}
    measured = Resources(peak_rss_bytes=2 << 30, decode_tokens_per_s=80.0, ttft_ms_max=None)
    result = evaluate_suite(suite, generations, measured)
    outcomes = {g.gate: g.outcome for g in result.gates}
    assert outcomes == {
        "max_peak_rss_gib": GateOutcome.FAIL,
        "min_decode_tokens_per_s": GateOutcome.PASS,
        "max_ttft_ms": GateOutcome.UNMEASURED,
    }
    assert not result.passed
    assert result.reasons == [
        "max_peak_rss_gib: 2 GiB > 1 GiB",
        "max_ttft_ms: not measured (limit 500 ms)",
    ]


def test_agreement_gates_are_skipped_without_a_reference() -> None:
    suite = _suite(min_pass_rate=0.0, min_top1_agreement=0.9, max_mean_kl=0.1)
    result = evaluate_suite(suite, {"paris": _chat("Paris")})
    assert {g.outcome for g in result.gates} == {GateOutcome.SKIPPED}
    assert result.passed
