"""The manifest's facts read from a GGUF header: the architecture (layers, widths, heads,
experts, context), the file type and its nominal bits per weight, the importance matrix a quant
was made with, and the digests of its metadata values. Also the small readers of loosely typed
config values (an int, a string, an int per layer) the safetensors path uses too."""

from __future__ import annotations

import hashlib
from typing import Any

from modelreg.manifests.gguf import (
    GGML_TYPES_BY_NAME,
    LLAMA_FILE_TYPES,
    GGUFHeader,
    SkippedArray,
    file_type_base,
    latent_attention_facts,
)
from modelreg.schemas.manifest import (
    MAX_METADATA_DIGESTS,
    MAX_METADATA_KEY_CHARS,
    ArchitectureFacts,
    ImportanceMatrix,
)


def _int_or_layers(value: Any) -> int | list[int] | None:
    if isinstance(value, bool) or value is None or isinstance(value, SkippedArray):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        return value
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def gguf_file_type_name(file_type_id: int | None) -> str | None:
    """``15`` -> ``Q4_K_M`` using gguf's ``LlamaFileType`` names (``LLAMA_FILE_TYPES``); None
    for ids it does not know."""
    if file_type_id is None:
        return None
    name = LLAMA_FILE_TYPES.get(file_type_id)
    if name is None:
        return None
    return name.removeprefix("MOSTLY_").removeprefix("ALL_")


def base_bits_per_weight(nominal: str | None) -> float | None:
    """Bits per weight of the ggml type a nominal file type is built on (Q4_K_M -> Q4_K)."""
    base = file_type_base(nominal) if nominal else None
    if base is None:
        return None
    block, size = GGML_TYPES_BY_NAME[base]
    return size * 8 / block


def architecture_from_gguf(header: GGUFHeader) -> ArchitectureFacts:
    template = _str(header.get("tokenizer.chat_template"))
    tokens = header.get("tokenizer.ggml.tokens")
    vocab = _int(header.arch_key("vocab_size"))
    if vocab is None and isinstance(tokens, SkippedArray | list):
        vocab = tokens.length if isinstance(tokens, SkippedArray) else len(tokens)
    pattern = header.arch_key("attention.sliding_window_pattern")
    names = {t.name for t in header.tensors}
    return ArchitectureFacts(
        architecture=_str(header.get("general.architecture")),
        name=_str(header.get("general.name")),
        size_label=_str(header.get("general.size_label")),
        context_length=_int(header.arch_key("context_length")),
        block_count=_int(header.arch_key("block_count")),
        embedding_length=_int(header.arch_key("embedding_length")),
        feed_forward_length=_int_or_layers(header.arch_key("feed_forward_length")),
        head_count=_int_or_layers(header.arch_key("attention.head_count")),
        head_count_kv=_int_or_layers(header.arch_key("attention.head_count_kv")),
        key_length=_int(header.arch_key("attention.key_length")),
        value_length=_int(header.arch_key("attention.value_length")),
        sliding_window=_int(header.arch_key("attention.sliding_window")),
        sliding_window_pattern=[bool(v) for v in pattern] if isinstance(pattern, list) else None,
        expert_count=_int(header.arch_key("expert_count")),
        expert_used_count=_int_or_layers(header.arch_key("expert_used_count")),
        vocab_size=vocab,
        tied_embeddings=("output.weight" not in names) if "token_embd.weight" in names else None,
        chat_template_sha256=hashlib.sha256(template.encode()).hexdigest() if template else None,
        source="gguf metadata",
        # Multi-head latent attention (DeepSeek-V2/V3): present only when the file has it.
        **latent_attention_facts(header),
    )


def importance_matrix_from_gguf(header: GGUFHeader) -> ImportanceMatrix | None:
    """``quantize.imatrix.*``: the importance matrix llama-quantize used, if it used one."""
    facts = ImportanceMatrix(
        file=_str(header.get("quantize.imatrix.file")),
        dataset=_str(header.get("quantize.imatrix.dataset")),
        entries_count=_count(header.get("quantize.imatrix.entries_count")),
        chunks_count=_count(header.get("quantize.imatrix.chunks_count")),
    )
    recorded = (facts.file, facts.dataset, facts.entries_count, facts.chunks_count)
    return None if all(v is None for v in recorded) else facts


def _count(value: Any) -> int | None:
    number = _int(value)
    return number if number is not None and number >= 0 else None


def _metadata_digests(kv_digests: dict[str, str]) -> dict[str, str] | None:
    if len(kv_digests) > MAX_METADATA_DIGESTS or any(
        len(key) > MAX_METADATA_KEY_CHARS for key in kv_digests
    ):
        return None
    return dict(kv_digests)
