"""``modelreg`` command line: parse, call one library function, render.

Exit codes: 0 ok; 1 a check failed / not deployable; 2 bad input or usage; 3 internal error.
Data goes to stdout (``--json`` for a stable schema), messages to stderr. Tracebacks only with
``MODELREG_DEBUG=1``.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Annotated, Any

import typer

from modelreg import config
from modelreg.errors import ModelregError

app = typer.Typer(
    name="modelreg",
    help="Artifact manifest registry and model-card validator for LLM builds.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (stable schema) to stdout.")]
DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="SQLAlchemy database URL (default: $MODELREG_DATABASE_URL, else SQLite under "
        "$MODELREG_HOME).",
        show_default=False,
    ),
]
TargetOption = Annotated[
    str, typer.Option("--target", "-t", help="Target name (see: modelreg targets).")
]


def _registry(ctx: typer.Context) -> Any:
    from modelreg.registry.store import open_registry

    return open_registry(ctx.obj.get("db") if ctx.obj else None)


def _manifest_ref(ctx: typer.Context, ref: str) -> tuple[str, Any]:
    """(name, manifest) of a record id/prefix, or of a manifest .json file."""
    path = Path(ref)
    if path.suffix == ".json" and path.is_file():
        from modelreg.schemas.manifest import read_manifest_file

        return str(path), read_manifest_file(path)
    record = _registry(ctx).get(ref)
    return record.id, record.manifest


@app.callback()
def _global(ctx: typer.Context, db: DbOption = None) -> None:
    ctx.obj = {"db": db}


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (tests call this directly)."""
    try:
        result = app(args=argv, prog_name="modelreg", standalone_mode=False)
    except typer.Abort:
        sys.stderr.write("aborted\n")
        return 130
    except typer.TyperException as exc:  # usage errors: missing or malformed options
        show = getattr(exc, "show", None)
        if show is not None:
            show()
        else:
            sys.stderr.write(f"error: {exc}\n")
        return 2
    except ModelregError as exc:
        if config.debug():
            traceback.print_exc()
        sys.stderr.write(f"error: {exc}\n")
        return exc.exit_code
    except Exception as exc:  # the one place an unexpected error becomes exit code 3
        if config.debug():
            traceback.print_exc()
        else:
            sys.stderr.write(
                f"internal error: {type(exc).__name__}: {exc} "
                "(rerun with MODELREG_DEBUG=1 for a traceback)\n"
            )
        return 3
    return result if isinstance(result, int) else 0


def run() -> None:
    sys.exit(main())


# Commands live in their own modules and register themselves on ``app``.
from modelreg.cli import card as _card  # noqa: E402,F401
from modelreg.cli import commands as _commands  # noqa: E402,F401
from modelreg.cli import fit as _fit  # noqa: E402,F401
from modelreg.cli import lifecycle as _lifecycle  # noqa: E402,F401
from modelreg.cli import transfer as _transfer  # noqa: E402,F401
