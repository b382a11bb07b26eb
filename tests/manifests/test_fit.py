"""Memory arithmetic: KV heads not query heads, sliding windows capped, GB is not GiB."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelreg.errors import InvalidInput
from modelreg.manifests.build import build_manifest
from modelreg.manifests.fit import kv_cache_bytes, memory_fit
from modelreg.schemas.manifest import ArchitectureFacts

LLAMA_8B_LIKE = ArchitectureFacts(
    architecture="llama",
    block_count=32,
    embedding_length=4096,
    head_count=32,
    head_count_kv=8,
    context_length=131072,
)


def test_reference_kv_example_is_exact() -> None:
    one = kv_cache_bytes(LLAMA_8B_LIKE, 8192)
    assert one.bytes == 1_073_741_824 == 2**30
    assert kv_cache_bytes(LLAMA_8B_LIKE, 8192, sequences=4).bytes == 4 * 2**30
    assert kv_cache_bytes(LLAMA_8B_LIKE, 8192, kv_dtype="q8_0").bytes == 2**30 * 34 // 64


def test_query_heads_are_not_kv_heads() -> None:
    mha = LLAMA_8B_LIKE.model_copy(update={"head_count_kv": 32})
    assert kv_cache_bytes(mha, 8192).bytes == 4 * kv_cache_bytes(LLAMA_8B_LIKE, 8192).bytes  # type: ignore[operator]


def test_gemma3_sliding_window_layers_are_capped(gemma: Path) -> None:
    arch = build_manifest([gemma], model_id="google/gemma-3-270m").manifest.architecture
    kv = kv_cache_bytes(arch, 32768)
    assert (kv.layers, kv.sliding_layers, kv.window) == (18, 15, 512)
    per_token_layer = (256 + 256) * 1 * 2  # K and V dims × 1 KV head × f16
    assert kv.bytes == 3 * 32768 * per_token_layer + 15 * 512 * per_token_layer
    assert kv_cache_bytes(arch, 256).bytes == 18 * 256 * per_token_layer  # under the window


def test_unknown_shape_is_unknown_not_guessed() -> None:
    kv = kv_cache_bytes(ArchitectureFacts(block_count=4), 1024)
    assert kv.bytes is None and "head_count_kv" in kv.unknown


@pytest.mark.parametrize("tokens", [0, -5, 10**9])
def test_absurd_context_is_bad_input(tokens: int) -> None:
    with pytest.raises(InvalidInput, match="context"):
        kv_cache_bytes(LLAMA_8B_LIKE, tokens)


def test_fit_verdict_against_capacity(smollm2: Path) -> None:
    manifest = build_manifest([smollm2], model_id="a/b").manifest
    fits = memory_fit(manifest, 16 * 2**30, context=8192)
    assert fits.fits is True and fits.weights_bytes == 96_576_768
    tight = memory_fit(manifest, 300 * 2**20, context=8192)
    assert tight.fits is False and "budget" in tight.reasons[0]
    assert memory_fit(manifest, None).fits is None
