"""Multi-head latent attention sized as llama.cpp caches it; ik_llama.cpp's row-interleaved
tensor types named, sized, and mapped to the x86 CPU flags their only kernels need."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelreg.errors import InvalidArtifact, InvalidInput
from modelreg.manifests.build import build_manifest
from modelreg.manifests.fit import kv_cache_bytes, memory_fit
from modelreg.manifests.gguf import latent_attention_facts, read_gguf
from modelreg.manifests.gguf_facts import architecture_from_gguf
from modelreg.manifests.hf_config import architecture_from_config
from modelreg.manifests.tensor_types import interleaved_cpu_requirements
from modelreg.schemas.manifest import ArchitectureFacts
from tests.helpers import kv_str, kv_u32, raw_gguf, tensor_info, write_gguf

CONTEXT = 32768
LAYERS = 2
# The small DeepSeek-V2-shaped file: 128 heads, kv_lora_rank 512, 64 rope dims,
# per-head K 128 + 64 = 192 and V 128 once decompressed.
DEEPSEEK_SHAPE: dict[str, object] = {
    "deepseek2.block_count": LAYERS,
    "deepseek2.embedding_length": 5120,
    "deepseek2.attention.head_count": 128,
    "deepseek2.attention.kv_lora_rank": 512,
    "deepseek2.rope.dimension_count": 64,
    "deepseek2.context_length": 163840,
}
# What convert_hf_to_gguf wrote before llama.cpp's MLA support: per-head K/V.
OLD_CONVERSION: dict[str, object] = {
    **DEEPSEEK_SHAPE,
    "deepseek2.attention.head_count_kv": 128,
    "deepseek2.attention.key_length": 192,
    "deepseek2.attention.value_length": 128,
}
# What it writes now (conversion/deepseek.py): one KV head of the 576-wide latent, V the
# 512-wide part of it, the decompressed sizes under *_mla.
NEW_CONVERSION: dict[str, object] = {
    **DEEPSEEK_SHAPE,
    "deepseek2.attention.head_count_kv": 1,
    "deepseek2.attention.key_length": 576,
    "deepseek2.attention.value_length": 512,
    "deepseek2.attention.key_length_mla": 192,
    "deepseek2.attention.value_length_mla": 128,
}
F16 = 2
# K row of (512 + 64) elements per token and layer, no V: 75,497,472 bytes (0.07 GiB).
LATENT_BYTES = (512 + 64) * F16 * CONTEXT * LAYERS
# Per-head K and V for 128 KV heads: 5,368,709,120 bytes (5.0 GiB), the figure.
MHA_BYTES = (192 + 128) * 128 * F16 * CONTEXT * LAYERS


def _deepseek2(tmp_path: Path, name: str, metadata: dict[str, object]) -> Path:
    return write_gguf(
        tmp_path / name,
        {"token_embd.weight": (8, 5120), "blk.0.attn_norm.weight": (5120,)},
        arch="deepseek2",
        metadata=metadata,
    )


def _facts(path: Path) -> ArchitectureFacts:
    header = read_gguf(path)
    return architecture_from_gguf(header).model_copy(update=latent_attention_facts(header))


def test_latent_attention_keys_are_read_from_the_gguf(tmp_path: Path) -> None:
    new = latent_attention_facts(read_gguf(_deepseek2(tmp_path, "new.gguf", NEW_CONVERSION)))
    assert new == {
        "kv_lora_rank": 512,
        "rope_dimension_count": 64,
        "key_length_mla": 192,
        "value_length_mla": 128,
    }
    old = latent_attention_facts(read_gguf(_deepseek2(tmp_path, "old.gguf", OLD_CONVERSION)))
    assert old["kv_lora_rank"] == 512 and old["key_length_mla"] is None


def test_new_conversion_caches_only_the_latent(tmp_path: Path) -> None:
    kv = kv_cache_bytes(_facts(_deepseek2(tmp_path, "new.gguf", NEW_CONVERSION)), CONTEXT)
    assert kv.bytes == LATENT_BYTES == 75_497_472
    # Not K 576 + V 512 (V is a view of K), and not the per-head figure.
    assert kv.bytes != (576 + 512) * F16 * CONTEXT * LAYERS
    assert kv.bytes != MHA_BYTES
    (note,) = kv.notes
    assert "latent" in note and "576 wide" in note and "kv_lora_rank 512 + 64 rope" in note


def test_memory_fit_of_a_new_conversion_uses_the_latent_figure(tmp_path: Path) -> None:
    path = _deepseek2(tmp_path, "new.gguf", NEW_CONVERSION)
    manifest = build_manifest([path], model_id="deepseek-ai/tiny").manifest
    manifest = manifest.model_copy(update={"architecture": _facts(path)})
    fit = memory_fit(manifest, 64 * 2**30, context=CONTEXT)
    assert fit.kv.bytes == LATENT_BYTES
    assert fit.total_bytes == fit.weights_bytes + LATENT_BYTES + fit.overhead_bytes  # type: ignore[operator]


def test_old_conversion_is_sized_as_llama_cpp_runs_it(tmp_path: Path) -> None:
    """Without key_length_mla llama.cpp's is_mla() is false: it decompresses to 128 K/V heads
    and caches those. The latent figure is in the note, and is what a latent runtime gets."""
    arch = _facts(_deepseek2(tmp_path, "old.gguf", OLD_CONVERSION))
    kv = kv_cache_bytes(arch, CONTEXT)
    assert kv.bytes == MHA_BYTES == 5 * 2**30
    (note,) = kv.notes
    assert "without key_length_mla" in note and f"{LATENT_BYTES} bytes" in note

    latent = kv_cache_bytes(arch, CONTEXT, latent_mla_runtime=True)
    assert latent.bytes == LATENT_BYTES
    assert "576-wide latent" in latent.notes[0]


def test_latent_runtime_sizes_both_conversions_the_same(tmp_path: Path) -> None:
    old = _facts(_deepseek2(tmp_path, "old.gguf", OLD_CONVERSION))
    new = _facts(_deepseek2(tmp_path, "new.gguf", NEW_CONVERSION))
    for arch in (old, new):
        assert kv_cache_bytes(arch, CONTEXT, latent_mla_runtime=True).bytes == LATENT_BYTES


def test_latent_cache_takes_the_k_type_and_leaves_the_v_type_unused(tmp_path: Path) -> None:
    arch = _facts(_deepseek2(tmp_path, "new.gguf", NEW_CONVERSION))
    kv = kv_cache_bytes(arch, CONTEXT, kv_dtype="q8_0", kv_dtype_v="f16")
    assert kv.bytes == 576 * 34 // 32 * CONTEXT * LAYERS  # 18 q8_0 blocks of 34 bytes a row
    assert "the V type f16 is unused" in kv.notes[0]


def test_latent_runtime_without_rope_dims_is_unknown() -> None:
    arch = ArchitectureFacts(
        architecture="deepseek2", block_count=2, head_count_kv=128, kv_lora_rank=512
    )
    kv = kv_cache_bytes(arch, CONTEXT, latent_mla_runtime=True)
    assert kv.bytes is None and any("rope_dimension_count" in u for u in kv.unknown)


def test_latent_attention_head_size_is_not_guessed_from_the_embedding() -> None:
    arch = ArchitectureFacts(
        block_count=2, embedding_length=5120, head_count=128, head_count_kv=128, kv_lora_rank=512
    )
    kv = kv_cache_bytes(arch, CONTEXT)
    assert kv.bytes is None and kv.unknown


DEEPSEEK_V3_CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "max_position_embeddings": 163840,
    "vocab_size": 129280,
}


def test_deepseek_config_gives_decompressed_head_sizes_and_the_latent() -> None:
    arch = architecture_from_config(DEEPSEEK_V3_CONFIG, "config.json")
    assert (arch.key_length, arch.value_length) == (192, 128)  # not 7168 / 128 = 56
    assert (arch.kv_lora_rank, arch.rope_dimension_count) == (512, 64)
    kv = kv_cache_bytes(arch, 4096)
    # What transformers caches for the checkpoint: per-head K/V; the latent is in the note.
    assert kv.bytes == (192 + 128) * 128 * F16 * 4096 * 61
    assert f"{(512 + 64) * F16 * 4096 * 61} bytes" in kv.notes[0]


def test_latent_runtime_flag_is_for_ik_llama_cpp_mla_architectures_only() -> None:
    minicpm3 = ArchitectureFacts(
        architecture="minicpm3",
        block_count=2,
        head_count_kv=40,
        key_length=96,
        value_length=64,
        kv_lora_rank=256,
        rope_dimension_count=32,
    )
    kv = kv_cache_bytes(minicpm3, 4096, latent_mla_runtime=True)
    assert kv.bytes == (96 + 64) * 40 * F16 * 4096 * 2


def test_config_without_latent_attention_is_unchanged() -> None:
    arch = architecture_from_config(
        {"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 2}, "x"
    )
    assert (arch.key_length, arch.value_length, arch.kv_lora_rank) == (128, 128, None)


def _interleaved_file(tmp_path: Path, tensors: list[tuple[str, list[int], int]]) -> Path:
    """Hand-assembled: the gguf package cannot write type ids it does not know."""
    infos, offset = [], 0
    for name, dims, ggml_type in tensors:
        infos.append(tensor_info(name, dims, ggml_type=ggml_type, offset=offset))
        offset += 4096
    path = tmp_path / "r8.gguf"
    path.write_bytes(
        raw_gguf(
            kvs=[
                kv_str("general.architecture", "llama"),
                kv_u32("llama.block_count", 1),
            ],
            tensors=infos,
            data=b"\0" * offset,
        )
    )
    return path


def test_q8_0_r8_tensor_is_named_and_sized(tmp_path: Path) -> None:
    # dims innermost first: 8 interleaved rows of 256 elements = 8 × 8 blocks of 34 bytes.
    path = _interleaved_file(tmp_path, [("blk.0.ffn_down.weight", [256, 8], 208)])
    (tensor,) = read_gguf(path).tensors
    assert tensor.type_name == "Q8_0_R8"
    assert tensor.n_bytes == 8 * (256 // 32) * 34 == 2176


def test_interleaved_type_with_per_row_scales_counts_them(tmp_path: Path) -> None:
    # IQ4_KS_R4: 136 bytes per 256 elements plus a 4-byte row scale (ggml_row_size).
    path = _interleaved_file(tmp_path, [("blk.0.ffn_up.weight", [512, 4], 344)])
    (tensor,) = read_gguf(path).tensors
    assert tensor.type_name == "IQ4_KS_R4"
    assert tensor.n_bytes == 4 * (4 + 2 * 136)


def test_interleaved_row_not_a_whole_number_of_blocks_is_invalid(tmp_path: Path) -> None:
    path = _interleaved_file(tmp_path, [("w", [48, 8], 208)])
    with pytest.raises(InvalidArtifact, match="not a multiple of the Q8_0_R8 block size 32"):
        read_gguf(path)


def test_manifest_of_a_q8_0_r8_file_names_the_type_and_its_cpu_need(tmp_path: Path) -> None:
    path = _interleaved_file(tmp_path, [("blk.0.ffn_down.weight", [256, 8], 208)])
    manifest = build_manifest([path], model_id="acme/r8").manifest
    assert manifest.quantization is not None
    stats = manifest.quantization.tensor_types["Q8_0_R8"]
    assert stats.bytes == 2176
    (need,) = interleaved_cpu_requirements(manifest.quantization.tensor_types)
    assert need.type_name == "Q8_0_R8"
    assert need.flags == ("avx2", "fma", "f16c")
    assert need.message.startswith("Q8_0_R8 (ik_llama.cpp row-interleaved) needs AVX2")


def test_cpu_requirements_cover_only_types_without_a_plain_path() -> None:
    assert interleaved_cpu_requirements(["F32", "Q8_0", "Q4_K", "unknown(140)"]) == []
    # Mainline's former ARM layouts have plain-C kernels on x86.
    assert interleaved_cpu_requirements(["Q4_0_4_4", "Q4_0_8_8"]) == []
    needs = interleaved_cpu_requirements(["Q4_K_R4", "BF16_R16", "Q8_K_R16", "Q4_K_R4"])
    assert [n.type_name for n in needs] == ["BF16_R16", "Q4_K_R4", "Q8_K_R16"]
    bf16, q4k, q8k = needs
    assert "avx512_bf16" in bf16.flags and "avx512_bf16" in bf16.message
    assert q4k.flags == ("avx2", "fma", "f16c")
    assert {"avx512f", "avx512_vnni", "avx512vl", "avx512bw", "avx512dq"} <= set(q8k.flags)


def test_cpu_requirement_reads_ids_recorded_as_unknown() -> None:
    (need,) = interleaved_cpu_requirements(["unknown(208)"])
    assert need.type_name == "Q8_0_R8" and "avx2" in need.flags


def test_files_without_latent_attention_gain_no_new_facts(tmp_path: Path) -> None:
    path = write_gguf(
        tmp_path / "llama.gguf",
        {"token_embd.weight": (8, 64)},
        metadata={"llama.rope.dimension_count": 64, "llama.attention.key_length": 64},
    )
    facts = latent_attention_facts(read_gguf(path))
    assert set(facts.values()) == {None}  # so the record identity stays what it was


def test_negative_latent_rank_in_a_config_is_bad_input() -> None:
    with pytest.raises(InvalidInput, match="kv_lora_rank"):
        architecture_from_config({**DEEPSEEK_V3_CONFIG, "kv_lora_rank": -512}, "config.json")
