"""Model-card validator: the claims a card publishes, checked against the record's facts.

The YAML front matter is found where huggingface_hub finds it and read as plain data (no
anchors or aliases: ``modelreg.safeyaml``), offline, then given to huggingface_hub's
``ModelCardData`` — what it cannot parse (a ``model-index`` without a task) the Hub rejects
too. Besides the Hub's own fields (``license``, ``base_model``, ``base_model_relation``,
``model_name``, ``language``) modelreg reads these optional claims: ``total_parameters``,
``active_parameters``, ``effective_parameters`` with ``effective_parameters_condition``,
``context_length`` and ``quantization``. Size labels are read from ``model_name`` and the
first heading, with the same rules as the record's size-label check. The body's claims —
quant names, bits per weight, N-bit, context and sequence length, parameter counts, license,
base model, a Neuron build's TP degree and batch size — are read by
``manifests.card_claims`` (in English and Korean) and each finding quotes the line it came
from; a body in another language is said to be unchecked, never "no findings".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from modelreg.errors import InvalidInput
from modelreg.manifests.card import is_quantized
from modelreg.manifests.card_claims import Claim, read_claims
from modelreg.manifests.card_language import card_language
from modelreg.manifests.hf import read_card_parts
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
    line: int | None = None  # the card line the claim is on (None: the card as a whole)
    quote: str | None = None  # that line


@dataclass
class CardReport:
    path: str
    findings: list[Finding] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # required facts the card does not state
    claims: list[Claim] = field(default_factory=list)  # what the card claims
    checked: bool = False  # against a record
    language: str | None = None  # of the body's prose (card_language), e.g. "en", "ko"

    def add(
        self,
        severity: Severity,
        field_name: str,
        message: str,
        expected: Any = None,
        found: Any = None,
        claim: Claim | None = None,
    ) -> None:
        if claim is not None:
            where = f"line {claim.line}" if claim.line else "front matter"
            message = f"{message} ({where}: {claim.quote})"
        line, quote = (claim.line or None, claim.quote) if claim else (None, None)
        self.findings.append(Finding(severity, field_name, message, expected, found, line, quote))

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
    meta, body, first_line = read_card_parts(path)
    report = CardReport(str(path), checked=manifest is not None)
    if not meta:
        report.add("error", "front matter", "the card has no YAML front matter")
    _hub_metadata(meta, report)

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
    report.claims = _front_matter_claims(meta) + read_claims(body, first_line)
    language = card_language(body)
    report.language = language.code
    if not language.readable:
        # No claims read is not "no findings": the body says things nobody checked.
        report.add(
            "warning",
            "card language",
            f"claims not checked: language {language.name} ({language.code}: "
            f"{language.evidence}) — modelreg reads a card's claims in English and Korean; "
            "only its front matter was checked",
            found=language.code,
        )
    if manifest is not None:
        _check_body_claims(report.claims, manifest, report)
    return report


_RELATIONS = ("adapter", "merge", "quantized", "finetune")


def _hub_metadata(meta: dict[str, Any], report: CardReport) -> None:
    """What huggingface_hub's own model (``ModelCardData``) and the Hub refuse."""
    from huggingface_hub import ModelCardData

    try:
        ModelCardData(**{k: v for k, v in meta.items() if isinstance(k, str)})
    except (ValueError, TypeError) as e:
        reason = str(e).split(". Pass `ignore_metadata_errors")[0][:300]
        report.add("error", "front matter", f"the Hub would reject the metadata: {reason}")
    relation = meta.get("base_model_relation")
    if relation is not None and relation not in _RELATIONS:
        report.add(
            "error",
            "base_model_relation",
            f"{str(relation)[:60]!r} is not one the Hub accepts: {', '.join(_RELATIONS)}",
            found=relation,
        )
    language = meta.get("language")
    languages = language if isinstance(language, list) else [language]
    if language is not None and not all(
        isinstance(x, str) and re.fullmatch(r"[a-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*", x)
        for x in languages
    ):
        report.add(
            "error", "language", "language must be ISO 639 codes (en, fr, zh-Hans…)", found=language
        )


def _front_matter_claims(meta: dict[str, Any]) -> list[Claim]:
    claims = []
    for key in ("quantization", "quantization_type", "quant_type"):
        value = meta.get(key)
        if isinstance(value, str) and value.strip():
            from modelreg.manifests.card_claims import QUANT_RE

            for q in QUANT_RE.finditer(value):
                quote = f"{key}: {value.strip()[:100]}"
                claims.append(Claim("quantization", q.group(1).upper(), 0, quote, "front matter"))
    return claims


# A card's decimal bits-per-weight figure is a rounded or nominal one (llama.cpp's tables say
# 4.5 for Q4_0's 4.5, 4.83 for a typical Q4_K_M): farther than this from the record's real
# figure, it is another build.
BPW_TOLERANCE = 0.3


def _check_body_claims(claims: list[Claim], manifest: Manifest, report: CardReport) -> None:
    """Each body (and front-matter quantization) claim against the record."""
    q = manifest.quantization
    nominal = (q.nominal_file_type or "").upper() if q is not None else ""
    bpw = q.bits_per_weight if q is not None else None
    neuron = manifest.neuron
    files = {Path(f.path).name.lower() for f in manifest.files}
    context = manifest.architecture.context_length
    table_quants: set[str] = set()
    ours_in_table = False

    def differs(kind: str, claim: Claim, expected: Any, text: str) -> None:
        report.add("error", kind, text, expected=expected, found=claim.value, claim=claim)

    for c in claims:
        if c.where == "table" and c.kind in ("quantization", "bits_per_weight"):
            if c.kind == "quantization":
                table_quants.add(str(c.value))
            if not any(name in cell.lower() for cell in c.row for name in files):
                continue  # a row of another file of the repo
            ours_in_table = True
        if c.kind == "quantization":
            if nominal and c.value != nominal:
                differs("quantization", c, nominal, f"card says {c.value}, the record is {nominal}")
            elif not nominal and manifest.format != "gguf":
                differs(
                    "quantization",
                    c,
                    None,
                    f"card says {c.value} (a GGUF type), the record is a {manifest.format} "
                    "artifact",
                )
        elif c.kind == "bits_per_weight" or (c.kind == "bits" and float(c.value) % 1):
            if bpw is not None and abs(float(c.value) - bpw) > BPW_TOLERANCE:
                differs(
                    "bits_per_weight",
                    c,
                    round(bpw, 2),
                    f"card claims {float(c.value):g} bits per weight, the record has {bpw:.2f}",
                )
        elif c.kind == "bits":
            _check_nominal_bits(c, nominal, bpw, neuron, report)
        elif c.kind == "context_length" or (c.kind == "sequence_length" and neuron is None):
            if context is not None and int(c.value) > context:
                differs(
                    "context_length",
                    c,
                    context,
                    f"card claims {int(c.value):,} tokens, the artifact's trained context is "
                    f"{context:,}",
                )
        elif c.kind in ("sequence_length", "tp_degree", "batch_size") and neuron is not None:
            actual = {
                "sequence_length": neuron.seq_len,
                "tp_degree": neuron.tp_degree,
                "batch_size": neuron.batch_size,
            }[c.kind]
            if actual is not None and int(c.value) != actual:
                what = c.kind.replace("_", " ").replace("tp", "tensor-parallel")
                differs(c.kind, c, actual, f"card says {what} {c.value}, the bundle's is {actual}")
        elif c.kind in ("parameters", "active_parameters"):
            count = (
                manifest.parameters.total if c.kind == "parameters" else manifest.parameters.active
            )
            if count.value and abs(int(c.value) - count.value) / count.value > 0.10:
                differs(
                    c.kind,
                    c,
                    count.value,
                    f"card claims {int(c.value):,}, the record has {count.value:,} "
                    f"({count.provenance})",
                )
        elif c.kind == "license":
            if manifest.license.id and c.value != manifest.license.id:
                differs(
                    "license",
                    c,
                    manifest.license.id,
                    f"card says {c.value!r}, the record says {manifest.license.id!r}",
                )
        elif c.kind == "base_model":
            base = manifest.base_model
            if base and str(c.value).lower() != base.lower():
                differs("base_model", c, base, f"card names {c.value}, the record's base is {base}")
    if table_quants and nominal and not ours_in_table and nominal not in table_quants:
        report.add(
            "warning",
            "quantization",
            f"the card's quant table lists {', '.join(sorted(table_quants))}, not the record's "
            f"{nominal} file",
            expected=nominal,
        )


def _check_nominal_bits(
    c: Claim, nominal: str, bpw: float | None, neuron: Any, report: CardReport
) -> None:
    """ "4-bit": the quant type's nominal width (Q4_K_M, IQ4_XS), 16 for F16/BF16, a Neuron
    build's int8, or the whole part of the real bits per weight."""
    bits = int(float(c.value))
    widths: set[int] = set()
    if nominal:
        digit = re.search(r"\d+", nominal)
        widths.add(int(digit.group(0)) if digit else 0)
    if neuron is not None and getattr(neuron, "quantization_dtype", None):
        digit = re.search(r"\d+", str(neuron.quantization_dtype))
        if digit:
            widths.add(int(digit.group(0)))
    if bpw is not None:
        widths.add(int(bpw))
    if widths and bits not in widths:
        shown = nominal or (neuron.quantization_dtype if neuron is not None else None)
        report.add(
            "error",
            "bits",
            f"card says {bits}-bit, the record is {shown or 'not that'}"
            + (f" ({bpw:.2f} bits per weight)" if bpw is not None else ""),
            expected=sorted(widths),
            found=bits,
            claim=c,
        )


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
