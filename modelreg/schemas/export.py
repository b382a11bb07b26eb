"""Export the JSON Schemas to ``schemas/`` at the repo root (``make schema``): the manifest,
the recipe, and every command's ``--json`` output under ``schemas/cli/``.

A test regenerates them and fails when the checked-in files are stale (or one is left over).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from modelreg.schemas.manifest import Manifest, QuantRecipe
from modelreg.schemas.suite import Suite


def schemas() -> dict[str, dict[str, object]]:
    """File name (relative to ``schemas/``) -> JSON Schema document."""
    from modelreg.schemas.output import COMMAND_OUTPUTS

    found: dict[str, dict[str, object]] = {
        "manifest.schema.json": Manifest.model_json_schema(),
        "recipe.schema.json": QuantRecipe.model_json_schema(),
        "suite.schema.json": Suite.model_json_schema(),
    }
    for command, model in COMMAND_OUTPUTS.items():
        found[f"cli/{command}.schema.json"] = model.model_json_schema()
    return found


def render(schema: dict[str, object]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def export(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in schemas().items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(schema), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for written_path in export(Path(sys.argv[1] if len(sys.argv) > 1 else "schemas")):
        print(written_path)
