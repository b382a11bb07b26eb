"""What changed between two artifacts, section by section.

The discipline is one variable at a time: when more than one of {weights, quantization,
tokenizer/template, runtime} changed, a regression cannot be attributed, and ``diff`` and
``promote`` say so. For GGUF a tensor-data digest tells a metadata-only edit (a new chat
template) from new weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from modelreg.schemas.manifest import Manifest

# The dimensions a change is attributed to.
ATTRIBUTION = ("weights", "quantization", "tokenizer/template", "runtime")


@dataclass(frozen=True)
class SectionDiff:
    name: str
    a: Any
    b: Any

    @property
    def changed(self) -> bool:
        return bool(self.a != self.b)


@dataclass(frozen=True)
class ManifestDiff:
    sections: list[SectionDiff]
    same_model: bool
    metadata_only: bool | None  # None: no tensor-data digest on one side
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> list[str]:
        return [s.name for s in self.sections if s.changed]

    @property
    def changed_dimensions(self) -> list[str]:
        return [s.name for s in self.sections if s.name in ATTRIBUTION and s.changed]

    @property
    def attribution_warning(self) -> str | None:
        dims = self.changed_dimensions
        if len(dims) <= 1:
            return None
        return (
            f"{len(dims)} things changed at once ({', '.join(dims)}): a regression cannot be "
            "attributed to one of them — change one variable at a time"
        )


def _files(m: Manifest, *roles: str) -> dict[str, str | None]:
    return {f.path: f.sha256 for f in m.files if f.role in roles}


def _weights(m: Manifest) -> Any:
    if m.gguf is not None and m.gguf.tensor_data_sha256:
        return {"tensor_data_sha256": m.gguf.tensor_data_sha256}
    return _files(m, "weights")


def _tokenizer(m: Manifest) -> dict[str, Any]:
    return {
        "chat_template_sha256": m.architecture.chat_template_sha256,
        "gguf_tokenizer_sha256": m.gguf.tokenizer_sha256 if m.gguf else None,
        "files": _files(m, "tokenizer", "chat_template"),
    }


def _quantization(m: Manifest) -> Any:
    q = m.quantization
    if q is None:
        return None
    return {
        "nominal_file_type": q.nominal_file_type,
        "bits_per_weight": q.bits_per_weight,
        "tensor_types": {k: v.tensors for k, v in q.tensor_types.items()},
        "recipe": q.recipe.model_dump() if q.recipe else None,
    }


def diff_manifests(a: Manifest, b: Manifest) -> ManifestDiff:
    sections = [
        SectionDiff(
            "identity",
            {"model_id": a.model_id, "base_model": a.base_model, "format": a.format},
            {"model_id": b.model_id, "base_model": b.base_model, "format": b.format},
        ),
        SectionDiff("source", a.source, b.source),
        SectionDiff("license", a.license.id, b.license.id),
        SectionDiff("parameters", a.parameters.model_dump(), b.parameters.model_dump()),
        SectionDiff("weights", _weights(a), _weights(b)),
        SectionDiff("quantization", _quantization(a), _quantization(b)),
        SectionDiff("tokenizer/template", _tokenizer(a), _tokenizer(b)),
        SectionDiff("config", _files(a, "config"), _files(b, "config")),
        SectionDiff("runtime", a.runtime.model_dump(), b.runtime.model_dump()),
        SectionDiff(
            "files", {f.path: f.sha256 for f in a.files}, {f.path: f.sha256 for f in b.files}
        ),
    ]
    notes = []
    same_model = a.model_id == b.model_id
    if not same_model:
        notes.append(
            f"different models ({a.model_id} vs {b.model_id}): the sections below differ by "
            "construction, not by a change to one build"
        )
    metadata_only = None
    ta = a.gguf.tensor_data_sha256 if a.gguf else None
    tb = b.gguf.tensor_data_sha256 if b.gguf else None
    if ta and tb:
        files_differ = {f.sha256 for f in a.files} != {f.sha256 for f in b.files}
        metadata_only = ta == tb and files_differ
        if metadata_only:
            notes.append("metadata only: tensor data identical")
    return ManifestDiff(sections, same_model, metadata_only, notes)
