"""Outputs of the other commands: targets, diff, fit, export/import, cards, attest, suites,
the database checks."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from modelreg.schemas.output.base import UNIT_DESCRIPTION, Output, ProductionChangeOut, _Out


class TargetOut(_Out):
    name: str
    kind: str
    description: str
    memory_bytes: int | None
    neuron_cores: int
    hbm_bytes: int
    is_local: bool | None = Field(
        default=None,
        description="Whether the host that answered is one of the target's hosts (where its "
        "hardware checks can run): in `targets` only (None elsewhere). Shown only: no verdict "
        "depends on the host that asks.",
    )
    origin: str
    cpu_flags: list[str] | None
    runtime: dict[str, str]
    unit: dict[str, str] = Field(default_factory=dict, description=UNIT_DESCRIPTION)
    spec_sha256: str | None = Field(
        default=None,
        description="The stored definition's digest (None: built in): evidence records the "
        "definition it was produced under.",
    )


class TargetsOutput(Output):
    targets: list[TargetOut]


class DiffSection(_Out):
    changed: bool
    a: Any
    b: Any


class DiffOutput(Output):
    a: str
    b: str
    same_model: bool
    metadata_only: bool | None
    changed: list[str]
    changed_dimensions: list[str]
    attribution_warning: str | None
    notes: list[str]
    sections: dict[str, DiffSection]
    metadata_keys: list[str] | None = Field(
        default=None,
        description="GGUF: the metadata keys added, removed or with another value from A to B "
        "(e.g. general.name, tokenizer.chat_template); null when a side is not GGUF or was "
        "recorded without per-key digests.",
    )


class Sizes(_Out):
    bytes: int | None
    GB: float | None
    GiB: float | None


class FitLine(_Out):
    key: str = Field(description="Stable name: weights, kv_cache, overhead, total, budget, …")
    name: str
    sizes: Sizes
    note: str = ""


class FitWhatIf(_Out):
    """``fit --bits`` / ``--quant``: the weights line is this, not the artifact's tensors."""

    bits: float = Field(description="Bits per weight asked (for --quant: its type's width).")
    quant: str | None = Field(description="The llama.cpp type asked with --quant.")
    parameters: int = Field(description="The ledger's total parameters weighed.")
    parameters_provenance: str
    weights: Sizes = Field(description="parameters × bits ÷ 8.")
    recorded_weights: Sizes = Field(description="The artifact's own tensor bytes (if known).")


class FitOutput(Output):
    record: str
    target: str
    kind: Literal["cpu", "neuron", "compile-host"]
    verdict: str = Field(description="fits, does not fit, incomplete or unknown.")
    fits: bool | None
    reasons: list[str]
    lines: list[FitLine]
    detail: dict[str, Any]
    what_if: FitWhatIf | None = Field(
        default=None,
        description="Weights at another width from the parameter ledger (--bits / --quant): "
        "a what-if, not the artifact.",
    )


class ExportOutput(Output):
    path: str | None
    rows: int
    sha256: str


class ImportOutput(Output):
    path: str
    sha256: str
    counts: dict[str, int] = Field(description="Rows imported, per kind.")
    skipped: dict[str, int] = Field(
        default_factory=dict,
        description="Rows of the file not imported, per kind: shared target definitions "
        "without --with-targets (they decide which keys a target trusts).",
    )


class CardFinding(_Out):
    severity: str
    field: str
    message: str
    expected: Any = None
    found: Any = None
    line: int | None = Field(default=None, description="The card line of the claim.")
    quote: str | None = Field(default=None, description="That line, as the card has it.")


class CardClaimOut(_Out):
    kind: str = Field(description="quantization, bits_per_weight, bits, context_length, …")
    value: str | int | float
    line: int = Field(description="The card line (0: the front matter).")
    quote: str
    where: Literal["front matter", "title", "label", "table", "sentence"]


class CardValidateOutput(Output):
    card: str
    record_id: str | None
    clean: bool
    checked: bool = Field(
        description="The claims were checked against a record (false: nothing to check "
        "them against; only the card's own consistency was)."
    )
    missing: list[str]
    held: str | None = Field(default=None, description="The hold applied (only with --hold).")
    findings: list[CardFinding]
    claims: list[CardClaimOut] = Field(description="The claims read from the card's body.")


class CardRenderOutput(Output):
    record_id: str
    path: str | None
    text: str


class AttestOutput(Output):
    """The signed statement of a record's latest signed run on a target, for an auditor."""

    record_id: str
    target: str
    run_id: str
    signed_by: str | None
    verified: bool = Field(description="The signature verifies with a key the target trusts.")
    problem: str | None = Field(default=None, description="Why it does not vouch for the run.")
    evidence_matches: bool = Field(
        description="The stored evidence hashes to the digests the statement signs."
    )
    statement: dict[str, Any]
    envelope: dict[str, Any]


class SuiteOutput(Output):
    model_id: str | None
    action: Literal["attach", "detach", "check"]
    name: str | None
    sha256: str | None
    cases: int
    subsets: list[str]
    message: str
    changes: list[str] = Field(
        default_factory=list, description="What changed from the version attached before."
    )
    weakens: list[str] = Field(
        default_factory=list,
        description="The changes that weaken the gate: a record that failed the earlier "
        "version needs a releaser's acceptance of its later pass.",
    )
    production_affected: list[ProductionChangeOut] = Field(
        default_factory=list,
        description="The production entries of the model whose verdict the change changes "
        "(made stale or failing, or deployable again), each with the step that re-verifies it.",
    )
    dry_run: bool = Field(
        default=False,
        description="True: nothing was written (--dry-run); this is what it would do.",
    )


class SuiteCaseOutput(Output):
    suite: str
    run_id: str
    added: list[str]
    sha256: str
    message: str
    production_affected: list[ProductionChangeOut] = Field(
        default_factory=list,
        description="The file changes no verdict by itself: the production entries that "
        "attaching it (suite attach, the step in next_steps) to the models running its previous "
        "version would make stale or failing, each with the step that re-verifies it.",
    )
    attached_to: list[str] = Field(
        default_factory=list,
        description="The models whose attached suite is this file's previous version.",
    )
    dry_run: bool = Field(default=False, description="True: the file was not written (--dry-run).")


class DbOutput(Output):
    url: str
    revision_before: str | None
    revision: str
    changed: bool


class BadValueOut(_Out):
    table: str
    key: str = Field(description="The row's primary key ('/'-joined).")
    column: str
    why: str


class DbCheckOutput(Output):
    """Stored values that cannot be read back (from before the storage boundary)."""

    bad: list[BadValueOut]
    quarantined: bool = Field(description="Each was made readable (db check --quarantine).")
    verdicts_drifted: list[str] = Field(
        default_factory=list,
        description="Stored verdicts a fresh derivation from the rows disagrees with (rows "
        "written around modelreg); --quarantine derives them again.",
    )
    message: str
