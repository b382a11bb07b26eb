"""Turn artifact files on disk into a ``Manifest`` (no database involved)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelreg.errors import InvalidArtifact, InvalidInput
from modelreg.manifests.digest import ProgressCallback, sha256_files
from modelreg.manifests.gguf import GGUFHeader, SkippedArray, read_gguf
from modelreg.manifests.holds import finalize
from modelreg.manifests.ledger import (
    TensorEntry,
    classify_gguf_tensor,
    compute_ledger,
    gguf_layer_of,
    summarize_quantization,
)
from modelreg.schemas.manifest import (
    ArchitectureFacts,
    Count,
    FileEntry,
    GGUFFacts,
    GoldenPrompt,
    License,
    Manifest,
    QuantRecipe,
    RuntimeRequirements,
    parse_model_id,
    parse_source_pin,
)

_QUANT_SUFFIXES = ("_XXS", "_XS", "_S", "_M", "_L")


@dataclass(frozen=True)
class BuiltArtifact:
    """A manifest and where its files are on this machine (``root / file.path``)."""

    manifest: Manifest
    root: Path


def build_manifest(
    paths: Sequence[Path],
    *,
    model_id: str | None = None,
    source: str | None = None,
    license_id: str | None = None,
    golden_prompts: Sequence[GoldenPrompt] = (),
    recipe: QuantRecipe | None = None,
    effective: Count | None = None,
    progress: ProgressCallback | None = None,
    on_hashing: Any = None,
) -> BuiltArtifact:
    """Read, digest and describe the artifact made of ``paths``.

    Everything is checked before anything is hashed, so bad input fails fast. ``on_hashing``
    is called with the total number of bytes about to be hashed (for a progress display).
    """
    if not paths:
        raise InvalidInput("no artifact path given")
    if source is not None:
        source = parse_source_pin(source)
    if model_id is not None:
        model_id = parse_model_id(model_id)
    resolved = [Path(p).expanduser().resolve() for p in paths]
    for p in resolved:
        if not p.exists():
            raise InvalidArtifact(p, "file not found")
    ggufs = [p for p in resolved if p.is_file() and p.suffix == ".gguf"]
    if ggufs:
        return _build_gguf(
            resolved,
            model_id=model_id,
            source=source,
            license_id=license_id,
            golden_prompts=golden_prompts,
            recipe=recipe,
            effective=effective,
            progress=progress,
            on_hashing=on_hashing,
        )
    raise InvalidInput(f"{resolved[0]}: not a recognised artifact (expected a .gguf file)")


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
    """``15`` -> ``Q4_K_M`` using gguf's ``LlamaFileType``; None for ids it does not know."""
    if file_type_id is None:
        return None
    from gguf import LlamaFileType

    try:
        name = LlamaFileType(file_type_id).name
    except ValueError:
        return None
    return name.removeprefix("MOSTLY_").removeprefix("ALL_")


def base_bits_per_weight(nominal: str | None) -> float | None:
    """Bits per weight of the ggml type a nominal file type is built on (Q4_K_M -> Q4_K)."""
    if not nominal:
        return None
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    candidates = [nominal] + [nominal.removesuffix(s) for s in _QUANT_SUFFIXES]
    for name in candidates:
        qtype = GGMLQuantizationType.__members__.get(name)
        if qtype is not None and qtype in GGML_QUANT_SIZES:
            block, size = GGML_QUANT_SIZES[qtype]
            return size * 8 / block
    return None


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
    )


def _resolve_license(artifact_license: str | None, cli_license: str | None) -> License:
    if cli_license and artifact_license and cli_license.lower() != artifact_license.lower():
        raise InvalidInput(
            f"--license {cli_license!r} contradicts the artifact's general.license "
            f"{artifact_license!r} — drop --license or fix the artifact"
        )
    if artifact_license:
        return License(id=artifact_license, source="gguf:general.license")
    if cli_license:
        return License(id=cli_license, source="cli")
    return License()


def _build_gguf(
    paths: list[Path],
    *,
    model_id: str | None,
    source: str | None,
    license_id: str | None,
    golden_prompts: Sequence[GoldenPrompt],
    recipe: QuantRecipe | None,
    effective: Count | None,
    progress: ProgressCallback | None,
    on_hashing: Any,
) -> BuiltArtifact:
    if len(paths) > 1 and not all(p.suffix == ".gguf" for p in paths):
        raise InvalidInput("a GGUF artifact is .gguf files only; give one artifact per add")
    header = read_gguf(paths[0])
    extra = set(paths) - set(header.paths)
    if extra:
        raise InvalidInput(
            f"{sorted(extra)[0]} is not part of {paths[0].name}'s split set; "
            "give one artifact per add"
        )
    root = header.paths[0].parent
    entries = [
        TensorEntry(t.name, t.n_elements, t.type_name, t.n_bytes, len(t.shape))
        for t in header.tensors
    ]
    arch = architecture_from_gguf(header)
    ledger = compute_ledger(
        entries,
        classify_gguf_tensor,
        gguf_layer_of,
        expert_count=arch.expert_count,
        expert_used_count=arch.expert_used_count,
    )
    file_type_id = _int(header.get("general.file_type"))
    nominal = gguf_file_type_name(file_type_id)
    quant = summarize_quantization(
        entries,
        classify_gguf_tensor,
        nominal_file_type=nominal,
        base_bits_per_weight=base_bits_per_weight(nominal),
    )
    quant.recipe = recipe
    if effective is not None:
        ledger.effective = effective
    license_ = _resolve_license(_str(header.get("general.license")), license_id)

    if on_hashing:
        on_hashing(sum(p.stat().st_size for p in header.paths))
    digests = sha256_files(header.paths, progress)
    files = [
        FileEntry(path=p.name, bytes=p.stat().st_size, sha256=d, role="weights")
        for p, d in zip(header.paths, digests, strict=True)
    ]
    manifest = Manifest(
        model_id=model_id,
        source=source,
        license=license_,
        format="gguf",
        files=files,
        parameters=ledger,
        quantization=quant,
        architecture=arch,
        gguf=GGUFFacts(
            version=header.version,
            alignment=header.alignment,
            tensor_count=header.tensor_count,
            kv_count=header.kv_count,
            split_count=len(header.paths),
            file_type_id=file_type_id,
            quantization_version=_int(header.get("general.quantization_version")),
        ),
        runtime=RuntimeRequirements(runtime="llama.cpp"),
        golden_prompts=list(golden_prompts),
    )
    return BuiltArtifact(finalize(manifest), root)
