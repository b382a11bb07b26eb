"""The ``modelreg`` Typer app, its global options and what every command shares (the options
they take alike, the registry they open). Commands register themselves on ``app`` from their
own modules; ``modelreg.cli.main`` imports them all and runs it."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from modelreg.errors import InvalidInput

if TYPE_CHECKING:
    from modelreg.api import Registry

app = typer.Typer(
    name="modelreg",
    help="Artifact manifest registry and model-card validator for LLM builds.",
    no_args_is_help=True,
    add_completion=False,  # `modelreg completion SHELL` instead: no shell detection at start-up
    context_settings={"help_option_names": ["-h", "--help"]},
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
RecordArg = Annotated[
    str,
    typer.Argument(
        metavar="RECORD",
        help="Record id or prefix, MODEL@vN (acme/chat@v3) or a promotion's label "
        "(acme/chat@release-14).",
    ),
]
ModelArg = Annotated[str, typer.Argument(metavar="MODEL", help="Model id, org/name.")]
WhyOption = Annotated[str | None, typer.Option("--why", help="Why (kept in the event log).")]


def registry(ctx: typer.Context) -> Registry:
    """The registry named by --db (or the environment), opened once per command."""
    from modelreg.api import open as open_registry

    return open_registry(ctx.obj.get("db") if ctx.obj else None)


def _show_version(value: bool) -> None:
    if value:
        from modelreg import __version__

        sys.stdout.write(f"modelreg {__version__}\n")
        raise typer.Exit()


@app.callback()
def _global(
    ctx: typer.Context,
    db: DbOption = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_show_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    ctx.obj = {"db": db}


@app.command()
def completion(
    shell: Annotated[str, typer.Argument(help="bash, zsh or fish.")],
) -> int:
    """Print the shell completion script: eval "$(modelreg completion bash)" in ~/.bashrc,
    or save it where your shell loads completions."""
    from typer._completion_shared import get_completion_script

    if shell not in ("bash", "zsh", "fish"):
        raise InvalidInput(f"no completion for shell {shell[:40]!r}", "give bash, zsh or fish")
    # typer's script: its completion classes (main() loads them when the shell asks) answer.
    script = get_completion_script(
        prog_name="modelreg", complete_var="_MODELREG_COMPLETE", shell=shell
    )
    sys.stdout.write(script if script.endswith("\n") else script + "\n")
    return 0
