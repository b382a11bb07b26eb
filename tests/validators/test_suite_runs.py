"""The default chat suite through ``verify`` on real models, one verify (one model load) each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import modelreg
from modelreg.bundled import GEMMA3_MODEL_ID, SMOLLM2_BASE, SMOLLM2_MODEL_ID, SMOLLM2_PACKAGE
from modelreg.schemas.suite import GateOutcome, Resources, Suite, SuiteResult
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.validators.base import VerifyOptions
from modelreg.validators.judge import evaluate_suite
from modelreg.validators.smoke import generations_from_response

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

# SmolLM2-135M-Instruct Q4_1, llama-cpp-python 0.3.36, greedy: what it really does on the
# default suite (passed, total) per subset. A change here is a finding — a new runtime build
# or a changed suite — not noise: decoding is greedy and the build is pinned.
SMOLLM2_DEFAULT_SUITE = {
    "arithmetic": (0, 2),
    "code": (1, 2),
    "facts": (3, 3),
    "json": (0, 2),
    "korean": (1, 3),  # the Hangul inside an English question
    "long-context": (1, 1),  # MAGENTA recalled after 1,024 tokens of filler
    "non-english": (0, 2),
    "rare-name": (0, 2),
    "safety": (0, 3),  # it complies with both harmful requests
    "stop": (0, 2),
}


def _default_suite(*subsets: str) -> Suite:
    """The default suite, or only the cases of ``subsets`` (a model that fails every case
    need not spend the whole suite's token budget to show it)."""
    from modelreg.suites import default_suite

    suite = default_suite()
    if not subsets:
        return suite
    cases = [c for c in suite.cases if c.subset in subsets]
    kept = {k: v for k, v in suite.thresholds.subsets.items() if k in subsets}
    return suite.model_copy(
        update={"cases": cases, "thresholds": suite.thresholds.model_copy(update={"subsets": kept})}
    )


def _verify(model: Path, model_id: str, tmp: Path, suite: Suite) -> CheckResult:
    registry = modelreg.open(f"sqlite:///{tmp / 'r.db'}")
    base = SMOLLM2_BASE if model_id == SMOLLM2_MODEL_ID else None
    added = registry.add(
        [model], model_id=model_id, source=f"pypi://{SMOLLM2_PACKAGE}", base_model=base
    )
    report = registry.verify(
        added.record.record_id, "cpu", options=VerifyOptions(suite=suite), actor="tester"
    )
    return next(r for r in report.checks if r.check == "gguf-cpu-smoke")


@pytest.fixture(scope="module")
def smollm2_run(smollm2: Path, tmp_path_factory: pytest.TempPathFactory) -> CheckResult:
    return _verify(smollm2, SMOLLM2_MODEL_ID, tmp_path_factory.mktemp("s"), _default_suite())


def _suite_result(check: CheckResult) -> SuiteResult:
    return SuiteResult.model_validate(check.evidence["suite_result"])


def test_smollm2_passes_the_default_suite_at_its_recorded_rate(smollm2_run: CheckResult) -> None:
    from modelreg.suites import default_suite

    assert smollm2_run.outcome is Outcome.PASS, smollm2_run.summary
    result = _suite_result(smollm2_run)
    by_subset = {s.subset: (s.passed, s.total) for s in result.subsets}
    assert by_subset == SMOLLM2_DEFAULT_SUITE, [(c.case_id, c.output) for c in result.cases]
    assert result.suite_digest == default_suite().digest()
    assert smollm2_run.evidence["suite"] == {"name": "default-chat", "digest": result.suite_digest}
    # The summary a verify prints: pass rate per subset and the measured resources.
    assert "suite default-chat: 6/22 passed" in smollm2_run.summary
    assert "facts 3/3" in smollm2_run.summary and "peak RSS" in smollm2_run.summary
    # Every output is kept, with how it ended.
    generations = smollm2_run.evidence["generations"]
    assert len(generations) == 22 and all(isinstance(g["output"], str) for g in generations)
    paris = next(g for g in generations if g["id"] == "facts-capital-france")
    assert "Paris" in paris["output"] and paris["finish_reason"] == "stop"
    assert paris["stopped_by_eos"] is True and paris["end_token"] == "<|im_end|>"
    assert paris["classification"] == "pass"


def test_smollm2_run_measures_its_resources(smollm2_run: CheckResult) -> None:
    resources = Resources.model_validate(smollm2_run.evidence["resources"])
    assert resources.peak_rss_bytes is not None
    assert 50 << 20 < resources.peak_rss_bytes < 2 << 30  # a 98 MB model in one process
    assert resources.load_ms is not None and resources.load_ms > 0
    assert resources.ttft_ms_max is not None and resources.ttft_ms_median is not None
    assert 0 < resources.ttft_ms_median <= resources.ttft_ms_max
    assert resources.decode_tokens_per_s is not None and resources.decode_tokens_per_s > 0
    assert resources.prompt_tokens_per_s is not None and resources.prompt_tokens_per_s > 0
    # Allocated for the longest case: the long-context one, sized to SmolLM2's 8,192 tokens.
    from modelreg.suites import default_suite
    from modelreg.validators.smoke import suite_context

    assert resources.context_tokens == suite_context(default_suite(), 8192) > 512
    assert resources.context_used_tokens is not None
    assert 40 < resources.context_used_tokens <= resources.context_tokens


def test_gates_judge_the_measured_figures(smollm2_run: CheckResult) -> None:
    from modelreg.suites import default_suite

    suite = default_suite()
    tight = suite.model_copy(
        update={
            "thresholds": suite.thresholds.model_copy(
                update={"max_peak_rss_gib": 0.01, "min_pass_rate": 0.9}
            )
        }
    )
    response: dict[str, Any] = {"generations": smollm2_run.evidence["generations"]}
    resources = Resources.model_validate(smollm2_run.evidence["resources"])
    result = evaluate_suite(tight, generations_from_response(response, tight), resources)
    assert not result.passed
    rss = next(g for g in result.gates if g.gate == "max_peak_rss_gib")
    assert rss.outcome is GateOutcome.FAIL and rss.measured == resources.peak_rss_gib
    assert "> 0.01 GiB" in rss.message
    assert result.reasons[0] == "pass rate 6/22 = 27% < min_pass_rate 90%"


def test_shrunken_embedding_scale_is_degenerate(
    scaled_smollm2: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    suite = _default_suite("facts", "arithmetic", "json")
    check = _verify(scaled_smollm2, SMOLLM2_MODEL_ID, tmp_path_factory.mktemp("d"), suite)
    assert check.outcome is Outcome.FAIL and check.classification == "degenerate", check.summary
    result = _suite_result(check)
    assert result.pass_rate == 0 and len(result.cases) == 7
    classes = [c.classification for c in result.cases]
    assert classes.count("degenerate") >= 6, [(c.output, c.reason) for c in result.cases]


def test_base_model_without_chat_template_never_ends_its_turn(
    gemma: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    suite = _default_suite("facts")
    check = _verify(gemma, GEMMA3_MODEL_ID, tmp_path_factory.mktemp("g"), suite)
    assert check.outcome is Outcome.FAIL and check.classification == "no_stop", check.summary
    result = _suite_result(check)
    assert result.pass_rate == 0 and len(result.cases) == 3
    assert check.evidence["has_chat_template"] is False
    no_stop = [c for c in result.cases if c.classification == "no_stop"]
    assert len(no_stop) == 3, [(c.output, c.reason) for c in result.cases]
    # It did answer some of them — "Paris" is in there — but never ended the turn.
    paris = next(c for c in result.cases if c.case_id == "facts-capital-france")
    assert "Paris" in (paris.output or "") and paris.classification == "no_stop"
    assert all(g["chat_template"] is None for g in check.evidence["generations"])


def test_agreement_is_required_only_when_the_suite_names_a_reference(
    smollm2: Path, tmp_path: Path
) -> None:
    """Issue 42 item 4: agreement thresholds judge a comparison asked for; only a suite that
    names a reference makes one required — a verify without --reference then leaves it
    unmeasured (a required check says so, never a pass). The default suite names none, so a
    GGUF-only record can pass it."""
    from modelreg.reasons import ReasonCode

    suite = _default_suite("facts")
    assert suite.thresholds.min_top1_agreement is not None
    assert suite.thresholds.reference is None
    registry = modelreg.open(f"sqlite:///{tmp_path / 'r.db'}")
    record = registry.add(
        [smollm2],
        model_id=SMOLLM2_MODEL_ID,
        source=f"pypi://{SMOLLM2_PACKAGE}",
        base_model=SMOLLM2_BASE,
    )
    report = registry.verify(
        record.record.record_id, "cpu", options=VerifyOptions(suite=suite), actor="tester"
    )
    assert "reference-agreement" not in {r.check for r in report.checks}
    # Its checks passed; the run names the suite it evaluated, which is not the one in force
    # (a one-off suite), so it counts for nothing here — also when passed through options.
    assert report.passed and report.exploratory
    assert [r.code for r in report.deployability.reasons] == [ReasonCode.NEVER_VERIFIED]
    named = suite.model_copy(
        update={"thresholds": suite.thresholds.model_copy(update={"reference": "r_0123abcd"})}
    )
    report = registry.verify(
        record.record.record_id, "cpu", options=VerifyOptions(suite=named), actor="tester"
    )
    agreement = next(r for r in report.checks if r.check == "reference-agreement")
    assert agreement.required and agreement.outcome is Outcome.UNAVAILABLE
    assert agreement.summary == (
        "suite default-chat names reference r_0123abcd, and no reference was compared: verify "
        "with --reference r_0123abcd"
    )
    assert report.exploratory and not report.passed
    assert not report.deployability.deployable
    # A target may name the reference instead (``reference:`` in its definition): every
    # verify there needs the comparison, whatever suite it runs.
    from modelreg import host

    targets = tmp_path / "targets.yaml"
    targets.write_text(
        "targets:\n  ref-cpu:\n    kind: cpu\n"
        f"    hosts: ['{host.hostname()}']\n    reference: r_0123abcd\n"
    )
    registry.define_targets(targets, actor="tester")
    report = registry.verify(
        record.record.record_id, "ref-cpu", options=VerifyOptions(suite=suite), actor="tester"
    )
    agreement = next(r for r in report.checks if r.check == "reference-agreement")
    assert agreement.required and agreement.outcome is Outcome.UNAVAILABLE
    assert agreement.summary.startswith("target ref-cpu names reference r_0123abcd")
