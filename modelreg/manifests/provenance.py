"""Is the artifact quantized, and is what it was quantized from known?

A quantized artifact is a derivative: its behaviour follows from the base model it was made
from as much as from the recipe. Without the base model's id *and* an immutable revision, a
regression cannot be traced to a change of base, nor a rebuild reproduced, so the record is
held (``provenance_unknown``) until both are given.
"""

from __future__ import annotations

import re

from modelreg.schemas.manifest import BASE_REVISION_FORMS, FULL_PRECISION_TYPES, Manifest

# GGUF integer tensors (I8…I64) hold integers, not quantized weights.
_NOT_QUANTIZED_GGUF = FULL_PRECISION_TYPES | {"I8", "I16", "I32", "I64"}
# safetensors dtypes of quantized checkpoints: FP8 / FP6 / FP4 (with their scales), int8, and
# the packed integers of GPTQ / AWQ (qweight in I32) and bitsandbytes (U8).
_QUANTIZED_DTYPE_RE = re.compile(r"^(F8|F6|F4|I8|U8|I4|U4|I32)")
_NEURON_FULL = frozenset({"fp32", "float32", "fp16", "float16", "bf16", "bfloat16"})
# ik_llama.cpp's row-interleaved layouts keep their base type's precision: BF16_R16 is BF16.
_INTERLEAVED_RE = re.compile(r"_R\d+$")


def is_full_precision(tensor_type: str) -> bool:
    """Is a GGUF tensor type (or a safetensors dtype) unquantized: F32, F16, BF16, F64?"""
    return _INTERLEAVED_RE.sub("", tensor_type.upper()) in FULL_PRECISION_TYPES


def _histogram(types: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in types.items())


def quantized_because(manifest: Manifest) -> str | None:
    """Why the artifact counts as quantized, in a few words; None when it does not.

    A GGUF: any tensor not F32 / F16 / BF16 (the tensors, not ``general.file_type``, which is
    only the majority type). A safetensors checkpoint or a Neuron bundle: when its own facts
    say so (quantized dtypes, the bundle's ``quantized`` flag or dtype) or a recipe was given.
    """
    quant = manifest.quantization
    neuron = manifest.neuron
    if neuron is not None:
        # NxD Inference's neuron_config carries a quantization_dtype even when quantized is
        # false: the flag decides, the dtype only when the flag is not stated.
        if neuron.quantized or (neuron.quantized is None and neuron.quantization_dtype):
            dtype = neuron.quantization_dtype or neuron.quantization_type or "quantized"
            return f"the bundle is compiled {dtype}"
        modules = [
            f"{m.name} {m.dtype}" for m in neuron.modules if m.dtype.lower() not in _NEURON_FULL
        ]
        if modules:
            return f"resident modules {', '.join(modules)}"
    if quant is None:
        return None
    if quant.tensor_types:
        if manifest.format == "gguf":
            below = {
                name: s.tensors
                for name, s in quant.tensor_types.items()
                if _INTERLEAVED_RE.sub("", name) not in _NOT_QUANTIZED_GGUF
            }
        else:
            below = {
                name: s.tensors
                for name, s in quant.tensor_types.items()
                if _QUANTIZED_DTYPE_RE.match(name.upper())
            }
        if below:
            return f"tensors {_histogram(below)}"
    elif quant.nominal_file_type and not is_full_precision(quant.nominal_file_type):
        return f"nominal type {quant.nominal_file_type}"
    scheme = quant.recipe.scheme if quant.recipe is not None else None
    if scheme and not is_full_precision(scheme):
        return f"its recipe's scheme {scheme}"
    return None


def is_quantized(manifest: Manifest) -> bool:
    """Is the artifact stored below full precision (``quantized_because``)?"""
    return quantized_because(manifest) is not None


def provenance_hold_reasons(manifest: Manifest) -> list[str]:
    """``provenance_unknown`` when a quantized artifact's base model or its revision is
    unknown, with the flag that settles it."""
    why = quantized_because(manifest)
    if why is None or manifest.base_model_revision is not None:
        return []
    if manifest.base_model is None:
        return [
            f"provenance_unknown: quantized ({why}) from an unknown base model: give the model "
            f"and revision it was made from, --base-model org/name@{BASE_REVISION_FORMS}"
        ]
    return [
        f"provenance_unknown: quantized ({why}) from {manifest.base_model} at an unknown "
        f"revision: give --base-model {manifest.base_model}@{BASE_REVISION_FORMS}"
    ]
