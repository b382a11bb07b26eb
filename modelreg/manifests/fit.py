"""Memory arithmetic: weights + KV cache + runtime overhead against a target's memory.

Weights are the sum of tensor bytes (not parameters × nominal bits). KV cache bytes are
``Σ_layers (key_dim + value_dim) × kv_heads × tokens × bytes/element × sequences`` — i.e.
2 × layers × KV heads × head_dim × tokens × bytes × sequences when K and V dims match — with
KV heads (not query heads), and sliding-window layers holding at most ``window`` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

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

KVDtype = Literal["f32", "f16", "bf16", "q8_0", "q4_0"]
KV_BYTES_PER_ELEMENT: dict[str, float] = {
    "f32": 4.0,
    "f16": 2.0,
    "bf16": 2.0,
    "q8_0": 34 / 32,
    "q4_0": 18 / 32,
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
    arch: ArchitectureFacts, tokens: int, sequences: int = 1, kv_dtype: str = "f16"
) -> KVEstimate:
    """KV-cache bytes for ``tokens`` of context per sequence; unknown facts stay unknown.

    Head size and KV heads may differ per layer (Gemma 4's global layers); sliding-window
    layers hold at most ``window`` tokens; KV-shared layers (the last ``kv_shared_layers``)
    reuse an earlier layer's cache and hold none of their own.
    """
    if not 0 < tokens <= MAX_CONTEXT:
        raise InvalidInput(f"context {tokens} is out of range (1 to {MAX_CONTEXT} tokens)")
    if not 0 < sequences <= MAX_SEQUENCES:
        raise InvalidInput(f"concurrency {sequences} is out of range (1 to {MAX_SEQUENCES})")
    if kv_dtype not in KV_BYTES_PER_ELEMENT:
        raise InvalidInput(f"KV dtype {kv_dtype!r} is not one of {', '.join(KV_BYTES_PER_ELEMENT)}")
    per_element = KV_BYTES_PER_ELEMENT[kv_dtype]
    layers = arch.block_count
    unknown = []
    if not layers:
        unknown.append("block_count")
    if arch.head_count_kv is None:
        unknown.append("head_count_kv")
    if arch.key_length is None and (arch.embedding_length is None or arch.head_count is None):
        unknown.append("head_dim (key_length, or embedding_length and head_count)")
    if unknown:
        return KVEstimate(tokens, sequences, kv_dtype, None, layers, unknown=unknown)
    assert layers is not None
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
    total = 0.0
    for layer in range(layers - shared):
        kv_heads = _layer_value(arch.head_count_kv, layer)
        heads = _layer_value(arch.head_count, layer)
        if kv_heads is None:
            return KVEstimate(
                tokens,
                sequences,
                kv_dtype,
                None,
                layers,
                unknown=[f"head_count_kv for layer {layer}"],
            )
        key_dim = _layer_value(arch.key_length, layer)
        if key_dim is None:
            if not heads or arch.embedding_length is None:
                return KVEstimate(
                    tokens,
                    sequences,
                    kv_dtype,
                    None,
                    layers,
                    unknown=[f"head_dim for layer {layer}"],
                )
            key_dim = arch.embedding_length // heads
        value_dim = _layer_value(arch.value_length, layer) or key_dim
        held = (
            min(tokens, arch.sliding_window) if pattern[layer] and arch.sliding_window else tokens
        )
        total += (key_dim + value_dim) * kv_heads * held * per_element * sequences
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
    overhead_fraction: float = 0.10,
    overhead_fixed_bytes: int = 256 << 20,
    headroom_fraction: float = 0.10,
) -> MemoryFit:
    """Do weights + KV cache + overhead fit ``capacity_bytes`` less the headroom?"""
    if not 0 <= overhead_fraction < 10 or not 0 <= headroom_fraction < 1:
        raise InvalidInput("overhead must be in [0, 10) and headroom in [0, 1)")
    tokens = context or default_context(manifest)
    declared = manifest.architecture.context_length
    kv = kv_cache_bytes(manifest.architecture, tokens, sequences, kv_dtype)
    weights = weights_bytes(manifest)
    rule = (
        f"{overhead_fraction:.0%} of weights + {overhead_fixed_bytes / (1 << 20):.0f} MiB "
        "(compute buffers, runtime)"
    )
    overhead = (
        round(weights * overhead_fraction) + overhead_fixed_bytes if weights is not None else None
    )
    reasons = []
    if declared and tokens > declared:
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
