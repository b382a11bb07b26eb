"""Facts and parameter counts from a Hugging Face ``config.json`` (provenance ``config``).

Counts follow the decoder-only layout shared by the Llama, Mistral, Qwen2/3 (dense and MoE),
Mixtral and Gemma 2/3 families: embeddings, attention (Q, K, V, O, optional QKV bias and QK
norms), gated MLP or routed experts (+ router, + shared expert), and RMSNorms. Gemma 4 (dense
and MoE: a dense MLP beside 128 routed experts, sliding / global layers with their own head
sizes, KV-shared layers, per-layer embeddings) and Gemma 3n (AltUp, LAuReL, per-layer
embeddings) have their own counters, written from transformers' modeling code. Only the
language model is counted: a multimodal config's vision and audio towers are not. Families
outside these layouts, or configs missing a needed field, leave the counts unknown rather than
guess.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelreg.errors import InvalidArtifact, InvalidInput
from modelreg.limits import MAX_EXPERTS, MAX_LAYERS, MAX_WIDTH
from modelreg.schemas.manifest import (
    ArchitectureFacts,
    Count,
    ParameterGroups,
    ParameterLedger,
)

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


# The config fields that count layers or experts, and their limits (modelreg/limits.py); every
# other integer a config gives is a width, a head count or a vocabulary (MAX_WIDTH).
_CONFIG_LIMITS = {
    "num_hidden_layers": (MAX_LAYERS, "layers"),
    "num_kv_shared_layers": (MAX_LAYERS, "layers"),
    "decoder_sparse_step": (MAX_LAYERS, "layers"),
    "num_experts": (MAX_EXPERTS, "experts"),
    "num_local_experts": (MAX_EXPERTS, "experts"),
    "n_routed_experts": (MAX_EXPERTS, "experts"),
    "num_experts_per_tok": (MAX_EXPERTS, "experts"),
    "moe_top_k": (MAX_EXPERTS, "experts"),
    "top_k_experts": (MAX_EXPERTS, "experts"),
}


def _within_limit(name: str, value: int) -> int:
    limit, what = _CONFIG_LIMITS.get(name, (MAX_WIDTH, "(a width, head count or vocabulary)"))
    if value > limit:
        raise InvalidInput(
            f"config field {name!r} is {value:,}: beyond the limit of {limit:,} {what}"
        )
    return value


def first_int(cfg: dict[str, Any], *names: str) -> int | None:
    """The first of ``names`` whose value is an int (not a bool). A value of the wrong scalar
    type (text, a fraction, a truth value) or beyond its limit (``_CONFIG_LIMITS``) is bad
    input, not an unknown: one line naming the field and the value. (Lists and objects are
    left to the callers that read per-layer values.)"""
    for name in names:
        value = cfg.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return _within_limit(name, value)
        if isinstance(value, bool | str) or (isinstance(value, float) and not value.is_integer()):
            shown = repr(value)[:60]
            raise InvalidInput(f"config field {name!r} must be an integer, not {shown}")
        if isinstance(value, float):
            return _within_limit(name, int(value))
    return None


def _int_per_layer(value: Any, layers: int) -> int | list[int] | None:
    """One int for every layer, or a per-layer list of ``layers`` ints (None when neither)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if (
        isinstance(value, list)
        and len(value) == layers
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        return list(value)
    return None


def _declared_layer_types(cfg: dict[str, Any], layers: int) -> list[str] | None:
    """The config's per-layer "sliding_attention" / "full_attention" list, if well formed."""
    declared = cfg.get("layer_types")
    if (
        isinstance(declared, list)
        and len(declared) == layers
        and all(t in ("sliding_attention", "full_attention") for t in declared)
    ):
        return list(declared)
    return None


def _layer_types(cfg: dict[str, Any], layers: int, family: str) -> list[str] | None:
    """Per-layer attention kinds of a Gemma 4 / 3n config, as declared or as transformers
    defaults them when absent (configuration_gemma4.py: every 6th layer global and the last
    layer forced global; configuration_gemma3n.py: every 5th layer global)."""
    if "layer_types" in cfg and cfg["layer_types"] is not None:
        return _declared_layer_types(cfg, layers)
    if family == "gemma4":
        types = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(layers)]
        if types:
            types[-1] = "full_attention"
        return types
    return ["full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(layers)]


def _gemma_family(cfg: dict[str, Any]) -> str | None:
    model_type = str(cfg.get("model_type"))
    if model_type in ("gemma4", "gemma4_text"):
        return "gemma4"
    if model_type in ("gemma3n", "gemma3n_text"):
        return "gemma3n"
    return None


@dataclass(frozen=True)
class _Gemma4Attention:
    """Per-layer attention shape of Gemma 4 (modeling_gemma4.Gemma4TextAttention)."""

    sliding: bool
    head_dim: int
    kv_heads: int
    k_eq_v: bool  # global layers with attention_k_eq_v reuse the key projection as values
    kv_shared: bool  # layers past num_hidden_layers - num_kv_shared_layers have no K/V weights


def _layer_overrides(per_layer: dict[Any, Any]) -> dict[int, dict[str, Any]] | None:
    """``per_layer_config`` keyed by layer number. transformers writes the keys as zero-padded
    strings ("05"); a config built in Python may use ints. Anything else: None (unknown)."""
    overrides: dict[int, dict[str, Any]] = {}
    for key, value in per_layer.items():
        if isinstance(key, str) and key.isdigit():
            key = int(key)
        if not isinstance(key, int) or isinstance(key, bool) or not isinstance(value, dict):
            return None
        overrides[key] = value
    return overrides


def _gemma4_attention(cfg: dict[str, Any]) -> list[_Gemma4Attention] | None:
    """Per-layer attention shapes, from either spelling of a Gemma 4 config.

    The released configs (google/gemma-4-26B-A4B-it) give global layers ``global_head_dim``
    and, with ``attention_k_eq_v``, ``num_global_key_value_heads``; transformers 5.x writes the
    same as ``per_layer_config`` ({layer: {head_dim, num_key_value_heads}}). A global layer
    whose head size neither states stays unknown (the two transformers versions default it
    differently).
    """
    # Field names: transformers' configuration_gemma4.py (Gemma4TextConfig) and the released
    # config.json; shapes: modeling_gemma4.Gemma4TextAttention.
    layers = first_int(cfg, "num_hidden_layers")
    if not layers:
        return None
    types = _layer_types(cfg, layers, "gemma4")
    head_dim, kv_heads = first_int(cfg, "head_dim"), first_int(cfg, "num_key_value_heads")
    global_head_dim = first_int(cfg, "global_head_dim")
    global_kv_heads = first_int(cfg, "num_global_key_value_heads")
    declared = cfg.get("per_layer_config")
    per_layer = _layer_overrides(declared) if isinstance(declared, dict) else None
    k_eq_v = cfg.get("attention_k_eq_v") is True
    shared = first_int(cfg, "num_kv_shared_layers") or 0
    if types is None or head_dim is None or kv_heads is None:
        return None
    if declared is not None and per_layer is None:
        return None
    shapes = []
    for layer, kind in enumerate(types):
        sliding = kind == "sliding_attention"
        alternative = k_eq_v and not sliding
        if per_layer is not None:
            override = per_layer.get(layer, {})
            dim = first_int(override, "head_dim") or head_dim
            heads_kv = first_int(override, "num_key_value_heads") or kv_heads
        elif sliding:
            dim, heads_kv = head_dim, kv_heads
        else:
            if global_head_dim is None or (alternative and global_kv_heads is None):
                return None
            dim = global_head_dim
            heads_kv = global_kv_heads if alternative and global_kv_heads else kv_heads
        kv_shared = shared > 0 and layer >= layers - shared
        shapes.append(_Gemma4Attention(sliding, dim, heads_kv, alternative, kv_shared))
    return shapes


@dataclass(frozen=True)
class _LatentAttention:
    """Multi-head latent attention of a DeepSeek-V2/V3-style config (``kv_lora_rank``):
    per-head K is ``qk_nope_head_dim + qk_rope_head_dim`` and V ``v_head_dim`` wide, not
    ``hidden_size / num_attention_heads`` (None where the config omits one)."""

    kv_lora_rank: int
    rope_head_dim: int | None
    key_head_dim: int | None
    value_head_dim: int | None


def _latent_attention(cfg: dict[str, Any]) -> _LatentAttention | None:
    # Field names: transformers' configuration_deepseek_v2.py / configuration_deepseek_v3.py.
    rank = first_int(cfg, "kv_lora_rank")
    if not rank:
        return None
    nope, rope = first_int(cfg, "qk_nope_head_dim"), first_int(cfg, "qk_rope_head_dim")
    for name, value in (
        ("kv_lora_rank", rank),
        ("qk_nope_head_dim", nope),
        ("qk_rope_head_dim", rope),
    ):
        if value is not None and value < 0:
            raise InvalidInput(f"config field {name!r} must not be negative, not {value}")
    return _LatentAttention(
        rank,
        rope,
        nope + rope if nope is not None and rope is not None else None,
        first_int(cfg, "v_head_dim"),
    )


def architecture_from_config(config: dict[str, Any], source: str) -> ArchitectureFacts:
    """Shape facts of the language model in ``config`` (per-layer where the family varies
    them: Gemma 4's global layers have their own head size and KV heads)."""
    cfg = text_config(config)
    heads = first_int(cfg, "num_attention_heads")
    hidden = first_int(cfg, "hidden_size")
    layers = first_int(cfg, "num_hidden_layers")
    head_dim = first_int(cfg, "head_dim") or (hidden // heads if hidden and heads else None)
    family = _gemma_family(cfg)
    experts = first_int(cfg, "num_experts", "num_local_experts", "n_routed_experts")
    if family == "gemma4" and cfg.get("enable_moe_block") is not True:
        experts = None  # Gemma 4 builds its router and experts only with enable_moe_block
    used = first_int(cfg, "num_experts_per_tok", "moe_top_k", "top_k_experts")
    if experts is not None and used is not None and used > experts:
        raise InvalidInput(
            f"{source}: contradictory expert counts: num_experts_per_tok {used} exceeds "
            f"num_experts {experts}"
        )
    window = cfg.get("sliding_window") if cfg.get("use_sliding_window", True) else None
    tie = cfg.get("tie_word_embeddings", config.get("tie_word_embeddings"))
    arch = cfg.get("architectures") or config.get("architectures") or []
    kv_heads: int | list[int] | None = first_int(cfg, "num_key_value_heads") or heads
    key_length: int | list[int] | None = head_dim
    pattern = None
    kv_shared = None
    if layers:
        types = _layer_types(cfg, layers, family) if family else _declared_layer_types(cfg, layers)
        if types is not None:
            pattern = [t == "sliding_attention" for t in types]
    if family == "gemma4":
        shapes = _gemma4_attention(cfg)
        key_length = [a.head_dim for a in shapes] if shapes else None
        kv_heads = [a.kv_heads for a in shapes] if shapes else None
        kv_shared = first_int(cfg, "num_kv_shared_layers") or 0
    elif family == "gemma3n":
        kv_shared = first_int(cfg, "num_kv_shared_layers")
    value_length = key_length
    latent = _latent_attention(cfg)
    if latent is not None:
        key_length, value_length = latent.key_head_dim, latent.value_head_dim
    ffn: int | list[int] | None = first_int(cfg, "intermediate_size")
    if ffn is None and layers:
        ffn = _int_per_layer(cfg.get("intermediate_size"), layers)
    return ArchitectureFacts(
        architecture=cfg.get("model_type") or (arch[0] if arch else None),
        context_length=first_int(cfg, "max_position_embeddings"),
        block_count=layers,
        embedding_length=hidden,
        feed_forward_length=ffn,
        head_count=heads,
        head_count_kv=kv_heads,
        key_length=key_length,
        value_length=value_length,
        sliding_window=window if isinstance(window, int) else None,
        sliding_window_pattern=pattern if window else None,
        kv_shared_layers=kv_shared,
        kv_lora_rank=latent.kv_lora_rank if latent else None,
        rope_dimension_count=latent.rope_head_dim if latent else None,
        expert_count=experts,
        expert_used_count=used,
        vocab_size=first_int(cfg, "vocab_size"),
        tied_embeddings=tie if isinstance(tie, bool) else None,
        source=source,
    )


@dataclass(frozen=True)
class ConfigParameters:
    """Parameters implied by a config: per group (ParameterGroups names), total and active."""

    groups: dict[str, int]
    active: int

    @property
    def total(self) -> int:
        return sum(self.groups.values())

    @property
    def embedding(self) -> int:
        return self.groups.get("embeddings", 0) + self.groups.get("output", 0)


def _tied(config: dict[str, Any], cfg: dict[str, Any]) -> bool | None:
    tie = cfg.get("tie_word_embeddings", config.get("tie_word_embeddings"))
    return tie if isinstance(tie, bool) else None


def _generic_parameters(cfg: dict[str, Any], tie: bool) -> ConfigParameters | None:
    family = _FAMILIES.get(str(cfg.get("model_type")))
    H, L = first_int(cfg, "hidden_size"), first_int(cfg, "num_hidden_layers")
    heads, vocab = first_int(cfg, "num_attention_heads"), first_int(cfg, "vocab_size")
    if family is None or H is None or L is None or heads is None or vocab is None:
        return None
    norms, qk_norm, qkv_bias = family
    kv_heads = first_int(cfg, "num_key_value_heads") or heads
    d = first_int(cfg, "head_dim") or H // heads
    q, kv = heads * d, kv_heads * d
    attention = H * q + 2 * H * kv + q * H
    attention += q + 2 * kv if qkv_bias or cfg.get("attention_bias") else 0
    layer_norms = norms * H + (2 * d if qk_norm else 0)

    experts = first_int(cfg, "num_experts", "num_local_experts", "n_routed_experts") or 0
    used = first_int(cfg, "num_experts_per_tok") or 0
    dense_ff = first_int(cfg, "intermediate_size")
    expert_ff = first_int(cfg, "moe_intermediate_size") or dense_ff
    shared_ff = first_int(cfg, "shared_expert_intermediate_size") or 0
    if dense_ff is None or (experts and (expert_ff is None or not used)):
        return None
    assert expert_ff is not None
    sparse_step = first_int(cfg, "decoder_sparse_step") or 1
    dense_layers = set(cfg.get("mlp_only_layers") or [])

    groups = dict.fromkeys(("attention", "norms", "ffn", "experts", "shared_experts", "router"), 0)
    # Counted, not visited: every layer the same but for MoE or dense MLP (a sparse step, the
    # mlp_only_layers listed) — one step per listed layer, none per layer of the model.
    sparse = 0
    if experts:
        step = abs(sparse_step)  # (layer + 1) % step == 0 whatever the sign
        listed = {layer for layer in dense_layers if _is_layer_index(layer, L)}
        sparse = L // step - sum(1 for layer in listed if (int(layer) + 1) % step == 0)
    groups["attention"] = L * attention
    groups["norms"] = L * layer_norms
    groups["ffn"] = (L - sparse) * 3 * H * dense_ff
    routed_active = 0
    if sparse:
        routed = experts * 3 * H * expert_ff
        groups["experts"] = sparse * routed
        routed_active = sparse * (routed * used // experts)
        groups["shared_experts"] = sparse * (3 * H * shared_ff + (H if shared_ff else 0))  # + gate
        groups["router"] = sparse * H * experts
    groups["norms"] += H  # final norm
    groups["embeddings"] = vocab * H
    groups["output"] = 0 if tie else vocab * H
    total = sum(groups.values())
    return ConfigParameters(groups, total - groups["experts"] + routed_active)


def _is_layer_index(value: Any, layers: int) -> bool:
    """Does ``value`` (an entry of mlp_only_layers) name one of ``layers`` layers? (As a set
    member would: 3, 3.0 and True name layers 3, 3 and 1.)"""
    if (
        not isinstance(value, int | float)
        or value != value
        or value in (float("inf"), -float("inf"))
    ):
        return False
    return int(value) == value and 0 <= value < layers


def _gemma4_parameters(cfg: dict[str, Any], tie: bool) -> ConfigParameters | None:
    """Gemma 4 text model, as transformers' modeling_gemma4 builds it (Gemma4TextModel,
    Gemma4TextDecoderLayer, Gemma4TextAttention, Gemma4TextMLP, Gemma4TextRouter,
    Gemma4TextExperts): checked against a meta-device instantiation of the 26B-A4B shape."""
    H, L = first_int(cfg, "hidden_size"), first_int(cfg, "num_hidden_layers")
    heads, vocab = first_int(cfg, "num_attention_heads"), first_int(cfg, "vocab_size")
    dense_ff = first_int(cfg, "intermediate_size")
    shapes = _gemma4_attention(cfg)
    if None in (H, L, heads, vocab, dense_ff) or shapes is None:
        return None
    assert H is not None and L is not None and heads is not None and vocab is not None
    assert dense_ff is not None
    moe = cfg.get("enable_moe_block") is True
    experts = first_int(cfg, "num_experts") if moe else 0
    top_k = first_int(cfg, "top_k_experts") if moe else 0
    expert_ff = first_int(cfg, "moe_intermediate_size") if moe else 0
    if moe and not (experts and top_k and expert_ff):
        return None
    assert experts is not None and top_k is not None and expert_ff is not None
    per_layer_input = first_int(cfg, "hidden_size_per_layer_input") or 0
    per_layer_vocab = first_int(cfg, "vocab_size_per_layer_input")
    if per_layer_input and per_layer_vocab is None:
        return None
    bias = cfg.get("attention_bias") is True
    double_wide = cfg.get("use_double_wide_mlp") is True

    groups = dict.fromkeys(("attention", "norms", "ffn", "experts", "router", "other"), 0)
    routed_active = 0
    # One step per distinct layer shape (sliding / global, KV-shared), times its layers.
    for a, n in Counter(shapes).items():
        q = heads * a.head_dim
        kv = a.kv_heads * a.head_dim
        attention = H * q + q * H + (q + H if bias else 0)  # q_proj, o_proj
        groups["norms"] += n * a.head_dim  # q_norm (v_norm has no scale)
        if not a.kv_shared:
            attention += (H * kv + (kv if bias else 0)) * (1 if a.k_eq_v else 2)  # k (+ v)
            groups["norms"] += n * a.head_dim  # k_norm
        groups["attention"] += n * attention
        ff = dense_ff * (2 if double_wide and a.kv_shared else 1)
        groups["ffn"] += n * 3 * H * ff
        groups["norms"] += n * 4 * H  # input, post-attention, pre- and post-feedforward
        groups["other"] += n  # layer_scalar: a persistent buffer, saved with the weights
        if per_layer_input:
            groups["other"] += n * 2 * H * per_layer_input  # per_layer_input_gate, _projection
            groups["norms"] += n * H  # post_per_layer_input_norm
        if moe:
            routed = experts * 3 * H * expert_ff  # gate_up_proj + down_proj
            groups["experts"] += n * routed
            routed_active += n * (routed * top_k // experts)
            groups["router"] += n * (H * experts + H + experts)  # proj, scale, per_expert_scale
            groups["norms"] += n * 3 * H  # post_feedforward_layernorm_1/_2, pre_feedforward_2
    groups["norms"] += H  # final norm
    groups["embeddings"] = vocab * H
    if per_layer_input:
        assert per_layer_vocab is not None
        groups["embeddings"] += per_layer_vocab * L * per_layer_input  # embed_tokens_per_layer
        groups["other"] += H * L * per_layer_input  # per_layer_model_projection
        groups["norms"] += per_layer_input  # per_layer_projection_norm
    groups["output"] = 0 if tie else vocab * H
    total = sum(groups.values())
    return ConfigParameters(groups, total - groups["experts"] + routed_active)


def _gemma3n_parameters(cfg: dict[str, Any], tie: bool) -> ConfigParameters | None:
    """Gemma 3n text model, as transformers' modeling_gemma3n (5.x) builds it
    (Gemma3nTextModel, Gemma3nTextDecoderLayer with AltUp and LAuReL, per-layer embeddings).
    The last num_kv_shared_layers layers reuse earlier K/V and have no K/V projections —
    checkpoints converted by transformers 4.x still carry those tensors, which 5.x ignores on
    load, so a tensor count can exceed this by them. No router: active equals total."""
    # Field names from transformers' configuration_gemma3n.Gemma3nTextConfig.
    H, L = first_int(cfg, "hidden_size"), first_int(cfg, "num_hidden_layers")
    heads, vocab = first_int(cfg, "num_attention_heads"), first_int(cfg, "vocab_size")
    kv_heads, d = first_int(cfg, "num_key_value_heads"), first_int(cfg, "head_dim")
    per_layer_input = first_int(cfg, "hidden_size_per_layer_input")
    per_layer_vocab = first_int(cfg, "vocab_size_per_layer_input")
    altup, laurel = first_int(cfg, "altup_num_inputs"), first_int(cfg, "laurel_rank")
    shared = first_int(cfg, "num_kv_shared_layers")
    needed = (H, L, heads, vocab, kv_heads, d, per_layer_input, per_layer_vocab, altup, laurel)
    if None in needed or shared is None:
        return None
    assert H is not None and L is not None and heads is not None and vocab is not None
    assert kv_heads is not None and d is not None and per_layer_input is not None
    assert per_layer_vocab is not None and altup is not None and laurel is not None
    ffn = _int_per_layer(cfg.get("intermediate_size"), L)
    if ffn is None:
        return None
    bias = cfg.get("attention_bias") is True
    q, kv = heads * d, kv_heads * d
    groups = dict.fromkeys(("attention", "norms", "ffn", "other"), 0)
    # Counted, not visited: the layers differ only in their K/V projections (the last
    # ``shared`` have none) and their MLP width.
    holding = max(0, min(L, L - shared))
    groups["attention"] = L * (2 * H * q + (q + H if bias else 0))  # q_proj, o_proj
    groups["attention"] += holding * (2 * H * kv + (2 * kv if bias else 0))  # k_proj, v_proj
    groups["norms"] = L * d + holding * d  # q_norm (v_norm has no scale); k_norm
    groups["ffn"] = 3 * H * (L * ffn if isinstance(ffn, int) else sum(ffn))
    # input, post-attention, pre/post-feedforward, post_laurel, post_per_layer_input and the
    # AltUp router norm
    groups["norms"] += L * 7 * H
    groups["other"] = L * (H + altup * altup + altup * altup**2 + H * altup)  # AltUp
    groups["other"] += L * 2 * H * laurel  # LAuReL linear_left, linear_right
    groups["other"] += L * 2 * H * per_layer_input  # per_layer_input_gate, _projection
    groups["norms"] += H + per_layer_input  # final norm, per_layer_projection_norm
    groups["embeddings"] = vocab * H + per_layer_vocab * L * per_layer_input
    groups["other"] += H * L * per_layer_input  # per_layer_model_projection
    groups["other"] += 2 * (altup - 1) * H * H  # altup_projections, altup_unembed_projections
    groups["output"] = 0 if tie else vocab * H
    total = sum(groups.values())
    return ConfigParameters(groups, total)


def parameters_from_config(config: dict[str, Any]) -> ConfigParameters | None:
    """Per-group, total and active parameters of the language model in ``config``; None when
    the family is not one this module counts or a needed field is missing."""
    cfg = text_config(config)
    tie = _tied(config, cfg)
    if tie is None:
        return None
    family = _gemma_family(cfg)
    if family == "gemma4":
        return _gemma4_parameters(cfg, tie)
    if family == "gemma3n":
        return _gemma3n_parameters(cfg, tie)
    return _generic_parameters(cfg, tie)


def ledger_from_config(config: dict[str, Any]) -> ParameterLedger:
    """Total, non-embedding and active parameters implied by the config (else unknown), with
    the per-group split a Neuron fit checks residency against."""
    counted = parameters_from_config(config)
    if counted is None:
        return ParameterLedger()
    return ParameterLedger(
        total=Count(value=counted.total, provenance="config"),
        non_embedding=Count(value=counted.total - counted.embedding, provenance="config"),
        active=Count(value=counted.active, provenance="config"),
        groups=ParameterGroups(
            counts={k: v for k, v in counted.groups.items() if v}, provenance="config"
        ),
    )
