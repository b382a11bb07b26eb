"""Render the model-card section a publisher needs, from a record's facts (never guessed:
what the record does not know is written as unknown, not filled in)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

# is_quantized is decided where provenance is (validators/card.py imports it from here).
from modelreg.manifests.provenance import is_quantized as is_quantized
from modelreg.schemas.manifest import Count, Manifest
from modelreg.textsafe import for_markdown as md


@dataclass(frozen=True)
class VerifiedOn:
    target: str
    at: datetime
    host: str
    runtime: dict[str, str]


@dataclass(frozen=True)
class ProductionOn:
    """Where the record is production, with the approval it was promoted with."""

    target: str
    since: datetime
    owner: str | None = None
    limitations: tuple[str, ...] = ()
    retest_by: date | None = None
    retest_overdue: bool = False
    # False: promoted there before, something else is production there now.
    now: bool = True


def _yaml_scalar(value: object) -> str:
    import json

    return json.dumps(value) if isinstance(value, str) else str(value)


def _base_model(m: Manifest) -> str:
    if m.base_model is None:
        return "unknown"
    return f"{m.base_model} at {m.base_model_revision or 'an unknown revision'}"


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


def render_card(
    manifest: Manifest,
    record_id: str,
    verified: list[VerifiedOn],
    production: Sequence[ProductionOn] = (),
) -> str:
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
        f"| base model | {md(_base_model(m))} |",
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
    lines += _production_lines(production)
    return "\n".join(lines) + "\n"


def _production_lines(production: Sequence[ProductionOn]) -> list[str]:
    """Where it is production, who answers for it, its known limitations and when it must be
    tested again (an overdue re-test says so); then the same for targets it was promoted to
    before."""
    lines: list[str] = []
    for now, title, since in (
        (True, "In production", "since"),
        (False, "Approved before (not production now)", "promoted"),
    ):
        these = [p for p in production if p.now is now]
        if not these:
            continue
        lines += [
            "",
            f"### {title}",
            "",
            f"| target | {since} | owner | re-test by |",
            "|---|---|---|---|",
        ]
        for p in these:
            due = "not set" if p.retest_by is None else p.retest_by.isoformat()
            if p.retest_overdue:
                due += " (**overdue**)"
            owner = md(p.owner) if p.owner else "not named"
            lines.append(f"| {md(p.target)} | {p.since:%Y-%m-%d %H:%M} UTC | {owner} | {due} |")
        for p in these:
            if p.limitations:
                lines += ["", f"Known limitations on {md(p.target)}:", ""]
                lines += [f"- {md(text)}" for text in p.limitations]
    return lines
