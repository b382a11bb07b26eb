"""Weight dtypes on Neuron: their names, their widths, and which stack versions support them.

The support table is data (``modelreg/data/neuron_dtypes.json``), every entry with its source:
NxD Inference quantizes weights to INT8 and FP8 only, so an fp4 bundle on that stack is held
with the reason, whatever constants the library happens to export. A stack version the table
does not cover is unknown, and a quantized bundle on it is held until an entry is added.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from modelreg.schemas.neuron import NeuronFacts

# Spellings seen in NxD Inference, optimum-neuron, torch and modelreg manifests -> one name.
DTYPE_ALIASES: dict[str, str] = {
    "bf16": "bf16",
    "bfloat16": "bf16",
    "torch.bfloat16": "bf16",
    "fp16": "fp16",
    "f16": "fp16",
    "float16": "fp16",
    "torch.float16": "fp16",
    "fp32": "fp32",
    "f32": "fp32",
    "float32": "fp32",
    "torch.float32": "fp32",
    "int8": "int8",
    "s8": "int8",
    "fp8": "fp8",
    "f8e4m3": "f8e4m3",
    "f8e4m3fn": "f8e4m3",
    "float8_e4m3fn": "f8e4m3",
    "f8e5m2": "f8e5m2",
    "float8_e5m2": "f8e5m2",
    "fp4": "fp4",
    "f4e2m1": "fp4",
    "f4e2m1fn": "fp4",
    "f4e2m1fn_x4": "fp4",
    "mxfp4": "fp4",
    "nvfp4": "fp4",
    "int4": "int4",
    "s4": "int4",
}
# Bytes per weight of each dtype, scales of quantized formats not included (per-channel int8
# scales of the Gemma-4 experts add 0.3%: inside a fit's tolerance).
DTYPE_BYTES: dict[str, float] = {
    "bf16": 2,
    "fp16": 2,
    "fp32": 4,
    "int8": 1,
    "fp8": 1,
    "f8e4m3": 1,
    "f8e5m2": 1,
    "fp4": 0.5,
    "int4": 0.5,
}
FLOAT_DTYPES = frozenset({"bf16", "fp16", "fp32"})
DATA_FILE = "neuron_dtypes.json"


def canonical_dtype(name: str | None) -> str | None:
    """``bfloat16`` -> ``bf16``, ``F4E2M1FN_X4`` -> ``fp4``; None for a name not known here."""
    if not name:
        return None
    return DTYPE_ALIASES.get(name.strip().lower())


def dtype_bytes(name: str | None) -> float | None:
    """Bytes per weight of a dtype by any of its spellings (None: unknown dtype)."""
    canonical = canonical_dtype(name)
    return DTYPE_BYTES.get(canonical) if canonical else None


@dataclass(frozen=True)
class StackSupport:
    """What one version line of one stack supports, and why we believe it."""

    stack: str
    name: str
    version_field: str
    versions: tuple[str, ...]
    quantized_weight_dtypes: frozenset[str]
    quantization_types: frozenset[str]
    not_supported: dict[str, str]
    sources: tuple[str, ...]


@dataclass(frozen=True)
class SupportTable:
    base_dtypes: frozenset[str]
    base_sources: tuple[str, ...]
    stacks: tuple[StackSupport, ...]


@cache
def support_table() -> SupportTable:
    """The packaged support table (``modelreg/data/neuron_dtypes.json``)."""
    text = resources.files("modelreg").joinpath("data", DATA_FILE).read_text(encoding="utf-8")
    raw: dict[str, Any] = json.loads(text)
    stacks = tuple(
        StackSupport(
            stack=entry["stack"],
            name=entry["name"],
            version_field=entry["version_field"],
            versions=tuple(entry["versions"]),
            quantized_weight_dtypes=frozenset(entry["quantized_weight_dtypes"]),
            quantization_types=frozenset(entry["quantization_types"]),
            not_supported=dict(entry["not_supported"]),
            sources=tuple(entry["sources"]),
        )
        for entry in raw["stacks"]
    )
    base = raw["base_weight_dtypes"]
    return SupportTable(frozenset(base["dtypes"]), tuple(base["sources"]), stacks)


def _version_line(version: str) -> str:
    """``2.26.0`` -> ``2.26``: the table is kept per major.minor."""
    return ".".join(version.strip().lstrip("v").split(".")[:2])


def stack_of(facts: NeuronFacts) -> tuple[str, str | None]:
    """(stack, its version) the bundle runs on: optimum-neuron exports on optimum-neuron,
    NxD-built bundles (NxD Inference directories, ModelBuilder slim deploys) on NxD."""
    if facts.layout == "optimum-neuron" or (facts.optimum_neuron_version and not facts.nxd_version):
        return "optimum-neuron", facts.optimum_neuron_version
    if facts.layout == "published" and not facts.nxd_version:
        return "unknown", None
    return "nxd", facts.nxd_version


def lookup(stack: str, version: str | None) -> StackSupport | None:
    """The table entry for ``stack`` at ``version`` (None: not covered)."""
    if version is None:
        return None
    line = _version_line(version)
    for entry in support_table().stacks:
        if entry.stack == stack and line in entry.versions:
            return entry
    return None


def weight_dtypes(facts: NeuronFacts) -> dict[str, list[str]]:
    """Declared weight dtype -> where it is declared (module names, ``torch_dtype``…)."""
    used: dict[str, list[str]] = {}
    for module in facts.modules:
        used.setdefault(module.dtype, []).append(f"module {module.name}")
    if facts.quantized and facts.quantization_dtype:
        used.setdefault(facts.quantization_dtype, []).append("quantization_dtype")
    if facts.torch_dtype and not facts.modules:
        used.setdefault(facts.torch_dtype, []).append("torch_dtype")
    return used


def dtype_support_problems(facts: NeuronFacts) -> list[str]:
    """Hold reasons for weight dtypes and quantization schemes the bundle's stack does not
    support, or whose support is unknown (not in the table). Empty when all are supported."""
    table = support_table()
    stack, version = stack_of(facts)
    entry = lookup(stack, version)
    where = f"{entry.name} {version}" if entry else None
    problems = []
    for declared, users in sorted(weight_dtypes(facts).items()):
        dtype = canonical_dtype(declared)
        used_by = ", ".join(users)
        if dtype is None:
            problems.append(
                f"weight dtype {declared!r} ({used_by}) is not one modelreg knows: "
                f"use one of {', '.join(sorted(DTYPE_BYTES))}"
            )
            continue
        if dtype in table.base_dtypes:
            continue
        if entry is None:
            known = f"{stack} {version}" if version else f"{stack} (version unknown)"
            problems.append(
                f"weight dtype {dtype} ({used_by}): support on {known} is unknown — record the "
                f"stack version, or add it with its source to modelreg/data/{DATA_FILE}"
            )
            continue
        if dtype in entry.not_supported:
            problems.append(
                f"weight dtype {dtype} ({used_by}) is not supported by {where}: "
                f"{entry.not_supported[dtype]} (source: {entry.sources[0]})"
            )
        elif dtype not in entry.quantized_weight_dtypes and not (
            dtype == "fp8" and entry.quantized_weight_dtypes & {"f8e4m3", "f8e5m2"}
        ):
            supported = ", ".join(sorted(entry.quantized_weight_dtypes)) or "none"
            problems.append(
                f"weight dtype {dtype} ({used_by}) is not supported by {where} "
                f"(quantized weights: {supported}; source: {entry.sources[0]})"
            )
    # Without a table entry the scheme cannot be judged either; the dtype hold above says so.
    scheme = facts.quantization_type if facts.quantized is not False else None
    if scheme and entry is not None and scheme not in entry.quantization_types:
        supported = ", ".join(sorted(entry.quantization_types)) or "none"
        problems.append(
            f"quantization type {scheme!r} is not supported by {where} "
            f"(supported: {supported}; source: {entry.sources[0]})"
        )
    return problems
