"""Inferentia2 bundles: NxD Inference compiled directories, optimum-neuron exports, and slim
host-embedding deploys — read without running anything from them.

``.pt`` files are pickles or TorchScript archives: loading them runs code. Here they are only
opened as zip archives (entry names and sizes, embedded NEFF sizes). Compile facts come from
``neuron_config.json`` (nested ``neuron_config`` for NxDI, flat for optimum-neuron) or, for a
slim deploy, from its ``modelreg-deploy.json`` deploy manifest.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from modelreg.errors import InvalidArtifact, InvalidInput
from modelreg.manifests.hf_config import first_int, read_json_object
from modelreg.schemas.manifest import HostEmbedding, NeuronFacts, NeuronModule, first_error

NEURON_CONFIG = "neuron_config.json"
DEPLOY_MANIFEST = "modelreg-deploy.json"
MAX_NEURON_CORES = 24  # inf2.48xlarge, the largest instance


def is_neuron_bundle(directory: Path) -> bool:
    return (directory / NEURON_CONFIG).is_file() or (directory / DEPLOY_MANIFEST).is_file()


@dataclass(frozen=True)
class PtArchive:
    """What a .pt zip holds, read from its central directory only."""

    entries: int
    neff_entries: dict[str, int]  # name -> uncompressed bytes
    has_pickle: bool


def inspect_pt(path: Path) -> PtArchive:
    """List a .pt archive without unpickling or loading it."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except zipfile.BadZipFile:
        raise InvalidArtifact(
            path, "not a zip archive: a .pt file is inspected as one, never unpickled"
        ) from None
    except FileNotFoundError:
        raise InvalidArtifact(path, "file not found") from None
    neffs = {i.filename: i.file_size for i in infos if "neff" in i.filename.lower()}
    pickles = any(i.filename.endswith(".pkl") for i in infos)
    return PtArchive(len(infos), neffs, pickles)


def _buckets(cfg: dict[str, Any]) -> list[int]:
    for key in ("context_encoding_buckets", "buckets", "context_buckets"):
        value = cfg.get(key)
        if isinstance(value, list) and all(isinstance(v, int) for v in value):
            return list(value)
    return []


def read_bundle(directory: Path) -> tuple[NeuronFacts, dict[str, Any]]:
    """Compile facts and the HF config of a bundle directory."""
    deploy = directory / DEPLOY_MANIFEST
    neuron_config = directory / NEURON_CONFIG
    config_path = directory / "config.json"
    hf_config = read_json_object(config_path) if config_path.is_file() else {}
    if deploy.is_file():
        facts = _slim_facts(deploy)
    else:
        raw = read_json_object(neuron_config)
        nested = raw.get("neuron_config")
        if isinstance(nested, dict):
            facts = _nxdi_facts(neuron_config, nested)
            hf_config = hf_config or {k: v for k, v in raw.items() if k != "neuron_config"}
        else:
            facts = _optimum_facts(neuron_config, raw)
    if facts.tp_degree is not None and facts.tp_degree > MAX_NEURON_CORES:
        raise InvalidInput(
            f"{directory}: tp_degree {facts.tp_degree} is larger than any inf2 instance "
            f"({MAX_NEURON_CORES} NeuronCores on inf2.48xlarge)"
        )
    archives = {}
    for pt in sorted(directory.glob("*.pt")):
        info = inspect_pt(pt)
        archives[pt.name] = sorted(info.neff_entries)
        if info.neff_entries and facts.neff_bytes is None:
            facts.neff_bytes = sum(info.neff_entries.values())
    facts.pt_archives = archives
    return facts, hf_config


def _require_tp(path: Path, tp: int | None) -> int:
    if tp is None:
        raise InvalidArtifact(path, "tp_degree missing: the tensor-parallel degree decides fit")
    if tp < 1:
        raise InvalidArtifact(path, f"tp_degree {tp} must be at least 1")
    return tp


def _nxdi_facts(path: Path, nc: dict[str, Any]) -> NeuronFacts:
    return NeuronFacts(
        layout="nxdi",
        tp_degree=_require_tp(path, first_int(nc, "tp_degree")),
        batch_size=first_int(nc, "batch_size", "max_batch_size"),
        seq_len=first_int(nc, "seq_len", "max_length"),
        context_buckets=_buckets(nc),
        torch_dtype=nc.get("torch_dtype") if isinstance(nc.get("torch_dtype"), str) else None,
        quantized=nc.get("quantized") if isinstance(nc.get("quantized"), bool) else None,
        quantization_type=nc.get("quantization_type"),
        quantization_dtype=nc.get("quantization_dtype"),
    )


def _optimum_facts(path: Path, raw: dict[str, Any]) -> NeuronFacts:
    return NeuronFacts(
        layout="optimum-neuron",
        tp_degree=_require_tp(
            path, first_int(raw, "tp_degree", "tensor_parallel_size", "num_cores")
        ),
        batch_size=first_int(raw, "batch_size"),
        seq_len=first_int(raw, "sequence_length", "seq_len"),
        torch_dtype=raw.get("auto_cast_type") or raw.get("torch_dtype"),
        compiler_version=raw.get("neuronxcc_version") or raw.get("compiler_version"),
        optimum_neuron_version=raw.get("optimum_neuron_version"),
    )


def _slim_facts(path: Path) -> NeuronFacts:
    raw = read_json_object(path)
    try:
        embedding = HostEmbedding.model_validate(raw["host_embedding"])
        modules = [NeuronModule.model_validate(m) for m in raw.get("modules", [])]
    except KeyError:
        raise InvalidArtifact(path, "a slim deploy manifest must describe host_embedding") from None
    except ValidationError as exc:
        raise InvalidArtifact(path, first_error(exc)) from None
    if not (path.parent / embedding.file).is_file():
        raise InvalidArtifact(path, f"host embedding file {embedding.file!r} is missing")
    return NeuronFacts(
        layout="slim-host-embedding",
        tp_degree=_require_tp(path, first_int(raw, "tp_degree")),
        batch_size=first_int(raw, "batch_size"),
        seq_len=first_int(raw, "seq_len"),
        context_buckets=_buckets(raw),
        torch_dtype=raw.get("torch_dtype"),
        quantized=raw.get("quantized"),
        quantization_dtype=raw.get("quantization_dtype"),
        modules=modules,
        compiler_version=raw.get("compiler_version"),
        nxd_version=raw.get("nxd_version"),
        sdk_version=raw.get("sdk_version"),
        compiled_on=raw.get("compiled_on"),
        host_embedding=embedding,
    )
