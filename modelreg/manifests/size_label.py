"""Size labels ("270M", "30B-A3B", "26B-A4B", "E2B", "8x7B") checked against the ledger.

A label is a name, not a fact: the number before ``A`` is checked against total parameters,
``A…`` against active ones, and ``E…`` against *declared effective* parameters — never read as
active (Gemma 3n "E2B" loads more than 5B parameters). ``NxM`` (Mixtral "8x7B") names the
expert count and the size of one expert-model; shared attention is counted once, so the total
is checked only as at most N×M.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from modelreg.schemas.manifest import Count, LabelCheck, LabelFinding, ParameterLedger

DEFAULT_TOLERANCE = 0.10  # also the schema default in LabelCheck
# No "K": "4k" / "128k" in model names are context lengths, not sizes.
_UNITS = {"M": 10**6, "B": 10**9, "T": 10**12}
# Bounded digit runs: a label is "480B" or "1.5T"; "9…9B" with 400 digits is no size (and its
# float would be infinite).
_NUM = r"(\d{1,6}(?:\.\d{1,6})?)([MBT])"
_LABEL_RE = re.compile(
    rf"(?<![A-Za-z0-9.])(?:(?P<experts>\d{{1,4}})x{_NUM}|E{_NUM}|{_NUM}(?:-A{_NUM})?)(?![A-Za-z0-9])",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class SizeLabel:
    raw: str
    total: int | None = None
    active: int | None = None
    effective: int | None = None
    experts: int | None = None
    per_expert: int | None = None
    # claim -> (unit, decimals) as written: "3B" is (10**9, 0), "0.5B" is (10**9, 1)
    precision: dict[str, tuple[int, int]] = field(default_factory=dict)

    def rounds_to_label(self, claim: str, value: int) -> bool:
        """Does ``value`` round to this label's number at the precision it is written in?"""
        labelled = getattr(self, claim)
        if claim not in self.precision or labelled is None:
            return False
        unit, decimals = self.precision[claim]
        return bool(round(value / unit, decimals) == round(labelled / unit, decimals))


def _value(number: str | None, unit: str | None) -> int | None:
    if number is None or unit is None:
        return None
    return round(float(number) * _UNITS[unit.upper()])


def _precision(number: str | None, unit: str | None) -> tuple[int, int] | None:
    if number is None or unit is None:
        return None
    return _UNITS[unit.upper()], len(number.partition(".")[2])


def parse_size_label(text: str) -> SizeLabel | None:
    """The first size label in ``text`` (a GGUF size_label or a model name), if any."""
    for match in _LABEL_RE.finditer(text):
        g = match.groups()
        # groups: experts, per-expert (num, unit), effective (num, unit), total (num, unit),
        # active (num, unit)
        if g[0] is not None:
            return SizeLabel(match.group(0), experts=int(g[0]), per_expert=_value(g[1], g[2]))
        precision = {
            claim: p
            for claim, p in (
                ("effective", _precision(g[3], g[4])),
                ("total", _precision(g[5], g[6])),
                ("active", _precision(g[7], g[8])),
            )
            if p is not None
        }
        if g[3] is not None:
            return SizeLabel(match.group(0), effective=_value(g[3], g[4]), precision=precision)
        if g[5] is not None:
            return SizeLabel(
                match.group(0),
                total=_value(g[5], g[6]),
                active=_value(g[7], g[8]),
                precision=precision,
            )
    return None


def _compare(label: SizeLabel, claim: str, count: Count, tolerance: float) -> LabelFinding:
    label_value = getattr(label, claim)
    if count.value is None:
        return LabelFinding(
            claim=claim,
            label_value=label_value,
            ledger_value=None,
            message=f"label claims {claim} ≈ {label_value:,} but {claim} parameters are unknown",
        )
    deviation = abs(count.value - label_value) / label_value
    within = deviation <= tolerance
    # A label is a rounded number: "A3B" for 3.3B active is honest, though 10% off.
    rounds = label.rounds_to_label(claim, count.value)
    if within:
        verdict = f"within {tolerance:.0%}"
    else:
        verdict = "rounds to the label" if rounds else f"beyond {tolerance:.0%}"
    return LabelFinding(
        claim=claim,
        label_value=label_value,
        ledger_value=count.value,
        deviation=round(deviation, 4),
        consistent=within or rounds,
        message=f"label {claim} {label_value:,} vs {count.value:,} ({count.provenance}): "
        f"{deviation:.1%}, {verdict}",
    )


def check_size_label(
    label: SizeLabel,
    source: str,
    ledger: ParameterLedger,
    *,
    expert_count: int | None = None,
    has_experts: bool | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> LabelCheck:
    """Every claim of ``label`` against the ledger. ``has_experts`` False (the tensors or the
    config show a dense model) contradicts a mixture-of-experts label ("26B-A4B", "8x7B")."""
    findings = []
    if label.total is not None:
        findings.append(_compare(label, "total", ledger.total, tolerance))
    if label.active is not None:
        findings.append(_compare(label, "active", ledger.active, tolerance))
    if label.effective is not None:
        if ledger.effective.value is None:
            findings.append(
                LabelFinding(
                    claim="effective",
                    label_value=label.effective,
                    ledger_value=None,
                    consistent=False,
                    message=f"label {label.raw!r} names effective parameters, which are never "
                    "computed: declare them with their source (and condition) or the record "
                    "stays on hold; 'E' is not 'A'",
                )
            )
        else:
            findings.append(_compare(label, "effective", ledger.effective, tolerance))
    if label.experts is not None and label.per_expert is not None:
        if expert_count is not None:
            ok = expert_count == label.experts
            findings.append(
                LabelFinding(
                    claim="experts",
                    label_value=label.experts,
                    ledger_value=expert_count,
                    consistent=ok,
                    message=f"label {label.raw!r} names {label.experts} experts; the artifact has "
                    f"{expert_count}",
                )
            )
        ceiling = label.experts * label.per_expert
        total = ledger.total.value
        ok_total = None if total is None else total <= ceiling * (1 + tolerance)
        findings.append(
            LabelFinding(
                claim="total",
                label_value=ceiling,
                ledger_value=total,
                consistent=ok_total,
                message=f"label {label.raw!r}: total {'unknown' if total is None else f'{total:,}'}"
                f" should be at most {label.experts}×{label.per_expert:,} "
                "(shared layers count once)",
            )
        )
    if has_experts is False and (label.active is not None or label.experts is not None):
        findings.append(
            LabelFinding(
                claim="experts",
                label_value=label.experts,
                ledger_value=0,
                consistent=False,
                message=f"label {label.raw!r} names a mixture of experts, but the artifact has "
                "no expert tensors: it is dense",
            )
        )
    return LabelCheck(label=label.raw, source=source, tolerance=tolerance, findings=findings)
