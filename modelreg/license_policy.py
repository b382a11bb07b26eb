"""Licenses as a policy: each license classified, and a policy that allows, warns on or denies
each class (or one license) with the reason.

SPDX ids are classified from the ScanCode LicenseDB index that the ``license-expression``
package ships (its ``category`` per license: Permissive, Copyleft, Source-available, …; it
also knows the deprecated ids the Hub still uses, such as ``gpl-3.0``). The model licenses of
the Hub that are not SPDX ids — Gemma, Llama, Qwen, the OpenRAIL family, research-only
licenses — are classified by the reviewed table ``MODEL_LICENSES`` below. A license neither
knows is ``unknown``, never guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Literal


class LicenseClass(StrEnum):
    PERMISSIVE = "permissive"
    COPYLEFT = "copyleft"
    NON_COMMERCIAL = "non-commercial"
    RESTRICTED = "restricted"  # use-based restrictions, acceptable-use policies, user caps
    UNKNOWN = "unknown"


Decision = Literal["allow", "warn", "deny"]
# The stricter of two classes, for SPDX expressions with AND (both apply).
_STRICTNESS = [
    LicenseClass.PERMISSIVE,
    LicenseClass.COPYLEFT,
    LicenseClass.RESTRICTED,
    LicenseClass.NON_COMMERCIAL,
    LicenseClass.UNKNOWN,
]

# Hub license ids that are not SPDX ids (or that SPDX classifies without the model's terms),
# reviewed against each license's text: what a deployer must know before serving the model.
MODEL_LICENSES: dict[str, tuple[LicenseClass, str]] = {
    "gemma": (LicenseClass.RESTRICTED, "Gemma Terms of Use: prohibited-use policy"),
    "llama2": (LicenseClass.RESTRICTED, "Llama 2 Community License: AUP, 700M MAU cap"),
    "llama3": (LicenseClass.RESTRICTED, "Llama 3 Community License: AUP, 700M MAU cap"),
    "llama3.1": (LicenseClass.RESTRICTED, "Llama 3.1 Community License: AUP, 700M MAU cap"),
    "llama3.2": (LicenseClass.RESTRICTED, "Llama 3.2 Community License: AUP, 700M MAU cap"),
    "llama3.3": (LicenseClass.RESTRICTED, "Llama 3.3 Community License: AUP, 700M MAU cap"),
    "llama4": (LicenseClass.RESTRICTED, "Llama 4 Community License: AUP, 700M MAU cap"),
    "qwen": (LicenseClass.RESTRICTED, "Tongyi Qianwen License: 100M MAU cap"),
    "tongyi-qianwen": (LicenseClass.RESTRICTED, "Tongyi Qianwen License: 100M MAU cap"),
    "qwen-research": (LicenseClass.NON_COMMERCIAL, "Qwen Research License: research only"),
    "openrail": (LicenseClass.RESTRICTED, "OpenRAIL: use-based restrictions"),
    "openrail++": (LicenseClass.RESTRICTED, "OpenRAIL++-M: use-based restrictions"),
    "bigscience-openrail-m": (LicenseClass.RESTRICTED, "BigScience OpenRAIL-M: use restrictions"),
    "creativeml-openrail-m": (LicenseClass.RESTRICTED, "CreativeML OpenRAIL-M: use restrictions"),
    "bigcode-openrail-m": (LicenseClass.RESTRICTED, "BigCode OpenRAIL-M: use restrictions"),
    "bigscience-bloom-rail-1.0": (LicenseClass.RESTRICTED, "BLOOM RAIL 1.0: use restrictions"),
    "deepfloyd-if-license": (LicenseClass.NON_COMMERCIAL, "DeepFloyd IF License: research"),
    "fair-noncommercial-research-license": (LicenseClass.NON_COMMERCIAL, "FAIR NC research"),
    "h-research": (LicenseClass.NON_COMMERCIAL, "H Research License: research only"),
    "intel-research": (LicenseClass.NON_COMMERCIAL, "Intel Research Use License"),
    "apple-amlr": (LicenseClass.NON_COMMERCIAL, "Apple Machine Learning Research Model License"),
    "apple-ascl": (LicenseClass.PERMISSIVE, "Apple Sample Code License"),
    "c-uda": (LicenseClass.RESTRICTED, "Computational Use of Data Agreement"),
    "lgpl-lr": (LicenseClass.COPYLEFT, "LGPL for Linguistic Resources"),
    "openmdw-1.0": (LicenseClass.PERMISSIVE, "OpenMDW 1.0"),
    "bsd": (LicenseClass.PERMISSIVE, "a BSD license"),
    "gpl": (LicenseClass.COPYLEFT, "a GPL version"),
    "lgpl": (LicenseClass.COPYLEFT, "an LGPL version"),
    "gfdl": (LicenseClass.COPYLEFT, "GNU Free Documentation License"),
    "etalab-2.0": (LicenseClass.PERMISSIVE, "Etalab Open License 2.0"),
    # The Hub's spellings of the Open Data Commons licenses (SPDX: ODC-By-1.0, ODbL-1.0, …).
    "odc-by": (LicenseClass.PERMISSIVE, "ODC Attribution License"),
    "odbl": (LicenseClass.COPYLEFT, "ODC Open Database License: share-alike"),
    "pddl": (LicenseClass.PERMISSIVE, "ODC Public Domain Dedication and License"),
}
# ScanCode LicenseDB categories -> class.
_CATEGORIES = {
    "Permissive": LicenseClass.PERMISSIVE,
    "Public Domain": LicenseClass.PERMISSIVE,
    "Copyleft": LicenseClass.COPYLEFT,
    "Copyleft Limited": LicenseClass.COPYLEFT,
    "Source-available": LicenseClass.RESTRICTED,
    "Free Restricted": LicenseClass.RESTRICTED,
    "Proprietary Free": LicenseClass.RESTRICTED,
    "Commercial": LicenseClass.RESTRICTED,
    "Patent License": LicenseClass.RESTRICTED,
    "CLA": LicenseClass.RESTRICTED,
}
_NON_COMMERCIAL_RE = re.compile(r"(?:^|-)nc(?:-|$)|noncommercial|non-commercial", re.IGNORECASE)


@dataclass(frozen=True)
class Classification:
    license_class: LicenseClass
    source: str  # where the class comes from: "spdx (ScanCode LicenseDB: Permissive)", …


@dataclass(frozen=True)
class PolicyDecision:
    decision: Decision
    license_class: LicenseClass
    reason: str


@cache
def _spdx_categories() -> dict[str, tuple[str, str]]:
    """lower-cased SPDX id (current and deprecated) -> (SPDX id, ScanCode category)."""
    from importlib.resources import files

    index = json.loads(
        files("license_expression").joinpath("data/scancode-licensedb-index.json").read_text()
    )
    found: dict[str, tuple[str, str]] = {}
    for entry in index:
        key, category = entry.get("spdx_license_key"), entry.get("category")
        if not key or not category or entry.get("is_exception"):
            continue
        for spelling in [key, *(entry.get("other_spdx_license_keys") or [])]:
            if not spelling.startswith("LicenseRef-"):
                found.setdefault(spelling.lower(), (key, category))
    return found


def _classify_one(license_id: str) -> Classification:
    key = license_id.strip().lower()
    if key in MODEL_LICENSES:
        cls, what = MODEL_LICENSES[key]
        return Classification(cls, f"model license table: {what}")
    if not key or key in ("unknown", "other"):
        return Classification(LicenseClass.UNKNOWN, "no license stated")
    spdx = _spdx_categories().get(key)
    if spdx is None:
        return Classification(LicenseClass.UNKNOWN, "not an SPDX id or a known model license")
    spdx_id, category = spdx
    if _NON_COMMERCIAL_RE.search(spdx_id):
        return Classification(LicenseClass.NON_COMMERCIAL, f"SPDX {spdx_id}: non-commercial")
    cls = _CATEGORIES.get(category, LicenseClass.UNKNOWN)
    return Classification(cls, f"SPDX {spdx_id} (ScanCode LicenseDB: {category})")


def classify(license_id: str | None) -> Classification:
    """The class of a license id or a simple SPDX expression: ``A OR B`` is the least strict
    of its options (the deployer may choose), ``A AND B`` the strictest (both apply)."""
    if license_id is None:
        return Classification(LicenseClass.UNKNOWN, "no license stated")
    text = license_id.strip().strip("()")
    for operator, pick in ((" or ", min), (" and ", max)):
        parts = re.split(operator, text, flags=re.IGNORECASE)
        if len(parts) > 1:
            classes = [_classify_one(p.strip().strip("()")) for p in parts]
            chosen = pick(classes, key=lambda c: _STRICTNESS.index(c.license_class))
            return Classification(chosen.license_class, f"{license_id}: {chosen.source}")
    return _classify_one(text)


def policy(
    license_id: str | None, rules: Mapping[str, Decision], *, default: Decision = "allow"
) -> PolicyDecision:
    """What ``rules`` (``{class or license id: allow | warn | deny}``) decide for a license,
    with the reason. A rule naming the license itself wins over its class's; neither: the
    ``default``."""
    found = classify(license_id)
    shown = license_id or "no license"
    normalised = {k.strip().lower(): v for k, v in rules.items()}
    key = (license_id or "").strip().lower()
    if key and key in normalised:
        decision, by = normalised[key], f"the policy names {shown}"
    elif found.license_class.value in normalised:
        decision, by = (
            normalised[found.license_class.value],
            (f"the policy's rule for {found.license_class.value} licenses"),
        )
    else:
        decision, by = default, "the policy's default"
    return PolicyDecision(
        decision,
        found.license_class,
        f"license {shown} is {found.license_class.value} ({found.source}): {decision} by {by}",
    )


def license_change(previous: str | None, current: str | None) -> str | None:
    """A note when a model's license changed between two of its records (None when not)."""
    if (previous or "").strip().lower() == (current or "").strip().lower():
        return None
    before, after = classify(previous), classify(current)
    return (
        f"license changed from {previous or 'none'} ({before.license_class.value}) to "
        f"{current or 'none'} ({after.license_class.value}) since the model's previous record"
    )
