"""Parameter ledgers and KV shapes from Gemma 4 and Gemma 3n configs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from modelreg.manifests.build import build_manifest
from modelreg.manifests.fit import kv_cache_bytes
from modelreg.manifests.hf_config import architecture_from_config, ledger_from_config

DATA = Path(__file__).resolve().parents[1] / "data"


def _gemma4() -> dict[str, Any]:
    return json.loads((DATA / "gemma-4-26b-a4b-it.config.json").read_text())


def test_gemma4_26b_a4b_ledger_equals_a_hand_count() -> None:
    H, L, V = 2816, 30, 262_144
    sliding, full = 25, 5  # every 6th layer attends globally
    # sliding layers: 16 query heads and 8 KV heads of 256; global layers: 16 query heads and
    # 2 KV heads of 512, keys reused as values (attention_k_eq_v), so no v_proj.
    attention_sliding = H * 16 * 256 + 2 * H * 8 * 256 + 16 * 256 * H
    attention_full = H * 16 * 512 + H * 2 * 512 + 16 * 512 * H
    q_k_norms = sliding * 2 * 256 + full * 2 * 512
    dense_mlp = 3 * H * 2112  # the MLP beside the experts
    experts = 128 * (2 * 704 * H + H * 704)  # gate_up_proj + down_proj
    router = H * 128 + H + 128  # proj, scale, per_expert_scale
    layer_norms = 7 * H  # 4 block norms + 3 around the experts
    layer_scalar = 1
    per_layer = dense_mlp + experts + router + layer_norms + layer_scalar
    total = (
        sliding * attention_sliding
        + full * attention_full
        + q_k_norms
        + L * per_layer
        + V * H  # embeddings; the lm_head is tied
        + H  # final norm
    )
    active = total - L * experts + L * experts * 8 // 128
    assert total == 25_233_141_790
    assert active == 3_822_530_590

    ledger = ledger_from_config(_gemma4())
    assert ledger.total.value == total and ledger.total.provenance == "config"
    assert ledger.active.value == active
    assert ledger.non_embedding.value == total - V * H
    assert ledger.groups is not None
    assert ledger.groups.counts["experts"] == L * experts
    assert ledger.groups.counts["ffn"] == L * dense_mlp
    assert ledger.groups.counts["router"] == L * router
    assert "output" not in ledger.groups.counts  # tied: resident as the head, counted once


def test_gemma4_architecture_per_layer_heads_and_window() -> None:
    arch = architecture_from_config(_gemma4(), "x")
    assert (arch.expert_count, arch.expert_used_count) == (128, 8)
    assert arch.sliding_window == 1024 and arch.kv_shared_layers == 0
    assert arch.sliding_window_pattern == ([True] * 5 + [False]) * 5
    assert arch.key_length == ([256] * 5 + [512]) * 5
    assert arch.head_count_kv == ([8] * 5 + [2]) * 5
    # 512 tokens: every layer holds all of them.
    assert kv_cache_bytes(arch, 512).bytes == 25 * 512 * 8 * 512 * 2 + 5 * 1024 * 2 * 512 * 2
    # 4096 tokens: sliding layers stop at the 1024-token window.
    assert kv_cache_bytes(arch, 4096).bytes == 25 * 512 * 8 * 1024 * 2 + 5 * 1024 * 2 * 4096 * 2


def test_a_gemma4_dense_config_has_no_experts() -> None:
    config = _gemma4()
    config["text_config"]["enable_moe_block"] = False
    ledger = ledger_from_config(config)
    assert ledger.groups is not None and "experts" not in ledger.groups.counts
    assert ledger.active.value == ledger.total.value
    assert architecture_from_config(config, "x").expert_count is None


def test_gemma4_without_a_needed_field_stays_unknown() -> None:
    config = _gemma4()
    del config["text_config"]["num_global_key_value_heads"]  # needed with attention_k_eq_v
    assert ledger_from_config(config).total.value is None


GEMMA3N_E2B_SHAPE: dict[str, Any] = {
    "model_type": "gemma3n_text",
    "hidden_size": 2048,
    "num_hidden_layers": 30,
    "intermediate_size": 8192,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "vocab_size": 262_400,
    "vocab_size_per_layer_input": 262_144,
    "hidden_size_per_layer_input": 256,
    "altup_num_inputs": 4,
    "laurel_rank": 64,
    "num_kv_shared_layers": 10,
    "sliding_window": 512,
    "tie_word_embeddings": True,
}


def test_gemma3n_ledger_equals_a_hand_count() -> None:
    H, L, V, P, A = 2048, 30, 262_400, 256, 4
    shared = 10  # the last 10 layers reuse K/V: no k_proj / v_proj / k_norm
    per_layer = (
        2 * H * 8 * 256  # q_proj, o_proj
        + 256  # q_norm
        + 3 * H * 8192  # MLP
        + 7 * H  # 4 block norms, LAuReL, per-layer-input and AltUp router norms
        + H
        + A * A
        + A * A * A
        + H * A  # AltUp
        + 2 * H * 64  # LAuReL
        + 2 * H * P  # per-layer input gate and projection
    )
    kv = 2 * H * 2 * 256 + 256  # k_proj, v_proj, k_norm
    total = (
        L * per_layer
        + (L - shared) * kv
        + V * H  # token embeddings (tied head)
        + 262_144 * L * P  # per-layer embeddings
        + H * L * P  # per_layer_model_projection
        + 2 * (A - 1) * H * H  # AltUp projections in and out
        + H  # final norm
        + P  # per_layer_projection_norm
    )
    ledger = ledger_from_config(GEMMA3N_E2B_SHAPE)
    assert ledger.total.value == total == 4_435_182_688
    assert ledger.active.value == total  # "E" is not "A": no router
    assert ledger.groups is not None
    assert ledger.groups.counts["embeddings"] == V * H + 262_144 * L * P


def test_gemma3n_kv_shared_layers_hold_no_cache() -> None:
    arch = architecture_from_config(GEMMA3N_E2B_SHAPE, "x")
    assert arch.kv_shared_layers == 10
    # 20 layers keep a cache; of those, layers 4, 9, 14, 19 are global.
    estimate = kv_cache_bytes(arch, 4096)
    assert estimate.bytes == 16 * 512 * 2 * 512 * 2 + 4 * 512 * 2 * 4096 * 2
    assert any("reuse an earlier layer's KV cache" in n for n in estimate.notes)


def _tiny_gemma4_checkpoint(directory: Path, **shape: Any) -> Path:
    """A real Gemma 4 MoE checkpoint written by transformers itself, at toy size."""
    import torch
    from transformers import Gemma4TextConfig
    from transformers.models.gemma4.modeling_gemma4 import Gemma4ForCausalLM

    defaults: dict[str, Any] = dict(
        hidden_size=32,
        num_hidden_layers=6,
        intermediate_size=48,
        num_attention_heads=2,
        num_key_value_heads=2,
        num_global_key_value_heads=1,
        head_dim=16,
        global_head_dim=32,
        vocab_size=64,
        sliding_window=8,
        attention_k_eq_v=True,
        enable_moe_block=True,
        num_experts=4,
        top_k_experts=2,
        moe_intermediate_size=8,
        hidden_size_per_layer_input=0,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    Gemma4ForCausalLM(Gemma4TextConfig(**(defaults | shape))).save_pretrained(directory)
    return directory


@pytest.mark.model  # builds a toy Gemma 4 with torch + transformers
@pytest.mark.parametrize(
    "shape",
    [
        {},
        # E2B-style: per-layer embeddings, KV-shared last layers with double-wide MLPs, no MoE
        {
            "enable_moe_block": False,
            "hidden_size_per_layer_input": 8,
            "vocab_size_per_layer_input": 40,
            "num_kv_shared_layers": 2,
            "use_double_wide_mlp": True,
            "attention_k_eq_v": False,
            "num_hidden_layers": 12,
        },
    ],
    ids=["moe", "per-layer-embeddings"],
)
def test_gemma4_config_count_matches_the_tensors_transformers_writes(
    tmp_path: Path, shape: dict[str, Any]
) -> None:
    checkpoint = _tiny_gemma4_checkpoint(tmp_path / "tiny", **shape)
    manifest = build_manifest([checkpoint], model_id="t/tiny-gemma4").manifest
    config = json.loads((checkpoint / "config.json").read_text())
    assert manifest.parameters.total.provenance == "tensors"
    assert manifest.parameters.total.value == ledger_from_config(config).total.value
    assert manifest.parameters.active.value == ledger_from_config(config).active.value
    assert not any("config implies" in n for n in manifest.notes)


@pytest.mark.model  # builds a toy Gemma 4 with torch + transformers
def test_a_tensor_missing_from_the_checkpoint_is_named_by_group(tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    checkpoint = _tiny_gemma4_checkpoint(tmp_path / "tiny")
    weights = checkpoint / "model.safetensors"
    tensors = load_file(weights)
    scale = next(name for name in tensors if name.endswith("layers.0.router.scale"))
    del tensors[scale]
    save_file(tensors, weights, metadata={"format": "pt"})
    notes = build_manifest([checkpoint], model_id="t/tiny-gemma4").manifest.notes
    assert any(n.startswith("config implies") for n in notes)
    assert any(n.startswith("group router: config implies") for n in notes)


@pytest.mark.parametrize("field", ["hidden_size", "num_hidden_layers", "vocab_size"])
def test_gemma3n_without_a_needed_field_stays_unknown(field: str) -> None:
    config = dict(GEMMA3N_E2B_SHAPE)
    del config[field]
    assert ledger_from_config(config).total.value is None
