"""Parameter ledger and quantization summary computed from a tensor table.

Counts come from tensors (provenance ``tensors``); the expert routing ratio comes from the
artifact's metadata. ``effective`` parameters are never computed: they only exist as a
declared number (Gemma 3n "E2B"), otherwise they stay unknown.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from modelreg.errors import InvalidInput
from modelreg.schemas.manifest import Count, ParameterLedger, Quantization, TensorStats


@dataclass(frozen=True)
class TensorEntry:
    """One tensor as the ledger needs it, whatever the file format."""

    name: str
    n_elements: int
    dtype: str
    n_bytes: int | None  # None when the dtype's size is unknown
    n_dims: int = 2


# Roles a tensor can play; the ledger and the quantization groups are both keyed by them.
EMBEDDING, OUTPUT, ROUTED_EXPERT, SHARED_EXPERT, ROUTER = (
    "embeddings",
    "output",
    "experts",
    "shared_experts",
    "router",
)
ATTENTION, FFN, NORM, OTHER = "attention", "ffn", "norms", "other"

_GGUF_LAYER_RE = re.compile(r"^blk\.(\d+)\.")


def classify_gguf_tensor(name: str) -> str:
    """Role of a tensor named the llama.cpp way (``blk.N.ffn_up_exps.weight``)."""
    if name.startswith(("token_embd.", "per_layer_token_embd.")):
        return EMBEDDING
    if name.startswith("output."):
        return OUTPUT
    base = name.split(".", 2)[-1] if name.startswith("blk.") else name
    if "_exps." in base:
        return ROUTED_EXPERT
    if "_shexp." in base:
        return SHARED_EXPERT
    if base.startswith("ffn_gate_inp"):
        return ROUTER
    if "norm" in base:
        return NORM
    if base.startswith("attn_"):
        return ATTENTION
    if base.startswith("ffn_"):
        return FFN
    return OTHER


_HF_LAYER_RE = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def classify_hf_tensor(name: str) -> str:
    """Role of a tensor named the transformers way (``model.layers.3.mlp.experts.7.up_proj``)."""
    if "embed_tokens" in name or "per_layer_embed" in name or name.endswith("wte.weight"):
        return EMBEDDING
    if name.startswith("lm_head."):
        return OUTPUT
    if ".experts." in name or name.endswith(".experts") or ".experts_" in name:
        return ROUTED_EXPERT
    if ".shared_expert" in name or ".shared_experts." in name:
        return SHARED_EXPERT
    if ".mlp.gate." in name or ".block_sparse_moe.gate." in name or ".router." in name:
        return ROUTER
    if "norm" in name:
        return NORM
    if ".self_attn." in name or ".attention." in name:
        return ATTENTION
    if ".mlp." in name or ".feed_forward." in name:
        return FFN
    return OTHER


def hf_layer_of(name: str) -> int | None:
    match = _HF_LAYER_RE.search(name)
    return int(match.group(1)) if match else None


def gguf_layer_of(name: str) -> int | None:
    match = _GGUF_LAYER_RE.match(name)
    return int(match.group(1)) if match else None


Classifier = Callable[[str], str]
LayerOf = Callable[[str], "int | None"]


def _per_layer(value: int | list[int] | None, layer: int | None) -> int | None:
    if isinstance(value, list):
        return value[layer] if layer is not None and 0 <= layer < len(value) else None
    return value


def compute_ledger(
    tensors: Iterable[TensorEntry],
    classify: Classifier,
    layer_of: LayerOf,
    *,
    expert_count: int | list[int] | None,
    expert_used_count: int | list[int] | None,
) -> ParameterLedger:
    """Ledger from tensors. Active parameters of a MoE stay unknown without routing counts;
    contradictory routing counts are bad input."""
    total = embedding = routed = 0
    routed_by_layer: dict[int | None, int] = {}
    for t in tensors:
        role = classify(t.name)
        total += t.n_elements
        if role in (EMBEDDING, OUTPUT):
            embedding += t.n_elements
        elif role == ROUTED_EXPERT:
            routed += t.n_elements
            layer = layer_of(t.name)
            routed_by_layer[layer] = routed_by_layer.get(layer, 0) + t.n_elements

    ledger = ParameterLedger(
        total=Count(value=total, provenance="tensors"),
        non_embedding=Count(value=total - embedding, provenance="tensors"),
    )
    if not routed:
        ledger.active = Count(value=total, provenance="tensors")
        return ledger

    active_routed = 0.0
    for layer, params in routed_by_layer.items():
        used = _per_layer(expert_used_count, layer)
        count = _per_layer(expert_count, layer)
        if not used or not count:
            return ledger  # active stays unknown; holds.hold_reasons says why
        if used > count:
            raise InvalidInput(
                f"contradictory expert counts: expert_used_count {used} exceeds expert_count "
                f"{count} (layer {layer})"
            )
        active_routed += params * used / count
    ledger.active = Count(value=total - routed + round(active_routed), provenance="tensors")
    return ledger


def _bits(n_bytes: int | None, params: int) -> float | None:
    return round(n_bytes * 8 / params, 4) if n_bytes is not None and params else None


def _add(stats: TensorStats, t: TensorEntry) -> None:
    stats.tensors += 1
    stats.params += t.n_elements
    stats.bytes = None if stats.bytes is None or t.n_bytes is None else stats.bytes + t.n_bytes


def summarize_quantization(
    tensors: Iterable[TensorEntry],
    classify: Classifier,
    *,
    nominal_file_type: str | None,
    base_bits_per_weight: float | None,
) -> Quantization:
    """Per-type histogram, per-role groups, real bits per weight, higher-precision tensors.

    A tensor is "kept at higher precision" when it is a matrix (2-D or more) stored with more
    bits per weight than the nominal file type's base type.
    """
    by_type: dict[str, TensorStats] = {}
    by_group: dict[str, TensorStats] = {}
    overall = TensorStats()
    higher: list[str] = []
    for t in tensors:
        _add(by_type.setdefault(t.dtype, TensorStats()), t)
        _add(by_group.setdefault(classify(t.name), TensorStats()), t)
        _add(overall, t)
        bits = _bits(t.n_bytes, t.n_elements)
        if (
            base_bits_per_weight is not None
            and t.n_dims >= 2
            and bits is not None
            and bits > base_bits_per_weight + 1e-9
        ):
            higher.append(t.name)
    for stats in (*by_type.values(), *by_group.values()):
        stats.bits_per_weight = _bits(stats.bytes, stats.params)
    return Quantization(
        nominal_file_type=nominal_file_type,
        tensor_types=dict(sorted(by_type.items(), key=lambda kv: (-kv[1].tensors, kv[0]))),
        groups=dict(sorted(by_group.items(), key=lambda kv: -kv[1].params)),
        bits_per_weight=_bits(overall.bytes, overall.params),
        higher_precision_tensors=higher,
    )
