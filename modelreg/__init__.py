"""modelreg: an artifact manifest registry and model-card validator for LLM builds.

The public API is small::

    import modelreg

    registry = modelreg.open()          # or modelreg.open("postgresql+psycopg://…")
    registry.add(["model.gguf"], model_id="org/name", source="pypi://pkg==1.0")
    registry.verify("r_1234", "cpu")
    registry.promote("r_1234", "cpu", why="release 1")
    registry.status("org/name")
    registry.rollback("org/name", "cpu", why="incident 42")

``modelreg.inspect(paths)`` reads an artifact without a database. Errors are the classes of
``modelreg.errors``; outputs are the pydantic models of ``modelreg.schemas.output``.

Importing this package is cheap: the database, pydantic models and runtimes load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

__all__ = ["Registry", "__version__", "errors", "inspect", "open", "upgrade"]

if TYPE_CHECKING:
    from modelreg import errors
    from modelreg.api import Registry, inspect, open, upgrade


def __getattr__(name: str) -> Any:
    # Lazy: `modelreg --help` and `import modelreg` must not pay for SQLAlchemy or pydantic.
    if name in ("Registry", "inspect", "open", "upgrade"):
        from modelreg import api

        return getattr(api, name)
    if name == "errors":
        import importlib

        return importlib.import_module("modelreg.errors")
    raise AttributeError(f"module 'modelreg' has no attribute {name!r}")
