"""What changed between two artifacts, section by section.

The discipline is one variable at a time: when more than one of {weights, quantization,
tokenizer/template, runtime} changed, a regression cannot be attributed, and ``diff`` and
``promote`` say so. For GGUF a tensor-data digest tells a metadata-only edit (a new chat
template) from new weights. The quantization is finer than one variable: each field of the
recipe (quantizer revision, scheme, group size, importance matrix, calibration set…) is one,
named with its old and new value. New tensor data from the same base model (id and revision
known on both sides) is the quantization's doing, not a second change to the weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from modelreg.license_policy import license_change
from modelreg.schemas.manifest import JUDGMENT_FIELDS, Manifest, QuantRecipe

# The dimensions a change is attributed to.
ATTRIBUTION = ("weights", "quantization", "tokenizer/template", "runtime")
# Recipe fields that describe the quantization run, each one variable; the section that
# holds them, apart from the tensors', so that the table says which of the two changed.
_RECIPE_FIELDS = tuple(QuantRecipe.model_fields)
_RECIPE_SECTION = "quantization recipe"


@dataclass(frozen=True)
class SectionDiff:
    name: str
    a: Any
    b: Any

    @property
    def changed(self) -> bool:
        return bool(self.a != self.b)


@dataclass(frozen=True)
class ManifestDiff:
    sections: list[SectionDiff]
    same_model: bool
    metadata_only: bool | None  # None: no tensor-data digest on one side
    notes: list[str] = field(default_factory=list)
    # The recipe fields that changed, when both sides record a recipe: the quantization's
    # variables. Empty: the quantization is one variable (or did not change).
    recipe_changes: list[str] = field(default_factory=list)
    # New tensor data from the same base model at the same revision, with the quantization
    # changed: the weights did not change independently of it.
    weights_follow_quantization: bool = False
    base_unknown: bool = False  # either side lacks its base model's revision
    # GGUF on both sides: the metadata keys added, removed or with another value (None: a side
    # is not GGUF or recorded no per-key digests).
    metadata_keys: list[str] | None = None

    @property
    def changed(self) -> list[str]:
        return [s.name for s in self.sections if s.changed]

    @property
    def changed_dimensions(self) -> list[str]:
        changed = set(self.changed)
        if _RECIPE_SECTION in changed:
            changed.add("quantization")  # the recipe is part of the quantization
        if self.weights_follow_quantization:
            changed.discard("weights")
        return [name for name in ATTRIBUTION if name in changed]

    @property
    def variables(self) -> list[str]:
        """What changed independently: the dimensions, with the quantization split into the
        recipe fields that changed."""
        found = []
        for dim in self.changed_dimensions:
            if dim == "quantization" and self.recipe_changes:
                found += [f"quantization recipe {name}" for name in self.recipe_changes]
            else:
                found.append(dim)
        return found

    @property
    def attribution_warning(self) -> str | None:
        variables = self.variables
        if len(variables) <= 1:
            return None
        warning = (
            f"{len(variables)} things changed at once ({', '.join(variables)}): a regression "
            "cannot be attributed to one of them — change one variable at a time"
        )
        quantization = any(v.startswith("quantization") for v in variables)
        if self.base_unknown and "weights" in variables and quantization:
            warning += (
                "; if the weights are only the quantization's doing, record the base model "
                "of both (--base-model org/name@<commit>)"
            )
        return warning


def _files(m: Manifest, *roles: str) -> dict[str, str | None]:
    return {f.path: f.sha256 for f in m.files if f.role in roles}


def _weights(m: Manifest) -> Any:
    if m.gguf is not None and m.gguf.tensor_data_sha256:
        return {"tensor_data_sha256": m.gguf.tensor_data_sha256}
    return _files(m, "weights")


def _tokenizer(m: Manifest) -> dict[str, Any]:
    return {
        "chat_template_sha256": m.architecture.chat_template_sha256,
        "gguf_tokenizer_sha256": m.gguf.tokenizer_sha256 if m.gguf else None,
        "files": _files(m, "tokenizer", "chat_template"),
    }


def _quantization(m: Manifest) -> Any:
    q = m.quantization
    if q is None:
        return None
    return {
        "nominal_file_type": q.nominal_file_type,
        "bits_per_weight": q.bits_per_weight,
        "tensor_types": {k: v.tensors for k, v in q.tensor_types.items()},
        "importance_matrix": q.importance_matrix.model_dump() if q.importance_matrix else None,
    }


def _recipe(m: Manifest) -> Any:
    q = m.quantization
    return q.recipe.model_dump() if q is not None and q.recipe is not None else None


def _golden(m: Manifest) -> list[dict[str, Any]]:
    return [g.model_dump() for g in m.golden_prompts]


# The manifest fields a section above (or a note) already compares.
_COMPARED = frozenset(
    {
        "model_id", "base_model", "base_model_revision", "format", "source", "license",
        "parameters", "quantization", "runtime", "files", "golden_prompts", "gguf",
    }
)  # fmt: skip


# Nested facts a section compares (the tokenizer/template section holds the template's).
_IN_A_SECTION = frozenset({"architecture.chat_template_sha256"})


def _other_facts(a: Manifest, b: Manifest) -> list[str]:
    """The facts (judgments left out) no section compares that differ: named when nothing
    else differs, so a diff never reads "same" everywhere for two identities."""
    left_out = _COMPARED | JUDGMENT_FIELDS
    da, db = a.model_dump(exclude=set(left_out)), b.model_dump(exclude=set(left_out))
    found = []
    for key in sorted(da.keys() | db.keys()):
        va, vb = da.get(key), db.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            found += [
                f"{key}.{k}"
                for k in sorted(va.keys() | vb.keys())
                if va.get(k) != vb.get(k) and f"{key}.{k}" not in _IN_A_SECTION
            ]
        elif va != vb:
            found.append(key)
    return found


def _identity(m: Manifest) -> dict[str, Any]:
    return {
        "model_id": m.model_id,
        "base_model": m.base_model,
        "base_model_revision": m.base_model_revision,
        "format": m.format,
    }


def _shown(value: Any) -> str:
    return "unknown" if value is None or value == [] else str(value)


def recipe_changes(a: QuantRecipe | None, b: QuantRecipe | None) -> list[tuple[str, Any, Any]]:
    """(field, A's value, B's value) for each recipe field that differs; a side without a
    recipe has every field unknown."""
    before = a.model_dump() if a else {}
    after = b.model_dump() if b else {}
    return [
        (name, before.get(name), after.get(name))
        for name in _RECIPE_FIELDS
        if before.get(name) != after.get(name)
        and not (before.get(name) in (None, []) and after.get(name) in (None, []))
    ]


def _quantization_notes(a: Manifest, b: Manifest) -> tuple[list[str], list[str]]:
    """Notes naming each recipe and importance-matrix field that changed, and the changed
    recipe fields (when both sides record a recipe)."""
    qa, qb = a.quantization, b.quantization
    ra, rb = (qa.recipe if qa else None), (qb.recipe if qb else None)
    changes = recipe_changes(ra, rb)
    notes = [
        f"quantization recipe: {name} {_shown(before)} → {_shown(after)}"
        for name, before, after in changes
    ]
    ia = qa.importance_matrix.model_dump() if qa and qa.importance_matrix else {}
    ib = qb.importance_matrix.model_dump() if qb and qb.importance_matrix else {}
    notes += [
        f"importance matrix (gguf:quantize.imatrix.*): {key} {_shown(ia.get(key))} → "
        f"{_shown(ib.get(key))}"
        for key in ("file", "dataset", "entries_count", "chunks_count")
        if ia.get(key) != ib.get(key)
    ]
    both = ra is not None and rb is not None
    return notes, [name for name, _, _ in changes] if both else []


def _metadata_changes(a: Manifest, b: Manifest) -> tuple[list[str] | None, list[str]]:
    """(the GGUF metadata keys that differ, notes naming them) from the per-key digests."""
    if a.gguf is None or b.gguf is None:
        return None, []
    da, db = a.gguf.metadata_sha256, b.gguf.metadata_sha256
    if da is None or db is None:
        files_differ = {f.sha256 for f in a.files} != {f.sha256 for f in b.files}
        if not files_differ:
            return None, []
        which = " and ".join(n for n, d in (("A", da), ("B", db)) if d is None)
        return None, [
            f"gguf metadata: which keys changed is unknown ({which} recorded without per-key "
            "digests)"
        ]
    changed = sorted(k for k in da.keys() & db.keys() if da[k] != db[k])
    added, removed = sorted(db.keys() - da.keys()), sorted(da.keys() - db.keys())
    parts = [
        f"{', '.join(keys)} {what}"
        for keys, what in ((changed, "changed"), (added, "added"), (removed, "removed"))
        if keys
    ]
    notes = [f"gguf metadata: {'; '.join(parts)}"] if parts else []
    return sorted([*changed, *added, *removed]), notes


def diff_manifests(a: Manifest, b: Manifest) -> ManifestDiff:
    sections = [
        SectionDiff("identity", _identity(a), _identity(b)),
        SectionDiff("source", a.source, b.source),
        SectionDiff("license", a.license.id, b.license.id),
        SectionDiff("parameters", a.parameters.model_dump(), b.parameters.model_dump()),
        SectionDiff("weights", _weights(a), _weights(b)),
        SectionDiff("quantization", _quantization(a), _quantization(b)),
        SectionDiff(_RECIPE_SECTION, _recipe(a), _recipe(b)),
        SectionDiff("tokenizer/template", _tokenizer(a), _tokenizer(b)),
        SectionDiff("config", _files(a, "config"), _files(b, "config")),
        SectionDiff("runtime", a.runtime.model_dump(), b.runtime.model_dump()),
        SectionDiff(
            "files", {f.path: f.sha256 for f in a.files}, {f.path: f.sha256 for f in b.files}
        ),
        SectionDiff("golden prompts", _golden(a), _golden(b)),
    ]
    notes = []
    same_model = a.model_id == b.model_id
    if not same_model:
        notes.append(
            f"different models ({a.model_id} vs {b.model_id}): the sections below differ by "
            "construction, not by a change to one build"
        )
    metadata_only = None
    ta = a.gguf.tensor_data_sha256 if a.gguf else None
    tb = b.gguf.tensor_data_sha256 if b.gguf else None
    if ta and tb:
        files_differ = {f.sha256 for f in a.files} != {f.sha256 for f in b.files}
        metadata_only = ta == tb and files_differ
        if metadata_only:
            notes.append("metadata only: tensor data identical")
    if (a.base_model, a.base_model_revision) != (b.base_model, b.base_model_revision):
        notes.append(
            f"base model: {_shown(a.base_model)}@{_shown(a.base_model_revision)} → "
            f"{_shown(b.base_model)}@{_shown(b.base_model_revision)}"
        )
    license_note = license_change(a.license.id, b.license.id)
    if license_note is not None:
        notes.append(license_note.replace(" since the model's previous record", ""))
    metadata_keys, metadata_notes = _metadata_changes(a, b)
    notes += metadata_notes
    quant_notes, changed_fields = _quantization_notes(a, b)
    notes += quant_notes
    by_name = {s.name: s for s in sections}
    same_base = (
        a.base_model is not None
        and a.base_model_revision is not None
        and (a.base_model, a.base_model_revision) == (b.base_model, b.base_model_revision)
    )
    quantization_changed = by_name["quantization"].changed or by_name[_RECIPE_SECTION].changed
    follows = same_base and by_name["weights"].changed and quantization_changed
    if follows:
        notes.append(
            f"weights: new tensor data from the same base model {a.base_model}@"
            f"{a.base_model_revision}: attributed to the new quantization"
        )
    if not notes and not any(s.changed for s in sections):
        others = _other_facts(a, b)
        if others:
            notes.append(f"other facts differ: {', '.join(others)}")
    return ManifestDiff(
        sections,
        same_model,
        metadata_only,
        notes,
        recipe_changes=changed_fields,
        weights_follow_quantization=follows,
        base_unknown=a.base_model_revision is None or b.base_model_revision is None,
        metadata_keys=metadata_keys,
    )
