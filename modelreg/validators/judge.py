"""The judge: what one generation is worth, and what a run is worth against a suite.

The order matters — an answer is only read once the output is known to be real text that ended:

1. **degenerate** (``modelreg.validators.degenerate``): not real text — empty, control
   characters, raw special tokens, a unit looping, or what damaged weights write (walls of
   line breaks, word salad). Judged before the stop, or the on-call reads "template / stop
   token" where the weights are broken.
2. **stop**: a chat model must end its turn (finish reason ``stop``: an EOS / end-of-turn token)
   within its token budget; an end-of-turn marker written out as text, with generation going
   on, is the same failure (a broken template or EOS id). Class ``no_stop``.
3. **answer**: the case's expectation (see ``ExpectMode``). ``contains`` is word-bounded and
   fails when the answer negates the expected text ("Berlin, not Paris") or also asserts an
   alternative from ``reject``.

Nothing here knows how the text was produced: a runtime child and an HTTP endpoint give the same
``Generation``.

Gates come from two places: the suite's thresholds (quality, and resource gates a suite may
state) and the ``gates:`` of the target the run is on (speed and memory of that target's hosts).
A suite meant for every host, like the default chat suite, states no speed: a loaded laptop is
slower than the server it stands in for, and that is not the artifact's fault. A run on a target
judges a ``SuiteOnTarget`` (same content, same digest), and every ``GateResult`` says where its
gate came from.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence

from pydantic import Field

from modelreg import units
from modelreg.schemas.suite import (
    AgreementFigures,
    Case,
    CaseResult,
    Classification,
    Expectation,
    ExpectMode,
    FinishReason,
    GateOutcome,
    GateResult,
    GateSource,
    Generation,
    ResourceGates,
    Resources,
    SubsetResult,
    Suite,
    SuiteResult,
    Thresholds,
    Verdict,
)
from modelreg.validators.degenerate import (
    _clip,
    _is_number,
    _json_answer,
    _unwrap,
    degenerate_reason,
)

# Markers that end a turn in the common chat templates (ChatML, Gemma, Llama 3, Phi, Llama 2).
END_OF_TURN_MARKERS = (
    "<|im_end|>",
    "<end_of_turn>",
    "<|eot_id|>",
    "<|end|>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "</s>",
    "<eos>",
)


_CLAUSE_BREAK = re.compile(r"[.;:!?\n,()\[\]—–]")
# Negation cues within the few words before a match, in the same clause.
_NEGATION_BEFORE = re.compile(
    r"\b(?:not|no|never|neither|nor|cannot|isn't|isnt|wasn't|aren't|weren't|don't|doesn't|"
    r"didn't|won't|wouldn't|rather\s+than|instead\s+of|other\s+than|except|unlike|"
    r"excluding|pas|nicht|kein|keine|nunca|jamais)\b|n't\b",
    re.IGNORECASE,
)
_NEGATION_AFTER = re.compile(
    r"^\s*(?:(?:is|was|are|were)\s+(?:not|never|no\s+longer)\b|(?:isn't|wasn't|aren't|"
    r"weren't)\b)",
    re.IGNORECASE,
)
NEGATION_WINDOW_WORDS = 4
_THOUSANDS = re.compile(r"(?<=\d)[,_ \u00a0\u202f](?=\d{3}(?:\D|$))")


# ---------------------------------------------------------------------------- degenerate


# ---------------------------------------------------------------------------- word salad


# ---------------------------------------------------------------------------- stop


def _split_turn(text: str) -> tuple[str, str | None]:
    """The text up to the first end-of-turn marker written as text, and that marker."""
    first: tuple[int, str] | None = None
    for marker in END_OF_TURN_MARKERS:
        at = text.find(marker)
        if at >= 0 and (first is None or at < first[0]):
            first = (at, marker)
    if first is None:
        return text, None
    return text[: first[0]], first[1]


def stop_reason(generation: Generation, marker: str | None) -> str | None:
    """Why the generation did not end its turn properly, or None when it did."""
    if marker is not None:
        return f"the end-of-turn marker {marker!r} came out as text and generation went on"
    if not generation.chat:
        return None  # a plain completion may run to its budget
    if generation.finish_reason is FinishReason.STOP:
        return None
    if generation.finish_reason is FinishReason.LENGTH:
        budget = generation.max_tokens or generation.completion_tokens
        return f"no end of turn within {budget} tokens"
    return "the runtime did not report why generation ended, so the end of turn is unproven"


# ---------------------------------------------------------------------------- answer


def _fold(text: str, expect: Expectation) -> str:
    return text if expect.case_sensitive else text.casefold()


def _bounded(ch: str) -> bool:
    """Whether a term edge at ``ch`` needs a word boundary: a word character of a script that
    separates words with spaces (not Chinese or Japanese, where 東京 sits inside 首都は東京です)."""
    return bool(re.match(r"\w", ch)) and unicodedata.east_asian_width(ch) not in ("W", "F")


def _pattern(term: str, expect: Expectation) -> re.Pattern[str]:
    """Word-bounded where the term starts or ends with a word character."""
    body = re.escape(_fold(term, expect))
    start = r"(?<!\w)" if _bounded(term[0]) else ""
    end = r"(?!\w)" if _bounded(term[-1]) else ""
    if _is_number(term):
        start, end = r"(?<![\w.,])", r"(?!\w|[.,]\d)"
    return re.compile(start + body + end)


def _normalise_numbers(text: str) -> str:
    return _THOUSANDS.sub("", text)


def _negated(text: str, start: int, end: int) -> bool:
    before = _CLAUSE_BREAK.split(text[:start])[-1]
    window = " ".join(before.split()[-NEGATION_WINDOW_WORDS:])
    if _NEGATION_BEFORE.search(window):
        return True
    after = _CLAUSE_BREAK.split(text[end:])[0]
    return bool(_NEGATION_AFTER.match(after))


def _occurrences(text: str, term: str, expect: Expectation) -> tuple[int, int]:
    """(asserted, negated) word-bounded occurrences of ``term`` in ``text``."""
    haystack = _fold(text, expect)
    if _is_number(term):
        haystack, term = _normalise_numbers(haystack), _normalise_numbers(term)
    asserted = negated = 0
    for match in _pattern(term, expect).finditer(haystack):
        if _negated(haystack, match.start(), match.end()):
            negated += 1
        else:
            asserted += 1
    return asserted, negated


def _rejected(text: str, expect: Expectation) -> str | None:
    for alternative in expect.reject:
        asserted, _ = _occurrences(text, alternative, expect)
        if asserted:
            return alternative
    return None


def _normalise_whole(text: str, expect: Expectation) -> str:
    """The whole answer as ``exact`` / ``one_of`` compare it: trimmed, unquoted, no final
    period, whitespace collapsed, case-folded unless the case is case-sensitive."""
    text = " ".join(text.split())
    previous = None
    while previous != text:
        previous = text
        text = _unwrap(text).rstrip(".!。")
    return _fold(text, expect)


def answer_reason(output: str, expect: Expectation) -> str | None:
    """Why ``output`` does not meet ``expect``, or None when it does."""
    mode = expect.mode
    if mode is ExpectMode.CONTAINS:
        assert expect.value is not None
        asserted, negated = _occurrences(output, expect.value, expect)
        if negated:
            return f"negates {expect.value!r}"
        if not asserted:
            return f"does not contain {expect.value!r}"
    elif mode is ExpectMode.NOT_CONTAINS:
        assert expect.value is not None
        asserted, negated = _occurrences(output, expect.value, expect)
        if asserted or negated:
            return f"contains {expect.value!r}"
    elif mode is ExpectMode.EXACT:
        assert expect.value is not None
        if _normalise_whole(output, expect) != _normalise_whole(expect.value, expect):
            return f"is not exactly {expect.value!r}"
    elif mode is ExpectMode.ONE_OF:
        answer = _normalise_whole(output, expect)
        if answer not in {_normalise_whole(v, expect) for v in expect.values}:
            return "is not " + expect.describe()
    elif mode is ExpectMode.REGEX:
        assert expect.value is not None
        flags = 0 if expect.case_sensitive else re.IGNORECASE
        if not re.search(expect.value, output, flags):
            return f"does not match /{expect.value}/"
    elif mode is ExpectMode.JSON:
        return _json_reason(output, expect)
    alternative = _rejected(output, expect)
    if alternative is not None:
        return f"also asserts {alternative!r}"
    return None


def _json_reason(output: str, expect: Expectation) -> str | None:
    try:
        document = json.loads(_json_answer(output))
    except json.JSONDecodeError as exc:
        return f"is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    if expect.json_schema is None:
        return None
    import jsonschema

    validator_class = jsonschema.validators.validator_for(expect.json_schema)
    error = jsonschema.exceptions.best_match(
        validator_class(expect.json_schema).iter_errors(document)
    )
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"JSON does not match its schema at {where}: {_clip(error.message, 120)}"


# ---------------------------------------------------------------------------- the judge


def judge(generation: Generation, expect: Expectation) -> Verdict:
    """Classify one generation: degenerate, then stop, then answer."""
    output = generation.output
    turn, marker = _split_turn(output)
    degenerate = degenerate_reason(turn)
    if degenerate is not None:
        return Verdict(classification=Classification.DEGENERATE, reason=degenerate)
    no_stop = stop_reason(generation, marker)
    if no_stop is not None:
        return Verdict(classification=Classification.NO_STOP, reason=no_stop)
    wrong = answer_reason(turn, expect)
    if wrong is not None:
        return Verdict(
            classification=Classification.WRONG_ANSWER, reason=f"{_clip(turn)!r} {wrong}"
        )
    return Verdict(classification=Classification.PASS, reason=f"{_clip(turn)!r}")


# ---------------------------------------------------------------------------- a suite run

SAME_OUTPUT_MIN_CASES = 3


def _same_output_everywhere(generations: Sequence[Generation]) -> bool:
    """A model that answers every prompt alike is not reading the prompts."""
    if len(generations) < SAME_OUTPUT_MIN_CASES:
        return False
    outputs = {" ".join(g.output.split()).casefold() for g in generations}
    return len(outputs) == 1


def judge_cases(suite: Suite, generations: Mapping[str, Generation]) -> list[CaseResult]:
    """Each case judged on its generation (``generations`` keyed by case id)."""
    present = [generations[c.id] for c in suite.cases if c.id in generations]
    same_everywhere = _same_output_everywhere(present)
    results = []
    for case in suite.cases:
        generation = generations.get(case.id)
        if generation is None:
            verdict = Verdict(classification=Classification.NOT_RUN, reason="no output")
        elif same_everywhere:
            verdict = Verdict(
                classification=Classification.DEGENERATE,
                reason=f"the same output for every prompt: {_clip(generation.output)!r}",
            )
        else:
            verdict = judge(generation, case.expect)
        results.append(case_result(case, generation, verdict))
    return results


def case_result(case: Case, generation: Generation | None, verdict: Verdict) -> CaseResult:
    return CaseResult(
        case_id=case.id,
        subset=case.subset,
        prompt=case.prompt,
        chat=case.chat,
        max_tokens=case.max_tokens,
        expect=case.expect,
        output=generation.output if generation is not None else None,
        finish_reason=generation.finish_reason if generation is not None else None,
        stopped_by_eos=generation.stopped_by_eos if generation is not None else None,
        completion_tokens=generation.completion_tokens if generation is not None else None,
        classification=verdict.classification,
        reason=verdict.reason,
    )


def _rate(passed: int, total: int) -> float:
    return passed / total if total else 0.0


def _gate(
    name: str,
    measured: float | None,
    limit: float,
    upper: bool,
    show: Callable[..., str] = units.number,
    *,
    target: str | None = None,
) -> GateResult:
    """``upper``: the measurement must not exceed ``limit``; otherwise it must reach it.
    ``target``: the gate is that target's (``gates:``), not the suite's."""
    label = f"{name} of target {target}" if target is not None else name
    source = GateSource.TARGET if target is not None else GateSource.SUITE
    if measured is None:
        return GateResult(
            gate=name,
            outcome=GateOutcome.UNMEASURED,
            measured=None,
            limit=limit,
            message=f"{label}: not measured (limit {show(limit)})",
            source=source,
            target=target,
        )
    ok = measured <= limit if upper else measured >= limit
    relation = ("≤" if ok else ">") if upper else ("≥" if ok else "<")
    shown = show(measured)
    if shown == show(limit) and measured != limit:
        shown = show(measured, digits=6)  # not "2 tok/s < 2 tok/s" for 1.995
    return GateResult(
        gate=name,
        outcome=GateOutcome.PASS if ok else GateOutcome.FAIL,
        measured=measured,
        limit=limit,
        message=f"{label}: {shown} {relation} {show(limit)}",
        source=source,
        target=target,
    )


def _resource_gates(
    limits: ResourceGates | Thresholds, r: Resources, target: str | None
) -> list[GateResult]:
    # (gate, measured, limit, a maximum?, how its figures print), in the order reported.
    table = (
        ("max_peak_rss_gib", r.peak_rss_gib, limits.max_peak_rss_gib, True, units.gib),
        (
            "min_decode_tokens_per_s",
            r.decode_tokens_per_s,
            limits.min_decode_tokens_per_s,
            False,
            units.rate,
        ),
        (
            "min_prompt_tokens_per_s",
            r.prompt_tokens_per_s,
            limits.min_prompt_tokens_per_s,
            False,
            units.rate,
        ),
        ("max_ttft_ms", r.ttft_ms_max, limits.max_ttft_ms, True, units.duration_ms),
        ("max_ttft_ms_p50", r.ttft_ms_median, limits.max_ttft_ms_p50, True, units.duration_ms),
        ("max_ttft_ms_p95", r.ttft_ms_p95, limits.max_ttft_ms_p95, True, units.duration_ms),
    )
    return [
        _gate(name, measured, limit, is_max, show, target=target)
        for name, measured, limit, is_max, show in table
        if limit is not None
    ]


class SuiteOnTarget(Suite):
    """A suite as it runs on one target: the suite's content (the same digest: the target's
    gates are part of the target's definition, fingerprinted there) and the resource gates
    that target adds on top of the suite's."""

    target_name: str | None = Field(default=None, exclude=True)
    target_gates: ResourceGates | None = Field(default=None, exclude=True)


def suite_on_target(suite: Suite, target_name: str, gates: ResourceGates | None) -> Suite:
    """``suite`` with the gates of ``target_name`` (the suite itself when it declares none)."""
    if gates is None or not gates.declared:
        return suite
    content = {name: getattr(suite, name) for name in Suite.model_fields}
    return SuiteOnTarget.model_construct(**content, target_name=target_name, target_gates=gates)


def resource_gates(suite: Suite, resources: Resources | None) -> list[GateResult]:
    """The suite's resource gates, then those of the target it runs on."""
    r = resources or Resources()
    gates = _resource_gates(suite.thresholds, r, None)
    if isinstance(suite, SuiteOnTarget) and suite.target_gates is not None:
        gates += _resource_gates(suite.target_gates, r, suite.target_name or "?")
    return gates


def agreement_gates(suite: Suite, agreement: AgreementFigures | None) -> list[GateResult]:
    """Gates on agreement with a reference; ``skipped`` when no reference was compared."""
    t = suite.thresholds
    wanted = [
        ("min_top1_agreement", t.min_top1_agreement, False),
        ("max_mean_kl", t.max_mean_kl, True),
    ]
    gates = []
    for name, limit, upper in wanted:
        if limit is None:
            continue
        if agreement is None:
            gates.append(
                GateResult(
                    gate=name,
                    outcome=GateOutcome.SKIPPED,
                    measured=None,
                    limit=limit,
                    message=f"{name}: no reference compared in this run",
                )
            )
            continue
        measured = agreement.top1_agreement if name == "min_top1_agreement" else agreement.mean_kl
        gates.append(_gate(name, measured, limit, upper))
    return gates


def evaluate_suite(
    suite: Suite,
    generations: Mapping[str, Generation],
    resources: Resources | None = None,
    agreement: AgreementFigures | None = None,
) -> SuiteResult:
    """Judge a run against ``suite``: every case, the pass rates overall and per subset, the
    resource gates (the suite's, and a ``SuiteOnTarget``'s target's) and the agreement gates.
    It passes only when every gate passes (or was skipped)."""
    cases = judge_cases(suite, generations)
    passed = sum(c.passed for c in cases)
    pass_rate = _rate(passed, len(cases))
    reasons = []
    if pass_rate < suite.thresholds.min_pass_rate:
        reasons.append(
            f"pass rate {passed}/{len(cases)} = {pass_rate:.0%} < "
            f"min_pass_rate {suite.thresholds.min_pass_rate:.0%}"
        )
    subsets = []
    for subset in sorted({c.subset for c in cases}):
        members = [c for c in cases if c.subset == subset]
        ok_count = sum(c.passed for c in members)
        rate = _rate(ok_count, len(members))
        minimum = suite.thresholds.subsets.get(subset)
        ok = minimum is None or rate >= minimum
        if not ok:
            reasons.append(
                f"subset {subset}: {ok_count}/{len(members)} = {rate:.0%} < {minimum:.0%}"
            )
        subsets.append(
            SubsetResult(
                subset=subset,
                passed=ok_count,
                total=len(members),
                pass_rate=rate,
                min_pass_rate=minimum,
                ok=ok,
            )
        )
    gates = resource_gates(suite, resources) + agreement_gates(suite, agreement)
    reasons += [g.message for g in gates if g.outcome in (GateOutcome.FAIL, GateOutcome.UNMEASURED)]
    return SuiteResult(
        suite_name=suite.name,
        suite_digest=suite.digest(),
        passed=not reasons,
        pass_rate=pass_rate,
        min_pass_rate=suite.thresholds.min_pass_rate,
        cases=cases,
        subsets=subsets,
        gates=gates,
        resources=resources,
        agreement=agreement,
        reasons=reasons,
    )


def baseline_gates(
    suite: Suite,
    result: SuiteResult,
    baseline: SuiteResult | None,
    baseline_id: str | None,
    problem: str | None,
    *,
    first_release: bool = False,
    baseline_of: str = "production",
) -> list[GateResult]:
    """The suite's pass-rate drops relative to its baseline record (``max_pass_rate_drop_vs``):
    ``baseline`` is that record's own counting run's result on this suite version (None:
    there is none, ``problem`` says why — unmeasured, never a pass; None without a problem:
    the record judged is the baseline itself, which drops nothing from itself).

    ``first_release``: nothing was ever production for the model on the target, so there is
    no baseline to drop from: the gate is skipped, saying that the first release is judged
    by the suite's absolute gates (a baseline that exists but cannot be read is ``problem``:
    still unmeasured). ``baseline_of``: what the baseline record is, in the gate's words."""
    t = suite.thresholds
    wanted: list[tuple[str, str | None, float | None]] = [
        ("max_pass_rate_drop", None, t.max_pass_rate_drop)
    ] + [
        (f"max_pass_rate_drop[{subset}]", subset, drop)
        for subset, drop in sorted(t.max_subset_pass_rate_drop.items())
    ]

    def rate(of: SuiteResult, subset: str | None) -> float | None:
        if subset is None:
            return of.pass_rate
        return next((s.pass_rate for s in of.subsets if s.subset == subset), None)

    gates = []
    for name, subset, limit in wanted:
        if limit is None:
            continue

        def gate(
            outcome: GateOutcome,
            measured: float | None,
            said: str,
            name: str = name,
            limit: float = limit,
        ) -> GateResult:
            return GateResult(
                gate=name,
                outcome=outcome,
                measured=measured,
                limit=limit,
                message=f"{name}: {said}",
                source=GateSource.BASELINE,
            )

        now = rate(result, subset)
        if first_release:
            gates.append(
                gate(
                    GateOutcome.SKIPPED,
                    None,
                    "no production yet: the first release is judged by the absolute gates",
                )
            )
            continue
        if baseline is None and problem is None:
            gates.append(
                gate(GateOutcome.PASS, 0.0, f"{baseline_id} is production, its own baseline")
            )
            continue
        base = rate(baseline, subset) if baseline is not None else None
        if base is None or now is None:
            why = problem or f"{baseline_id} has no result for subset {subset}"
            gates.append(gate(GateOutcome.UNMEASURED, None, f"no baseline ({why})"))
            continue
        drop = max(0.0, base - now)
        ok = drop <= limit + 1e-9
        gates.append(
            gate(
                GateOutcome.PASS if ok else GateOutcome.FAIL,
                round(drop, 6),
                f"{now:.1%} vs {base:.1%} for {baseline_of} {baseline_id}, a drop of "
                f"{drop * 100:.1f} pp {'≤' if ok else '>'} {limit * 100:.1f} pp",
            )
        )
    return gates


def with_gates(result: SuiteResult, gates: list[GateResult]) -> SuiteResult:
    """``result`` with more gates judged: failing or unmeasured ones fail it."""
    failing = [g.message for g in gates if g.outcome in (GateOutcome.FAIL, GateOutcome.UNMEASURED)]
    return result.model_copy(
        update={
            "gates": [*result.gates, *gates],
            "reasons": [*result.reasons, *failing],
            "passed": result.passed and not failing,
        }
    )
