"""The sizes a manifest names, each with its limit (modelreg/limits.py, docs/limits.md), and
the parameter groups a ledger may use: shared by the manifest's parts (modelreg.schemas.manifest,
modelreg.schemas.neuron)."""

from __future__ import annotations

from typing import Annotated

from modelreg.limits import (
    MAX_ARTIFACT_BYTES,
    MAX_CONTEXT_TOKENS,
    MAX_EXPERTS,
    MAX_LAYERS,
    MAX_PARAMETERS,
    MAX_TENSORS,
    MAX_WIDTH,
    bounded,
)

Parameters = Annotated[int, bounded(MAX_PARAMETERS, "parameters")]
ByteCount = Annotated[int, bounded(MAX_ARTIFACT_BYTES, "bytes")]
TensorCount = Annotated[int, bounded(MAX_TENSORS, "tensors")]
Layers = Annotated[int, bounded(MAX_LAYERS, "layers")]
Width = Annotated[int, bounded(MAX_WIDTH, "(a width or head count)")]
Tokens = Annotated[int, bounded(MAX_CONTEXT_TOKENS, "tokens")]


# Parameter groups, named like the tensor roles of manifests/ledger.py: "embeddings" (token and
# per-layer embedding tables), "output" (the lm_head; zero parameters when tied), "attention",
# "router", "experts" (routed), "shared_experts", "ffn" (dense MLP, e.g. Gemma 4's shared dense
# MLP beside its experts), "norms", "other".
PARAMETER_GROUPS = (
    "embeddings",
    "output",
    "attention",
    "router",
    "experts",
    "shared_experts",
    "ffn",
    "norms",
    "other",
)


def _known_groups(names: list[str] | dict[str, int]) -> None:
    unknown = sorted(set(names) - set(PARAMETER_GROUPS))
    if unknown:
        raise ValueError(
            f"unknown parameter group {unknown[0]!r}: use one of {', '.join(PARAMETER_GROUPS)}"
        )


# One value for every layer, or one per layer (at most MAX_LAYERS of them).
IntOrPerLayer = Annotated[int | list[int] | None, bounded(MAX_WIDTH, "(a width or head count)")]
ExpertsOrPerLayer = Annotated[int | list[int] | None, bounded(MAX_EXPERTS, "experts")]
