"""llama.cpp build features and the host CPU flags they need (no heavy imports here)."""

from __future__ import annotations

# llama.cpp's system-info names -> /proc/cpuinfo flag names.
LLAMA_FEATURE_TO_CPU_FLAG = {
    "SSE3": "pni",
    "SSSE3": "ssse3",
    "AVX": "avx",
    "AVX2": "avx2",
    "F16C": "f16c",
    "FMA": "fma",
    "BMI2": "bmi2",
    "AVX_VNNI": "avx_vnni",
    "AVX512": "avx512f",
    "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16",
    "AMX_INT8": "amx_int8",
    "AMX_BF16": "amx_bf16",
}


def build_features(system_info: str) -> list[str]:
    """Features reported as ``NAME = 1`` in ``llama_print_system_info()``."""
    features = []
    for part in system_info.replace("\n", "|").split("|"):
        name, sep, value = part.partition("=")
        name = name.split(":")[-1].strip()
        if sep and value.strip() == "1" and name:
            features.append(name)
    return features


def required_cpu_flags(features: list[str]) -> dict[str, str]:
    """CPU flags a build with ``features`` executes: {cpuinfo flag: llama.cpp feature}."""
    return {LLAMA_FEATURE_TO_CPU_FLAG[f]: f for f in features if f in LLAMA_FEATURE_TO_CPU_FLAG}


def missing_flags(features: list[str], host_flags: set[str] | frozenset[str]) -> list[str]:
    """llama.cpp features of this build whose CPU flag the host lacks, e.g. ['AVX2', 'FMA']."""
    return sorted(f for flag, f in required_cpu_flags(features).items() if flag not in host_flags)
