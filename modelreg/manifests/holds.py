"""What a manifest does not know, and the hold that follows from it.

Unknown is unknown: a missing fact is recorded as unknown and puts the record on hold, with a
reason that says what would settle it. Derived from the manifest alone, so a hand-written
reference manifest and one built by ``add`` follow the same rules.
"""

from __future__ import annotations

from modelreg.families import family_contradiction
from modelreg.manifests.hf import CARD_FILE
from modelreg.manifests.neuron_dtypes import dtype_support_problems
from modelreg.manifests.provenance import provenance_hold_reasons
from modelreg.manifests.recipe import recipe_problems
from modelreg.manifests.size_label import check_size_label, parse_size_label
from modelreg.safety.names import name_contradictions
from modelreg.schemas.manifest import Finding, LabelCheck, Manifest


def has_experts(manifest: Manifest) -> bool | None:
    """Does the artifact hold routed experts? Its expert count, else its tensors when they
    were read, else the parameter split of a config modelreg understood; None when nothing
    says (a config of an unknown family is not evidence of a dense model)."""
    if (manifest.architecture.expert_count or 0) > 0:
        return True
    quant = manifest.quantization
    if quant is not None and quant.groups:
        return "experts" in quant.groups
    groups = manifest.parameters.groups
    if groups is not None:
        return groups.counts.get("experts", 0) > 0
    return None


def label_checks(manifest: Manifest) -> list[LabelCheck]:
    """Every size label the artifact carries — its own (GGUF ``general.size_label``), its
    card's, its model id's — each checked against the ledger, in that order."""
    arch = manifest.architecture
    own_source = (
        "gguf:general.size_label"
        if arch.source == "gguf metadata"
        else f"size_label ({arch.source})"
    )
    candidates = [
        (arch.size_label, own_source),
        # The file's own name ("Llama 3.1 8B Instruct") may name a size too.
        (arch.name if arch.source == "gguf metadata" else None, "gguf:general.name"),
        (manifest.card_size_label, f"card:{CARD_FILE}"),
        (manifest.model_id.split("/", 1)[1] if manifest.model_id else None, "model_id"),
    ]
    experts = has_experts(manifest)
    checks = []
    for text, source in candidates:
        label = parse_size_label(text) if text else None
        if label is not None:
            checks.append(
                check_size_label(
                    label,
                    source,
                    manifest.parameters,
                    expert_count=arch.expert_count,
                    has_experts=experts,
                )
            )
    return checks


def identity_hold_reasons(manifest: Manifest) -> list[str]:
    """Where the artifact's names contradict its bytes: a size label the tensors do not have
    (``identity_mismatch``), a model id naming a family the architecture is not, and — not a
    contradiction but a gap — a label whose count is unknown."""
    reasons = []
    for check in manifest.label_checks:
        for finding in check.findings:
            if finding.consistent is True:
                continue
            prefix = "identity_mismatch: " if finding.consistent is False else ""
            reasons.append(
                f"{prefix}size label {check.label!r} ({check.source}): {finding.message}"
            )
    arch = manifest.architecture
    if manifest.model_id and arch.name and arch.source == "gguf metadata":
        for source, problem in name_contradictions(
            manifest.model_id, {"gguf:general.name": arch.name}
        ):
            reasons.append(f"identity_mismatch: {source}: {problem}")
    named = (
        family_contradiction(manifest.model_id, arch.architecture)
        if manifest.model_id and arch.architecture
        else None
    )
    if named:
        where = "gguf:general.architecture" if arch.source == "gguf metadata" else arch.source
        reasons.append(
            f"identity_mismatch: model id {manifest.model_id} names the {' / '.join(named)} "
            f"family, but the artifact's architecture is {arch.architecture} ({where})"
        )
    return reasons


def neuron_hold_reasons(manifest: Manifest) -> list[str]:
    """What a Neuron bundle does not state about its compile, and weight dtypes its stack
    does not support (modelreg/data/neuron_dtypes.json)."""
    facts = manifest.neuron
    if facts is None:
        return []
    reasons = []
    if facts.tp_degree is None:
        reasons.append(
            "tensor-parallel degree unknown: the bundle states none (neuron_config tp_degree, "
            "or TP in its server script / Dockerfile)"
        )
    if facts.seq_len is None and not facts.context_buckets:
        reasons.append("sequence length and context buckets unknown: the bundle states neither")
    if facts.compiler_version is None:
        reasons.append(
            "neuronx-cc version unknown: record `neuronx-cc --version` as compiler_version — "
            "evidence cannot expire on a compiler change nobody recorded"
        )
    if not facts.modules and facts.torch_dtype is None and facts.quantization_dtype is None:
        reasons.append("weight dtype unknown: the bundle states no torch_dtype and no modules")
    if facts.layout == "published" and facts.quantized is None and not facts.modules:
        reasons.append(
            "quantization unknown: a published bundle's config gives the checkpoint's dtype, "
            "not what was compiled"
        )
    embedding = facts.host_embedding
    if embedding is not None and embedding.scale is None:
        reasons.append(
            f"host embedding scale unknown: the server must multiply {embedding.file} rows "
            "by the model's embedding scale (√hidden_size for Gemma); declare it"
        )
    return reasons + dtype_support_problems(facts)


def finding_reason(finding: Finding) -> str:
    """A finding as a hold reason: ``code: file where: message (line N: text)``; a template
    that could not be audited is unknown, not unsafe (``fact_unknown``)."""
    place = finding.file + (f" {finding.where}" if finding.where else "")
    line = ""
    if finding.line is not None:
        line = f" (line {finding.line}" + (f": {finding.excerpt})" if finding.excerpt else ")")
    if finding.unknown:
        return f"safety unknown: {place}: {finding.message}{line}"
    return f"{finding.code}: {place}: {finding.message}{line}"


def scan_hold_reasons(manifest: Manifest) -> list[str]:
    """The holds of what the safety scans found, and of files a runtime would load that the
    record does not hold."""
    reasons = [finding_reason(f) for f in manifest.findings if f.holds]
    if manifest.unrecorded_files:
        reasons.append(
            "files a runtime would load are not part of the record: "
            + ", ".join(manifest.unrecorded_files)
            + " (remove them, or record them)"
        )
    return list(dict.fromkeys(reasons))


def hold_reasons(manifest: Manifest) -> list[str]:
    """Every hold, derived from the manifest alone: a builder records facts and findings, and
    calling this again after any later declaration (a base model, declared counts) can never
    drop one."""
    reasons = []
    if manifest.model_id is None:
        reasons.append("model id unknown: give --model-id org/name")
    if manifest.source is None:
        reasons.append("source unknown: give --source hf://org/name@<commit> (or pypi://, sha256:)")
    if manifest.license.id is None:
        reasons.append("license unknown: the artifact declares none; give --license")
    unhashed = [f.path for f in manifest.files if f.sha256 is None]
    if unhashed:
        reasons.append(f"sha256 unknown for {', '.join(unhashed)}")
    quant = manifest.quantization
    if quant is not None:
        unsized = sorted(name for name, stats in quant.tensor_types.items() if stats.bytes is None)
        if unsized:
            reasons.append(
                f"tensor types {', '.join(unsized)} are unknown to this gguf version: "
                "tensor bytes and bits per weight unknown"
            )
        if "experts" in quant.groups and manifest.parameters.active.value is None:
            reasons.append(
                "mixture-of-experts tensors present but expert_count / expert_used_count "
                "unknown: active parameters unknown"
            )
    reasons += neuron_hold_reasons(manifest)
    reasons += identity_hold_reasons(manifest)
    reasons += provenance_hold_reasons(manifest)
    reasons += recipe_problems(manifest)
    reasons += scan_hold_reasons(manifest)
    return reasons


def finalize(manifest: Manifest) -> Manifest:
    """The manifest with its size-label checks and hold reasons filled in."""
    checked = manifest.model_copy(update={"label_checks": label_checks(manifest)})
    return checked.model_copy(update={"hold_reasons": hold_reasons(checked)})
