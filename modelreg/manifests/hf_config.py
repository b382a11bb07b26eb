"""Facts and parameter counts from a Hugging Face ``config.json`` (provenance ``config``).

Counts follow the decoder-only layout shared by the Llama, Mistral, Qwen2/3 (dense and MoE),
Mixtral and Gemma 2/3 families: embeddings, attention (Q, K, V, O, optional QKV bias and QK
norms), gated MLP or routed experts (+ router, + shared expert), and RMSNorms. Families outside
that layout, or configs missing a needed field, leave the counts unknown rather than guess.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modelreg.errors import InvalidArtifact, InvalidInput
from modelreg.schemas.manifest import ArchitectureFacts, Count, ParameterLedger

# model_type -> (norms per layer, has q/k norms, has qkv bias)
_FAMILIES: dict[str, tuple[int, bool, bool]] = {
    "llama": (2, False, False),
    "mistral": (2, False, False),
    "mixtral": (2, False, False),
    "qwen2": (2, False, True),
    "qwen2_moe": (2, False, True),
    "qwen3": (2, True, False),
    "qwen3_moe": (2, True, False),
    "gemma": (2, False, False),
    "gemma2": (4, False, False),
    "gemma3_text": (4, True, False),
    "gemma3": (4, True, False),
}


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's part of a config (multimodal configs nest it in text_config)."""
    nested = config.get("text_config")
    return nested if isinstance(nested, dict) else config


MAX_JSON_BYTES = 16 << 20


def read_json_object(path: Path, max_bytes: int = MAX_JSON_BYTES) -> dict[str, Any]:
    """A JSON object from a config-like file; anything else is an ``InvalidArtifact``."""
    from modelreg.jsonio import read_json_file

    data = read_json_file(path, max_bytes=max_bytes, what="JSON file")
    if not isinstance(data, dict):
        raise InvalidArtifact(path, "expected a JSON object")
    return data


def first_int(cfg: dict[str, Any], *names: str) -> int | None:
    """The first of ``names`` whose value is an int (not a bool)."""
    for name in names:
        value = cfg.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def architecture_from_config(config: dict[str, Any], source: str) -> ArchitectureFacts:
    cfg = text_config(config)
    heads = first_int(cfg, "num_attention_heads")
    hidden = first_int(cfg, "hidden_size")
    head_dim = first_int(cfg, "head_dim") or (hidden // heads if hidden and heads else None)
    experts = first_int(cfg, "num_experts", "num_local_experts", "n_routed_experts")
    used = first_int(cfg, "num_experts_per_tok", "moe_top_k")
    if experts is not None and used is not None and used > experts:
        raise InvalidInput(
            f"{source}: contradictory expert counts: num_experts_per_tok {used} exceeds "
            f"num_experts {experts}"
        )
    window = cfg.get("sliding_window") if cfg.get("use_sliding_window", True) else None
    tie = cfg.get("tie_word_embeddings")
    arch = cfg.get("architectures") or config.get("architectures") or []
    return ArchitectureFacts(
        architecture=cfg.get("model_type") or (arch[0] if arch else None),
        context_length=first_int(cfg, "max_position_embeddings"),
        block_count=first_int(cfg, "num_hidden_layers"),
        embedding_length=hidden,
        feed_forward_length=first_int(cfg, "intermediate_size"),
        head_count=heads,
        head_count_kv=first_int(cfg, "num_key_value_heads") or heads,
        key_length=head_dim,
        value_length=head_dim,
        sliding_window=window if isinstance(window, int) else None,
        expert_count=experts,
        expert_used_count=used,
        vocab_size=first_int(cfg, "vocab_size"),
        tied_embeddings=tie if isinstance(tie, bool) else None,
        source=source,
    )


def ledger_from_config(config: dict[str, Any]) -> ParameterLedger:
    """Total, non-embedding and active parameters implied by the config (else unknown)."""
    cfg = text_config(config)
    family = _FAMILIES.get(str(cfg.get("model_type")))
    H, L = first_int(cfg, "hidden_size"), first_int(cfg, "num_hidden_layers")
    heads, vocab = first_int(cfg, "num_attention_heads"), first_int(cfg, "vocab_size")
    tie = cfg.get("tie_word_embeddings")
    if family is None or None in (H, L, heads, vocab) or not isinstance(tie, bool):
        return ParameterLedger()
    assert H is not None and L is not None and heads is not None and vocab is not None
    norms, qk_norm, qkv_bias = family
    kv_heads = first_int(cfg, "num_key_value_heads") or heads
    d = first_int(cfg, "head_dim") or H // heads
    q, kv = heads * d, kv_heads * d
    attention = H * q + 2 * H * kv + q * H
    attention += q + 2 * kv if qkv_bias or cfg.get("attention_bias") else 0
    attention += 2 * d if qk_norm else 0

    experts = first_int(cfg, "num_experts", "num_local_experts", "n_routed_experts") or 0
    used = first_int(cfg, "num_experts_per_tok") or 0
    dense_ff = first_int(cfg, "intermediate_size")
    expert_ff = first_int(cfg, "moe_intermediate_size") or dense_ff
    shared_ff = first_int(cfg, "shared_expert_intermediate_size") or 0
    if dense_ff is None or (experts and (expert_ff is None or not used)):
        return ParameterLedger()
    assert expert_ff is not None
    sparse_step = first_int(cfg, "decoder_sparse_step") or 1
    dense_layers = set(cfg.get("mlp_only_layers") or [])

    total = active = 0
    for layer in range(L):
        per_layer = attention + norms * H
        sparse = experts and layer not in dense_layers and (layer + 1) % sparse_step == 0
        if sparse:
            routed = experts * 3 * H * expert_ff
            shared = 3 * H * shared_ff + (H if shared_ff else 0)  # + its sigmoid gate
            router = H * experts
            total += per_layer + routed + shared + router
            active += per_layer + routed * used // experts + shared + router
        else:
            total += per_layer + 3 * H * dense_ff
            active += per_layer + 3 * H * dense_ff
    embeddings = vocab * H * (1 if tie else 2)
    total += embeddings + H  # + final norm
    active += embeddings + H
    return ParameterLedger(
        total=Count(value=total, provenance="config"),
        non_embedding=Count(value=total - embeddings, provenance="config"),
        active=Count(value=active, provenance="config"),
    )
