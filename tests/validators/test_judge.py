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


def _runaway(output: str) -> Generation:
    """A chat turn that ran to its budget without an end of turn: no_stop, unless the output
    itself is garbage."""
    return Generation(
        prompt="p",
        output=output,
        chat=True,
        finish_reason=FinishReason.LENGTH,
        stopped_by_eos=False,
        max_tokens=32,
        completion_tokens=32,
    )


@pytest.mark.parametrize(
    ("output", "needle"),
    [
        # Issue 24 item 7: judged no_stop before ("a template / stop-token problem"), as were
        # all the real outputs further down.
        ("_______ the the furtherTheThe further further further A", "4 of 8 words repeat"),
        ("what is is is the the capital capital of France", "repeat the word before them"),
        # Degenerate before too: the older rules catch them first.
        ("\n\nterterterDDDCterter(", "repetition covers"),
        ("the cat sat on the cat sat on the cat sat on", "repetition covers"),
        ("A A A A A A A A", "near-constant"),
        ("______ ______ ______", "no letters or digits"),
        # Real greedy outputs of damaged SmolLM2 copies (llama-cpp-python 0.3.36, 32 tokens;
        # tests/validators/test_broken_weights.py makes them).
        # Token embedding scales × 1/53 (this build; reference.md's build said "terterterDDDC").
        ("\n\nterter(CCC((',','" + "'" * 20, "repetition covers"),
        # × 8: a fluent start, then one token over and over.
        (" the most popular destination in the world." + "\n" * 24, "24 line breaks in a row"),
        # blk.10.ffn_down inverted: glued subword fragments.
        (
            'oflavscribeaughedennis arocal__":ingoutheastern setattrounter,  leastaughteredayama'
            " Buddhordial pathlibareordial pathlibemplateruct']=are McCletexts thesebianaughed",
            "letters on average",
        ),
        (
            " interpreayamaя following elifzig other onlyunsqueeze greatamenoscow whatRomːinders"
            " overallrasoundevelopedisureplianceumacipline Uttungenaughed"
            " serializersessorsordialeveloped linestyle McCle",
            "letters on average",
        ),
        # blk.29.ffn_down inverted: a few fragments glued over and over, no space.
        (
            "CovaughedChannelTypeectinikipediaqueezequeezequeezequeezequeezequeezeChannelType"
            "ikipediaChannelTypeailureailureailurexualityChannelTypeailureChannelTypeailure"
            "ChannelTypeChannelTypeailureChannelTypeChannelTypeChannelTypeailureChannelType"
            "ailureChannelType",
            "words are the same 3",
        ),
        # blk.20.ffn_down inverted: one glued token, Cyrillic inside.
        (
            " fundamentrustnaiяrequentlysersevelopedthelessthelessthelessaughedounteredernacle"
            "ounteredaughedountered(['ChannelTypeaughedthelessthelessthelessthelessthelessaughed"
            "ːymourparalleledthelessaughedːtheless",
            "letters on average",
        ),
        # blk.3.attn_output inverted: modifier letters glued into every token.
        (
            "outheasternːːerc oːː twoːːIREDːː midːː Tː saffːounteredːː midːː Tː saffːounteredː",
            "9 of 9 tokens are no words (modifier letters",
        ),
        # Gemma 3 270M with embeddings 1/√640 too small (its embed_scale dropped).
        (
            ', \\\\々\r\r\r"},{""},{""},{""},{""},{""},{""},{""},{",子,,,, ,,,,,,,,,,,',
            "only 2 of 61 characters are letters or digits",
        ),
        # Synthetic: mixed scripts in one token, letter-digit soup.
        (
            "ζωMetaInfo Столицаabc interpreayamaя themselvesяaughed the capital of France",
            "4 of 8 tokens are no words (mixed scripts)",
        ),
        ("x7q2k9z b8n7m6k5 q1w2e3r4 z9y8x7w6 is the answer", "(letter-digit soup)"),
    ],
)
def test_word_salad_is_degenerate_before_the_stop_is_judged(output: str, needle: str) -> None:
    verdict = judge(_runaway(output), PARIS)
    assert verdict.classification is DEGENERATE, verdict.reason
    assert needle in verdict.reason
    assert "\n" not in verdict.reason


@pytest.mark.parametrize(
    "output",
    [
        # Short answers: too little evidence for any statistical rule.
        "Paris",
        "Paris.",
        "4",
        "yes",
        "OK",
        "H2O",
        "Paris Paris",
        "the the capital",
        # English prose, function words repeated (real SmolLM2 and Gemma 3 270M outputs).
        "The sky is blue because of a process called Rayleigh scattering, which occurs when"
        " sunlight reaches our atmosphere and encounters molecules of air. When sunlight"
        " encounters molecules of air, it is scattered in all directions, with some of it"
        " getting to our eyes. This scattering of light is known as Rayleigh scattering.",
        " the capital of the country of France. It is the largest city in France. It is the"
        " capital of the country of France. It is the largest city in",
        "I think that that is the best answer, and I had had enough of the other ones.",
        "It was the best of times, it was the worst of times, it was the age of wisdom, it was"
        " the age of foolishness.",
        "Photosynthesis converts electromagnetic radiation into chemical energy through"
        " biochemical reactions.",
        "iPhone, eBay, YouTube, PowerPoint and JavaScript are brand names with capitals inside.",
        # Korean (space separated), Chinese, Japanese and Thai (not), Latin words inside them.
        "프랑스의 수도는 파리입니다. 파리는 유럽에서 가장 큰 도시 중 하나입니다.",
        "서울은 대한민국의 수도이며, 한강을 따라 자리 잡은 인구 약 천만 명의 대도시입니다."
        " Python과 JSON을 사용하는 개발자도 많습니다.",
        "日本の首都は東京です。東京は日本で最も大きな都市で、約1400万人が住んでいます。",
        "東京はTokyoとも呼ばれ、PythonやJavaScriptのエンジニアが多く働いています。",
        "中国的首都是北京。北京是一座历史悠久的城市，有故宫、长城和天安门广场。",
        "世界第二大经济体，是世界第二大贸易伙伴，是世界第二大消费市场。\n\n在经济发展史上，"
        "北京是世界第二大经济体。",
        "例如，在Python中，可以使用`str.encode()`方法，将字符串数据转换为utf-8。",
        "เมืองหลวงของประเทศไทยคือกรุงเทพมหานครซึ่งเป็นเมืองที่ใหญ่ที่สุดในประเทศไทยและมีภาษาPython",
        # Other scripts and languages.
        "Столица Франции — Париж. Это крупнейший город страны и один из культурных центров.",
        "Η πρωτεύουσα της Ελλάδας είναι η Αθήνα, μία από τις αρχαιότερες πόλεις του κόσμου.",
        "Die Hauptstadt von Deutschland ist Berlin. Die Bundesrepublik Deutschland ist ein"
        " föderaler Staat in Mitteleuropa mit sechzehn Bundesländern.",
        "Suomen pääkaupunki on Helsinki, joka sijaitsee Uudenmaan maakunnassa.",
        "The pronunciation is /ˈpærɪs/ in English and [paʁi] in French.",
        "Use 5 μg of the compound per kilogram, dissolved in 10 mL of water.",
        # JSON, code, markup.
        '{"name": "Ada", "age": 36}',
        '[{"name": "Ada", "age": 36}, {"name": "Bob", "age": 41}, {"name": "Eve", "age": 29}]',
        '```json\n{"name": "Ada", "tags": ["a", "a", "a", "a", "a", "a"]}\n```',
        "```python\ndef square(x):\n    return x * x\n```",
        "for i in range(n):\n    for j in range(n):\n        a[i][j] = b[i][j] + c[i][j]",
        "(defun square (x) (* x x))\n(defun cube (x) (* x x x))",
        "\n    if n == 0:\n        return 0\n    elif n == 1:\n        return 1\n"
        "    elif n == 2:\n        return 2\n    elif n == 3:\n        return 3\n"
        "    elif n == 4:\n        return 4",
        "import org.springframework.boot.SpringApplication;\n"
        "import org.springframework.boot.autoconfigure.SpringBootApplication;\n\n"
        "@SpringBootApplication\npublic class Application {}",
        "const button = document.getElementById('submit');\n"
        "button.addEventListener('click', handleClick);",
        "<ul>\n  <li>apples</li>\n  <li>pears</li>\n  <li>plums</li>\n</ul>",
        'Traceback (most recent call last):\n  File "main.py", line 3, in <module>\n'
        "    print(1 / 0)\nZeroDivisionError: division by zero",
        # Lists, tables, numbers, identifiers.
        "1. apples\n2. pears",
        "1. Bananas\n2. Apples\n3. Oranges\n4. Pears\n5. Plums",
        "1. 1\n2. 2\n3. 3\n4. 4\n5. 5\n6. 6\n7. 7\n8. 8\n9. 9\n10. 10",
        "| Name | Age |\n|------|-----|\n| Ada  | 36  |\n| Bob  | 41  |",
        "Results\n--------\nParis: 12\nBerlin: 9\nMadrid: 7",
        "[[0, 0, 0], [0, 0, 0], [0, 0, 0]]",
        "The sum is 1,111,111,110 and the error is 0.000000001.",
        "Glucose is C6H12O6 and baking soda is NaHCO3; water is H₂O.",
        "The commit is 9f86d081884c7d659a2feaa0c55ad015 and the id is"
        " 550e8400-e29b-41d4-a716-446655440000.",
        "Visit https://www.examplecompanywebsite.com/documentation for the"
        " internationalization guide.",
        "#travelphotography #wanderlust #instatravel #naturephotography #adventuretime",
        "Name: ________  Date: ________",
        "Paris.\n\n\nBerlin.",
    ],
)
def test_healthy_answers_are_not_degenerate(output: str) -> None:
    for generation in (_chat(output), _runaway(output), _completion(output)):
        verdict = judge(generation, PARIS)
        assert verdict.classification is not DEGENERATE, verdict.reason


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
