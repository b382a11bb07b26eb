"""Quantization recipe files (``--recipe recipe.yaml``): what the quantizer was told to do, and
where the artifact's tensors contradict it.

A recipe is a declaration; the tensors are the facts. ``recipe_problems`` compares the claims
the format can contradict — the scheme against the per-tensor types, the group size against
the block size a GGUF type is stored in (``gguf.GGML_QUANT_SIZES``), excluded tensors against
the tensors and their types, the importance matrix against the one a GGUF records — and each
contradiction holds the record (``recipe_mismatch``).
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase
from pathlib import PurePath
from typing import TYPE_CHECKING

from pydantic import ValidationError

from modelreg.errors import InvalidInput
from modelreg.manifests.gguf import GGML_TYPES_BY_NAME, file_type_base
from modelreg.manifests.provenance import is_full_precision
from modelreg.manifests.tensor_types import EXTRA_TYPES_BY_NAME
from modelreg.safeyaml import read_yaml_file
from modelreg.schemas.manifest import Manifest, QuantRecipe, TensorStats, first_error

if TYPE_CHECKING:
    from pathlib import Path

    from modelreg.manifests.ledger import TensorEntry

MAX_RECIPE_BYTES = 1 << 20
# A scheme's weights are contradicted when more of them than this share sit below its type.
_BELOW_SCHEME_SHARE = 0.5
# llama.cpp's fallback when a tensor's rows do not divide into a K-quant's 256-weight blocks
# (llama_tensor_get_type): a Q4_K_M file of a 640-wide model holds Q5_0 where Q4_K cannot go.
_FALLBACK = {
    "Q2_K": "IQ4_NL",
    "Q3_K": "IQ4_NL",
    "IQ4_XS": "IQ4_NL",
    "Q4_K": "Q5_0",
    "Q5_K": "Q5_1",
    "Q6_K": "Q8_0",
}
# K-quants store 256-weight super-blocks with a scale per sub-block (ggml-common.h): a
# recipe may give either as its group size.
_SUB_BLOCK = {"Q2_K": 16, "Q3_K": 16, "Q4_K": 32, "Q5_K": 32, "Q6_K": 16}


def load_recipe(path: Path) -> QuantRecipe:
    """Parse and validate a recipe YAML file; any problem is one ``InvalidInput`` line."""
    data = read_yaml_file(path, max_bytes=MAX_RECIPE_BYTES, what="recipe")
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}: recipe must be a YAML mapping")
    try:
        return QuantRecipe.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(f"{path}: recipe field {first_error(exc)}") from None


def excluded_tensor_types(
    recipe: QuantRecipe, tensors: Iterable[TensorEntry]
) -> dict[str, dict[str, int]]:
    """For each excluded tensor of ``recipe`` (a name, or a glob pattern), how many tensors of
    each type it names in the artifact; ``{}`` for one that names none."""
    tensors = list(tensors)
    found: dict[str, dict[str, int]] = {}
    for entry in recipe.excluded_tensors:
        glob = any(c in entry for c in "*?[")
        types: dict[str, int] = {}
        for t in tensors:
            if t.name == entry or (glob and fnmatchcase(t.name, entry)):
                types[t.dtype] = types.get(t.dtype, 0) + 1
        found[entry] = types
    return found


def _bits(type_name: str) -> float | None:
    """Bits per weight of a GGUF tensor type (ggml's table, then ik_llama.cpp's types)."""
    if type_name in GGML_TYPES_BY_NAME:
        block, size = GGML_TYPES_BY_NAME[type_name]
        return size * 8 / block
    extra = EXTRA_TYPES_BY_NAME.get(type_name)
    return extra.type_size * 8 / extra.block_size if extra else None


def _block(type_name: str) -> int | None:
    if type_name in GGML_TYPES_BY_NAME:
        return GGML_TYPES_BY_NAME[type_name][0]
    extra = EXTRA_TYPES_BY_NAME.get(type_name)
    return extra.block_size if extra else None


def _quantized(types: dict[str, TensorStats]) -> dict[str, TensorStats]:
    return {
        name: s
        for name, s in types.items()
        if not is_full_precision(name) and name not in ("I8", "I16", "I32", "I64")
    }


def _dominant(types: dict[str, TensorStats]) -> str | None:
    """The type holding the most parameters."""
    return max(types, key=lambda name: types[name].params, default=None)


def _histogram(types: dict[str, TensorStats]) -> str:
    return ", ".join(f"{name} {s.tensors}" for name, s in types.items())


def _weights_type(recipe: QuantRecipe, types: dict[str, TensorStats]) -> str | None:
    """The type the artifact's weights are stored in: the scheme's, when its tensors bear the
    scheme out, else the quantized type holding the most parameters."""
    base = file_type_base(recipe.scheme) if recipe.scheme else None
    if base is not None and base in types and not _gguf_scheme_problems(recipe, types):
        return base
    return _dominant(_quantized(types))


def _gguf_scheme_problems(recipe: QuantRecipe, types: dict[str, TensorStats]) -> list[str]:
    scheme = (recipe.scheme or "").strip().upper()
    base = file_type_base(scheme)
    if base is None:
        return [
            f"scheme {recipe.scheme!r} is no llama.cpp quantization type (e.g. Q4_K_M, Q8_0, "
            f"IQ4_XS), and a GGUF's tensors are ggml types: {_histogram(types)}"
        ]
    problems = []
    base_bits = _bits(base)
    quantized = _quantized(types)
    total = sum(s.params for s in quantized.values())
    below = {
        name: s
        for name, s in quantized.items()
        if base_bits is not None and (bits := _bits(name)) is not None and bits < base_bits - 1e-9
    }
    below_params = sum(s.params for s in below.values())
    if total and below_params > _BELOW_SCHEME_SHARE * total:
        worst = _dominant(below)
        assert worst is not None
        problems.append(
            f"scheme {recipe.scheme} stores weights as {base} ({base_bits:.2f} bits/weight), "
            f"but the weights are {worst}: {_histogram(below)} below {base}, "
            f"{below_params / total:.0%} of the quantized parameters (tensors: "
            f"{_histogram(types)})"
        )
    if base not in types and _FALLBACK.get(base) not in types:
        problems.append(
            f"scheme {recipe.scheme}, but no tensor is {base} (tensors: {_histogram(types)})"
        )
    return problems


def _gguf_group_size_problem(recipe: QuantRecipe, types: dict[str, TensorStats]) -> str | None:
    if recipe.group_size is None:
        return None
    weights = _weights_type(recipe, types)
    block = _block(weights) if weights else None
    if weights is None or block is None:
        return None
    allowed = {block, _SUB_BLOCK.get(weights, block)}
    if recipe.group_size in allowed:
        return None
    stored = (
        f"super-blocks of {block} with a scale per {_SUB_BLOCK[weights]}"
        if weights in _SUB_BLOCK
        else f"blocks of {block}"
    )
    return (
        f"group_size {recipe.group_size}, but the {weights} weights are stored in {stored} "
        "weights (gguf GGML_QUANT_SIZES)"
    )


def _higher_than(name: str, reference: str | None) -> bool:
    if is_full_precision(name):
        return True
    bits, ref_bits = _bits(name), _bits(reference) if reference else None
    return bits is not None and ref_bits is not None and bits > ref_bits + 1e-9


def _excluded_problems(manifest: Manifest, reference: str | None) -> list[str]:
    quant = manifest.quantization
    assert quant is not None and quant.recipe is not None
    problems = []
    for entry in quant.recipe.excluded_tensors:
        types = quant.excluded_tensor_types.get(entry)
        if types is None:
            continue  # a hand-written manifest that does not say: nothing to compare
        if not types:
            problems.append(f"excluded tensor {entry!r} is not in the artifact")
            continue
        if manifest.format == "gguf":
            lower = {t: n for t, n in types.items() if not _higher_than(t, reference)}
        else:
            lower = {t: n for t, n in types.items() if not is_full_precision(t)}
        if lower:
            kept = ", ".join(f"{t} ({n})" for t, n in lower.items())
            than = f"the {reference} weights" if reference else "the quantized weights"
            problems.append(
                f"excluded tensor {entry!r} is {kept} in the artifact: not kept at higher "
                f"precision than {than}"
            )
    return problems


def _basename(name: str) -> str:
    return PurePath(name.replace("\\", "/")).name


def _imatrix_problems(manifest: Manifest) -> list[str]:
    quant = manifest.quantization
    assert quant is not None and quant.recipe is not None
    recipe, recorded = quant.recipe, quant.importance_matrix
    claims = recipe.importance_matrix_sha256 or recipe.importance_matrix_file
    if manifest.format != "gguf" or not claims:
        return []
    if recorded is None:
        return [
            "the recipe names an importance matrix, but the GGUF records none "
            "(llama-quantize writes quantize.imatrix.* whenever it uses one)"
        ]
    problems = []
    for what, claimed, found, key in (
        ("importance matrix file", recipe.importance_matrix_file, recorded.file, "file"),
        ("calibration set", recipe.calibration_set, recorded.dataset, "dataset"),
    ):
        if claimed and found and _basename(claimed) != _basename(found):
            problems.append(
                f"{what} {claimed!r}, but the GGUF records {found!r} (quantize.imatrix.{key})"
            )
    return problems


def recipe_problems(manifest: Manifest) -> list[str]:
    """Where the artifact's tensors contradict its recipe (empty without a recipe)."""
    quant = manifest.quantization
    recipe = quant.recipe if quant is not None else None
    if quant is None or recipe is None:
        return []
    types = quant.tensor_types
    problems: list[str] = []
    reference: str | None = None
    if manifest.format == "gguf" and types:
        if recipe.scheme:
            problems += _gguf_scheme_problems(recipe, types)
        group = _gguf_group_size_problem(recipe, types)
        problems += [group] if group else []
        reference = _weights_type(recipe, types)
    elif types and recipe.scheme and all(is_full_precision(t) for t in types):
        problems.append(
            f"scheme {recipe.scheme}, but every tensor is {', '.join(types)}: nothing is quantized"
        )
    elif manifest.neuron is not None and recipe.scheme and manifest.neuron.quantized is False:
        problems.append(f"scheme {recipe.scheme}, but the bundle says quantized: false")
    if types:
        problems += _excluded_problems(manifest, reference)
    problems += _imatrix_problems(manifest)
    return [f"recipe_mismatch: {p}" for p in problems]
