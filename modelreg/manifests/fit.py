"""Memory arithmetic: weights + KV cache + runtime overhead against a target's memory.

Weights are the sum of tensor bytes (not parameters × nominal bits). KV cache bytes are
``Σ_layers (key_dim + value_dim) × kv_heads × tokens × bytes/element × sequences`` — i.e.
2 × layers × KV heads × head_dim × tokens × bytes × sequences when K and V dims match — with
KV heads (not query heads), and sliding-window layers holding at most ``window`` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from modelreg.errors import InvalidInput

# The Neuron fit lives in neuron_fit; these names stay importable from here.
from modelreg.manifests.neuron_fit import (
    DEFAULT_NEURON_HOST_RUNTIME_BYTES,
    DEFAULT_NEURON_RESERVE_BYTES,
    NEURON_CORE_HBM_BYTES,
    Contributor,
    NeuronFit,
    neuron_fit,
)
from modelreg.schemas.manifest import ArchitectureFacts, Manifest

__all__ = [
    "DEFAULT_NEURON_HOST_RUNTIME_BYTES",
    "DEFAULT_NEURON_RESERVE_BYTES",
    "NEURON_CORE_HBM_BYTES",
    "Contributor",
    "KVEstimate",
    "MemoryFit",
    "NeuronFit",
    "kv_cache_bytes",
    "memory_fit",
    "neuron_fit",
]

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
# llama.cpp's fixed sliding-window layouts when the file carries no per-layer pattern:
# every Nth layer attends globally, the others use the window.
SLIDING_WINDOW_PERIOD = {"gemma2": 2, "gemma3": 6, "cohere2": 4}
DEFAULT_CONTEXT = 4096
MAX_CONTEXT = 1 << 24
MAX_SEQUENCES = 4096
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


def _layer_value(value: int | list[int] | None, layer: int) -> int | None:
    if isinstance(value, list):
        return value[layer] if layer < len(value) else None
    return value


def sliding_layers(arch: ArchitectureFacts) -> tuple[list[bool] | None, str | None]:
    """Which layers use the sliding window, and where that came from (None: unknown)."""
    layers = arch.block_count
    if not arch.sliding_window or not layers:
        return [False] * (layers or 0), None
    if arch.sliding_window_pattern and len(arch.sliding_window_pattern) == layers:
        return list(arch.sliding_window_pattern), "per-layer pattern in the artifact"
    period = SLIDING_WINDOW_PERIOD.get(arch.architecture or "")
    if period:
        pattern = [(i + 1) % period != 0 for i in range(layers)]
        return pattern, f"{arch.architecture}: every {period}th layer global (llama.cpp layout)"
    return None, None


def kv_cache_bytes(
    arch: ArchitectureFacts,
    tokens: int,
    sequences: int = 1,
    kv_dtype: str = "f16",
    kv_dtype_v: str | None = None,
    *,
    latent_mla_runtime: bool = False,
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

    pattern, pattern_source = sliding_layers(arch)
    notes = []
    if pattern is None:
        notes.append(
            f"sliding window {arch.sliding_window} declared but the layer layout is unknown: "
            "every layer counted at full context (an upper bound)"
        )
        pattern = [False] * layers
    elif pattern_source:
        notes.append(f"sliding-window layers from {pattern_source}")
    shared = min(arch.kv_shared_layers or 0, layers)
    if shared:
        notes.append(f"the last {shared} layers reuse an earlier layer's KV cache: not counted")
    latent_row = rank + rope if rank is not None and rope is not None else None
    # ik_llama.cpp keeps the latent in the K type with flash attention, in the V type without.
    per_latent = max(per_key, per_value) if absorbed else per_key
    total = latent_total = 0.0
    for layer in range(layers - shared):
        held = (
            min(tokens, arch.sliding_window) if pattern[layer] and arch.sliding_window else tokens
        )
        if latent_row is not None:
            latent_total += latent_row * per_latent * held * sequences
        if absorbed:
            continue
        kv_heads = _layer_value(arch.head_count_kv, layer)
        heads = _layer_value(arch.head_count, layer)
        if kv_heads is None:
            return unknown_kv(f"head_count_kv for layer {layer}")
        key_dim = _layer_value(arch.key_length, layer)
        if key_dim is None:
            if not heads or arch.embedding_length is None or rank is not None:
                return unknown_kv(f"head_dim for layer {layer}")
            key_dim = arch.embedding_length // heads
        value_dim = _layer_value(arch.value_length, layer)
        if value_dim is None and rank is not None and not stored_latent:
            return unknown_kv(f"value_length for layer {layer} (latent attention: not key_length)")
        value_dim = 0 if stored_latent else (value_dim or key_dim)
        total += (key_dim * per_key + value_dim * per_value) * kv_heads * held * sequences
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
        sum(pattern),
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
) -> MemoryFit:
    """Do weights + KV cache + overhead fit ``capacity_bytes`` less the headroom?
    (``latent_mla_runtime``: the runtime caches MLA's latent for every conversion, as
    ik_llama.cpp does — see ``kv_cache_bytes``.)"""
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
    weights = weights_bytes(manifest)
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
