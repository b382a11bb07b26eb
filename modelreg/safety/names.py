"""Names an artifact gives itself that contradict the record: a GGUF whose ``general.name`` or
``general.basename`` names another model family than its model id ("Llama 3.1 8B Instruct" in
a SmolLM2 file). Sizes in names are checked against the tensors by ``holds.label_checks``.
"""

from __future__ import annotations

from collections.abc import Mapping

from modelreg.families import families_named


def name_contradictions(model_id: str, names: Mapping[str, str]) -> list[tuple[str, str]]:
    """(source, message) for each name that names model families and none the model id
    names (both must name one: a fine-tune's own name contradicts nothing)."""
    named_by_id = set(families_named(model_id))
    if not named_by_id:
        return []
    found = []
    for source, name in names.items():
        named = families_named(name.replace("/", " "))
        if named and not named_by_id & set(named):
            found.append(
                (
                    source,
                    f"names the {' / '.join(named)} family ({name[:80]!r}), but the model id "
                    f"{model_id} names {' / '.join(sorted(named_by_id))}",
                )
            )
    return found
