"""Why a record is not deployable: the codes and the reason a rule gives (``modelreg.rules``).

A leaf module: the rules give reasons, errors carry them, outputs show them; none of those
needs the others to say what a reason is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from modelreg.steps import Step


class ReasonCode(StrEnum):
    """Why a record is not deployable on a target."""

    FACT_UNKNOWN = "fact_unknown"  # the manifest does not know something that matters
    HELD = "held"
    RETIRED = "retired"
    TARGET_UNDEFINED = "target_undefined"
    NEVER_VERIFIED = "never_verified"
    CHECK_FAILED = "check_failed"
    CHECK_UNAVAILABLE = "check_unavailable"  # a required check could not run: never a pass
    STALE_RUNTIME = "stale_runtime"  # the runtime (packages, libraries, declared build) changed
    STALE_TARGET = "stale_target"  # the target's definition changed
    STALE_SUITE = "stale_suite"  # the golden suite in force changed
    UNTRUSTED_EVIDENCE = "untrusted_evidence"  # no run signed by a key the target trusts
    # The manifest's own holds with a code of their own (``hold_code``): the base model of a
    # quantized artifact is unknown; its identity facts contradict each other or the tensors;
    # its quantization recipe contradicts the tensors.
    PROVENANCE_UNKNOWN = "provenance_unknown"
    IDENTITY_MISMATCH = "identity_mismatch"
    RECIPE_MISMATCH = "recipe_mismatch"
    # A chat template that reaches Python internals or gates instructions on message text; a
    # pickle that imports what is not a tensor type (modelreg.safety).
    UNSAFE_TEMPLATE = "unsafe_template"
    UNSAFE_PICKLE = "unsafe_pickle"
    # A pass under a gate weakened after the record failed the gate's earlier version, not yet
    # accepted by a releaser (``promote --accept-relaxed-gate``).
    GATE_RELAXED_AFTER_FAILURE = "gate_relaxed_after_failure"
    # The target's license policy denies the record's license (``Target.license_policy``).
    LICENSE_DENIED = "license_denied"


# Reasons that mean "the evidence is out of date", as opposed to "the record is bad".
STALE_CODES = frozenset({ReasonCode.STALE_RUNTIME, ReasonCode.STALE_TARGET, ReasonCode.STALE_SUITE})
# A manifest hold reason that starts with one of these codes and ": " is reported with it;
# any other is ``fact_unknown``.
CODED_HOLDS = frozenset(
    {
        ReasonCode.PROVENANCE_UNKNOWN,
        ReasonCode.IDENTITY_MISMATCH,
        ReasonCode.RECIPE_MISMATCH,
        ReasonCode.UNSAFE_TEMPLATE,
        ReasonCode.UNSAFE_PICKLE,
    }
)
# Reasons that come from the record's state or facts, whatever the evidence says.
HOLD_CODES = frozenset({ReasonCode.FACT_UNKNOWN, ReasonCode.HELD, ReasonCode.RETIRED}) | CODED_HOLDS


def hold_code(reason: str) -> ReasonCode:
    """The code of one of a manifest's hold reasons (``CODED_HOLDS``: written "code: …")."""
    code, sep, _ = reason.partition(": ")
    return ReasonCode(code) if sep and code in CODED_HOLDS else ReasonCode.FACT_UNKNOWN


@dataclass(frozen=True, slots=True)
class Reason:
    code: ReasonCode
    message: str
    # What to do next (``modelreg.steps``), when something can be done.
    step: Step | None = None
    # Structured facts behind the reason, for the code that acts on it (a relaxed gate: the
    # terms it passed under and each change with its before/after values). Not compared.
    detail: Mapping[str, object] | None = field(default=None, compare=False)


__all__ = ["CODED_HOLDS", "HOLD_CODES", "STALE_CODES", "Reason", "ReasonCode", "hold_code"]
