"""``modelreg card validate`` and ``modelreg card render``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from modelreg.cli.app import JsonOption, app, registry
from modelreg.cli.render import emit, out, say, table

card_app = typer.Typer(
    help="Model cards: validate their claims, render them from a record.", no_args_is_help=True
)
app.add_typer(card_app, name="card")


@card_app.command("validate")
def validate(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(metavar="README.md", help="The model card.")],
    record_ref: Annotated[
        str | None, typer.Option("--record", help="Check the card against this record.")
    ] = None,
    hold: Annotated[
        bool,
        typer.Option(
            "--hold",
            help="With --record: put the record on hold if the card leaves required "
            "facts unstated (no side effect without it).",
        ),
    ] = False,
    json_out: JsonOption = False,
) -> int:
    """Check a card's license, base model, relation, parameter and context claims; exit 1 on
    error-level findings."""
    if record_ref is None and not hold:
        from modelreg.api import validate_card_file

        report = validate_card_file(path)
    else:
        report = registry(ctx).card_validate(path, record_ref, hold=hold)
    if json_out:
        emit(report)
        return 0 if report.clean else 1
    if report.findings:
        print(
            table(
                [(f.severity, f.field, f.message) for f in report.findings],
                ["severity", "field", "finding"],
            )
        )
    elif report.checked:
        checked = f"{len(report.claims)} claim(s) checked against {report.record_id}"
        out(f"{path}: no findings — {checked}")
    if not report.checked:
        kinds = sorted({c.kind.replace("_", " ") for c in report.claims})
        read = f"{len(report.claims)} claim(s) read ({', '.join(kinds)})" if kinds else "no claims"
        say(
            f"{path}: nothing to check against — {read}; give --record RECORD to check them "
            "against a record"
            + (" (the card's own metadata is consistent)" if not report.findings else "")
        )
    if report.held and report.record_id is not None:
        say(f"{report.record_id} put on hold: {report.held}")
    return 0 if report.clean else 1


@card_app.command("render")
def render(
    ctx: typer.Context,
    record_ref: Annotated[str, typer.Argument(metavar="RECORD", help="Record id or prefix.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    json_out: JsonOption = False,
) -> int:
    """Write the card section a publisher needs: identity and pin, license, parameter ledger
    with provenance, quantization and real bits per weight, digests, where it was verified,
    where it is production with its approval (owner, known limitations, re-test date)."""
    result = registry(ctx).card_render(record_ref, output)
    if json_out:
        emit(result)
    elif output:
        say(f"wrote {output}")
    else:
        sys.stdout.write(result.text)
    return 0
