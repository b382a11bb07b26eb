"""Fit over layers costs one step per kind of layer, never one per layer a manifest names
(``block_count: 2147483648`` once made a fit allocate 16.9 GB), and gives the same bytes as
the layer-by-layer sum it replaced (kept here as the reference)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelreg.limits import MAX_LAYERS
from modelreg.manifests.fit import kv_cache_bytes, memory_fit
from modelreg.manifests.layers import SLIDING_WINDOW_PERIOD, layer_value
from modelreg.schemas.manifest import ArchitectureFacts, Manifest, read_manifest_file

REPO = Path(__file__).resolve().parents[2]

SECONDS_PER_INPUT = 1.0
PER_KEY = {"f16": 2.0, "q8_0": 34 / 32}


def _reference_kv(arch: ArchitectureFacts, tokens: int, kv_dtype: str) -> tuple[int | None, int]:
    """The layer-by-layer KV sum (the code fit.py had): bytes (None: unknown), sliding layers."""
    layers = arch.block_count or 0
    if arch.head_count_kv is None or (
        arch.key_length is None and (arch.embedding_length is None or arch.head_count is None)
    ):
        return None, 0
    if arch.sliding_window and layers:
        if arch.sliding_window_pattern and len(arch.sliding_window_pattern) == layers:
            pattern = list(arch.sliding_window_pattern)
        elif period := SLIDING_WINDOW_PERIOD.get(arch.architecture or ""):
            pattern = [(i + 1) % period != 0 for i in range(layers)]
        else:
            pattern = [False] * layers
    else:
        pattern = [False] * layers
    shared = min(arch.kv_shared_layers or 0, layers)
    per = PER_KEY[kv_dtype]
    total = 0.0
    for layer in range(layers - shared):
        held = (
            min(tokens, arch.sliding_window) if pattern[layer] and arch.sliding_window else tokens
        )
        kv_heads = layer_value(arch.head_count_kv, layer)
        heads = layer_value(arch.head_count, layer)
        if kv_heads is None:
            return None, sum(pattern)
        key = layer_value(arch.key_length, layer)
        if key is None:
            if not heads or arch.embedding_length is None:
                return None, sum(pattern)
            key = arch.embedding_length // heads
        value = layer_value(arch.value_length, layer) or key
        total += (key * per + value * per) * kv_heads * held
    return round(total), sum(pattern)


def _per_layer(draw: st.DrawFn, layers: int, low: int, high: int) -> int | list[int] | None:
    kind = draw(st.sampled_from(["int", "list", "short list", "none"]))
    if kind == "int":
        return draw(st.integers(low, high))
    if kind == "none":
        return None
    size = layers if kind == "list" else draw(st.integers(0, layers))
    return draw(st.lists(st.integers(low, high), min_size=size, max_size=size))


@st.composite
def architectures(draw: st.DrawFn, max_layers: int = 40) -> ArchitectureFacts:
    layers = draw(st.integers(1, max_layers))
    window = draw(st.one_of(st.none(), st.integers(1, 64)))
    pattern = None
    if window and draw(st.booleans()):
        size = draw(st.sampled_from([layers, max(0, layers - 1)]))
        pattern = draw(st.lists(st.booleans(), min_size=size, max_size=size))
    return ArchitectureFacts(
        architecture=draw(st.sampled_from(["llama", *SLIDING_WINDOW_PERIOD])),
        block_count=layers,
        embedding_length=draw(st.one_of(st.none(), st.integers(64, 512))),
        head_count=_per_layer(draw, layers, 1, 8),
        head_count_kv=_per_layer(draw, layers, 1, 8),
        key_length=_per_layer(draw, layers, 8, 64),
        value_length=_per_layer(draw, layers, 8, 64),
        sliding_window=window,
        sliding_window_pattern=pattern,
        kv_shared_layers=draw(st.one_of(st.none(), st.integers(0, layers + 2))),
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(architectures(), st.integers(1, 200), st.sampled_from(sorted(PER_KEY)))
def test_grouped_layers_give_the_layer_by_layer_sum(
    arch: ArchitectureFacts, tokens: int, kv_dtype: str
) -> None:
    estimate = kv_cache_bytes(arch, tokens, 1, kv_dtype)
    expected, sliding = _reference_kv(arch, tokens, kv_dtype)
    assert estimate.bytes == expected
    if expected is not None:
        assert estimate.sliding_layers == sliding


def _big(arch: ArchitectureFacts, layers: int) -> ArchitectureFacts:
    """``arch`` with ``layers`` layers, read back as a stored row is (no bound refuses it)."""
    data = arch.model_dump() | {"block_count": layers}
    return ArchitectureFacts.model_validate(data, context={"stored": True})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    architectures(max_layers=8),
    st.one_of(st.integers(1, MAX_LAYERS), st.integers(MAX_LAYERS, 2**40)),
    st.integers(1, 1 << 20),
)
def test_a_large_layer_count_fits_within_the_bound(
    arch: ArchitectureFacts, layers: int, tokens: int
) -> None:
    """Allowed (up to MAX_LAYERS) or stored before the bound (up to 2**40): the same time."""
    big = _big(arch, layers)
    start = time.perf_counter()
    estimate = kv_cache_bytes(big, tokens, 4, "q8_0")
    took = time.perf_counter() - start
    assert took < SECONDS_PER_INPUT, f"{layers:,} layers took {took:.2f} s"
    assert estimate.layers == layers


def test_the_16_9_gb_manifest_fits_in_milliseconds() -> None:
    """The issue's manifest: Qwen3-30B-A3B with block_count 2,147,483,648, as a row stored
    before the bound: every layer counted, none visited."""
    qwen = read_manifest_file(REPO / "manifests" / "qwen3-30b-a3b.json")
    data = qwen.model_dump(mode="json")
    data["architecture"]["block_count"] = 2_147_483_648
    stored = Manifest.model_validate(data, context={"stored": True})
    start = time.perf_counter()
    fit = memory_fit(stored, 64 << 30, context=4096)
    assert time.perf_counter() - start < SECONDS_PER_INPUT
    # 2 × layers × 4 KV heads × 128 × 4096 tokens × 2 bytes
    assert fit.kv.bytes == 2 * 2_147_483_648 * 4 * 128 * 4096 * 2
    assert (
        fit.kv.bytes
        == 48 * (2_147_483_648 // 48) * 8 * 128 * 4096 * 2
        + (2_147_483_648 % 48) * 8 * 128 * 4096 * 2
    )


def test_the_neuron_split_over_ranks_is_counted_not_visited() -> None:
    from modelreg.manifests.neuron_fit import CompiledShape, kv_cache_per_rank

    gemma = read_manifest_file(REPO / "manifests" / "gemma-4-26b-a4b-inf2-xlarge.json")
    small_kv, small_notes = kv_cache_per_rank(gemma.architecture, CompiledShape.of(gemma.neuron))
    arch = gemma.architecture.model_copy(
        update={"block_count": 1 << 31, "head_count_kv": 8, "key_length": 256}
    )
    start = time.perf_counter()
    kv, notes = kv_cache_per_rank(arch, CompiledShape.of(gemma.neuron))
    assert time.perf_counter() - start < SECONDS_PER_INPUT
    assert small_kv is not None and kv is not None and kv.bytes and kv.bytes > small_kv.bytes
    assert "4 of 8 KV heads on" in notes[-1] and small_notes


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        (
            "block_count",
            2_147_483_648,
            "architecture.block_count: 2,147,483,648 is beyond the limit",
        ),
        ("expert_count", 1 << 20, "architecture.expert_count: 1,048,576 is beyond the limit"),
        ("context_length", 1 << 40, "architecture.context_length: 1,099,511,627,776 is beyond"),
        ("head_count_kv", [4] * (MAX_LAYERS + 1), "a per-layer list of 65,537 values"),
    ],
)
def test_a_manifest_beyond_a_limit_is_one_line_naming_the_field(
    field: str, value: object, needle: str
) -> None:
    from modelreg.errors import InvalidInput
    from modelreg.schemas.manifest import load_manifest

    data = read_manifest_file(REPO / "manifests" / "qwen3-30b-a3b.json").model_dump(mode="json")
    data["architecture"][field] = value
    with pytest.raises(InvalidInput) as refused:
        load_manifest(data, origin="m.json")
    assert needle in str(refused.value) and "\n" not in str(refused.value)
