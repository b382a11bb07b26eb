"""Quantization recipe files (``--recipe recipe.yaml``): what the quantizer was told to do."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from modelreg.errors import InvalidInput
from modelreg.safeyaml import read_yaml_file
from modelreg.schemas.manifest import QuantRecipe, first_error

MAX_RECIPE_BYTES = 1 << 20


def load_recipe(path: Path) -> QuantRecipe:
    """Parse and validate a recipe YAML file; any problem is one ``InvalidInput`` line."""
    data = read_yaml_file(path, max_bytes=MAX_RECIPE_BYTES, what="recipe")
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}: recipe must be a YAML mapping")
    try:
        return QuantRecipe.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(f"{path}: recipe field {first_error(exc)}") from None
