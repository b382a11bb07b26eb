"""``fit --bits`` / ``--quant``: the weights at another width, from the parameter ledger — the
purchase what-if of seed 002, answered with the numbers the product prints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
QWEN = REPO / "manifests" / "qwen3-30b-a3b.json"
# Seed 002 (002_7f0779e26694df69.txt), lines 537 and 543, as written:
SEED_BYTES = (
    "단순 weight byte는 total parameter×bit÷8로 계산할 수 있습니다. 30.5B Q4라면 약 15.25GB지만 "
    "실제 artifact에는 scale, metadata, mixed high-precision tensor, alignment가 있고"
)
SEED_BOXES = (
    "두 번째 실습은 total 30.5B, active 3.3B와 Q4를 넣어 total weight 하한과 active-weight "
    "상당값을 나란히 보여 줍니다. 16GiB available에서는 교육용 실행 예산이 실패하고 21GiB로 "
    "바꾸면 기준선을 통과합니다. 실제 승인에서는 공식 file byte와 load·prefill·decode peak, "
    "context·동시성, quality를 측정하고 단순 10% overhead 가정을 교체해야 합니다."
)


@pytest.fixture
def boxes(cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tmp_path / "targets.yaml"
    spec.write_text(
        "targets:\n"
        "  box-16gib:\n    cpu_flags: [avx2]\n    memory_gib: 16\n"
        "  box-21gib:\n    cpu_flags: [avx2]\n    memory_gib: 21\n"
    )
    monkeypatch.setenv("MODELREG_TARGETS", str(spec))
    assert cli("targets", "apply")[0] == 0


def test_the_seeds_30b_question_is_answered_for_16_and_21_gib(cli, boxes: None) -> None:
    """Qwen3-30B-A3B (30.5B total) at ~4.5 bits (Q4_K_M) with 10% overhead: 16 GiB fails and
    21 GiB passes, as the seed says; without the what-if the manifest says 'unknown'."""
    assert "16GiB available에서는 교육용 실행 예산이 실패하고 21GiB로" in SEED_BOXES
    assert "단순 10% overhead" in SEED_BOXES
    code, out, _ = cli("fit", QWEN, "--target", "box-16gib")
    assert code == 1 and "verdict: unknown — tensor bytes unknown" in out

    code, out, _ = cli("fit", QWEN, "--target", "box-16gib", "--quant", "Q4_K_M")
    assert code == 1
    assert "verdict: does not fit — needs 18.22 GiB but the budget is 14.40 GiB" in out
    assert "what-if: weights at 4.5 bits per weight (Q4_K_M) from 30,532,122,624 parameters" in out
    assert "× Q4_K_M, 4.5 bits ÷ 8 — not the artifact's tensor bytes" in out

    code, out, _ = cli("fit", QWEN, "--target", "box-21gib", "--quant", "Q4_K_M", "--json")
    report = json.loads(out)
    assert code == 0 and report["verdict"] == "fits"
    lines = {line["key"]: line["sizes"] for line in report["lines"]}
    assert lines["weights"]["bytes"] == 30_532_122_624 * 45 // 80  # 17,174,318,976
    assert lines["total"]["GiB"] == 18.219 and lines["budget"]["GiB"] == 18.9
    assert report["what_if"]["bits"] == 4.5 and report["what_if"]["quant"] == "Q4_K_M"
    assert report["what_if"]["recorded_weights"]["bytes"] is None


def test_the_seeds_weight_bytes_are_parameters_times_bits_over_8(cli, boxes: None) -> None:
    assert "30.5B Q4라면 약 15.25GB" in SEED_BYTES
    code, out, _ = cli("fit", QWEN, "--target", "box-21gib", "--bits", "4", "--json")
    assert code == 0
    weights = next(line for line in json.loads(out)["lines"] if line["key"] == "weights")
    # 30,532,122,624 parameters (the seed rounds to 30.5B: 15.25 GB) × 4 ÷ 8
    assert weights["sizes"]["bytes"] == 15_266_061_312
    assert abs(weights["sizes"]["GB"] - 15.25) < 0.02
    assert "what-if" in weights["note"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--bits", "4", "--quant", "Q4_K_M"), "give --bits or --quant, not both"),
        (("--quant", "Q4_K_XL"), "is not a llama.cpp quantization type"),
        (("--bits", "0"), "must be above 0"),
        (("--bits", "nan"), "must be above 0"),
    ],
)
def test_a_what_if_it_cannot_weigh_is_exit_2(
    cli, boxes: None, args: tuple[str, ...], needle: str
) -> None:
    code, _, err = cli("fit", QWEN, "--target", "box-16gib", *args)
    assert code == 2 and needle in err, err


def test_a_record_is_weighed_at_another_width_too(cli, smollm2: Path, boxes: None) -> None:
    code, record, err = cli("add", smollm2, "--model-id", "HuggingFaceTB/SmolLM2-135M-Instruct")
    assert code == 0, err
    code, out, _ = cli("fit", record.strip(), "--target", "box-16gib", "--bits", "8", "--json")
    report = json.loads(out)
    weights = next(line for line in report["lines"] if line["key"] == "weights")
    assert code == 0 and weights["sizes"]["bytes"] == 134_515_008
    # the record's own tensors, shown beside the what-if (Q4_1: 5.74 bits per weight)
    assert report["what_if"]["recorded_weights"]["bytes"] > weights["sizes"]["bytes"] * 0.6
