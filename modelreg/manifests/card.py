"""Render the model-card section a publisher needs, from a record's facts (never guessed:
what the record does not know is written as unknown, not filled in)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from modelreg.schemas.manifest import Count, Manifest
from modelreg.textsafe import for_markdown as md

_FULL_PRECISION = {"F32", "F16", "BF16", "F64"}


def is_quantized(manifest: Manifest) -> bool:
    """Is the artifact stored below full precision (GGUF quant types, int8 Neuron modules)?"""
    quant = manifest.quantization
    if quant is None:
        return manifest.neuron is not None and bool(manifest.neuron.quantized)
    if quant.nominal_file_type:
        return quant.nominal_file_type.upper() not in _FULL_PRECISION
    return quant.bits_per_weight is not None and quant.bits_per_weight < 15.9


@dataclass(frozen=True)
class VerifiedOn:
    target: str
    at: datetime
    host: str
    runtime: dict[str, str]


def _yaml_scalar(value: object) -> str:
    import json

    return json.dumps(value) if isinstance(value, str) else str(value)


def _count(c: Count) -> str:
    return "unknown" if c.value is None else f"{c.value:,}"


def front_matter(manifest: Manifest) -> list[str]:
    meta: dict[str, object] = {}
    if manifest.license.id:
        meta["license"] = manifest.license.id
    if manifest.base_model:
        meta["base_model"] = manifest.base_model
        if is_quantized(manifest):
            meta["base_model_relation"] = "quantized"
    if manifest.model_id:
        meta["model_name"] = manifest.model_id.split("/", 1)[1]
    ledger = manifest.parameters
    if ledger.total.value is not None:
        meta["total_parameters"] = ledger.total.value
    if ledger.active.value is not None and ledger.active.value != ledger.total.value:
        meta["active_parameters"] = ledger.active.value
    if ledger.effective.value is not None:
        meta["effective_parameters"] = ledger.effective.value
        meta["effective_parameters_condition"] = ledger.effective.provenance.removeprefix(
            "declared:"
        )
    if manifest.architecture.context_length:
        meta["context_length"] = manifest.architecture.context_length
    return ["---", *(f"{k}: {_yaml_scalar(v)}" for k, v in meta.items()), "---"]


def render_card(manifest: Manifest, record_id: str, verified: list[VerifiedOn]) -> str:
    """The card's Markdown. Every string that came from the artifact, a card, a target file or a
    flag goes through ``for_markdown`` (``md``), so a license or a file name cannot add a row, a
    heading, raw HTML, a link or a comment; such strings are never put in code spans, where
    escapes do not work. The record id and digests are the registry's own hex."""
    m = manifest
    lines = [*front_matter(m), "", f"# {md(m.model_id or 'unknown model')}", ""]
    lines += [
        f"## Artifact record `{record_id}` (modelreg)",
        "",
        "| fact | value |",
        "|---|---|",
        f"| model id | {md(m.model_id or 'unknown')} |",
        f"| source pin | {md(m.source or 'unknown')} |",
        f"| license | {md(m.license.id or 'unknown')} (from {md(m.license.source)}) |",
        f"| base model | {md(m.base_model or 'unknown')} |",
        f"| format / runtime | {md(m.format)} / {md(m.runtime.runtime)} |",
        "",
        "### Parameters",
        "",
        "| | count | provenance |",
        "|---|---|---|",
    ]
    for name in ("total", "non_embedding", "active", "effective"):
        count: Count = getattr(m.parameters, name)
        lines.append(f"| {name.replace('_', '-')} | {_count(count)} | {md(count.provenance)} |")
    q = m.quantization
    if q is not None:
        bpw = f"{q.bits_per_weight:.2f}" if q.bits_per_weight is not None else "unknown"
        lines += [
            "",
            "### Quantization",
            "",
            f"Nominal type **{md(q.nominal_file_type or 'unknown')}**, "
            f"**{bpw} real bits per weight** over all tensors.",
            "",
            "| tensor type | tensors | parameters | bits/weight |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {md(name)} | {s.tensors} | {s.params:,} | {s.bits_per_weight or 'unknown'} |"
            for name, s in q.tensor_types.items()
        ]
        if q.recipe:
            recipe = ", ".join(f"{k}: {md(str(v))}" for k, v in q.recipe.model_dump().items() if v)
            lines += ["", f"Recipe: {recipe}"]
    lines += ["", "### Files", "", "| file | bytes | sha256 |", "|---|---|---|"]
    lines += [
        f"| {md(f.path)} | {f.bytes if f.bytes is not None else 'unknown'} | "
        f"`{f.sha256 or 'unknown'}` |"
        for f in m.files
    ]
    lines += ["", "### Verified on", ""]
    if not verified:
        lines.append("Not verified on any target yet.")
    else:
        lines += ["| target | verified | host | runtime |", "|---|---|---|---|"]
        from modelreg.fingerprint import summary

        for v in verified:
            # One line, no local paths: the full fingerprint (library paths on the verifying
            # host) stays in the registry (`modelreg show --runtime`).
            runtime = md(summary(v.runtime))
            lines.append(
                f"| {md(v.target)} | {v.at:%Y-%m-%d %H:%M} UTC | {md(v.host)} | {runtime} |"
            )
    return "\n".join(lines) + "\n"
