"""What a manifest does not know, and the hold that follows from it.

Unknown is unknown: a missing fact is recorded as unknown and puts the record on hold, with a
reason that says what would settle it. Derived from the manifest alone, so a hand-written
reference manifest and one built by ``add`` follow the same rules.
"""

from __future__ import annotations

from modelreg.manifests.size_label import check_size_label, parse_size_label
from modelreg.schemas.manifest import LabelCheck, Manifest


def label_check(manifest: Manifest) -> LabelCheck | None:
    """Check the artifact's own size label, else the one in its model id."""
    arch = manifest.architecture
    own_source = (
        "gguf:general.size_label"
        if arch.source == "gguf metadata"
        else f"size_label ({arch.source})"
    )
    candidates = [
        (arch.size_label, own_source),
        (manifest.model_id.split("/", 1)[1] if manifest.model_id else None, "model_id"),
    ]
    for text, source in candidates:
        label = parse_size_label(text) if text else None
        if label is not None:
            return check_size_label(
                label, source, manifest.parameters, expert_count=manifest.architecture.expert_count
            )
    return None


def hold_reasons(manifest: Manifest) -> list[str]:
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
    check = manifest.label_check
    if check is not None:
        reasons += [f"size label {check.label!r} ({check.source}): {p}" for p in check.problems]
    return reasons


def finalize(manifest: Manifest) -> Manifest:
    """The manifest with its size-label check and hold reasons filled in."""
    checked = manifest.model_copy(update={"label_check": label_check(manifest)})
    return checked.model_copy(update={"hold_reasons": hold_reasons(checked)})
