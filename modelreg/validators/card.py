"""Model-card validator: the claims a card publishes, checked against the record's facts.

The YAML front matter is found where huggingface_hub finds it and read as plain data (no
anchors or aliases: ``modelreg.safeyaml``), offline. Besides the Hub's
own fields (``license``, ``base_model``, ``base_model_relation``, ``model_name``) modelreg reads
these optional claims: ``total_parameters``, ``active_parameters``, ``effective_parameters``
with ``effective_parameters_condition``, and ``context_length``. Size labels are read from
``model_name`` and the first heading, with the same rules as the record's size-label check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from modelreg.errors import InvalidInput
from modelreg.manifests.card import is_quantized
from modelreg.manifests.hf import read_card_front_matter
from modelreg.manifests.size_label import check_size_label, parse_size_label
from modelreg.schemas.licenses import KNOWN_LICENSES, license_id_problem
from modelreg.schemas.manifest import MODEL_ID_RE, Count, Manifest

Severity = Literal["error", "warning", "info"]
_HEADING_RE = re.compile(r"^#\s+(.+)$", re.MULTILINE)
# A backslash before ASCII punctuation is a Markdown escape (``card render`` writes them).
_MARKDOWN_ESCAPE_RE = re.compile(r"\\([!-/:-@\[-`{-~])")


@dataclass(frozen=True)
class Finding:
    severity: Severity
    field: str
    message: str
    expected: Any = None
    found: Any = None


@dataclass
class CardReport:
    path: str
    findings: list[Finding] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # required facts the card does not state

    def add(
        self,
        severity: Severity,
        field_name: str,
        message: str,
        expected: Any = None,
        found: Any = None,
    ) -> None:
        self.findings.append(Finding(severity, field_name, message, expected, found))

    def require(self, field_name: str, why: str, severity: Severity = "error") -> None:
        self.missing.append(field_name)
        self.add(severity, field_name, f"{field_name} missing: {why}")

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def hold_reason(self) -> str | None:
        if not self.missing:
            return None
        return f"model card {self.path} does not state: {', '.join(self.missing)}"


def _int(value: Any) -> int | None:
    """A count claimed in the front matter (an int, "1,234" or a size label); None when it is
    not one, or not a count at all (beyond 64 bits: a ratio against it would overflow)."""
    if isinstance(value, bool):
        return None
    number: int | None = None
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        label = parse_size_label(value.replace(" ", ""))
        if label is not None and label.total is not None and label.active is None:
            number = label.total
        else:
            try:
                number = int(value.replace(",", "").replace("_", ""))
            except ValueError:
                return None
    if number is None or not -(2**63) <= number < 2**63:
        return None
    return number


def validate_card(path: Path, manifest: Manifest | None = None) -> CardReport:
    """Check a card on its own, and against ``manifest`` when given."""
    meta, body = read_card_front_matter(path)
    report = CardReport(str(path))
    if not meta:
        report.add("error", "front matter", "the card has no YAML front matter")

    license_ = meta.get("license")
    if isinstance(license_, str) and license_.strip():
        # Newlines, markup or control characters are not a wrong license but a broken card.
        problem = license_id_problem(license_.strip())
        if problem:
            raise InvalidInput(f"{path}: front matter {problem}")
    if not isinstance(license_, str) or license_.strip().lower() in ("", "unknown"):
        report.require("license", "a card must state its license")
    else:
        license_ = license_.strip().lower()
        if license_ not in KNOWN_LICENSES:
            report.add(
                "error",
                "license",
                f"{license_!r} is not a known SPDX id or named license",
                found=license_,
            )
        elif license_ == "other" and not meta.get("license_name"):
            report.add("warning", "license", "license 'other' without license_name / license_link")
        if manifest is not None and manifest.license.id and license_ != manifest.license.id:
            report.add(
                "error",
                "license",
                f"card says {license_!r}, the record says "
                f"{manifest.license.id!r} (from {manifest.license.source})",
                expected=manifest.license.id,
                found=license_,
            )

    base = meta.get("base_model")
    bases = base if isinstance(base, list) else [base] if base is not None else []
    for b in bases:
        if not isinstance(b, str) or not MODEL_ID_RE.match(b):
            report.add("error", "base_model", f"{b!r} is not an exact org/name", found=b)
    quantized = manifest is not None and is_quantized(manifest)
    if manifest is not None and manifest.base_model and manifest.base_model not in bases:
        report.add(
            "error",
            "base_model",
            "the card's base model is not the record's",
            expected=manifest.base_model,
            found=base,
        )
    if quantized:
        # A card rendered from a record that does not know its base model cannot state it:
        # that is the record's gap, reported (and held with --hold), not the card's error.
        record_knows = manifest is None or manifest.base_model is not None
        if not bases:
            report.require(
                "base_model",
                "a quantized artifact must name the model it quantizes"
                + (
                    ""
                    if record_knows
                    else "; the record does not know it either — re-add it "
                    "with --base-model ORG/NAME"
                ),
                severity="error" if record_knows else "warning",
            )
        relation = meta.get("base_model_relation")
        if relation is None:
            report.require(
                "base_model_relation",
                "a quantized artifact must say 'quantized'",
                severity="error" if record_knows or bases else "warning",
            )
        elif relation != "quantized":
            report.add(
                "error",
                "base_model_relation",
                "the artifact is quantized",
                expected="quantized",
                found=relation,
            )

    _check_claims(meta, body, manifest, report)
    return report


def _check_claims(
    meta: dict[str, Any], body: str, manifest: Manifest | None, report: CardReport
) -> None:
    effective = _int(meta.get("effective_parameters"))
    if effective is not None and not meta.get("effective_parameters_condition"):
        report.add(
            "error",
            "effective_parameters",
            "effective parameters are declared without the condition they hold under "
            "(e.g. 'PLE caching and parameter skipping')",
        )
    if manifest is None:
        return
    ledger = manifest.parameters
    for key, count in (("total_parameters", ledger.total), ("active_parameters", ledger.active)):
        claim = _int(meta.get(key))
        if claim is None or count.value is None:
            continue
        if abs(claim - count.value) / count.value > 0.10:
            report.add(
                "error",
                key,
                f"card claims {claim:,}, the record has {count.value:,} ({count.provenance})",
                expected=count.value,
                found=claim,
            )
    if effective is not None and ledger.effective.value is None:
        report.add(
            "warning",
            "effective_parameters",
            "the card declares effective parameters the record does not carry; add them "
            "with --effective-params/--effective-source",
        )
    heading = _HEADING_RE.search(body)
    for source, text in (
        ("model_name", meta.get("model_name")),
        ("heading", _MARKDOWN_ESCAPE_RE.sub(r"\1", heading.group(1)) if heading else None),
    ):
        label = parse_size_label(text) if isinstance(text, str) else None
        if label is None:
            continue
        with_effective = (
            ledger.model_copy(
                update={"effective": Count(value=effective, provenance="declared:card")}
            )
            if effective is not None and ledger.effective.value is None
            else ledger
        )
        check = check_size_label(
            label,
            f"card:{source}",
            with_effective,
            expert_count=manifest.architecture.expert_count,
        )
        for finding in check.findings:
            if finding.consistent is False:
                report.add(
                    "error", source, finding.message, finding.ledger_value, finding.label_value
                )
        break
    claimed_context = _int(meta.get("context_length"))
    actual = manifest.architecture.context_length
    if claimed_context is not None and actual is not None and claimed_context > actual:
        report.add(
            "error",
            "context_length",
            f"card claims {claimed_context:,} tokens, the artifact's trained context is {actual:,}",
            expected=actual,
            found=claimed_context,
        )
