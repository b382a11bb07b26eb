"""Memory arithmetic: weights + KV cache + runtime overhead against a target's memory.

Weights are the sum of tensor bytes (not parameters × nominal bits). KV cache bytes are
``Σ_layers (key_dim + value_dim) × kv_heads × tokens × bytes/element × sequences`` — i.e.
2 × layers × KV heads × head_dim × tokens × bytes × sequences when K and V dims match — with
KV heads (not query heads), and sliding-window layers holding at most ``window`` tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from modelreg.errors import InvalidInput
from modelreg.limits import MAX_BATCH, MAX_CONTEXT_TOKENS
from modelreg.manifests.layers import (
    NO_SLIDING,
    layer_groups,
    sliding_layout,
)
from modelreg.schemas.manifest import ArchitectureFacts, Manifest

__all__ = ["KVEstimate", "MemoryFit", "kv_cache_bytes", "memory_fit"]

# Bytes per cached element of each KV type llama.cpp may be started with (block bytes / 32
# elements for the quantized ones: ggml's block_q8_0 is 34 bytes, q5_1 24, q5_0 22, q4_1 20,
# q4_0 and iq4_nl 18).
KV_BYTES_PER_ELEMENT: dict[str, float] = {
    "f32": 4.0,
    "f16": 2.0,
    "bf16": 2.0,
    "q8_0": 34 / 32,
    "q5_1": 24 / 32,
    "q5_0": 22 / 32,
    "q4_1": 20 / 32,
    "q4_0": 18 / 32,
    "iq4_nl": 18 / 32,
}
DEFAULT_CONTEXT = 4096
MAX_CONTEXT = MAX_CONTEXT_TOKENS
MAX_SEQUENCES = MAX_BATCH
GB, GiB = 10**9, 1 << 30


@dataclass(frozen=True)
class KVEstimate:
    tokens: int
    sequences: int
    kv_dtype: str
    bytes: int | None
    layers: int | None = None
    sliding_layers: int = 0
    window: int | None = None
    unknown: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def kv_cache_bytes(
    arch: ArchitectureFacts,
    tokens: int,
    sequences: int = 1,
    kv_dtype: str = "f16",
    kv_dtype_v: str | None = None,
    *,
    latent_mla_runtime: bool = False,
    kv_heads_held: Callable[[int, int | None], int | None] | None = None,
) -> KVEstimate:
    """KV-cache bytes for ``tokens`` of context per sequence; unknown facts stay unknown.

    Head size and KV heads may differ per layer (Gemma 4's global layers); sliding-window
    layers hold at most ``window`` tokens; KV-shared layers (the last ``kv_shared_layers``)
    reuse an earlier layer's cache and hold none of their own.

    Multi-head latent attention is sized as llama.cpp allocates it (llama-kv-cache.cpp): a
    GGUF carrying ``key_length_mla`` / ``value_length_mla`` (``hparams.is_mla()``) caches one
    K row of ``key_length`` × ``head_count_kv`` elements per token and layer — the latent,
    ``kv_lora_rank`` + rope dims, 576 for DeepSeek — and no V (V is a view of K). Without
    those keys llama.cpp decompresses to per-head K/V and caches those: counted so, with the
    latent figure in a note. ``latent_mla_runtime`` is for runtimes that cache the
    ``kv_lora_rank`` + ``rope_dimension_count`` latent for those files too: ik_llama.cpp
    (``-mla``, default 3) for the architectures it builds MLA for.

    ``kv_heads_held(kv_heads, query_heads)``: the KV heads of a layer one device holds (a
    Neuron rank's share); a layer whose share is None is unknown. The sum runs over groups of
    identical layers (``manifests/layers.py``), never once per layer.
    """
    if not 0 < tokens <= MAX_CONTEXT:
        raise InvalidInput(f"context {tokens} is out of range (1 to {MAX_CONTEXT} tokens)")
    if not 0 < sequences <= MAX_SEQUENCES:
        raise InvalidInput(f"concurrency {sequences} is out of range (1 to {MAX_SEQUENCES})")
    kv_dtype_v = kv_dtype_v or kv_dtype
    for dtype in (kv_dtype, kv_dtype_v):
        if dtype not in KV_BYTES_PER_ELEMENT:
            raise InvalidInput(
                f"KV dtype {dtype!r} is not one of {', '.join(KV_BYTES_PER_ELEMENT)}"
            )
    per_key, per_value = KV_BYTES_PER_ELEMENT[kv_dtype], KV_BYTES_PER_ELEMENT[kv_dtype_v]
    dtypes_differ = kv_dtype_v != kv_dtype
    if dtypes_differ:
        kv_dtype = f"{kv_dtype}/{kv_dtype_v}"
    layers = arch.block_count
    rank, rope = arch.kv_lora_rank, arch.rope_dimension_count
    stored_latent = arch.key_length_mla is not None and arch.value_length_mla is not None
    # ik_llama.cpp's is_mla_model(): the architectures whose latent it builds at load time
    # (MiniCPM3 and PLM declare kv_lora_rank too, and run as multi-head attention).
    ik_latent = arch.architecture in {"deepseek2", "glm-dsa", "mistral4", "bailingmoe3"}
    absorbed = latent_mla_runtime and ik_latent and rank is not None and not stored_latent
    unknown = []
    if not layers:
        unknown.append("block_count")
    if arch.head_count_kv is None and not absorbed:
        unknown.append("head_count_kv")
    if absorbed and rope is None:
        unknown.append("rope_dimension_count (the rotary part of the MLA latent)")
    if (
        arch.key_length is None
        and not absorbed
        and (rank is not None or arch.embedding_length is None or arch.head_count is None)
    ):
        # Latent-attention heads are not embedding_length / head_count wide.
        unknown.append("head_dim (key_length, or embedding_length and head_count)")
    if unknown:
        return KVEstimate(tokens, sequences, kv_dtype, None, layers, unknown=unknown)
    assert layers is not None

    def unknown_kv(what: str) -> KVEstimate:
        return KVEstimate(tokens, sequences, kv_dtype, None, layers, unknown=[what])

    layout = sliding_layout(arch)
    notes = []
    if not layout.known:
        notes.append(
            f"sliding window {arch.sliding_window} declared but the layer layout is unknown: "
            "every layer counted at full context (an upper bound)"
        )
        layout = NO_SLIDING
    elif layout.source:
        notes.append(f"sliding-window layers from {layout.source}")
    shared = min(arch.kv_shared_layers or 0, layers)
    if shared:
        notes.append(f"the last {shared} layers reuse an earlier layer's KV cache: not counted")
    latent_row = rank + rope if rank is not None and rope is not None else None
    # ik_llama.cpp keeps the latent in the K type with flash attention, in the V type without.
    per_latent = max(per_key, per_value) if absorbed else per_key
    total = latent_total = 0.0
    # In the order each kind of layer first occurs: the first layer that is unknown is named.
    for group in layer_groups(arch, layout):
        kind, count, layer = group.kind, group.count, group.first
        if kind.kv_shared:
            continue
        held = min(tokens, arch.sliding_window) if kind.sliding and arch.sliding_window else tokens
        if latent_row is not None:
            latent_total += latent_row * per_latent * held * sequences * count
        if absorbed:
            continue
        kv_heads, heads = kind.head_count_kv, kind.head_count
        if kv_heads is None:
            return unknown_kv(f"head_count_kv for layer {layer}")
        if kv_heads_held is not None:
            kv_heads = kv_heads_held(kv_heads, heads)
            if kv_heads is None:
                return unknown_kv(f"the KV heads one rank holds for layer {layer}")
        key_dim = kind.key_length
        if key_dim is None:
            if not heads or arch.embedding_length is None or rank is not None:
                return unknown_kv(f"head_dim for layer {layer}")
            key_dim = arch.embedding_length // heads
        value_dim = kind.value_length
        if value_dim is None and rank is not None and not stored_latent:
            return unknown_kv(f"value_length for layer {layer} (latent attention: not key_length)")
        value_dim = 0 if stored_latent else (value_dim or key_dim)
        total += (key_dim * per_key + value_dim * per_value) * kv_heads * held * sequences * count
    latent_parts = f"kv_lora_rank {rank} + {rope} rope dims" if latent_row is not None else ""
    if stored_latent:
        notes.append(
            "multi-head latent attention: llama.cpp caches one latent K row per token and layer "
            f"({arch.key_length} wide{', ' + latent_parts if latent_parts else ''}, "
            f"{arch.head_count_kv} KV head) and no V — V is a view of it"
            + (f"; the V type {kv_dtype_v} is unused" if dtypes_differ else "")
        )
    elif absorbed:
        total = latent_total
        notes.append(
            f"multi-head latent attention: the runtime caches the {latent_row}-wide latent "
            f"({latent_parts}) per token and layer, not per-head K/V"
            + (
                f"; counted at the larger of {kv_dtype} (ik_llama.cpp keeps it in the V type "
                "without flash attention)"
                if dtypes_differ
                else ""
            )
        )
    elif rank is not None:
        alternative = (
            f"{round(latent_total)} bytes ({latent_parts})"
            if latent_row is not None
            else f"kv_lora_rank {rank} + rope dims (rope_dimension_count unknown)"
        )
        runtime = (
            "ik_llama.cpp -mla, or a re-conversion with current llama.cpp"
            if ik_latent
            else "e.g. vLLM for a checkpoint"
        )
        notes.append(
            f"kv_lora_rank {rank} without key_length_mla: llama.cpp runs this as per-head K/V "
            f"and caches those (counted); a runtime that caches the latent ({runtime}) needs "
            f"{alternative}"
        )
    return KVEstimate(
        tokens,
        sequences,
        kv_dtype,
        round(total),
        layers,
        layout.sliding_between(0, layers),
        arch.sliding_window,
        notes=notes,
    )


@dataclass(frozen=True)
class MemoryFit:
    weights_bytes: int | None
    kv: KVEstimate
    overhead_bytes: int | None
    overhead_rule: str
    total_bytes: int | None
    budget_bytes: int | None
    capacity_bytes: int | None
    headroom_fraction: float
    fits: bool | None  # None: cannot tell (an input is unknown)
    reasons: list[str] = field(default_factory=list)


def weights_bytes(manifest: Manifest) -> int | None:
    quant = manifest.quantization
    if quant is None or not quant.tensor_types:
        return None
    sizes = [s.bytes for s in quant.tensor_types.values()]
    return None if any(b is None for b in sizes) else sum(b for b in sizes if b is not None)


def default_context(manifest: Manifest) -> int:
    declared = manifest.architecture.context_length
    return min(DEFAULT_CONTEXT, declared) if declared else DEFAULT_CONTEXT


def memory_fit(
    manifest: Manifest,
    capacity_bytes: int | None,
    *,
    context: int | None = None,
    sequences: int = 1,
    kv_dtype: str = "f16",
    kv_dtype_v: str | None = None,
    overhead_fraction: float = 0.10,
    overhead_fixed_bytes: int = 256 << 20,
    headroom_fraction: float = 0.10,
    latent_mla_runtime: bool = False,
    weights_what_if: int | None = None,
) -> MemoryFit:
    """Do weights + KV cache + overhead fit ``capacity_bytes`` less the headroom?
    (``latent_mla_runtime``: the runtime caches MLA's latent for every conversion, as
    ik_llama.cpp does — see ``kv_cache_bytes``. ``weights_what_if``: weight bytes to use
    instead of the artifact's tensor bytes — a what-if, see ``what_if_weights``.)"""
    if not 0 <= overhead_fraction < 10 or not 0 <= headroom_fraction < 1:
        raise InvalidInput("overhead must be in [0, 10) and headroom in [0, 1)")
    tokens = context or default_context(manifest)
    declared = manifest.architecture.context_length
    kv = kv_cache_bytes(
        manifest.architecture,
        tokens,
        sequences,
        kv_dtype,
        kv_dtype_v,
        latent_mla_runtime=latent_mla_runtime,
    )
    weights = weights_bytes(manifest) if weights_what_if is None else weights_what_if
    rule = (
        f"{overhead_fraction:.0%} of weights + {overhead_fixed_bytes / (1 << 20):.0f} MiB "
        "(compute buffers, runtime)"
    )
    overhead = (
        round(weights * overhead_fraction) + overhead_fixed_bytes if weights is not None else None
    )
    reasons = []
    beyond_trained = bool(declared and tokens > declared)
    if beyond_trained:
        reasons.append(f"context {tokens} exceeds the model's trained context {declared}")
    if weights is None:
        reasons.append("tensor bytes unknown")
    if kv.bytes is None:
        reasons.append(f"KV cache unknown: missing {', '.join(kv.unknown)}")
    if capacity_bytes is None:
        reasons.append("target memory unknown")
    total = (
        weights + kv.bytes + overhead
        if weights is not None and kv.bytes is not None and overhead is not None
        else None
    )
    budget = round(capacity_bytes * (1 - headroom_fraction)) if capacity_bytes is not None else None
    fits: bool | None = None
    if total is not None and budget is not None and capacity_bytes is not None:
        fits = total <= budget
        if not fits:
            reasons.append(
                f"needs {total / GiB:.2f} GiB but the budget is {budget / GiB:.2f} GiB "
                f"({1 - headroom_fraction:.0%} of {capacity_bytes / GiB:.2f} GiB)"
            )
    if beyond_trained:
        # Positions past the trained context are extrapolation, not service: whatever the
        # memory, this configuration is not one the model serves.
        fits = False
    return MemoryFit(
        weights,
        kv,
        overhead,
        rule,
        total,
        budget,
        capacity_bytes,
        headroom_fraction,
        fits,
        reasons,
    )


@dataclass(frozen=True)
class WeightsWhatIf:
    """Weights at another width: the ledger's parameters × bits ÷ 8 — what a purchase or a
    quantization choice is weighed with before the artifact exists (seed 002: "30.5B Q4라면 약
    15.25GB"). Not the artifact's tensor bytes: scales, mixed-precision tensors and alignment
    come on top, so it is a lower bound of what a real file at that width weighs."""

    bits: float
    quant: str | None
    parameters: int
    parameters_provenance: str
    bytes: int

    def describe(self) -> str:
        named = f"{self.quant}, " if self.quant else ""
        return (
            f"what-if: {self.parameters:,} parameters ({self.parameters_provenance}) × "
            f"{named}{self.bits:g} bits ÷ 8 — not the artifact's tensor bytes"
        )


MAX_WHAT_IF_BITS = 32.0


def what_if_weights(manifest: Manifest, bits: float | None, quant: str | None) -> WeightsWhatIf:
    """The weights of ``manifest`` at ``bits`` per weight, or at the width of the llama.cpp
    type ``quant`` names (Q4_K_M: its Q4_K blocks, 4.5 bits), from the ledger's total."""
    import math

    if bits is not None and quant is not None:
        raise InvalidInput("give `bits` or `quant`, not both")
    if quant is not None:
        from modelreg.manifests.gguf_facts import base_bits_per_weight

        bits = base_bits_per_weight(quant.strip().upper())
        if bits is None:
            raise InvalidInput(
                f"`quant` {quant[:40]!r} is not a llama.cpp quantization type "
                "(Q4_K_M, Q8_0, IQ4_XS, …)",
                "or give the width itself: `bits` 4.5",
            )
        quant = quant.strip().upper()
    assert bits is not None
    if not (math.isfinite(bits) and 0 < bits <= MAX_WHAT_IF_BITS):
        raise InvalidInput(f"`bits` {bits} must be above 0 and at most {MAX_WHAT_IF_BITS:g}")
    total = manifest.parameters.total
    if total.value is None:
        raise InvalidInput(
            "the record's total parameters are unknown: there is nothing to weigh at "
            f"{bits:g} bits",
            "declare them when the record is added: `total_params` with `params_source`",
        )
    return WeightsWhatIf(
        bits, quant, total.value, total.provenance, math.ceil(total.value * bits / 8)
    )
