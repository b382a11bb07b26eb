"""Agreement with a reference: real runtimes on both sides (llama.cpp GGUF vs transformers)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from modelreg.schemas.suite import AgreementFigures, GateOutcome, Suite
from modelreg.schemas.verification import Outcome
from modelreg.validators.agreement import (
    AGREEMENT_TEXT,
    AgreementRun,
    AgreementSide,
    agreement_check,
    compare_logits,
    measure_agreement,
)
from modelreg.validators.judge import agreement_gates


def test_identical_distributions_agree_fully() -> None:
    logits = np.random.default_rng(0).normal(size=(40, 50)).astype(np.float32)
    assert compare_logits(logits, logits) == pytest.approx((1.0, 0.0, 0.0), abs=1e-9)
    # A constant added to every logit leaves the distribution unchanged.
    top1, mean_kl, _ = compare_logits(logits + 3.0, logits)
    assert top1 == 1.0 and mean_kl == pytest.approx(0.0, abs=1e-9)


def test_a_flipped_decision_is_counted_and_costs_kl() -> None:
    reference = np.zeros((4, 3), dtype=np.float32)
    reference[:, 0] = 5.0  # the reference is sure of token 0 everywhere
    candidate = reference.copy()
    candidate[0] = [0.0, 5.0, 0.0]  # the candidate prefers token 1 at position 0
    top1, mean_kl, max_kl = compare_logits(candidate, reference)
    assert top1 == 0.75
    assert max_kl > 4 and mean_kl == pytest.approx(max_kl / 4)


def test_the_bundled_text_has_enough_tokens() -> None:
    # ~4 characters per token in English: 256 tokens need well over 1,000 characters.
    assert len(AGREEMENT_TEXT.read_text(encoding="utf-8")) > 1800


def _thresholds() -> Suite:
    from modelreg.suites import default_suite

    return default_suite()


@pytest.mark.slow
def test_smollm2_q4_1_agrees_with_its_bf16_conversion(smollm2: Path, smollm2_st: Path) -> None:
    suite = _thresholds()
    run = measure_agreement(
        AgreementSide("llama.cpp", smollm2), AgreementSide("transformers", smollm2_st)
    )
    assert run.figures is not None, run.problem
    figures = run.figures
    assert figures.tokens == 256
    assert figures.top1_agreement >= 0.93, figures
    assert figures.mean_kl <= 0.02, figures
    assert figures.candidate_runtime == "llama.cpp"
    assert figures.reference_runtime == "transformers (float32)"
    assert run.evidence["vocab"] == {"candidate": 49152, "reference": 49152}
    gates = agreement_gates(suite, figures)
    assert [g.outcome for g in gates] == [GateOutcome.PASS, GateOutcome.PASS], gates


@pytest.mark.slow
def test_shrunken_embedding_scale_agrees_far_less(scaled_smollm2: Path, smollm2_st: Path) -> None:
    suite = _thresholds()
    run = measure_agreement(
        AgreementSide("llama.cpp", scaled_smollm2), AgreementSide("transformers", smollm2_st)
    )
    assert run.figures is not None, run.problem
    # SmolLM2's own copy agrees on ≥ 93% of next tokens with mean KL ≤ 0.02 (test above).
    assert run.figures.top1_agreement <= 0.3, run.figures
    assert run.figures.mean_kl >= 2.0, run.figures
    gates = agreement_gates(suite, run.figures)
    assert [g.outcome for g in gates] == [GateOutcome.FAIL, GateOutcome.FAIL], gates
    assert "min_top1_agreement" in gates[0].message and "<" in gates[0].message


@pytest.mark.slow
def test_a_model_that_cannot_load_is_a_finding_not_a_figure(
    smollm2_st: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "truncated.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    run = measure_agreement(
        AgreementSide("llama.cpp", broken), AgreementSide("transformers", smollm2_st)
    )
    assert run.figures is None and run.classification == "load_error", run.problem
    assert run.problem is not None and "candidate (llama.cpp) could not load" in run.problem


def _figures(top1: float, kl: float) -> AgreementFigures:
    return AgreementFigures(
        tokens=256,
        top1_agreement=top1,
        mean_kl=kl,
        max_kl=kl * 3,
        candidate_runtime="llama.cpp",
        reference_runtime="transformers (float32)",
        text_sha256="0" * 64,
        wall_ms=1.0,
    )


@pytest.mark.parametrize(
    ("run", "outcome", "classification", "needle"),
    [
        (AgreementRun(_figures(0.96, 0.003)), Outcome.PASS, None, "top-1 agreement 96.0%"),
        (
            AgreementRun(_figures(0.06, 7.6)),
            Outcome.FAIL,
            "disagrees",
            "min_top1_agreement: 0.06 < 0.85; max_mean_kl: 7.6 > 0.15",
        ),
        (
            AgreementRun(None, "the tokenizers differ at token 0", "tokenizer_mismatch"),
            Outcome.FAIL,
            "tokenizer_mismatch",
            "tokenizers differ",
        ),
        (
            AgreementRun(None, "reference: transformers/torch not importable", "no_runtime"),
            Outcome.UNAVAILABLE,
            None,
            "not importable",
        ),
    ],
)
def test_agreement_check_outcomes(
    run: AgreementRun, outcome: Outcome, classification: str | None, needle: str
) -> None:
    result = agreement_check(run, _thresholds(), datetime.now(UTC))
    assert result.check == "reference-agreement"
    assert (result.outcome, result.classification) == (outcome, classification), result.summary
    assert needle in result.summary


def test_agreement_without_thresholds_fails_closed() -> None:
    suite = _thresholds()
    bare = suite.model_copy(
        update={
            "thresholds": suite.thresholds.model_copy(
                update={"min_top1_agreement": None, "max_mean_kl": None}
            )
        }
    )
    result = agreement_check(AgreementRun(_figures(0.99, 0.001)), bare, datetime.now(UTC))
    assert result.outcome is Outcome.FAIL and result.classification == "no_threshold"
    assert "sets no min_top1_agreement or max_mean_kl" in result.summary
