"""Tensor types the ``gguf`` package does not know: ik_llama.cpp's row-interleaved layouts.

ik_llama.cpp stores some weights "repacked": 4, 8 or 16 rows interleaved block by block
(``Q8_0_R8``, ``Q4_K_R4``, ``BF16_R16``…), written to GGUF under type ids of its own
(``ggml/include/ggml.h`` enum ``ggml_type``). The block sizes here are its
``ggml/src/ggml.c`` ``type_traits`` (``blck_size``, ``type_size``, ``row_meta_size``), with the
``block_*`` struct sizes of ``ggml/src/ggml-common.h`` (read at ik_llama.cpp 8337e4c). No
id here is one mainline llama.cpp assigns today, and the ``gguf`` package's own table wins
for every id it knows.

On x86 the interleaved types have one matrix-multiplication kernel, in ``iqk_mul_mat``, which
ik_llama.cpp compiles only with AVX2 (``iqk_config.h``: ``IQK_IMPLEMENT`` needs ``__AVX2__``)
and writes with FMA and F16C intrinsics. Their ggml fallbacks (``vec_dot_*_r*`` in
``iqk_quantize.cpp``) call that kernel and compute nothing without it, so a pre-AVX2 CPU
produces garbage rather than an error — hence :func:`interleaved_cpu_requirements`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# /proc/cpuinfo flags every iqk_mul_mat kernel executes on x86.
IQK_X86_FLAGS = ("avx2", "fma", "f16c")
# iqk_config.h HAVE_FANCY_SIMD: the AVX-512 subset Q8_K_R16's only x86 kernel needs.
_FANCY_SIMD_FLAGS = ("avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni")

QK_K = 256


@dataclass(frozen=True)
class ExtraTensorType:
    """A tensor type id outside the ``gguf`` package's table, and how its bytes are laid out."""

    type_id: int
    name: str
    block_size: int  # elements per block
    type_size: int  # bytes per block
    row_meta_bytes: int = 0  # bytes ahead of every row (per-row scales)
    interleaved_rows: int = 1
    # /proc/cpuinfo flags its only x86 kernel executes; () when ggml has a plain-C path.
    x86_flags: tuple[str, ...] = ()
    origin: str = "ik_llama.cpp row-interleaved"

    def row_bytes(self, row_elements: int) -> int:
        """Bytes of one row of ``row_elements`` (ggml_row_size: row meta + whole blocks)."""
        return self.row_meta_bytes + row_elements // self.block_size * self.type_size


def _r(
    type_id: int,
    name: str,
    block: int,
    size: int,
    meta: int = 0,
    x86_flags: tuple[str, ...] = IQK_X86_FLAGS,
) -> ExtraTensorType:
    """An ik_llama.cpp ``*_R4`` / ``*_R8`` / ``*_R16`` type (the suffix is its row count)."""
    rows = int(name.rsplit("_R", 1)[1])
    return ExtraTensorType(type_id, name, block, size, meta, rows, x86_flags)


def _arm(type_id: int, name: str, rows: int) -> ExtraTensorType:
    """Mainline llama.cpp's former ARM layouts of Q4_0 (removed there, still in
    ik_llama.cpp's enum; the gguf package no longer names them). ggml-aarch64.c has plain-C
    gemv/gemm for them, so x86 needs no particular flag."""
    return ExtraTensorType(
        type_id, name, 32, 18, 0, rows, (), "ARM row-interleaved, removed from llama.cpp"
    )


# ik_llama.cpp ggml.h ids; (block, bytes) from its type_traits: e.g. Q8_0_R8 is QK8_0 = 32
# elements in sizeof(block_q8_0) = 34 bytes, IQ1_S_R4 32 elements in sizeof(block_iq1_s_r4)/4
# = 6 bytes plus 2 bytes per row.
EXTRA_TENSOR_TYPES: dict[int, ExtraTensorType] = {
    t.type_id: t
    for t in (
        _arm(31, "Q4_0_4_4", 4),
        _arm(32, "Q4_0_4_8", 4),
        _arm(33, "Q4_0_8_8", 8),
        _r(202, "Q4_0_R8", 32, 18),
        _r(206, "Q5_0_R4", 32, 22),
        _r(208, "Q8_0_R8", 32, 34),
        _r(210, "Q2_K_R4", QK_K, 84),
        _r(211, "Q3_K_R4", QK_K, 110),
        _r(212, "Q4_K_R4", QK_K, 144),
        _r(213, "Q5_K_R4", QK_K, 176),
        _r(214, "Q6_K_R4", QK_K, 210),
        _r(216, "IQ2_XXS_R4", QK_K, 66),
        _r(217, "IQ2_XS_R4", QK_K, 74),
        _r(218, "IQ3_XXS_R4", QK_K, 98),
        _r(219, "IQ1_S_R4", 32, 6, 2),
        _r(220, "IQ4_NL_R4", 32, 18),
        _r(221, "IQ3_S_R4", QK_K, 110),
        _r(222, "IQ2_S_R4", QK_K, 82),
        _r(223, "IQ4_XS_R8", QK_K, 136),
        _r(229, "IQ1_M_R4", 32, 7, 2),
        # iqk_gemm_floats.cpp: the only BF16_R16 kernel is under __AVX512BF16__.
        _r(230, "BF16_R16", 1, 2, x86_flags=(*IQK_X86_FLAGS, "avx512f", "avx512_bf16")),
        _r(233, "Q6_0_R4", 32, 26),
        _r(335, "IQ2_BN_R4", 64, 16, 4),
        _r(337, "IQ2_K_R4", QK_K, 76),
        _r(338, "IQ3_K_R4", QK_K, 110),
        _r(339, "IQ4_K_R4", QK_K, 144),
        _r(340, "IQ5_K_R4", QK_K, 176),
        _r(344, "IQ4_KS_R4", QK_K, 136, 4),
        _r(352, "IQ5_KS_R4", QK_K, 168, 4),
        _r(353, "MXFP4_R8", 32, 17),
        # iqk_gemm_kquants.cpp: the Q8_K_R16 kernel is under HAVE_FANCY_SIMD.
        _r(397, "Q8_K_R16", QK_K, 258, x86_flags=(*IQK_X86_FLAGS, *_FANCY_SIMD_FLAGS)),
        _r(398, "Q8_KV_R8", 32, 32, 4),
        _r(399, "Q8_K_R8", QK_K, 258),
    )
}
EXTRA_TYPES_BY_NAME = {t.name: t for t in EXTRA_TENSOR_TYPES.values()}
_UNKNOWN_RE = re.compile(r"^unknown\((\d+)\)$")


@dataclass(frozen=True)
class CpuRequirement:
    """CPU flags a tensor type's only x86 kernel executes."""

    type_name: str
    flags: tuple[str, ...]  # /proc/cpuinfo names: "avx2", "fma", "f16c", "avx512_bf16"…
    message: str


def _lookup(type_name: str) -> ExtraTensorType | None:
    known = EXTRA_TYPES_BY_NAME.get(type_name)
    if known is not None:
        return known
    # Manifests recorded before these types had names carry "unknown(208)".
    match = _UNKNOWN_RE.match(type_name)
    return EXTRA_TENSOR_TYPES.get(int(match.group(1))) if match else None


def interleaved_cpu_requirements(type_names: Iterable[str]) -> list[CpuRequirement]:
    """x86 CPU flags the row-interleaved tensor types among ``type_names`` need, one entry per
    type that needs any (sorted by type name); ``[]`` when none does.

    ``type_names`` are a manifest's tensor type names (the keys of
    ``manifest.quantization.tensor_types``); ``"unknown(208)"`` from an older manifest is
    read as the id it names.
    """
    found: dict[str, CpuRequirement] = {}
    for type_name in type_names:
        extra = _lookup(type_name)
        if extra is None or not extra.x86_flags or extra.name in found:
            continue
        beyond_base = [f for f in extra.x86_flags if f not in IQK_X86_FLAGS]
        needs = "AVX2" + (f" and {', '.join(beyond_base)}" if beyond_base else "")
        found[extra.name] = CpuRequirement(
            extra.name,
            extra.x86_flags,
            f"{extra.name} ({extra.origin}) needs {needs}: its only x86 kernel is "
            f"ik_llama.cpp's iqk_mul_mat (CPU flags {', '.join(extra.x86_flags)}); without "
            "it the output is garbage, not an error",
        )
    return [found[name] for name in sorted(found)]
