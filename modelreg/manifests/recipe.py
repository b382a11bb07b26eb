"""Quantization recipe files (``--recipe recipe.yaml``): what the quantizer was told to do."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from modelreg.errors import InvalidInput
from modelreg.schemas.manifest import QuantRecipe, first_error

MAX_RECIPE_BYTES = 1 << 20


def load_recipe(path: Path) -> QuantRecipe:
    """Parse and validate a recipe YAML file; any problem is one ``InvalidInput`` line."""
    import yaml

    try:
        if path.stat().st_size > MAX_RECIPE_BYTES:
            raise InvalidInput(f"{path}: recipe larger than {MAX_RECIPE_BYTES} bytes")
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInput(f"{path}: recipe file not found") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InvalidInput(
            f"{path}: recipe is not valid YAML: {str(exc).splitlines()[0]}"
        ) from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}: recipe must be a YAML mapping")
    try:
        return QuantRecipe.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(f"{path}: recipe field {first_error(exc)}") from None
